"""The routing formulas of CANN's engine facts (:mod:`opcheck.scrapers.cann_engine`): the
conditions under which an aclnn entry reaches a launch (dtype, SoC, kept-as-text atoms), their
JSON form, and how a traced call decides them. Pure; no C++ is read here."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from opcheck.core.errors import ScrapeError

ENGINES = {"AICORE": "aicore", "AICPU": "aicpu", "DSA": "dsa"}

# CANN dtype token → torch dtype name (the OpList's spelling)
_DTYPES = {
    "DT_FLOAT": "float32", "DT_FLOAT16": "float16", "DT_BF16": "bfloat16",
    "DT_DOUBLE": "float64", "DT_INT8": "int8", "DT_INT16": "int16", "DT_INT32": "int32",
    "DT_INT64": "int64", "DT_UINT8": "uint8", "DT_UINT16": "uint16", "DT_UINT32": "uint32",
    "DT_UINT64": "uint64", "DT_BOOL": "bool", "DT_COMPLEX64": "complex64",
    "DT_COMPLEX128": "complex128", "DT_COMPLEX32": "complex32",
    "DT_HIFLOAT8": "hifloat8", "DT_FLOAT8_E4M3FN": "float8_e4m3fn",
    "DT_FLOAT8_E5M2": "float8_e5m2", "DT_INT4": "int4", "DT_QINT8": "qint8",
    "DT_QUINT8": "quint8", "DT_QINT32": "qint32", "DT_FLOAT8_E8M0": "float8_e8m0fnu",
    "DT_FLOAT4_E2M1": "float4_e2m1", "DT_FLOAT4_E1M2": "float4_e1m2", "DT_STRING": "string",
    "DT_UNDEFINED": "undefined",
}

# SocVersion::X → the SoC name of CANN's binary lists (op_host/config/<soc>/)
_SOCS = {
    "ASCEND910": "ascend910", "ASCEND910B": "ascend910b", "ASCEND910_93": "ascend910_93",
    "ASCEND910_95": "ascend910_95", "ASCEND950": "ascend950", "ASCEND310P": "ascend310p",
    "ASCEND310B": "ascend310b", "ASCEND310": "ascend310", "ASCEND310C": "ascend310c",
    "ASCEND610LITE": "ascend610lite", "ASCEND910E": "ascend910e", "KIRINX90": "kirinx90",
    "ASCEND031": "ascend031", "ASCEND035": "ascend035", "ASCEND350": "ascend350",
    "KIRIN9030": "kirin9030", "MC62CM12A": "mc62cm12a",
}
# NpuArch::DAV_XXXX → SoCs (only the architectures whose SoCs are certain)
_ARCHS = {"DAV_3510": ("ascend910_95", "ascend950"), "DAV_2201": ("ascend910b", "ascend910_93")}
_REGBASE = _ARCHS["DAV_3510"]
_TYPE_CLASSES = {
    "IsComplexType": ("complex32", "complex64", "complex128"),
    "IsFloatingType": ("float16", "bfloat16", "float32", "float64"),
    "IsIntegralType": ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32",
                       "uint64"),
}  # IsRegbase(): the DAV_3510 architecture


def torch_dtype(token: str) -> str:
    """``DT_DOUBLE`` / ``DataType::DT_DOUBLE`` → ``float64`` (unknown tokens lower-cased)."""
    t = token.rsplit("::", 1)[-1]
    return _DTYPES.get(t, t.lower().removeprefix("dt_"))


@lru_cache(maxsize=4096)
def role(name: str) -> str:
    """The argument a C++ variable stands for, comparable with an ATen argument name:
    ``selfRef``/``selfCast``/``inputCast``/``x`` → ``self``, ``values``/``value`` → ``value``,
    ``allDefinedIndices``/``indices`` → ``indice``."""
    n = re.sub(r"[^a-z0-9]", "", name.lower()) or name.lower()
    n = re.sub(r"^(?:all)?(?:defined)?", "", n) or name.lower()
    n = re.sub(r"(?:ref|contiguous|cast|tensor|list|fp32)+$", "", n) or n
    n = n[:-1] if len(n) > 3 and n.endswith("s") else n
    # the primary input: ATen names it ``self`` (methods) or ``input``, aclnn entries ``self``,
    # ``input`` or ``x`` (aclnnCos(input, out) receives aten::cos's ``self``)
    return "self" if n in _PRIMARY else n


_PRIMARY = frozenset({"self", "input", "x"})


# --- formulas ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    value: bool


@dataclass(frozen=True)
class DtypeIs:
    """The dtype of argument ``arg`` (its C++ name; ``pick`` ``first`` for ``x[0]``, ``any``
    for a list element in a loop, ``one`` for a tensor) is one of ``dtypes``."""

    arg: str
    dtypes: tuple[str, ...]
    where: str
    pick: str = "one"


@dataclass(frozen=True)
class SocIs:
    socs: tuple[str, ...]
    where: str


@dataclass(frozen=True)
class Unknown:
    # size (ranks, element and index counts), layout (strides, offsets, aliasing),
    # runtime (index positions, argument values),
    # setting (deterministic mode), other (a dtype or SoC test not understood), guard (empty
    # tensors, null pointers, failed checks)
    kind: str
    text: str
    where: str


@dataclass(frozen=True)
class DtypeEq:
    """Arguments ``a`` and ``b`` have the same dtype."""

    a: str
    b: str
    where: str


@dataclass(frozen=True)
class Not:
    item: Formula


@dataclass(frozen=True)
class And:
    items: tuple[Formula, ...]


@dataclass(frozen=True)
class Or:
    items: tuple[Formula, ...]


Formula = Const | DtypeIs | DtypeEq | SocIs | Unknown | Not | And | Or
TRUE = Const(True)
FALSE = Const(False)


def f_and(*items: Formula) -> Formula:
    out: list[Formula] = []
    for it in items:
        if it == TRUE:
            continue
        if it == FALSE:
            return FALSE
        for x in (it.items if isinstance(it, And) else (it,)):
            if x not in out:
                out.append(x)
    return TRUE if not out else out[0] if len(out) == 1 else And(tuple(out))


def f_or(*items: Formula) -> Formula:
    out: list[Formula] = []
    for it in items:
        if it == FALSE:
            continue
        if it == TRUE:
            return TRUE
        for x in (it.items if isinstance(it, Or) else (it,)):
            if x not in out:
                out.append(x)
    return FALSE if not out else out[0] if len(out) == 1 else Or(tuple(out))


def f_not(item: Formula) -> Formula:
    if isinstance(item, Const):
        return Const(not item.value)
    if isinstance(item, Not):
        return item.item
    return Not(item)


def formula_to_json(f: Formula) -> Any:
    if isinstance(f, Const):
        return f.value
    if isinstance(f, DtypeIs):
        return {"dtype": f.arg, "in": list(f.dtypes), "pick": f.pick, "at": f.where}
    if isinstance(f, SocIs):
        return {"soc": list(f.socs), "at": f.where}
    if isinstance(f, DtypeEq):
        return {"same_dtype": [f.a, f.b], "at": f.where}
    if isinstance(f, Unknown):
        return {"unknown": f.kind, "text": f.text, "at": f.where}
    if isinstance(f, Not):
        return {"not": formula_to_json(f.item)}
    if isinstance(f, And):
        return {"and": [formula_to_json(x) for x in f.items]}
    return {"or": [formula_to_json(x) for x in f.items]}


def formula_from_json(raw: Any) -> Formula:
    if isinstance(raw, str):
        raw = json.loads(raw)
    if isinstance(raw, bool):
        return Const(raw)
    if "dtype" in raw:
        return DtypeIs(raw["dtype"], tuple(raw["in"]), raw["at"], raw.get("pick", "one"))
    if "soc" in raw:
        return SocIs(tuple(raw["soc"]), raw["at"])
    if "same_dtype" in raw:
        return DtypeEq(raw["same_dtype"][0], raw["same_dtype"][1], raw["at"])
    if "unknown" in raw:
        return Unknown(raw["unknown"], raw["text"], raw["at"])
    if "not" in raw:
        return Not(formula_from_json(raw["not"]))
    if "and" in raw:
        return And(tuple(formula_from_json(x) for x in raw["and"]))
    if "or" in raw:
        return Or(tuple(formula_from_json(x) for x in raw["or"]))
    raise ValueError(f"not a routing formula: {raw!r}")


def _rename(f: Formula, names: Mapping[str, tuple[str, str]]) -> Formula:
    """A callee's formula in the caller's words: parameter → (caller's root name, pick)."""
    if isinstance(f, DtypeIs):
        got = names.get(f.arg)
        if got is None:
            return f
        root, pick = got
        return DtypeIs(root, f.dtypes, f.where, pick if pick != "one" else f.pick)
    if isinstance(f, DtypeEq):
        return DtypeEq(names.get(f.a, (f.a, ""))[0], names.get(f.b, (f.b, ""))[0], f.where)
    if isinstance(f, Not):
        return f_not(_rename(f.item, names))
    if isinstance(f, And):
        return f_and(*(_rename(x, names) for x in f.items))
    if isinstance(f, Or):
        return f_or(*(_rename(x, names) for x in f.items))
    return f


# --- deciding a call --------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """What a decision knows of one call: the SoC and each argument's dtypes (by role)."""

    soc: str
    dtypes: Mapping[str, tuple[str, ...]]


def evaluate(f: Formula, call: Call) -> bool | None:
    """Kleene three-valued truth of ``f`` for ``call`` (None: undecided). Guards (empty
    tensors, null pointers, failed status) are decided as the valid, non-empty call."""
    if isinstance(f, Const):
        return f.value
    if isinstance(f, SocIs):
        return call.soc in f.socs
    if isinstance(f, DtypeIs):
        got = call.dtypes.get(role(f.arg))
        if not got:
            return None
        hits = [d in f.dtypes for d in (got[:1] if f.pick == "first" else got)]
        if f.pick == "one" and len(got) > 1:
            return None
        return any(hits)
    if isinstance(f, DtypeEq):
        a, b = call.dtypes.get(role(f.a)), call.dtypes.get(role(f.b))
        if not a or not b or len(a) > 1 or len(b) > 1:
            return None
        return a == b
    if isinstance(f, Unknown):
        # guards: the call is valid and non-empty; settings: their default (deterministic off)
        return False if f.kind in ("guard", "setting") else None
    if isinstance(f, Not):
        v = evaluate(f.item, call)
        return None if v is None else not v
    vals = [evaluate(x, call) for x in f.items]
    if isinstance(f, And):
        return False if False in vals else None if None in vals else True
    return True if True in vals else None if None in vals else False


def _free_atoms(f: Formula, call: Call, out: dict[Formula, None]) -> bool:
    """Collect the undecided atoms of ``f`` into ``out`` (in order); False as soon as there are
    more than :data:`MAX_FREE` (the caller gives up then, so the walk stops too)."""
    if isinstance(f, Unknown) and f.kind == "opaque":
        return False  # stands for many conditions: never split (the case count would explode)
    if isinstance(f, (Unknown, DtypeIs, DtypeEq)):
        if f not in out and evaluate(f, call) is None:
            out[f] = None
        return len(out) <= MAX_FREE
    if isinstance(f, Not):
        return _free_atoms(f.item, call, out)
    if isinstance(f, (And, Or)):
        return all(_free_atoms(x, call, out) for x in f.items)
    return True


def _assign(f: Formula, call: Call, values: Mapping[Formula, bool]) -> bool | None:
    if f in values:
        return values[f]
    if isinstance(f, Not):
        v = _assign(f.item, call, values)
        return None if v is None else not v
    if isinstance(f, (And, Or)):
        vals = [_assign(x, call, values) for x in f.items]
        if isinstance(f, And):
            return False if False in vals else None if None in vals else True
        return True if True in vals else None if None in vals else False
    return evaluate(f, call)


MAX_FREE = 8  # undecided atoms tried both ways (2^8 cases at most)


def holds(f: Formula, call: Call) -> bool | None:
    """Like :func:`evaluate`, but an undecided atom is tried both ways: ``(d ∧ x) ∨ (d ∧ ¬x)``
    holds whatever ``x`` is (the AI CPU branch a setting picks between two AI CPU kernels)."""
    v = evaluate(f, call)
    if v is not None:
        return v
    atoms: dict[Formula, None] = {}
    if not _free_atoms(f, call, atoms) or not atoms:
        return None
    free = list(atoms)
    seen: set[bool | None] = set()
    for bits in range(1 << len(free)):
        seen.add(_assign(f, call, {a: bool(bits >> k & 1) for k, a in enumerate(free)}))
        if len(seen) > 1:
            return None
    return seen.pop()


def deciding_atoms(f: Formula, call: Call) -> list[Formula]:
    """The structured atoms (dtype, SoC) that hold for ``call`` in ``f``: what a finding cites."""
    out: list[Formula] = []
    if isinstance(f, (DtypeIs, SocIs)):
        return [f] if evaluate(f, call) else []
    if isinstance(f, (And, Or)):
        for x in f.items:
            if evaluate(x, call) is not False:
                out += deciding_atoms(x, call)
    return out


def undecided_atoms(f: Formula, call: Call) -> list[Unknown | DtypeIs | DtypeEq]:
    """The atoms that left ``f`` undecided for ``call`` (their text and line)."""
    return _undecided(f, call)[1]


def _undecided(f: Formula, call: Call
               ) -> tuple[bool | None, list[Unknown | DtypeIs | DtypeEq]]:
    """(Kleene value, the atoms leaving it undecided) in one pass over ``f``."""
    if isinstance(f, (And, Or)):
        parts = [_undecided(x, call) for x in f.items]
        vals = [v for v, _ in parts]
        if isinstance(f, And):
            v: bool | None = False if False in vals else None if None in vals else True
        else:
            v = True if True in vals else None if None in vals else False
        return v, ([a for pv, atoms in parts if pv is None for a in atoms] if v is None else [])
    if isinstance(f, Not):
        v, atoms = _undecided(f.item, call)
        return (None if v is None else not v), atoms
    v = evaluate(f, call)
    if v is None and isinstance(f, (Unknown, DtypeIs, DtypeEq)):
        return v, [f]
    return v, []


def describe(f: Formula) -> str:
    """A formula as text for a report line."""
    if isinstance(f, Const):
        return "always" if f.value else "never"
    if isinstance(f, DtypeIs):
        which = {"first": f"{f.arg}[0]", "any": f"any {f.arg}"}.get(f.pick, f.arg)
        return f"{which} dtype in {{{', '.join(f.dtypes)}}}"
    if isinstance(f, SocIs):
        return f"SoC in {{{', '.join(f.socs)}}}"
    if isinstance(f, DtypeEq):
        return f"{f.a} dtype == {f.b} dtype"
    if isinstance(f, Unknown):
        return f.text
    if isinstance(f, Not):
        return f"not ({describe(f.item)})"
    joiner = " and " if isinstance(f, And) else " or "
    return joiner.join(f"({describe(x)})" for x in f.items)


def formula_dumps(f: Formula) -> str:
    """Compact JSON of ``f``: each row's file paths and condition texts are listed once
    (``{"p": [paths], "t": [texts], "f": formula}``, atoms citing ``"at": "i:line"`` and
    ``"text": j``), since one formula repeats them many times."""
    paths: dict[str, int] = {}
    texts: dict[str, int] = {}

    def intern(node: Any) -> Any:
        if isinstance(node, list):
            return [intern(x) for x in node]
        if not isinstance(node, dict):
            return node
        out = {k: intern(v) for k, v in node.items()}
        if isinstance(node.get("at"), str):
            path, _, line = node["at"].rpartition(":")
            out["at"] = f"{paths.setdefault(path, len(paths))}:{line}"
        if isinstance(node.get("text"), str):
            out["text"] = texts.setdefault(node["text"], len(texts))
        return out

    body = intern(formula_to_json(f))
    doc = {"p": list(paths), "t": list(texts), "f": body}
    return json.dumps(doc, ensure_ascii=False, separators=(",", ":"))


# The catalog stores one formula per launch site and many sites share one (a check reads ~260
# site rows holding ~110 distinct formulas); formulas are frozen, so a parse is shared.
@lru_cache(maxsize=8192)
def formula_loads(text: str) -> Formula:
    try:
        doc = json.loads(text)
        paths, texts = doc["p"], doc["t"]

        def expand(node: Any) -> Any:
            if isinstance(node, list):
                return [expand(x) for x in node]
            if not isinstance(node, dict):
                return node
            out = {k: expand(v) for k, v in node.items()}
            if "at" in node:
                i, _, line = node["at"].partition(":")
                out["at"] = f"{paths[int(i)]}:{line}"
            if "text" in node:
                out["text"] = texts[node["text"]]
            return out

        return formula_from_json(expand(doc["f"]))
    except (ValueError, KeyError, TypeError, IndexError) as exc:
        raise ScrapeError(f"not a routing formula: {text[:80]!r} ({exc})") from None


def dict_atoms(f: Formula) -> list[dict[str, Any]]:
    """Every atom of ``f`` as JSON (for reports)."""
    if isinstance(f, (DtypeIs, DtypeEq, SocIs, Unknown)):
        return [formula_to_json(f)]
    if isinstance(f, Not):
        return dict_atoms(f.item)
    if isinstance(f, (And, Or)):
        return [a for x in f.items for a in dict_atoms(x)]
    return []
