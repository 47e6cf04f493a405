"""The PyTorch op universe: ``native_functions.yaml`` (+ ``tags.yaml``) as torchgen reads them.

Pure text → rows.  Where the text comes from (the installed torch's ``torchgen/packaged``
copy) is :mod:`opcheck.sync.upstreams`' business; nothing here imports torch.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from opcheck.core.errors import ScrapeError, UsageError
from opcheck.core.opname import OpName
from opcheck.scrapers.rows import OperatorRow, Origin
from opcheck.scrapers.yamlines import LineList, load

# Keys torchgen's NativeFunction.from_yaml pops (torch 2.x), plus keys older torch releases
# used that it no longer knows; anything else means the format moved on.
KNOWN_KEYS = frozenset(
    {
        "func", "cpp_no_default_args", "use_const_ref_for_mutable_tensors", "variants",
        "manual_kernel_registration", "manual_cpp_binding", "device_guard", "device_check",
        "structured", "structured_delegate", "structured_inherits", "python_module",
        "category_override", "precomputed", "tags", "dispatch", "autogen", "ufunc_inner_loop",
    }
)  # fmt: skip
LEGACY_KEYS = frozenset(
    {
        "use_c10_dispatcher", "matches_jit_signature", "requires_tensor",
        "supports_named_tensor", "abstract", "named_guard", "legacy_indexing",
    }
)  # fmt: skip

CIA = "CompositeImplicitAutograd"
CEA = "CompositeExplicitAutograd"
CEA_NF = "CompositeExplicitAutogradNonFunctional"
BACKEND = "backend"


def parse_tags(text: str, *, origin: Origin) -> set[str]:
    """The tag names declared in ``tags.yaml``."""
    data = load(text, origin)
    if not isinstance(data, list):
        raise ScrapeError("tags.yaml is not a list", source=origin.path)
    out: set[str] = set()
    for i, e in enumerate(data):
        if not isinstance(e, dict) or not isinstance(e.get("tag"), str):
            raise ScrapeError(f"entry {i + 1} has no tag: name", source=origin.path)
        out.add(e["tag"])
    return out


def _canonical(name: str, origin: Origin, line: int) -> str:
    try:
        return str(OpName.from_schema(name, "aten"))
    except UsageError as e:
        raise ScrapeError(str(e), source=origin.path, line=line) from None


def kernel_kind(
    dispatch: Iterable[str] | None, *, structured: bool, structured_delegate: bool
) -> str:
    """torchgen's rule: no dispatch table, not structured, no delegate → CompositeImplicit.

    ``dispatch`` is None when the YAML has no ``dispatch:`` key; an explicit empty table
    (``dispatch: {}``) means "no kernel here", not CompositeImplicit.
    """
    if dispatch is None:
        return BACKEND if structured or structured_delegate else CIA
    keys = set(dispatch)
    if CIA in keys:
        return CIA
    if CEA in keys:
        return CEA
    if CEA_NF in keys:
        return CEA_NF
    return BACKEND


def _tags(entry: dict[Any, Any], valid_tags: set[str] | None, origin: Origin,
          line: int) -> tuple[str, ...]:
    """An entry's ``tags:`` (a name or a list of names), checked against tags.yaml if given."""
    raw_tags = entry.get("tags", [])
    if not (
        raw_tags is None
        or isinstance(raw_tags, str)
        or (isinstance(raw_tags, list) and all(isinstance(t, str) for t in raw_tags))
    ):
        raise ScrapeError("tags: is not a name or a list of names", source=origin.path, line=line)
    tags = (raw_tags,) if isinstance(raw_tags, str) else tuple(raw_tags or ())
    if valid_tags is not None:
        bad = [t for t in tags if t not in valid_tags]
        if bad:
            raise ScrapeError(
                f"tag(s) not in tags.yaml: {', '.join(repr(str(t))[1:-1] for t in bad)}",
                source=origin.path,
                line=line,
            )
    return tags


def _dispatch_keys(raw_dispatch: object, origin: Origin, line: int) -> list[str]:
    """The dispatch keys an entry's ``dispatch:`` names (``CPU, CUDA: fn`` names two)."""
    dispatch: list[str] = []
    if raw_dispatch is not None:
        if not isinstance(raw_dispatch, dict):
            raise ScrapeError("dispatch: is not a mapping", source=origin.path, line=line)
        for ks in raw_dispatch:
            for k in str(ks).split(","):
                if k.strip() and k.strip() not in dispatch:
                    dispatch.append(k.strip())
    return dispatch


def parse_native_functions(
    text: str,
    *,
    origin: Origin,
    tags_text: str | None = None,
    include_autogen: bool = True,
) -> list[OperatorRow]:
    """Rows for every ``func:`` of a torchgen-style native_functions.yaml.

    ``tags`` are those written in the YAML (torchgen adds ``pt2_compliant_tag``/``out``/
    ``inplace`` implicitly; those are not repeated here).  With ``tags_text`` (tags.yaml) an
    undeclared tag is an error, as in torchgen.  ``include_autogen`` adds the ops named by
    ``autogen:`` (torchgen generates them with a CompositeExplicitAutograd kernel and the
    ``generated`` tag, or no kernel at all when the parent is CompositeImplicit; their schema
    is derived by torchgen and left empty here).
    """
    data = load(text, origin)
    if not isinstance(data, LineList):
        raise ScrapeError("expected a YAML list of functions", source=origin.path, line=1)
    valid_tags = parse_tags(tags_text, origin=origin) if tags_text is not None else None
    lines = data.item_lines
    rows: list[OperatorRow] = []
    generated: list[tuple[str, int, str]] = []
    for entry, line in zip(data, lines, strict=True):
        if not isinstance(entry, dict):
            raise ScrapeError("list item is not a mapping", source=origin.path, line=line)
        # repr without quotes: a key may hold a line break (the message must stay one line)
        unknown = sorted(repr(str(k))[1:-1] for k in entry if k not in KNOWN_KEYS and k not in LEGACY_KEYS)
        if unknown:
            raise ScrapeError(
                f"unknown key(s) {', '.join(unknown)}", source=origin.path, line=line
            )
        func = entry.get("func")
        if not isinstance(func, str):
            raise ScrapeError("entry has no func: string", source=origin.path, line=line)
        op = _canonical(func, origin, line)

        tags = _tags(entry, valid_tags, origin, line)
        raw_dispatch = entry.get("dispatch")
        dispatch = _dispatch_keys(raw_dispatch, origin, line)

        delegate_raw = entry.get("structured_delegate")
        delegate = _canonical(str(delegate_raw), origin, line) if delegate_raw else None
        structured = bool(entry.get("structured", False))
        kind = kernel_kind(
            None if raw_dispatch is None else dispatch,
            structured=structured,
            structured_delegate=delegate is not None,
        )
        rows.append(
            OperatorRow(
                op=op,
                schema=func.strip(),
                tags=tags,
                dispatch=tuple(dispatch),
                kernel_kind=kind,
                structured_delegate=delegate,
                line=line,
            )
        )
        autogen = entry.get("autogen")
        if include_autogen and autogen:
            generated.extend((n.strip(), line, kind) for n in str(autogen).split(",") if n.strip())
    # Several entries may autogen the same op (foo.out from both foo and foo_).
    seen = {r.op for r in rows}
    for name, line, parent_kind in generated:
        op = _canonical(name, origin, line)
        if op in seen:
            continue
        seen.add(op)
        # torchgen registers no kernel for ops generated from a CompositeImplicit parent.
        gen_kind = BACKEND if parent_kind == CIA else CEA
        rows.append(
            OperatorRow(
                op=op,
                schema="",
                tags=("generated",),
                dispatch=(gen_kind,) if gen_kind == CEA else (),
                kernel_kind=gen_kind,
                structured_delegate=None,
                line=line,
            )
        )
    return rows
