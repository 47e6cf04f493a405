"""Engine and routing of 30 aclnn functions re-derived by a simple reading of their own,
independent of opcheck.scrapers.cann_engine, and compared with it.

The simple reading knows one common shape of CANN's level-0 files: a dtype list, a predicate
``IsAiCoreSupport(self)`` that is exactly ``return CheckType(self->GetDataType(), LIST);`` and
a level-0 function ``X`` that launches its AI Core op when the predicate holds, its AI CPU op
otherwise. An aclnn entry calling ``l0op::X(arg, …)`` then runs X on the AI CPU exactly when
``arg``'s dtype is outside LIST. Regular expressions over the text; nothing is shared with the
parser but the files.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from opcheck.scrapers import cann_engine as ce
from opcheck.scrapers.rows import Origin

pytestmark = pytest.mark.upstream

MATH = "github/hicann/ops-math/v9.1.0"
DT = {"DT_FLOAT": "float32", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16",
      "DT_DOUBLE": "float64", "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32",
      "DT_INT64": "int64", "DT_UINT8": "uint8", "DT_BOOL": "bool",
      "DT_COMPLEX64": "complex64", "DT_COMPLEX128": "complex128"}
PROBES = ("float32", "float16", "bfloat16", "float64", "int32", "int64", "int8", "uint8",
          "bool", "complex64")

_LIST = re.compile(r"initializer_list<(?:op::)?DataType>\s+(\w+)\s*=\s*\{([^}]*)\}", re.S)
_PRED = re.compile(r"static (?:inline )?bool IsAiCoreSupport\(const aclTensor\s*\*\s*(\w+)\)\s*\{")
_CHECK = r"return (?:op::)?CheckType\(\s*{x}->GetDataType\(\),\s*(\w+)\s*\);"
_LAUNCH = re.compile(r"ADD_TO_LAUNCHER_LIST_(AICORE|AICPU)\(\s*(\w+)")
_L0 = re.compile(r"^const aclTensor\s*\*\s*(\w+)\(", re.M)
_B_FAMILY = re.compile(r"DAV_2201|ASCEND910B\b")


def _body(text: str, start: int) -> str:
    depth = 0
    for i in range(start, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return text[start + 1:i]
    return ""


def _predicate_list(body: str, x: str) -> str | None:
    """The list the predicate checks on a 910B: ``return CheckType(x, L);`` alone, or one
    ``if (<910B family>) { return CheckType(x, LB); }`` before it (LB then)."""
    code = re.sub(r"//[^\n]*|/\*.*?\*/", "", body, flags=re.S)
    code = re.sub(r"auto \w+ = (?:op::)?GetCurrentPlatformInfo\(\)\.\w+\(\);", "", code)
    check = _CHECK.format(x=x)
    m = re.fullmatch(r"\s*" + check + r"\s*", code)
    if m:
        return m.group(1)
    m = re.fullmatch(r"\s*if\s*\(([^{}]*)\)\s*\{?\s*" + check + r"\s*\}?\s*" + check + r"\s*",
                     code)
    if m and _B_FAMILY.search(m.group(1)) and "!" not in m.group(1):
        return m.group(2)
    return None


def _simple_level0(root: Path) -> dict[str, tuple[str, frozenset[str], str]]:
    """level-0 function → (op type, AI Core dtypes on 910B, file) for files of the simple
    shape."""
    out: dict[str, tuple[str, frozenset[str], str]] = {}
    for p in sorted(root.rglob("op_api/*.cpp")):
        if "experimental" in p.parts or p.name.startswith("aclnn_"):
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        pred = _PRED.search(text)
        if pred is None:
            continue
        name = _predicate_list(_body(text, pred.end() - 1), pred.group(1))
        lists = {m.group(1): m.group(2) for m in _LIST.finditer(text)}
        if name is None or name not in lists:
            continue
        launches = _LAUNCH.findall(text)
        cores = {op for k, op in launches if k == "AICORE"}
        cpus = {op for k, op in launches if k == "AICPU"}
        names = _L0.findall(text)
        if len(cores) != 1 or len(cpus) != 1 or cores != cpus or len(names) != 1:
            continue
        if text.count("IsAiCoreSupport(") != 2:  # defined once, called once (by X)
            continue
        dtypes = frozenset(DT[t] for t in re.findall(r"DT_\w+", lists[name]) if t in DT)
        out[names[0]] = (cores.pop(), dtypes, str(p.relative_to(root)))
    return out


def _entries(root: Path, level0: dict[str, tuple[str, frozenset[str], str]]
             ) -> list[tuple[str, str, str]]:
    """(aclnn function, level-0 function, the argument it passes) for entry files calling one
    simple level-0 function (and no other level-0 function of a simple file)."""
    out = []
    for p in sorted(root.rglob("op_api/aclnn_*.cpp")):
        if "experimental" in p.parts:
            continue
        text = p.read_text(encoding="utf-8", errors="replace")
        fns = re.findall(r"aclnnStatus (aclnn\w+)GetWorkspaceSize\(", text)
        calls = re.findall(r"l0op::(\w+)\(\s*(\w+)", text)
        simple = {(x, a) for x, a in calls if x in level0}
        if not fns or len(simple) != 1:
            continue
        x, arg = simple.pop()
        out += [(fn, x, arg) for fn in fns]
    return out


class _Every(Mapping[str, tuple[str, ...]]):
    """Every tensor of the call has one dtype (the simple reading does not follow names)."""

    def __init__(self, dtype: str) -> None:
        self.dtype = dtype

    def __getitem__(self, key: str) -> tuple[str, ...]:
        return (self.dtype,)

    def __iter__(self) -> Iterator[str]:
        return iter(())

    def __len__(self) -> int:
        return 0


def test_thirty_functions_rederived_independently(upstream: Path) -> None:
    root = upstream / MATH
    level0 = _simple_level0(root)
    entries = _entries(root, level0)
    assert len(entries) >= 30, f"only {len(entries)} simple entries found"
    entries = entries[:30]
    files = {str(p.relative_to(root)): p for p in root.rglob("op_api/*.cpp")
             if "experimental" not in p.parts}
    # the parser reads the whole library (the entries call helpers anywhere in it)
    parsed = [(rel, ce.parse_source(p.read_text(encoding="utf-8", errors="replace"),
                                    origin=Origin(rel))) for rel, p in sorted(files.items())]
    sites = ce.analyze(parsed)
    by_fn: dict[str, list[ce.EngineSite]] = {}
    for s in sites:
        by_fn.setdefault(s.aclnn, []).append(s)
    agree = disagree = 0
    misses: list[str] = []
    for fn, x, _arg in entries:
        op, aicore, path = level0[x]
        mine = by_fn.get(fn, [])
        # engine: both launches of X are among the parser's, with the right engines
        got = {(s.op_type, s.engine) for s in mine if s.launch.startswith(path + ":")}
        assert got == {(op, "aicore"), (op, "aicpu")}, (fn, got)
        cpu = [s for s in mine if s.launch.startswith(path + ":") and s.engine == "aicpu"]
        for dtype in PROBES:
            call = ce.Call("ascend910b", _Every(dtype))
            simple = dtype not in aicore  # the simple reading: AI CPU iff outside the list
            parser = any(ce.holds(s.condition, call) is not False for s in cpu)
            if simple == parser:
                agree += 1
            else:
                disagree += 1
                misses.append(f"{fn} {dtype}: simple {simple}, parser {parser}")
            if not simple:
                # inside the list the AI CPU launch is never reachable: no excuse to differ
                assert not parser, (fn, dtype)
    # outside the list the entry itself may route the dtype elsewhere (a cast, a rejection
    # the parser sees as a path condition): rare, and listed
    print(f"simple reading vs parser: {agree} agree, {disagree} differ over {len(entries)} "
          f"functions x {len(PROBES)} dtypes", *misses, sep="\n")
    assert agree / (agree + disagree) >= 0.9, misses
