"""Static op listings: read a model file's graph as text, execute nothing, import no torch.

* ``.pt2`` (torch.export): the JSON graph in ``models/*.json`` (or the torch<2.5
  ``serialized_exported_program.json``), including subgraphs of higher-order ops (cond, map,
  while_loop...). Shape bookkeeping nodes (``sym_size``, ``_assert_*``, Python ``operator``
  arithmetic on sizes) are dropped. This is the *pre-dispatch* IR: CompositeImplicitAutograd ops
  such as ``aten::linear`` are still there, so it is labelled as such and is not the list the
  NPU backend receives.
* TorchScript: the archive's ``code/**.py`` (TorchScript's own Python-like serialisation) is
  parsed with :mod:`ast`; ``torch.X(...)`` and ``ops.aten.X(...)`` calls become ``aten::X``.
  That format records no overloads, so a name without a default overload (``aten::isin``) is
  resolved to the overload whose schema the call's arguments fit (:func:`pick_overload`:
  literals by their kind, annotated parameters by their annotation, other expressions taken
  for tensors), from the op schemas of the bundled snapshot. ``constants.pkl``/``data.pkl``
  are never read.
"""

from __future__ import annotations

import ast
import csv
import functools
import json
import re
import zipfile
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import MAX_SAMPLES, OpList, OpUse
from opcheck.core.opname import split_top_level
from opcheck.tracers.sniff import ZIP_ERRORS

# torch.export schema ScalarType enum -> dtype name
_SCALAR_TYPES = {
    1: "uint8", 2: "int8", 3: "int16", 4: "int32", 5: "int64", 6: "float16", 7: "float32",
    8: "float64", 9: "complex32", 10: "complex64", 11: "complex128", 12: "bool",
    13: "bfloat16", 28: "uint16", 29: "float8_e4m3fn", 30: "float8_e5m2",
    31: "float8_e4m3fnuz", 32: "float8_e5m2fnuz", 33: "float8_e8m0fnu", 34: "uint32", 35: "uint64",
}  # fmt: skip
# Nodes that only compute or check symbolic sizes: not kernels the device runs.
_BOOKKEEPING = frozenset(
    {
        "aten::sym_size.int", "aten::sym_size", "aten::sym_numel", "aten::sym_stride.int",
        "aten::sym_stride", "aten::sym_storage_offset", "aten::_assert_async.msg",
        "aten::_assert_async", "aten::_assert_scalar", "aten::sym_constrain_range",
        "aten::sym_constrain_range_for_size", "aten::_assert_tensor_metadata",
        "aten::_functional_assert_async.msg", "aten::_functional_assert_scalar",
        "aten::_functional_sym_constrain_range", "aten::_functional_sym_constrain_range_for_size",
        "aten::sym_is_contiguous",
    }
)  # fmt: skip
PRE_DISPATCH_NOTE = (
    "static listing of the torch.export graph (pre-dispatch IR): CompositeImplicitAutograd ops "
    "(e.g. aten::linear) are listed as such, while the NPU backend would receive their "
    "decompositions; run with --trust for the runtime op list"
)
TORCHSCRIPT_NOTE = (
    "static listing of TorchScript code: operator overloads are inferred from each call's "
    "arguments and ops called inside CompositeImplicit functions are not expanded"
)
MAX_MEMBER_BYTES = 512 * 1024 * 1024


def _target_to_op(target: str) -> tuple[str | None, bool]:
    """(canonical op or None, is_higher_order)."""
    t = target
    for prefix in ("torch.ops.", "torch._ops.ops."):
        if t.startswith(prefix):
            t = t[len(prefix) :]
            break
    else:
        # _operator.getitem, torch.sym_*, math.*: Python-level size arithmetic
        return None, False
    ns, _, rest = t.partition(".")
    if ns == "higher_order":
        return None, True
    name, _, overload = rest.partition(".")
    if not name:
        return None, False
    op = f"{ns}::{name}.{overload}" if overload and overload != "default" else f"{ns}::{name}"
    return (None if op in _BOOKKEEPING else op), False


class _Collector:
    def __init__(self) -> None:
        self.ops: dict[str, OpUse] = {}
        self.higher_order: set[str] = set()
        self.nodes = 0

    def add(
        self, op: str, dtypes: list[str], shape: list[int] | None, module: str, loc: str
    ) -> None:
        use = self.ops.get(op)
        if use is None:
            use = self.ops[op] = OpUse(op=op)
        use.count += 1
        for d in dtypes:
            if d not in use.dtypes and len(use.dtypes) < MAX_SAMPLES:
                use.dtypes.append(d)
        if shape is not None and shape not in use.shapes and len(use.shapes) < MAX_SAMPLES:
            use.shapes.append(shape)
        if module and module not in use.modules and len(use.modules) < MAX_SAMPLES:
            use.modules.append(module)
        if loc and loc not in use.locations and len(use.locations) < MAX_SAMPLES:
            use.locations.append(loc)


def _sizes(raw: Any) -> list[int]:
    out: list[int] = []
    for s in raw or []:
        if isinstance(s, dict) and "as_int" in s:
            out.append(int(s["as_int"]))
        else:
            out.append(-1)
    return out


def _arg_tensor_names(arg: Any) -> list[str]:
    if not isinstance(arg, dict):
        return []
    if "as_tensor" in arg and isinstance(arg["as_tensor"], dict):
        return [str(arg["as_tensor"].get("name", ""))]
    if "as_tensors" in arg and isinstance(arg["as_tensors"], list):
        return [str(t.get("name", "")) for t in arg["as_tensors"] if isinstance(t, dict)]
    if "as_optional_tensor" in arg and isinstance(arg["as_optional_tensor"], dict):
        inner = arg["as_optional_tensor"].get("as_tensor")
        return [str(inner.get("name", ""))] if isinstance(inner, dict) else []
    return []


def _module_path(meta: dict[str, Any]) -> str:
    stack = meta.get("nn_module_stack")
    if not isinstance(stack, str) or not stack:
        return ""
    last = stack.split(";")[-1].split(",")
    return last[1] if len(last) > 1 else ""


def _location(meta: dict[str, Any]) -> str:
    trace = meta.get("stack_trace")
    if not isinstance(trace, str):
        return ""
    best = ""
    for line in trace.splitlines():
        line = line.strip()
        if not line.startswith('File "'):
            continue
        fn, _, rest = line[6:].partition('", line ')
        lineno = rest.split(",", 1)[0]
        if "/torch/" in fn.replace("\\", "/") or fn.startswith("<"):
            continue
        i = fn.rfind("site-packages/")
        best = f"{fn[i + 14 :] if i >= 0 else fn}:{lineno}"
    return best


def _walk_graph(graph: dict[str, Any], col: _Collector) -> None:
    values = graph.get("tensor_values") or {}
    for node in graph.get("nodes") or []:
        col.nodes += 1
        target = str(node.get("target", ""))
        op, higher = _target_to_op(target)
        inputs = node.get("inputs") or []
        for inp in inputs:
            arg = inp.get("arg") if isinstance(inp, dict) else None
            if isinstance(arg, dict) and "as_graph" in arg:
                sub = arg["as_graph"].get("graph") if isinstance(arg["as_graph"], dict) else None
                if isinstance(sub, dict):
                    _walk_graph(sub, col)
        if higher:
            col.higher_order.add(target.rsplit(".", 1)[-1])
            continue
        if op is None:
            continue
        dtypes: list[str] = []
        shape: list[int] | None = None
        for inp in inputs:
            for name in _arg_tensor_names(inp.get("arg") if isinstance(inp, dict) else None):
                tv = values.get(name)
                if not isinstance(tv, dict):
                    continue
                d = _SCALAR_TYPES.get(int(tv.get("dtype", 0) or 0), "")
                if d and d not in dtypes:
                    dtypes.append(d)
                if shape is None:
                    shape = _sizes(tv.get("sizes"))
        meta = node.get("metadata") or {}
        col.add(op, dtypes, shape, _module_path(meta), _location(meta))


def _find_graph_module(doc: Any) -> dict[str, Any] | None:
    if not isinstance(doc, dict):
        return None
    gm = doc.get("graph_module")
    if isinstance(gm, dict) and isinstance(gm.get("graph"), dict):
        return gm
    for key in ("exported_program", "program"):
        found = _find_graph_module(doc.get(key))
        if found is not None:
            return found
    return None


def list_pt2(path: str | Path, *, label: str = "") -> OpList:
    """The op listing of a torch.export archive, from its JSON graph only."""
    p = Path(path)
    try:
        with zipfile.ZipFile(p) as zf:
            names = zf.namelist()
            graphs = sorted(
                n
                for n in names
                if (("/models/" in n or n.startswith("models/")) and n.endswith(".json"))
                or n.endswith("serialized_exported_program.json")
            )
            if not graphs:
                raise TraceError(f"{p}: torch.export archive without a model graph (models/*.json)")
            docs = []
            for n in graphs:
                if zf.getinfo(n).file_size > MAX_MEMBER_BYTES:
                    raise TraceError(f"{p}: graph {n} is implausibly large")
                raw = zf.read(n)
                try:
                    docs.append((n, json.loads(raw)))
                except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
                    raise TraceError(f"{p}: torch.export graph is not valid JSON ({exc})") from None
    except ZIP_ERRORS as exc:
        raise TraceError(f"{p}: damaged torch.export archive ({exc})") from None
    col = _Collector()
    version = ""
    for n, doc in docs:
        gm = _find_graph_module(doc)
        if gm is None:
            raise TraceError(f"{p}: {n} holds no graph_module")
        try:
            _walk_graph(gm["graph"], col)
        except (AttributeError, TypeError, ValueError, KeyError, RecursionError) as exc:
            # valid JSON of another shape: a newer/older export schema or a damaged file
            raise TraceError(
                f"{p}: unexpected torch.export graph layout in {n} ({type(exc).__name__}: {exc})"
            ) from None
        sv = doc.get("schema_version") if isinstance(doc, dict) else None
        if isinstance(sv, dict):
            version = f"{sv.get('major', '')}.{sv.get('minor', '')}"
    notes = [PRE_DISPATCH_NOTE]
    if len(docs) > 1:
        notes.append(
            f"{len(docs)} exported methods listed together: {', '.join(n.rsplit('/', 1)[-1] for n, _ in docs)}"
        )
    if col.higher_order:
        notes.append(
            "control flow operators (" + ", ".join(sorted(col.higher_order)) + ") listed by "
            "their subgraphs; which branch runs depends on the data"
        )
    if version:
        notes.append(f"export schema version {version}")
    return OpList(
        model=label or p.name,
        method="static-export",
        ir="pre-dispatch",
        torch_version="",
        notes=notes,
        ops=sorted(col.ops.values(), key=lambda u: u.op),
    )


# ---------------------------------------------------------------- TorchScript


_TS_SKIP = frozenset(
    {"annotate", "len", "list", "isinstance", "unchecked_cast", "__is__", "__isnot__", "__not__"}
)


@functools.lru_cache(maxsize=1)
def op_schemas() -> Mapping[str, tuple[str, ...]]:
    """``aten::isin`` → the schemas of its overloads (``isin.Tensor_Tensor(Tensor elements,
    ...)``), from the bundled snapshot's operator table; empty when it cannot be read."""
    from opcheck.core.paths import snapshot_dir

    out: dict[str, list[str]] = {}
    try:
        with (snapshot_dir() / "operators.tsv").open(encoding="utf-8", newline="") as fh:
            reader = csv.DictReader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            for row in reader:
                op, schema = row.get("op") or "", row.get("schema") or ""
                if "::" in op:
                    out.setdefault(op.split(".", 1)[0], []).append(f"{op}\t{schema}")
    except (OSError, csv.Error):
        return {}
    return {k: tuple(v) for k, v in out.items()}


_PARAM = re.compile(r"^(?P<type>.+?)\s+(?P<name>\w+)(?:=.*)?$")


def _params(schema: str) -> tuple[list[tuple[str, str, bool]], set[str]] | None:
    """(positional (type, name, has default), keyword-only names) of a schema string."""
    m = re.match(r"^[\w.]+\((?P<args>.*)\)\s*->", schema)
    if m is None:
        return None
    parts = split_top_level(m.group("args"), angles=False)
    positional: list[tuple[str, str, bool]] = []
    keyword: set[str] = set()
    kw_only = False
    for part in parts:
        if part == "*":
            kw_only = True
            continue
        pm = _PARAM.match(part)
        if pm is None:
            return None
        if kw_only:
            keyword.add(pm.group("name"))
        else:
            positional.append((pm.group("type"), pm.group("name"), "=" in part))
    return positional, keyword | {n for _, n, _ in positional}


_NUMBER_TYPES = ("int", "float", "Scalar", "SymInt", "bool", "complex", "SymFloat", "SymBool")


def _fits(kind: str, typ: str) -> int | None:
    """Score of an argument of ``kind`` for a parameter of schema type ``typ``; None: no fit."""
    base = typ.rstrip("?")
    if kind == "none":
        return 0 if typ.endswith("?") else None
    if kind == "number":
        return 1 if base in _NUMBER_TYPES else None
    if kind == "str":
        return 1 if base in ("str", "Dimname", "str?") else None
    if kind == "list":
        return 1 if base.endswith("]") else None
    if kind == "Tensor":
        return 2 if base.startswith("Tensor") and not base.endswith("]") else None
    if kind in _NUMBER_TYPES:
        return 2 if base in _NUMBER_TYPES else None
    # unknown: most names in model code are tensors
    return 1 if base.startswith("Tensor") and not base.endswith("]") else 0


def pick_overload(name: str, args: list[str], kwargs: list[str],
                  schemas: Mapping[str, tuple[str, ...]] | None = None) -> str:
    """The overload of ``name`` (``aten::isin``) a call with arguments of kinds ``args``
    (``number``, ``str``, ``none``, ``list``, ``Tensor``, an annotation like ``int``, or
    ``unknown``) and keyword arguments ``kwargs`` fits best; the default overload (``name``
    itself) when it fits as well as any, and ``name`` when no schema fits or none is known."""
    rows = (op_schemas() if schemas is None else schemas).get(name, ())
    ops = {row.split("\t", 1)[0]: row.split("\t", 1)[1] for row in rows}
    if not ops:
        return name
    # (score, is the default overload): the default wins a tie
    best: tuple[int, bool, str] | None = None
    for op, schema in sorted(ops.items()):
        overload = op.split(".", 1)[1] if "." in op.split("::", 1)[1] else ""
        parsed = _params(schema)
        if parsed is None or "Dimname" in schema:
            continue  # no schema known, or named tensors (rare in model code)
        positional, names = parsed
        is_out = "(a!) out" in schema or overload == "out" or overload.endswith("_out")
        if is_out != ("out" in kwargs) or not set(kwargs) <= names or len(args) > len(positional):
            continue
        given = set(kwargs)
        if any(not default and pname not in given for _, pname, default in positional[len(args):]):
            continue
        score = 0
        for kind, (typ, _pname, _d) in zip(args, positional, strict=False):
            fit = _fits(kind, typ)
            if fit is None:
                break
            score += fit
        else:
            if best is None or (score, op == name) > best[:2]:
                best = (score, op == name, op)
    return best[2] if best else name


def _arg_kind(node: ast.expr, annotations: Mapping[str, str]) -> str:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        node = node.operand
    if isinstance(node, ast.Constant):
        v = node.value
        if v is None:
            return "none"
        if isinstance(v, str):
            return "str"
        return "number" if isinstance(v, (int, float, complex)) else "unknown"
    if isinstance(node, (ast.List, ast.Tuple)):
        return "list"
    if isinstance(node, ast.Name) and node.id in annotations:
        return annotations[node.id]
    return "unknown"


def _annotation(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Name) and node.id in ("Tensor", *_NUMBER_TYPES):
        return node.id
    if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name) \
            and node.value.id == "List":
        return "list"
    return None


class _TSVisitor(ast.NodeVisitor):
    def __init__(self, col: _Collector, source: str) -> None:
        self.col = col
        self.source = source
        self.annotations: dict[str, str] = {}

    def visit_FunctionDef(self, node: ast.FunctionDef) -> None:
        outer = self.annotations
        self.annotations = {a.arg: t for a in node.args.args
                            if (t := _annotation(a.annotation)) is not None}
        self.generic_visit(node)
        self.annotations = outer

    def visit_AnnAssign(self, node: ast.AnnAssign) -> None:
        t = _annotation(node.annotation)
        if t is not None and isinstance(node.target, ast.Name):
            self.annotations[node.target.id] = t
        self.generic_visit(node)

    def visit_Call(self, node: ast.Call) -> None:
        chain: list[str] = []
        f: ast.expr = node.func
        while isinstance(f, ast.Attribute):
            chain.append(f.attr)
            f = f.value
        if isinstance(f, ast.Name):
            chain.append(f.id)
            chain.reverse()
            op = self._op(chain)
            if op:
                op = pick_overload(op, [_arg_kind(a, self.annotations) for a in node.args],
                                   [k.arg for k in node.keywords if k.arg])
                self.col.add(op, [], None, "", f"{self.source}:{node.lineno}")
        self.generic_visit(node)

    @staticmethod
    def _op(chain: list[str]) -> str | None:
        if len(chain) == 2 and chain[0] == "torch":
            name = chain[1]
        elif len(chain) == 3 and chain[0] == "ops" and chain[1] == "aten":
            name = chain[2]
        elif len(chain) == 4 and chain[:3] == ["torch", "ops", "aten"]:
            name = chain[3]
        else:
            return None
        if name in _TS_SKIP or (name.startswith("__") and name.endswith("__")):
            return None
        return f"aten::{name}"


def list_torchscript(path: str | Path, *, label: str = "") -> OpList:
    """Ops named in a TorchScript archive's serialised code (text only, never unpickled)."""
    p = Path(path)
    col = _Collector()
    try:
        with zipfile.ZipFile(p) as zf:
            code = [n for n in zf.namelist() if "/code/" in f"/{n}" and n.endswith(".py")]
            if not code:
                raise TraceError(f"{p}: TorchScript archive without code/")
            for n in code:
                if zf.getinfo(n).file_size > MAX_MEMBER_BYTES:
                    raise TraceError(f"{p}: {n} is implausibly large")
                text = zf.read(n).decode("utf-8", "replace")
                try:
                    tree = ast.parse(text)
                except SyntaxError as exc:
                    raise TraceError(f"{p}: cannot parse TorchScript code {n}: {exc.msg}") from None
                _TSVisitor(col, n.split("/code/", 1)[-1]).visit(tree)
    except ZIP_ERRORS as exc:
        raise TraceError(f"{p}: damaged TorchScript archive ({exc})") from None
    return OpList(
        model=label or p.name,
        method="static-torchscript",
        ir="torchscript",
        notes=[TORCHSCRIPT_NOTE],
        ops=sorted(col.ops.values(), key=lambda u: u.op),
    )
