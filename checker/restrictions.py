"""Documented per-API restrictions applied to traced ops.

A traced op is ``restricted`` when the Python API that produced it is documented, for the
target's doc version, as not supported on the chosen product, or with a dtype list that excludes
a dtype the call used. Without ``--hardware`` a limit counts only when it holds on every product
the doc names (the op cannot run that way anywhere); with it, only that product's statement
counts.

Which API: a runtime trace records, per call signature, the public API the user's code called
(``F.max_pool3d`` reaches the backend as ``aten::max_pool3d_with_indices``); those APIs are
checked, and only those. Op lists without that record (schema 1, static listings, logs) fall back
to the API → ATen link, and such restrictions say they were inferred.

Which dtypes: the ones the documented list is about. A list of integer dtypes speaks of index
arguments (``nn.Embedding``: indices, not the float weight), a list of floating dtypes of the
data; a cast (``Tensor.to``, ``Tensor.bfloat16``...) is judged by the dtype it produces.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from opcheck.checker.check import Restriction, RestrictionLookup
from opcheck.checker.contract import combine, contract_lookup
from opcheck.checker.hccl import hccl_lookup
from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpUse, Signature
from opcheck.core.products import ALIASES, canonical_alias, product_aliases
from opcheck.core.versions import release_key
from opcheck.db import reads
from opcheck.db.catalog import Catalog, ReleaseInfo

_DTYPES = {
    "bfloat16": "bf16", "float16": "fp16", "float32": "fp32", "float64": "fp64",
    "complex32": "complex32", "complex64": "complex64", "complex128": "complex128",
}  # fmt: skip


def doc_dtype(traced: str) -> str:
    """A traced dtype (``float32``) in the docs' spelling (``fp32``)."""
    name = traced.removeprefix("torch.")
    return _DTYPES.get(name, name)


@dataclass(frozen=True)
class _Row:
    api: str
    doc_version: str
    hardware: str
    supported: bool | None
    only: frozenset[str] | None
    unsupported: frozenset[str]
    restriction: str
    link: str


def products(cat: Catalog) -> list[str]:
    return reads.api_products(cat.engine)


def match_hardware(cat: Catalog, wanted: str) -> list[str]:
    """The API docs' product names ``wanted`` stands for: a product alias (``910A``, ``A2``,
    ``310P``: see ``opcheck.core.products``) or a part of the name (``A2`` → ``Atlas A2 训练系列产品``)."""
    known = products(cat)
    alias = canonical_alias(wanted)
    hits = [p for p in known if alias is not None and alias in (product_aliases(p) or ())]
    hits = hits or [p for p in known if wanted.lower() in p.lower()]
    if not hits and alias is None:
        raise UsageError(f"no hardware product matches {wanted!r} (aliases: "
                         f"{', '.join(ALIASES)}; or part of a name: {', '.join(known)})")
    return hits


def all_restrictions(cat: Catalog, hardware: str | None) -> RestrictionLookup | None:
    """Both sources of limits: the aclnn contract (CANN's operator docs) and torch_npu's
    per-API docs, each labelled in its findings (``Restriction.source``)."""
    return combine(contract_lookup(cat, hardware), restriction_lookup(cat, hardware),
                   hccl_lookup(cat))


def _pick_version(versions: Iterable[str], torch: str) -> str:
    """The doc set for the target's torch: the same version, else the newest older one, else
    the oldest newer one."""
    vs = sorted({v for v in versions if v}, key=release_key)
    if not vs:
        return ""
    if torch in vs:
        return torch
    older = [v for v in vs if release_key(v) <= release_key(torch)]
    return older[-1] if older else vs[0]


def _describe(row: _Row) -> str:
    if row.restriction:
        return row.restriction
    parts = []
    if row.supported is False:
        parts.append("not supported")
    if row.only is not None:
        parts.append("only " + ", ".join(sorted(row.only)))
    if row.unsupported:
        parts.append("not " + ", ".join(sorted(row.unsupported)))
    return "; ".join(parts) or "documented without restriction"


def restriction_lookup(cat: Catalog, hardware: str | None) -> RestrictionLookup | None:
    """A lookup for ``check``; None when the catalog has no API docs."""
    if reads.api_support_count(cat.engine) == 0:
        return None
    links: dict[str, set[str]] = defaultdict(set)
    for api, op in reads.api_op_links(cat.engine):
        links[op].add(api)
    urls = reads.source_urls(cat.engine)
    wanted = match_hardware(cat, hardware) if hardware else None
    cache: dict[str, list[_Row]] = {}

    def rows_for(api: str) -> list[_Row]:
        if api not in cache:
            cache[api] = [
                _Row(api, r.doc_version, r.hardware, r.supported,
                     frozenset(r.only_dtypes.split(",")) if r.only_dtypes else None,
                     frozenset(x for x in r.unsupported_dtypes.split(",") if x), r.restriction,
                     f"{urls[r.source_id]}#L{r.line}"
                     if r.source_id is not None and urls.get(r.source_id) else "")
                for r in reads.api_support_rows(cat.engine, api)
            ]
        return cache[api]

    def lookup(use: OpUse, target: ReleaseInfo) -> list[Restriction]:
        recorded = _recorded_apis(use)
        inferred = not recorded
        apis = sorted(links.get(use.op, ())) if inferred else sorted(recorded)
        out: list[Restriction] = []
        clear = False
        for api in apis:
            rows = rows_for(api)
            version = _pick_version((r.doc_version for r in rows), target.torch)
            rows = [r for r in rows if r.doc_version == version]
            if wanted is not None:
                rows = [r for r in rows if r.hardware in wanted or not r.hardware]
            if not rows:
                continue  # this API says nothing for the target
            documented = _documented_dtypes(rows)
            calls = recorded.get(api, []) if not inferred else list(use.signatures)
            seen = (_relevant_dtypes(api, calls, documented) if calls
                    else {doc_dtype(d) for d in use.dtypes})
            judged = _judge(api, rows, seen, every_product=wanted is None, inferred=inferred)
            # Several APIs reach one op (torch.addmm, Tensor.addmm, nn.Linear): when any
            # documented path allows what the trace does, the op is not restricted.
            clear = clear or not any(r.violated for r in judged)
            out += judged
        if clear:
            out = [_cleared(x) for x in out]
        return out

    return lookup


def _cleared(r: Restriction) -> Restriction:
    return Restriction(r.api, r.text, (), r.link, r.hardware, inferred=r.inferred)


def _recorded_apis(use: OpUse) -> dict[str, list[Signature]]:
    """API → the call signatures it produced, from the trace's provenance records."""
    out: dict[str, list[Signature]] = defaultdict(list)
    for sig in use.signatures:
        for api in sig.apis:
            out[api].append(sig)
    return dict(out)


_CASTS = frozenset({"to", "type", "bfloat16", "half", "float", "double", "int", "long", "short",
                    "bool", "byte", "char", "cfloat", "cdouble", "type_as"})


def _kind(doc_name: str) -> str:
    if doc_name in ("bf16", "fp16", "fp32", "fp64"):
        return "float"
    if doc_name.startswith("complex"):
        return "complex"
    if doc_name == "bool":
        return "bool"
    return "int"


def _documented_dtypes(rows: Iterable[_Row]) -> set[str]:
    names: set[str] = set()
    for r in rows:
        names |= set(r.only or ()) | set(r.unsupported)
    return names


def _relevant_dtypes(api: str, calls: Sequence[Signature], documented: set[str]) -> set[str]:
    """The dtypes of these calls that the API's documented dtype list speaks about."""
    if api.rsplit(".", 1)[-1] in _CASTS:
        # a cast is limited by what it produces, not by what it reads
        return {doc_dtype(d) for s in calls for d in ([s.dtype] if s.dtype else s.outputs) if d}
    kinds = {_kind(d) for d in documented}
    if "float" in kinds:
        kinds.add("complex")  # complex data given to a float-only API is outside the list too
    seen = set()
    for sig in calls:
        for value in sig.inputs.values():
            for d in value.split(","):
                name = doc_dtype(d.strip())
                if name and (not kinds or _kind(name) in kinds):
                    seen.add(name)
    return seen


def _judge(api: str, rows: list[_Row], seen: set[str], *, every_product: bool,
           inferred: bool = False) -> list[Restriction]:
    limited = [r for r in rows if r.supported is False or r.only is not None or r.unsupported]
    if not limited:
        return []
    out = []
    for r in limited:
        outside = tuple(sorted(d for d in seen if (r.only is not None and d not in r.only)
                               or d in r.unsupported))
        out.append(Restriction(api, _describe(r), outside, r.link, r.hardware,
                               unsupported=r.supported is False, inferred=inferred))
    if every_product and any(r.hardware for r in rows):
        # A limit that some product does not have is not a reason to flag the op.
        free = [r for r in rows if r.hardware and not any(
            x.hardware == r.hardware and x.violated for x in out)]
        if free:
            out = [_cleared(x) for x in out]
    return out
