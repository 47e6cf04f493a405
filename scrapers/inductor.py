"""torch_npu's inductor backend (``torch.compile``'s default backend on the NPU): which ops it
generates Triton kernels for, read from ``torch_npu/_inductor/lowering_op_list.py`` at a tag.

torch_npu registers an NPU backend for inductor (``register_backend_for_device('npu', ...)``
in ``torch_npu/_inductor/__init__.py``) and keeps inductor's own lowering only for the ops it
lists; every other lowered op is made a fallback (``_register_npu_inductor_fallbacks``): the
compiled graph calls the op's eager ATen kernel, i.e. torch_npu's kernel as in eager mode.
The lists, each entry with its line:

- ``generate``: ``GENERATE_LIST`` (``aten.mul`` stands for every overload of ``aten::mul``,
  ``aten.copy_`` for ``aten::copy_``; ``prims.*`` and torch_npu's own callables kept by name);
- ``generate_prefix``: ``GENERATE_LIST2`` (substrings: every op whose name contains one, e.g.
  ``foreach``);
- ``fallback``: ``FALLBACK_LIST`` (ops forced to their eager kernel).

Newer tags of some torch lines (2.7.1 and 2.9.0 at 26.1.0) invert the format: no
``lowering_op_list.py``; ``lowering_fallback_list.py`` lists the ops kept eager
(``*FALLBACK_LIST`` lists, also those added under a config ``if``: their default values add
them) and inductor lowers every other op (:func:`parse_fallbacks`: the fallback rows plus one
``generate_rest`` row), and ``lowering_override_list.py`` lists the ops given torch_npu's own
lowering (``LOWERING_OVERRIDE_OP``: generate rows, :func:`parse_overrides`).

Read with ``ast`` (torch_npu is never imported); a file without ``GENERATE_LIST`` or with an
entry of another shape is a :class:`ScrapeError` naming file and line.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.rows import Origin

GENERATE, GENERATE_PREFIX, FALLBACK = "generate", "generate_prefix", "fallback"
GENERATE_REST = "generate_rest"  # the fallback-list format: every op not kept eager is lowered
BACKEND = "backend"  # torch_npu/_inductor/__init__.py registers inductor's backend for 'npu'
_LISTS = {"GENERATE_LIST": GENERATE, "GENERATE_LIST2": GENERATE_PREFIX, "FALLBACK_LIST": FALLBACK}
_NAMESPACES = {"aten": "aten", "prims": "prims", "tr_c10d": "tr_c10d"}


@dataclass(frozen=True)
class InductorRow:
    kind: str  # generate | generate_prefix | fallback
    name: str  # "aten::mul" (every overload), "aten::copy_", "npu_dtype_cast", "foreach"
    line: int


def _entry(node: ast.expr, kind: str, origin: Origin,
           namespaces: frozenset[str] = frozenset()) -> str:
    if kind == GENERATE_PREFIX:
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            return node.value
    elif isinstance(node, ast.Attribute):
        # aten.mul / aten.copy_ / aten.add.Tensor
        parts: list[str] = []
        cur: ast.expr = node
        while isinstance(cur, ast.Attribute):
            parts.insert(0, cur.attr)
            cur = cur.value
        ns = cur.id if isinstance(cur, ast.Name) else ""
        if ns == "torch" and len(parts) >= 3 and parts[0] == "ops":  # torch.ops.<ns>.<op>
            ns, parts = parts[1], parts[2:]
        elif ns in _NAMESPACES:
            ns = _NAMESPACES[ns]
        elif ns in namespaces:  # a name bound to torch.ops.<ns> in the file
            pass
        else:
            ns = ""
        if ns and parts:
            name = f"{ns}::{parts[0]}"
            return name + (f".{parts[1]}" if len(parts) > 1 and parts[1] != "default" else "")
    elif isinstance(node, ast.Name):  # torch_npu's own callables, higher-order ops
        return node.id
    raise ScrapeError(f"unexpected {kind} entry: {ast.unparse(node)}", source=origin.path,
                      line=node.lineno)


def parse_init(text: str, origin: Origin) -> list[InductorRow]:
    """``torch_npu/_inductor/__init__.py``: the line registering inductor's backend for the
    ``npu`` device (``register_backend_for_device('npu', ...)``); none when it does not."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ScrapeError(f"not Python: {exc.msg}", source=origin.path, line=exc.lineno) from None
    for node in ast.walk(tree):
        if (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)
                and node.func.id == "register_backend_for_device" and node.args
                and isinstance(node.args[0], ast.Constant) and node.args[0].value == "npu"):
            return [InductorRow(BACKEND, "npu", node.lineno)]
    return []


def parse(text: str, origin: Origin) -> list[InductorRow]:
    """The op lists of one ``lowering_op_list.py``."""
    try:
        tree = ast.parse(text)
    except SyntaxError as exc:
        raise ScrapeError(f"not Python: {exc.msg}", source=origin.path, line=exc.lineno) from None
    rows: list[InductorRow] = []
    seen: set[str] = set()
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name) and node.targets[0].id in _LISTS):
            continue
        name = node.targets[0].id
        if not isinstance(node.value, ast.List):
            raise ScrapeError(f"{name} is not a list", source=origin.path, line=node.lineno)
        seen.add(name)
        kind = _LISTS[name]
        for elt in node.value.elts:
            rows.append(InductorRow(kind, _entry(elt, kind, origin), elt.lineno))
    if "GENERATE_LIST" not in seen:
        raise ScrapeError("no GENERATE_LIST", source=origin.path)
    out: dict[tuple[str, str], InductorRow] = {}
    for r in rows:  # an op listed twice keeps its first line
        out.setdefault((r.kind, r.name), r)
    return list(out.values())


def _tree(text: str, origin: Origin) -> ast.Module:
    try:
        return ast.parse(text)
    except SyntaxError as exc:
        raise ScrapeError(f"not Python: {exc.msg}", source=origin.path, line=exc.lineno) from None


def _op_namespaces(tree: ast.Module) -> frozenset[str]:
    """Names the file binds to ``torch.ops`` namespaces (``from torch.ops import fsdp``,
    ``npu = torch.ops.npu``)."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.module == "torch.ops":
            out |= {a.asname or a.name for a in node.names}
        elif (isinstance(node, ast.Assign) and len(node.targets) == 1
              and isinstance(node.targets[0], ast.Name)
              and ast.unparse(node.value).startswith("torch.ops.")):
            out.add(node.targets[0].id)
    return frozenset(out)


def _lists(tree: ast.Module, wanted: Callable[[str], bool]) -> Iterator[tuple[str, ast.List]]:
    """Module-level list literals assigned (``=`` or ``+=``) to a wanted name, also inside a
    module-level ``if`` (a config switch: read with its default taken)."""
    body: list[ast.stmt] = []
    for node in tree.body:
        body += [node, *(node.body if isinstance(node, ast.If) else [])]
    for node in body:
        target = (node.targets[0] if isinstance(node, ast.Assign) and len(node.targets) == 1
                  else node.target if isinstance(node, ast.AugAssign) else None)
        if isinstance(target, ast.Name) and wanted(target.id):
            value = node.value if isinstance(node, (ast.Assign, ast.AugAssign)) else None
            if isinstance(value, ast.List):
                yield target.id, value


def _rows_of(tree: ast.Module, kind: str, wanted: Callable[[str], bool],
             origin: Origin) -> list[InductorRow]:
    spaces = _op_namespaces(tree)
    out: dict[str, InductorRow] = {}
    for _, value in _lists(tree, wanted):
        for elt in value.elts:
            name = _entry(elt, kind, origin, spaces)
            out.setdefault(name, InductorRow(kind, name, elt.lineno))
    return list(out.values())


def parse_fallbacks(text: str, origin: Origin) -> list[InductorRow]:
    """``lowering_fallback_list.py``: the ops kept eager, and one ``generate_rest`` row at the
    line that assembles ``FALLBACK_LIST`` (inductor lowers every op not in it)."""
    tree = _tree(text, origin)
    assembled = next((n.lineno for n in tree.body if isinstance(n, ast.Assign)
                      and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name)
                      and n.targets[0].id == "FALLBACK_LIST"), 0)
    if not assembled:
        raise ScrapeError("no FALLBACK_LIST", source=origin.path)
    rows = _rows_of(tree, FALLBACK, lambda n: n.endswith("FALLBACK_LIST"), origin)
    return [InductorRow(GENERATE_REST, "*", assembled), *rows]


def parse_overrides(text: str, origin: Origin) -> list[InductorRow]:
    """``lowering_override_list.py``: the ops torch_npu lowers with its own lowering."""
    tree = _tree(text, origin)
    if not any(name == "LOWERING_OVERRIDE_OP" for name, _ in
               _lists(tree, lambda n: n == "LOWERING_OVERRIDE_OP")):
        raise ScrapeError("no LOWERING_OVERRIDE_OP list", source=origin.path)
    return _rows_of(tree, GENERATE, lambda n: n == "LOWERING_OVERRIDE_OP", origin)
