"""torchair's graph-mode converters: which ATen overloads become GE graph nodes.

``torch.compile(model, backend=torchair...)`` hands torchair an FX graph of ATen ops; each node
is converted to GE nodes by the function registered for its overload::

    @declare_supported([Support(F32(2, 2), F16(2, 2)), ...])   # tested dtype/shape samples
    @register_fx_node_ge_converter(torch.ops.aten.add.Tensor)
    def conveter_aten_add_Tensor(self, other, *, alpha=1, meta_outputs=None):
        ...  # builds GE nodes, or raises

Read with ``ast`` (torchair is never imported). Per registered overload, the body decides:

- ``raises``: every call raises (the body's first reachable statement at the top level is a
  ``raise``: "torch.ops.aten._softmax.out is redundant before pytorch 2.1.0, ...");
- ``conditional``: it raises only on some paths (argument values, dtypes, dynamic shapes): the
  condition is the ``if`` tests that lead to the raise (or the negation of the tests whose
  ``return`` a top-level raise follows), with the raise's message and line;
- ``converted``: no ``raise`` in the body.

Module-level guards are kept: a torch version test (``torch.__version__ >= '2.3.1'``) becomes
``min_torch``; existence tests (``op is not None``, ``hasattr(...)``) need no record, since an
op in a traced graph exists. Registrations of Python callables (``operator.add``,
``sym_sqrt``: symbolic-shape arithmetic, not ATen ops) are skipped. Anything else is a
:class:`~opcheck.core.errors.ScrapeError` naming file and line.

``torchair_pins.tsv`` (tag → torchair commit, from each torch_npu tag's
``third_party/torchair/torchair`` submodule entry) is parsed by :func:`parse_pins`.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from opcheck.core.errors import ScrapeError, UsageError
from opcheck.core.opname import OpName
from opcheck.scrapers.rows import Origin

REGISTER = "register_fx_node_ge_converter"
DECLARE = "declare_supported"
CONVERTED, RAISES, CONDITIONAL = "converted", "raises", "conditional"
RANK = {RAISES: 0, CONDITIONAL: 1, CONVERTED: 2}  # how much of the op converts
MAX_TEXT = 240  # a message or condition longer than this is cut (the line points at the rest)

# supported_declaration's typed-tensor helpers → torch dtype names
_SAMPLE_DTYPES = {
    "F32": "float32", "F16": "float16", "BF16": "bfloat16", "F64": "float64",
    "I32": "int32", "I16": "int16", "I64": "int64", "I8": "int8", "U8": "uint8",
    "BOOL": "bool", "C64": "complex64",
}
# Python-level callables torchair converts for symbolic shapes: not ops of an ATen graph.
_PY_MODULES = ("operator", "math")
_SYM_PREFIXES = ("sym_", "_sym_")
_VERSION = re.compile(r"^\d+(?:\.\d+)*$")
_PIN_HEADER = ("tag", "torchair_commit")
_SHA = re.compile(r"^[0-9a-f]{40}$")


@dataclass(frozen=True)
class ConverterRow:
    """One registered overload in one converter file."""

    op: str  # canonical aten::name.overload (npu::, prims::, c10d_functional:: ... too)
    status: str  # converted | raises | conditional
    message: str = ""  # the (first) raise's message
    condition: str = ""  # conditional: when it raises ("a or b"; each path's tests joined by and)
    dtypes: tuple[str, ...] = ()  # dtypes named by @declare_supported samples, sorted
    min_torch: str = ""  # registered only on torch >= this version ("" = always)
    line: int = 0  # the raise (raises / conditional), else the def
    # conditional: arguments the condition reads that the converter assigns before raising
    # (``end = 2147483647``): the condition then tests the new value, not the argument;
    # ``end:none=2147483647`` when only under ``if end is None:`` (a passed value is kept)
    rebound: tuple[str, ...] = ()


@dataclass(frozen=True)
class PinRow:
    tag: str  # a torch_npu tag: v7.2.0-pytorch2.1.0
    commit: str  # the torchair commit it pins ("" = unknown)
    line: int = 0


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= MAX_TEXT else text[: MAX_TEXT - 1] + "…"


def _dotted(node: ast.expr) -> list[str] | None:
    """``a.b.c`` as ["a", "b", "c"]; None for anything else."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return None
    return [node.id, *reversed(parts)]


def _string(node: ast.expr | None) -> str:
    """The text of a message argument: literals and their concatenations as written,
    ``"...".format(x)`` as its template, anything else as source."""
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _string(node.left) + _string(node.right)
    if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == "format" and isinstance(node.func.value, ast.Constant)):
        return _string(node.func.value)
    if isinstance(node, ast.JoinedStr):
        return "".join(v.value if isinstance(v, ast.Constant) and isinstance(v.value, str)
                       else "{" + ast.unparse(v.value if isinstance(v, ast.FormattedValue) else v)
                       + "}" for v in node.values)
    return ast.unparse(node)


def _message(node: ast.Raise) -> str:
    exc = node.exc
    if isinstance(exc, ast.Call):
        name = ast.unparse(exc.func)
        text = _string(exc.args[0]) if exc.args else ""
        return _clip(f"{name}: {text}" if text else name)
    return _clip(ast.unparse(exc)) if exc is not None else "raise"


def _negate(test: ast.expr) -> str:
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return ast.unparse(test.operand)
    text = ast.unparse(test)
    simple = isinstance(test, (ast.Name, ast.Attribute, ast.Call, ast.Subscript))
    return f"not {text}" if simple else f"not ({text})"


def _ends(stmts: Sequence[ast.stmt]) -> bool:
    """The block always leaves the function (its last statement returns or raises)."""
    return bool(stmts) and isinstance(stmts[-1], (ast.Return, ast.Raise))


def _returns(stmts: Sequence[ast.stmt]) -> bool:
    return bool(stmts) and isinstance(stmts[-1], ast.Return)


@dataclass(frozen=True)
class _Raise:
    conds: tuple[str, ...]
    message: str
    line: int


def _raises(stmts: Sequence[ast.stmt], conds: tuple[str, ...]) -> Iterator[_Raise]:
    """Every ``raise`` of a block with the tests that lead to it (nested defs excluded)."""
    for s in stmts:
        if isinstance(s, ast.Raise):
            yield _Raise(conds, _message(s), s.lineno)
            return  # what follows is unreachable
        if isinstance(s, ast.Return):
            return
        if isinstance(s, ast.If):
            yield from _raises(s.body, (*conds, ast.unparse(s.test)))
            yield from _raises(s.orelse, (*conds, _negate(s.test)))
            if _ends(s.body) and _ends(s.orelse):
                return
            # Past a branch that returns, the rest runs only when its test failed; past one
            # that raises, saying so adds nothing ("a or b" reads as "a or (not a and b)").
            if _returns(s.body):
                conds = (*conds, _negate(s.test))
            elif _returns(s.orelse):
                conds = (*conds, ast.unparse(s.test))
        elif isinstance(s, (ast.For, ast.AsyncFor)):
            loop = f"for {ast.unparse(s.target)} in {ast.unparse(s.iter)}"
            yield from _raises(s.body, (*conds, loop))
            yield from _raises(s.orelse, conds)
        elif isinstance(s, ast.While):
            yield from _raises(s.body, (*conds, f"while {ast.unparse(s.test)}"))
            yield from _raises(s.orelse, conds)
        elif isinstance(s, (ast.With, ast.AsyncWith)):
            yield from _raises(s.body, conds)
        elif isinstance(s, ast.Try):
            yield from _raises(s.body, conds)
            for h in s.handlers:
                caught = f"except {ast.unparse(h.type)}" if h.type is not None else "except"
                yield from _raises(h.body, (*conds, caught))
            yield from _raises(s.orelse, conds)
            yield from _raises(s.finalbody, conds)
        elif isinstance(s, ast.Match):
            for case in s.cases:
                yield from _raises(case.body, (*conds, f"case {ast.unparse(case.pattern)}"))


def _within(stmts: list[ast.stmt], line: int) -> bool:
    return bool(stmts) and stmts[0].lineno <= line <= (stmts[-1].end_lineno or line)


def _rebound(fn: ast.FunctionDef, condition: str, raises: list[int]) -> tuple[str, ...]:
    """The converter's arguments that ``condition`` reads and the body assigns (or loops
    over) before the last of the ``raises`` lines, on a path that can reach one, sorted;
    ``name:none`` when every such assignment sits under
    ``if name is None:`` (a default filled in, so a call passing a value keeps it), with
    ``=value`` when that default is one constant (``end:none=2147483647``)."""
    params = {a.arg for a in (*fn.args.posonlyargs, *fn.args.args, *fn.args.kwonlyargs)}
    try:
        read = {n.id for n in ast.walk(ast.parse(condition, mode="eval"))
                if isinstance(n, ast.Name)}
    except SyntaxError:
        read = set(params)
    watched = params & read
    guarded: dict[str, list[str]] = {}  # name → the constants assigned under `is None`
    plain: set[str] = set()

    def none_test(test: ast.expr) -> str:
        if (isinstance(test, ast.Compare) and isinstance(test.left, ast.Name)
                and len(test.ops) == 1 and isinstance(test.ops[0], ast.Is)
                and isinstance(test.comparators[0], ast.Constant)
                and test.comparators[0].value is None):
            return test.left.id
        return ""

    def visit(node: ast.AST, guards: frozenset[str]) -> None:
        if getattr(node, "lineno", 0) >= max(raises):
            return
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign):
            targets = list(node.targets)
        elif isinstance(node, (ast.AugAssign, ast.AnnAssign, ast.For, ast.NamedExpr)):
            targets = [node.target]
        elif isinstance(node, (ast.With, ast.AsyncWith)):
            targets = [i.optional_vars for i in node.items if i.optional_vars is not None]
        for t in targets:
            for n in ast.walk(t):
                if not (isinstance(n, ast.Name) and n.id in watched):
                    continue
                if n.id in guards and isinstance(node, ast.Assign):
                    value = (ast.unparse(node.value) if isinstance(t, ast.Name)
                             and _is_constant(node.value) else "")
                    value = "" if "," in value else value  # the column is comma-separated
                    guarded.setdefault(n.id, []).append(value)
                else:
                    plain.add(n.id)
        if isinstance(node, ast.If):
            visit(node.test, guards)
            inner = guards | {none_test(node.test)} - {""}
            # a branch the raises cannot follow (they are all in the other one) assigns
            # nothing they see: `if end == MAX: end = 2**31 - 1 elif end > 2**31 - 1: raise`
            in_body, in_else = (all(_within(stmts, r) for r in raises)
                                for stmts in (node.body, node.orelse))
            if not in_else:
                for stmt in node.body:
                    visit(stmt, inner)
            if not in_body:
                for stmt in node.orelse:
                    visit(stmt, guards)
            return
        for sub in ast.iter_child_nodes(node):
            visit(sub, guards)

    for stmt in fn.body:
        visit(stmt, frozenset())
    out = set(plain)
    for name, values in guarded.items():
        if name not in plain:
            # one constant: the value the test then sees; else only that it is not None
            out.add(f"{name}:none={values[0]}" if len(values) == 1 and values[0]
                    else f"{name}:none")
    return tuple(sorted(out))


def _is_constant(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, (int, float, bool, str))


def _classify(fn: ast.FunctionDef) -> tuple[str, str, str, int, tuple[str, ...]]:
    """(status, message, condition, line, rebound arguments) of one converter function."""
    body = fn.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]  # the docstring (its schema line)
    found = list(_raises(body, ()))
    if not found:
        return CONVERTED, "", "", fn.lineno, ()
    always = next((r for r in found if not r.conds), None)
    if always is not None:
        return RAISES, always.message, "", always.line, ()
    condition = " or ".join(" and ".join(r.conds) if len(r.conds) == 1
                            else " and ".join(f"({c})" if " or " in c else c for c in r.conds)
                            for r in found)
    rebound = _rebound(fn, condition, [r.line for r in found])
    return CONDITIONAL, found[0].message, _clip(condition), found[0].line, rebound


def _dtypes(decorator: ast.Call) -> tuple[str, ...]:
    """The dtypes @declare_supported's samples name: typed tensors (``F32(2, 2)``) and
    ``dtype=torch.float16`` arguments."""
    out: set[str] = set()
    for node in ast.walk(decorator):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id in _SAMPLE_DTYPES):
            out.add(_SAMPLE_DTYPES[node.func.id])
        if isinstance(node, ast.keyword) and node.arg == "dtype":
            path = _dotted(node.value)
            if path and len(path) == 2 and path[0] == "torch":
                out.add({"float": "float32", "half": "float16"}.get(path[1], path[1]))
    return tuple(sorted(out))


def _call_name(node: ast.expr) -> str:
    if isinstance(node, ast.Call):
        path = _dotted(node.func)
        return path[-1] if path else ""
    return ""


def _walk(tree: ast.AST) -> list[ast.AST]:
    """``list(ast.walk(tree))``, same order (breadth first), without a generator per node."""
    out = [tree]
    i = 0
    while i < len(out):
        node = out[i]
        i += 1
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, ast.AST):
                out.append(value)
            elif isinstance(value, list):
                out.extend(v for v in value if isinstance(v, ast.AST))
    return out


class _Module:
    """One converter file: its module-level op aliases and python-callable imports."""

    def __init__(self, tree: ast.Module, origin: Origin) -> None:
        self.origin = origin
        self.aliases: dict[str, ast.expr] = {}  # NAME = torch.ops.x.y.z (in try / if too)
        self.imported: set[str] = set()  # names imported from modules
        # every register(...) call, in ast.walk order (one walk of the tree serves both)
        self.register_calls: list[ast.Call] = []
        for node in _walk(tree):
            if isinstance(node, ast.Call):
                if _call_name(node) == REGISTER:
                    self.register_calls.append(node)
            elif isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(
                    node.targets[0], ast.Name):
                path = _dotted(node.value)
                if path and path[:2] == ["torch", "ops"]:
                    self.aliases[node.targets[0].id] = node.value
            elif isinstance(node, ast.ImportFrom):
                self.imported.update(a.asname or a.name for a in node.names)

    def op(self, arg: ast.expr, line: int) -> str | None:
        """The canonical op a registration names; None for a Python-level callable."""
        if isinstance(arg, ast.Name) and arg.id in self.aliases:
            arg = self.aliases[arg.id]
        path = _dotted(arg)
        # 5 parts: an OpOverload; 4: an OpOverloadPacket (``torch.ops.aten.sym_size``), which
        # the graph names when the op is called without an overload
        if path and path[:2] == ["torch", "ops"] and len(path) in (4, 5):
            try:
                return str(OpName.parse(f"{path[2]}::{'.'.join(path[3:])}"))
            except UsageError:
                pass
        elif path and (
            (len(path) == 2 and path[0] in _PY_MODULES)
            or (len(path) == 2 and path[0] == "torch" and path[1].startswith(_SYM_PREFIXES))
            or (len(path) == 1 and path[0] in self.imported and path[0].startswith(_SYM_PREFIXES))
        ):
            return None
        raise ScrapeError(f"unrecognised converter target {ast.unparse(arg)!r}",
                          source=self.origin.path, line=line)


def _version_bound(test: ast.expr) -> str | None:
    """``X`` of ``torch.__version__ >= 'X'`` or ``version.parse(torch.__version__) >=
    version.parse('X')``; None when ``test`` is not such a comparison."""
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1
            and isinstance(test.ops[0], (ast.GtE, ast.Gt))):
        return None
    left, right = test.left, test.comparators[0]
    if _call_name(left) == "parse" and isinstance(left, ast.Call) and left.args:
        left = left.args[0]
    if _call_name(right) == "parse" and isinstance(right, ast.Call) and right.args:
        right = right.args[0]
    if _dotted(left) != ["torch", "__version__"]:
        return None
    if isinstance(right, ast.Constant) and isinstance(right.value, str) and _VERSION.match(
            right.value):
        return right.value
    return None


def _existence(test: ast.expr) -> bool:
    """A test that an op or attribute exists (``op is not None``, ``hasattr(...)``)."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        test = test.operand
    if isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(
            test.ops[0], (ast.IsNot, ast.Is)):
        return isinstance(test.comparators[0], ast.Constant) and test.comparators[0].value is None
    return _call_name(test) == "hasattr"


def _applied(s: ast.stmt) -> ast.Call | None:
    """``register_fx_node_ge_converter(op)(fn)`` as a statement (``x = ...`` or bare): the
    registration of an already defined function."""
    value = s.value if isinstance(s, (ast.Expr, ast.Assign)) else None
    if (isinstance(value, ast.Call) and isinstance(value.func, ast.Call)
            and _call_name(value.func) == REGISTER):
        return value
    return None


def _guarded(stmts: Sequence[ast.stmt], min_torch: str, origin: Origin
             ) -> Iterator[tuple[ast.FunctionDef | ast.Call, str]]:
    """Module-level functions and applied registrations with the torch version they need,
    through if / try blocks."""
    for s in stmts:
        applied = _applied(s)
        if isinstance(s, ast.FunctionDef):
            yield s, min_torch
        elif applied is not None:
            yield applied, min_torch
        elif isinstance(s, ast.If):
            bound = _version_bound(s.test)
            if bound is not None:
                yield from _guarded(s.body, bound, origin)
                if any(True for _ in _guarded(s.orelse, min_torch, origin)):
                    raise ScrapeError("converters in the else branch of a torch version test",
                                      source=origin.path, line=s.lineno)
            elif _existence(s.test):
                yield from _guarded(s.body, min_torch, origin)
                yield from _guarded(s.orelse, min_torch, origin)
            elif any(True for _ in _guarded([*s.body, *s.orelse], min_torch, origin)):
                raise ScrapeError(f"converters under an unrecognised module-level test "
                                  f"{ast.unparse(s.test)!r}", source=origin.path, line=s.lineno)
        elif isinstance(s, ast.Try):
            for block in (s.body, s.orelse, s.finalbody, *(h.body for h in s.handlers)):
                yield from _guarded(block, min_torch, origin)


def parse_converters(text: str, *, origin: Origin) -> list[ConverterRow]:
    """The overloads one converter file registers (see the module docstring)."""
    try:
        tree = ast.parse(text, filename=origin.path)
    except SyntaxError as exc:
        raise ScrapeError(f"not Python: {exc.msg}", source=origin.path, line=exc.lineno) from None
    module = _Module(tree, origin)
    rows: list[ConverterRow] = []
    seen: set[int] = set()
    functions = {s.name: s for s in tree.body if isinstance(s, ast.FunctionDef)}
    for node, min_torch in _guarded(tree.body, "", origin):
        targets: list[tuple[ast.expr, int]] = []
        dtypes: tuple[str, ...] = ()
        if isinstance(node, ast.Call):  # register(op)(fn): fn's own decorators still count
            reg = node.func
            assert isinstance(reg, ast.Call)
            fn = functions.get(node.args[0].id) if (
                len(node.args) == 1 and isinstance(node.args[0], ast.Name)) else None
            if fn is None or len(reg.args) != 1:
                raise ScrapeError(f"unrecognised registration {ast.unparse(node)!r}",
                                  source=origin.path, line=node.lineno)
            targets.append((reg.args[0], node.lineno))
            seen.add(id(reg))
        else:
            fn = node
        for d in fn.decorator_list:
            name = _call_name(d)
            if name == REGISTER and isinstance(d, ast.Call):
                if len(d.args) != 1 or d.keywords:
                    raise ScrapeError(f"{REGISTER} with {len(d.args)} arguments",
                                      source=origin.path, line=d.lineno)
                if isinstance(node, ast.FunctionDef):
                    targets.append((d.args[0], d.lineno))
                seen.add(id(d))
            elif name == DECLARE and isinstance(d, ast.Call):
                dtypes = _dtypes(d)
        if not targets:
            continue
        status, message, condition, line, rebound = _classify(fn)
        for arg, at in targets:
            op = module.op(arg, at)
            if op is not None:
                rows.append(ConverterRow(op, status, message, condition, dtypes, min_torch, line,
                                         rebound))
    return _unique(rows, module, origin, seen)


def best_of(rows: Iterable[ConverterRow]) -> list[ConverterRow]:
    """One row per op: an op registered twice (``torch.ops.aten.sym_size`` and
    ``torch.ops.aten.sym_size.default`` are one canonical name) keeps its most capable
    converter, in first-seen order."""
    out: dict[str, ConverterRow] = {}
    for r in rows:
        old = out.get(r.op)
        if old is None or RANK[r.status] > RANK[old.status]:
            out[r.op] = r
    return list(out.values())


def _unique(rows: list[ConverterRow], module: _Module, origin: Origin, seen: set[int]
            ) -> list[ConverterRow]:
    for node in module.register_calls:  # a registration that is no module-level decorator
        if id(node) not in seen:
            raise ScrapeError(f"{REGISTER} outside a module-level function decorator",
                              source=origin.path, line=node.lineno)
    return best_of(rows)


def parse_pins(text: str, *, origin: Origin) -> list[PinRow]:
    """``torchair_pins.tsv``: tag, torchair commit (40 hex digits, or empty when unknown),
    then any columns (the mirror's own notes)."""
    lines = text.splitlines()
    if not lines or tuple(lines[0].split("\t")[:2]) != _PIN_HEADER:
        raise ScrapeError(f"expected a header starting {_PIN_HEADER[0]!r}, {_PIN_HEADER[1]!r}",
                          source=origin.path, line=1)
    rows: list[PinRow] = []
    for n, line in enumerate(lines[1:], start=2):
        if not line.strip():
            continue
        cells = line.split("\t")
        tag, commit = cells[0].strip(), cells[1].strip() if len(cells) > 1 else ""
        if not tag or (commit and not _SHA.match(commit)):
            raise ScrapeError(f"bad pin row {line!r}", source=origin.path, line=n)
        rows.append(PinRow(tag, commit, n))
    return rows
