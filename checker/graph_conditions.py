"""A torchair converter's raise condition, evaluated on the calls a trace recorded.

torchair's converters refuse some calls with ``if <condition>: raise ...`` (the catalog keeps
the condition's source text, ``opcheck.scrapers.torchair``). The condition reads the
converter's arguments, which torchair names after the ATen schema: tensors as GE tensors
(``self.dtype == DataType.DT_INT8``), the rest as the values torch.compile passes
(``layout != torch.strided``, ``isinstance(padding, Tensor)``). A recorded call signature holds
each tensor argument's dtype and every non-default non-tensor argument, so many conditions can
be decided for the model's own calls instead of being reported as "converts conditionally".

The evaluation reads the condition's syntax tree (never ``eval``) with three values: true,
false and unknown. Anything the signature does not hold (ranks, shapes, local variables of the
converter, helper functions, symbolic scalars) is unknown and keeps the op conditional. It
assumes static shapes: under ``torch.compile(dynamic=True)`` scalar arguments may arrive as
symbolic tensors, which the report says.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass
from typing import Any

from opcheck.core.oplist import Signature
from opcheck.core.opname import split_top_level

# torch dtype names (as the trace writes them) → GE DataType members
GE_DTYPES = {
    "float32": "DT_FLOAT", "float16": "DT_FLOAT16", "bfloat16": "DT_BF16",
    "float64": "DT_DOUBLE", "int8": "DT_INT8", "int16": "DT_INT16", "int32": "DT_INT32",
    "int64": "DT_INT64", "uint8": "DT_UINT8", "bool": "DT_BOOL",
    "complex64": "DT_COMPLEX64", "complex128": "DT_COMPLEX128",
}  # fmt: skip


class _Unknown:
    def __repr__(self) -> str:
        return "UNKNOWN"


UNKNOWN: Any = _Unknown()
_NO_DEFAULT = object()


@dataclass(frozen=True)
class _DataType:
    name: str  # DT_FLOAT16


@dataclass(frozen=True)
class _GeTensor:
    dtype: Any  # _DataType or UNKNOWN
    rank: Any = UNKNOWN


class _TensorType:
    """The name ``Tensor`` in ``isinstance(x, Tensor)``."""


@dataclass(frozen=True)
class Param:
    type: str  # the schema's type text: "Tensor", "int[]", "Layout?"
    default: Any  # a Python value, or _NO_DEFAULT

    @property
    def optional(self) -> bool:
        return self.type.endswith("?")

    @property
    def is_tensor(self) -> bool:
        return self.type.split("(")[0].rstrip("?") == "Tensor"


def _default(text: str) -> Any:
    named = {"None": None, "True": True, "False": False}
    if text in named:
        return named[text]
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        # enum-like defaults (contiguous_format, Mean): compared as torch.<name> strings
        return text


@functools.lru_cache(maxsize=4096)
def schema_params(schema: str) -> dict[str, Param]:
    """``name(Tensor self, int dim=-1, *, ScalarType? dtype=None) -> Tensor`` → its
    arguments by name (an unparseable schema gives none: every argument then stays unknown)."""
    start = schema.find("(")
    end = schema.rfind(") ->")
    if start < 0 or end < start:
        return {}
    out: dict[str, Param] = {}
    for part in split_top_level(schema[start + 1:end]):
        if part == "*" or " " not in part:
            continue
        decl, _, default = part.partition("=")
        typ, _, name = decl.strip().rpartition(" ")
        out[name] = Param(typ.strip(), _default(default.strip()) if default else _NO_DEFAULT)
    return out


def bind(sig: Signature, params: dict[str, Param], first_rank: int | None = None,
         rebound: tuple[str, ...] = ()) -> dict[str, Any]:
    """The value each schema argument had in the calls of ``sig`` (UNKNOWN where the signature
    cannot say). ``first_rank``: the rank of the first argument in every call, when known (a
    trace records the first tensor's shapes per op, not per signature). ``rebound``: arguments
    the converter reassigns before its test, whose tested value the call does not give
    (``name:none``: only when the call passed None, the converter then filling in a default,
    ``name:none=value`` that constant)."""
    filled: dict[str, str | None] = {}  # name → the default the converter gives a None
    for r in rebound:
        name, none, rest = r.partition(":none")
        if none:
            filled[name] = rest[1:] if rest.startswith("=") else None
    env: dict[str, Any] = {}
    for i, (name, p) in enumerate(params.items()):
        if name in rebound:
            env[name] = UNKNOWN
            continue
        if name in sig.inputs:
            dts = sig.inputs[name].split(",")
            rank = first_rank if i == 0 and first_rank is not None else UNKNOWN
            env[name] = (_GeTensor(_DataType(GE_DTYPES[dts[0]]) if dts[0] in GE_DTYPES
                                   else UNKNOWN, rank)
                         if p.is_tensor and len(dts) == 1 else UNKNOWN)
        elif name == "dtype" and sig.dtype:
            env[name] = sig.dtype
        elif name in sig.args:
            v = sig.args[name]
            scalar = p.type.rstrip("?").split("[")[0] in ("int", "SymInt", "float", "bool")
            # a long list ("<12 values>") or a data-dependent value ("u0") is not the value
            env[name] = UNKNOWN if isinstance(v, str) and (scalar or v.startswith("<")) else v
        elif p.default is not _NO_DEFAULT:
            env[name] = p.default
        elif p.optional:
            env[name] = None
        else:  # omitted by the recorder (device, pin_memory) or absent
            env[name] = UNKNOWN
        if env[name] is None and name in filled:  # the converter fills in its default
            default = filled[name]
            env[name] = UNKNOWN if default is None else _default(default)
    return env


class _Eval:
    def __init__(self, env: dict[str, Any]) -> None:
        self.env = env

    def truth(self, v: Any) -> Any:
        # a list is true when non-empty, whatever its (possibly unknown) items
        return UNKNOWN if v is UNKNOWN else bool(v)

    def run(self, node: ast.AST) -> Any:
        method = getattr(self, "n_" + type(node).__name__, None)
        return UNKNOWN if method is None else method(node)

    def n_Expression(self, node: ast.Expression) -> Any:
        return self.run(node.body)

    def n_Constant(self, node: ast.Constant) -> Any:
        return node.value

    def n_Name(self, node: ast.Name) -> Any:
        if node.id in self.env:
            return self.env[node.id]
        return {"None": None, "True": True, "False": False, "Tensor": _TensorType,
                "DataType": "DataType", "torch": "torch"}.get(node.id, UNKNOWN)

    def n_Attribute(self, node: ast.Attribute) -> Any:
        base = self.run(node.value)
        if base == "DataType":
            return _DataType(node.attr)
        if base == "torch":
            return node.attr  # torch.strided → "strided", as the trace writes layouts
        if isinstance(base, _GeTensor) and node.attr in ("dtype", "rank"):
            return getattr(base, node.attr)
        return UNKNOWN  # .symsize, ...: not in a signature

    def n_List(self, node: ast.List) -> Any:
        return [self.run(e) for e in node.elts]

    n_Tuple = n_List

    def n_Subscript(self, node: ast.Subscript) -> Any:
        seq, idx = self.run(node.value), self.run(node.slice)
        if isinstance(seq, list) and isinstance(idx, int) and -len(seq) <= idx < len(seq):
            return seq[idx]
        return UNKNOWN

    def n_BoolOp(self, node: ast.BoolOp) -> Any:
        values = [self.truth(self.run(v)) for v in node.values]
        decisive = isinstance(node.op, ast.Or)  # True decides an `or`, False an `and`
        if decisive in values:
            return decisive
        return UNKNOWN if UNKNOWN in values else not decisive

    def n_UnaryOp(self, node: ast.UnaryOp) -> Any:
        v = self.run(node.operand)
        if isinstance(node.op, ast.Not):
            t = self.truth(v)
            return UNKNOWN if t is UNKNOWN else not t
        if isinstance(node.op, ast.USub) and isinstance(v, (int, float)):
            return -v
        return UNKNOWN

    def n_BinOp(self, node: ast.BinOp) -> Any:
        a, b = self.run(node.left), self.run(node.right)
        if not (isinstance(a, (int, float)) and isinstance(b, (int, float))):
            return UNKNOWN
        op = node.op
        if isinstance(op, ast.Add):
            return a + b
        if isinstance(op, ast.Sub):
            return a - b
        if isinstance(op, ast.Mult):
            return a * b
        if isinstance(op, (ast.Div, ast.Mod)) and b:
            return a / b if isinstance(op, ast.Div) else a % b
        return UNKNOWN

    def n_IfExp(self, node: ast.IfExp) -> Any:
        t = self.truth(self.run(node.test))
        if t is UNKNOWN:
            return UNKNOWN
        return self.run(node.body if t else node.orelse)

    def n_Compare(self, node: ast.Compare) -> Any:
        left = self.run(node.left)
        results = []
        for op, right_node in zip(node.ops, node.comparators, strict=True):
            right = self.run(right_node)
            results.append(_compare(op, left, right))
            left = right
        if False in results:
            return False
        return UNKNOWN if UNKNOWN in results else True

    def n_Call(self, node: ast.Call) -> Any:
        if not isinstance(node.func, ast.Name) or node.keywords:
            return UNKNOWN
        args = [self.run(a) for a in node.args]
        if node.func.id == "isinstance" and len(args) == 2:
            value, kind = args
            if kind is not _TensorType or value is UNKNOWN:
                return UNKNOWN
            # static shapes: a non-tensor argument arrives as the Python value it was
            return isinstance(value, _GeTensor)
        if node.func.id == "len" and len(args) == 1 and isinstance(args[0], (list, str)):
            return len(args[0])
        return UNKNOWN  # helpers of the converter module (is_arch35(), _check_dim_valid())


def _compare(op: ast.cmpop, a: Any, b: Any) -> Any:
    if a is UNKNOWN or b is UNKNOWN:
        return UNKNOWN
    if isinstance(op, (ast.Is, ast.IsNot)):
        if a is None or b is None:
            return (a is b) == isinstance(op, ast.Is)
        op = ast.Eq() if isinstance(op, ast.Is) else ast.NotEq()
    if isinstance(op, (ast.In, ast.NotIn)):
        if not isinstance(b, list) or any(x is UNKNOWN for x in b):
            return UNKNOWN
        found = [_compare(ast.Eq(), a, x) for x in b]
        hit = True if True in found else (UNKNOWN if UNKNOWN in found else False)
        return hit if isinstance(op, ast.In) or hit is UNKNOWN else not hit
    # a DataType compared with a number (self.dtype == 28): the enum's values are not known
    if isinstance(a, _DataType) != isinstance(b, _DataType) and None not in (a, b):
        return UNKNOWN
    try:
        if isinstance(op, ast.Eq):
            return a == b
        if isinstance(op, ast.NotEq):
            return a != b
        if isinstance(op, ast.Lt):
            return a < b
        if isinstance(op, ast.LtE):
            return a <= b
        if isinstance(op, ast.Gt):
            return a > b
        if isinstance(op, ast.GtE):
            return a >= b
    except TypeError:
        return UNKNOWN
    return UNKNOWN


@functools.lru_cache(maxsize=1024)
def _parse(condition: str) -> ast.Expression | None:
    try:
        return ast.parse(condition, mode="eval")
    except SyntaxError:
        return None


def first_rank(schema: str, shapes: list[list[int]], complete: bool) -> int | None:
    """The rank of the op's first argument in every recorded call: known when that argument
    is a single tensor (the one whose shapes a trace samples) and ``shapes`` holds every
    distinct shape (``complete``), all of one rank."""
    params = list(schema_params(schema).values())
    if not (complete and shapes and params and params[0].type.split("(")[0] == "Tensor"):
        return None
    ranks = {len(s) for s in shapes}
    return ranks.pop() if len(ranks) == 1 else None


def holds(condition: str, sig: Signature, schema: str, rank: int | None = None,
          rebound: tuple[str, ...] = ()) -> bool | None:
    """Whether the converter raises for the calls of ``sig``: True, False, or None when the
    signature cannot decide it. ``rank``: the first argument's (:func:`first_rank`);
    ``rebound``: arguments the converter reassigns before its test (unknown)."""
    tree = _parse(condition)
    if tree is None:
        return None
    ev = _Eval(bind(sig, schema_params(schema), rank, rebound))
    got = ev.truth(ev.run(tree))
    return None if got is UNKNOWN else bool(got)


def describe(sig: Signature) -> str:
    """A signature as the report names it: ``self=float16, dim=-1``."""
    bits = [f"{k}={v}" for k, v in sig.inputs.items()]
    if sig.dtype:
        bits.append(f"dtype={sig.dtype}")
    bits += [f"{k}={v}" for k, v in sig.args.items()]
    return ", ".join(bits) or "no arguments recorded"
