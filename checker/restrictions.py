"""Documented per-API restrictions applied to traced ops (through the API → ATen link).

A traced op is ``restricted`` when a Python API that calls it is documented, for the target's
doc version, as not supported on the chosen product, or with a dtype list that excludes a dtype
the trace saw. Without ``--hardware`` a limit counts only when it holds on every product the doc
names (the op cannot run that way anywhere); with it, only that product's statement counts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from sqlalchemy import text

from opcheck.checker.check import Restriction, RestrictionLookup
from opcheck.core.errors import UsageError
from opcheck.core.versions import release_key
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
    with cat.engine.connect() as conn:
        return [r[0] for r in conn.execute(text(
            "SELECT DISTINCT hardware FROM api_support WHERE hardware != '' ORDER BY hardware"))]


def match_hardware(cat: Catalog, wanted: str) -> list[str]:
    """Products whose name contains ``wanted`` (``A2`` → ``Atlas A2 训练系列产品``)."""
    known = products(cat)
    hits = [p for p in known if wanted.lower() in p.lower()]
    if not hits:
        raise UsageError(f"no hardware product matches {wanted!r} (known: {', '.join(known)})")
    return hits


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
    with cat.engine.connect() as conn:
        if conn.execute(text("SELECT COUNT(*) FROM api_support")).scalar_one() == 0:
            return None
        links: dict[str, set[str]] = defaultdict(set)
        for api, op in conn.execute(text("SELECT api, op FROM api_op")):
            links[op].add(api)
        urls = {sid: url for sid, url in conn.execute(text("SELECT id, url FROM source"))}
    wanted = match_hardware(cat, hardware) if hardware else None
    cache: dict[str, list[_Row]] = {}

    def rows_for(api: str) -> list[_Row]:
        if api not in cache:
            with cat.engine.connect() as conn:
                cache[api] = [
                    _Row(api, v, hw, None if sup is None else bool(sup),
                         frozenset(only.split(",")) if only else None,
                         frozenset(x for x in unsup.split(",") if x), restr,
                         f"{urls.get(sid, '')}#L{line}" if urls.get(sid) else "")
                    for v, hw, sup, only, unsup, restr, sid, line in conn.execute(text(
                        "SELECT doc_version, hardware, supported, only_dtypes, "
                        "unsupported_dtypes, restriction, source_id, line FROM api_support "
                        "WHERE api = :a AND feature = ''"), {"a": api})
                ]
        return cache[api]

    def lookup(op: str, dtypes: Sequence[str], target: ReleaseInfo) -> list[Restriction]:
        seen = {doc_dtype(d) for d in dtypes}
        out: list[Restriction] = []
        clear = False
        for api in sorted(links.get(op, ())):
            rows = rows_for(api)
            version = _pick_version((r.doc_version for r in rows), target.torch)
            rows = [r for r in rows if r.doc_version == version]
            if wanted is not None:
                rows = [r for r in rows if r.hardware in wanted or not r.hardware]
            if not rows:
                continue  # this API says nothing for the target
            judged = _judge(api, rows, seen, every_product=wanted is None)
            # Several APIs reach one op (torch.addmm, Tensor.addmm, nn.Linear): when any
            # documented path allows what the trace does, the op is not restricted.
            clear = clear or not any(r.violated for r in judged)
            out += judged
        if clear:
            out = [Restriction(x.api, x.text, (), x.link, x.hardware) for x in out]
        return out

    return lookup


def _judge(api: str, rows: list[_Row], seen: set[str], *, every_product: bool) -> list[Restriction]:
    limited = [r for r in rows if r.supported is False or r.only is not None or r.unsupported]
    if not limited:
        return []
    out = []
    for r in limited:
        outside = tuple(sorted(d for d in seen if (r.only is not None and d not in r.only)
                               or d in r.unsupported))
        out.append(Restriction(api, _describe(r), outside, r.link, r.hardware,
                               unsupported=r.supported is False))
    if every_product and any(r.hardware for r in rows):
        # A limit that some product does not have is not a reason to flag the op.
        free = [r for r in rows if r.hardware and not any(
            x.hardware == r.hardware and x.violated for x in out)]
        if free:
            out = [Restriction(x.api, x.text, (), x.link, x.hardware) for x in out]
    return out
