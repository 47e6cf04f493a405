"""torch_npu's ACL graph capture rules (``torch.npu.NPUGraph`` / ``torch.npu.graph``), read
from its own sources at a release tag.

What torch_npu itself refuses while a stream is being captured, each with its message and
line (the text a user sees):

- ``aclop``: ``c10_npu::assertNotCapturingAclop`` ("Cannot run aclop operators during NPU
  graph capture", ``core/npu/NPUGraphsUtils.h``), called from ``OpCommand::Run``
  (``framework/OpCommand.cpp``) for every acl_op kernel: only aclnn kernels can be captured;
- ``generator``: the ``NPUGeneratorImpl`` / ``NPUGeneratorState`` functions that call
  ``assertNotCapturing`` (``aten/NPUGeneratorImpl.cpp``): in 2.1-era sources every generator
  access, so any random op raises during capture; later ones keep a graph-safe path
  (``rng_graph_safe``: ``philox_npu_state`` branches on the capture status) and refuse only
  seeding, offsets, cloning and the legacy ``philox_engine_inputs``;
- ``capture_begin``: ``TORCH_CHECK``s of ``NPUGraph::capture_begin`` (``core/npu/NPUGraph.cpp``):
  ``TASK_QUEUE_ENABLE=2``, the default stream;
- ``sync_point``: the host synchronisations torch_npu routes through one function
  (``AclrtSynchronizeStreamWithTimeout`` in ``core/npu/interface/AclInterface.cpp``, where
  ``set_sync_debug_mode`` hooks in): the ACL runtime fails a stream synchronize during capture
  (torch_npu does not check it itself, so the rule's evidence is the sync point);
- ``task_update``: the ops ``torch_npu/npu/graphs.py``'s ``_GraphDispatchMode`` captures as
  updatable task groups (``npu_fused_infer_attention_score``, paged attention...): the ops
  whose sequence lengths a captured graph may change between replays.

``parse(text, origin)`` picks the reader from the file name; a file of a known name without
the construct it is read for is a :class:`ScrapeError` (upstream changed), never silence.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from dataclasses import dataclass

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.cpp_text import string_literals
from opcheck.scrapers.rows import Origin

ACLOP, GENERATOR, RNG_SAFE = "aclop", "generator", "rng_graph_safe"
CAPTURE_BEGIN, SYNC_POINT, TASK_UPDATE = "capture_begin", "sync_point", "task_update"
ABSENT = "absent"  # set by the sync: the tag has no NPUGraph at all
KINDS = (ACLOP, GENERATOR, RNG_SAFE, CAPTURE_BEGIN, SYNC_POINT, TASK_UPDATE, ABSENT)

# the files read, relative to the tag's root
FILES = (
    "torch_npu/csrc/core/npu/NPUGraphsUtils.h",
    "torch_npu/csrc/framework/OpCommand.cpp",
    "torch_npu/csrc/aten/NPUGeneratorImpl.cpp",
    "torch_npu/csrc/core/npu/NPUGraph.cpp",
    "torch_npu/csrc/core/npu/interface/AclInterface.cpp",
    "torch_npu/npu/graphs.py",
)
MAX_TEXT = 240


@dataclass(frozen=True)
class CaptureRuleRow:
    kind: str  # one of KINDS
    subject: str  # the function, op or option the rule is about
    message: str  # the text torch_npu raises (or what the line does)
    line: int


# a C++ function definition head: `Type Class::name(` / `inline void name(` at column 0
_FUNC = re.compile(r"^[A-Za-z_][\w:<>,\s\*&]*?\b((?:\w+::)*~?\w+)\s*\([^;]*$")


def _literal(args: str) -> str:
    return string_literals(args, MAX_TEXT)


def _call_args(lines: list[str], start: int, col: int) -> str:
    """The text inside the parentheses that open at lines[start][col:] (may span lines)."""
    depth, out = 0, list[str]()
    for i in range(start, min(start + 20, len(lines))):
        seg = lines[i][col:] if i == start else lines[i]
        for ch in seg:
            if ch == "(":
                depth += 1
                if depth == 1:
                    continue
            elif ch == ")":
                depth -= 1
                if depth == 0:
                    return "".join(out)
            if depth >= 1:
                out.append(ch)
        out.append(" ")
    return "".join(out)


def _functions(lines: list[str]) -> list[tuple[int, str]]:
    """(0-based line, name) of each function definition starting at column 0."""
    out = []
    for i, line in enumerate(lines):
        if line[:1].isspace() or line.startswith(("#", "//", "/*", "*", "}", "{")):
            continue
        m = _FUNC.match(line)
        if m and not line.rstrip().endswith(";"):
            out.append((i, m.group(1)))
    return out


def _enclosing(funcs: list[tuple[int, str]], i: int) -> str:
    name = ""
    for start, fn in funcs:
        if start > i:
            break
        name = fn
    return name


def _calls(lines: list[str], name: str) -> list[tuple[int, str]]:
    """(0-based line, argument text) of each call of ``name(`` (not its definition)."""
    out = []
    pat = re.compile(rf"\b{re.escape(name)}\s*\(")
    for i, line in enumerate(lines):
        code = line.split("//", 1)[0]
        for m in pat.finditer(code):
            if re.match(r"^\s*(inline\s+)?(void|bool|static)\b", code):
                continue  # the definition
            out.append((i, _call_args(lines, i, m.end() - 1)))
    return out


def _utils_header(lines: list[str], origin: Origin) -> list[CaptureRuleRow]:
    for i, line in enumerate(lines):
        if re.search(r"\bvoid\s+assertNotCapturingAclop\s*\(", line):
            body = " ".join(lines[i:i + 15])
            m = re.search(r"TORCH_CHECK\s*\(", body)
            if m is None:
                raise ScrapeError("assertNotCapturingAclop has no TORCH_CHECK",
                                  source=origin.path, line=i + 1)
            return [CaptureRuleRow(ACLOP, "assertNotCapturingAclop",
                                   _literal(body[m.end():]), i + 1)]
    return []  # before acl_op capture was refused (the caller checks OpCommand too)


def _opcommand(lines: list[str], origin: Origin) -> list[CaptureRuleRow]:
    funcs = _functions(lines)
    return [CaptureRuleRow(ACLOP, _enclosing(funcs, i) or "OpCommand::Run",
                           "acl_op kernels (OpCommand) refuse to run during capture", i + 1)
            for i, _ in _calls(lines, "assertNotCapturingAclop")]


def _generator(lines: list[str], origin: Origin) -> list[CaptureRuleRow]:
    funcs = _functions(lines)
    rows = [CaptureRuleRow(GENERATOR, _enclosing(funcs, i), _literal(args), i + 1)
            for i, args in _calls(lines, "assertNotCapturing")]
    for start, fn in funcs:
        if fn.endswith("::philox_npu_state"):
            body = "\n".join(lines[start:start + 25])
            if "CaptureStatus" in body:
                rows.append(CaptureRuleRow(
                    RNG_SAFE, fn, "random ops draw graph-safe offsets while capturing",
                    start + 1))
    if not rows:
        raise ScrapeError("no assertNotCapturing call and no graph-safe philox_npu_state",
                          source=origin.path)
    return rows


def _graph_cpp(lines: list[str], origin: Origin) -> list[CaptureRuleRow]:
    funcs = _functions(lines)
    rows = []
    for i, args in _calls(lines, "TORCH_CHECK"):
        fn = _enclosing(funcs, i)
        if fn.endswith("::capture_begin"):
            cond = args.split(",", 1)[0].strip()
            rows.append(CaptureRuleRow(CAPTURE_BEGIN, re.sub(r"\s+", " ", cond)[:80],
                                       _literal(args), i + 1))
    if not any(fn.endswith("::capture_begin") for _, fn in funcs):
        raise ScrapeError("no NPUGraph::capture_begin", source=origin.path)
    return rows


def _acl_interface(lines: list[str], origin: Origin) -> list[CaptureRuleRow]:
    for i, line in enumerate(lines):
        if re.match(r"^aclError\s+AclrtSynchronizeStreamWithTimeout\s*\(", line):
            return [CaptureRuleRow(SYNC_POINT, "AclrtSynchronizeStreamWithTimeout",
                                   "host waits for the NPU stream (aclrtSynchronizeStream)",
                                   i + 1)]
    return []


def _graphs_py(text: str, origin: Origin) -> list[CaptureRuleRow]:
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ScrapeError(f"not Python: {exc.msg}", source=origin.path, line=exc.lineno) from None
    rows: list[CaptureRuleRow] = []
    for node in ast.walk(tree):
        if not (isinstance(node, ast.ClassDef) and node.name == "_GraphDispatchMode"):
            continue
        for sub in ast.walk(node):
            # `func.__name__ in ["npu_fused_infer_attention_score", ...]`
            if (isinstance(sub, ast.Compare) and isinstance(sub.left, ast.Attribute)
                    and sub.left.attr == "__name__" and len(sub.ops) == 1
                    and isinstance(sub.ops[0], ast.In)
                    and isinstance(sub.comparators[0], ast.List | ast.Tuple)):
                for elt in sub.comparators[0].elts:
                    if isinstance(elt, ast.Constant) and isinstance(elt.value, str):
                        rows.append(CaptureRuleRow(
                            TASK_UPDATE, elt.value,
                            "captured as an updatable task group (graph.update)", sub.lineno))
    seen: set[tuple[str, str]] = set()
    return [r for r in rows if (r.kind, r.subject) not in seen
            and not seen.add((r.kind, r.subject))]  # type: ignore[func-returns-value]


_READERS: dict[str, Callable[[list[str], Origin], list[CaptureRuleRow]]] = {
    "NPUGraphsUtils.h": _utils_header,
    "OpCommand.cpp": _opcommand,
    "NPUGeneratorImpl.cpp": _generator,
    "NPUGraph.cpp": _graph_cpp,
    "AclInterface.cpp": _acl_interface,
}


def parse(text: str, origin: Origin) -> list[CaptureRuleRow]:
    """The capture rules one of :data:`FILES` states (chosen by the file name)."""
    name = origin.path.rsplit("/", 1)[-1]
    if name == "graphs.py":
        return _graphs_py(text, origin)
    reader = _READERS.get(name)
    if reader is None:
        raise ScrapeError(f"no capture-rule reader for {name}", source=origin.path)
    return reader(text.splitlines(), origin)
