"""One op across every release: the document behind ``opcheck op`` and the op page.

Statuses come from the resolver (``queries.op_history``), one per release. The other facts an
op's history shows (workarounds, deprecations, per-API documentation) are read once per catalog
into ``HistoryFacts``, so a server answering many op pages reads them once.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from opcheck.checker.check import WorkaroundLookup
from opcheck.checker.contract import aclnn_summary
from opcheck.checker.graph import op_graph
from opcheck.checker.queries import HistoryRow, op_history
from opcheck.core.versions import release_key
from opcheck.core.vocab import Status
from opcheck.db import reads
from opcheck.db.catalog import Catalog, OperatorInfo

# 2: `opcheck op --format json` and the op page's JSON became one document (before, two
# documents with different fields both said 1).
SCHEMA_VERSION = 2


@dataclass(frozen=True)
class HistoryFacts:
    """What an op's history needs besides the resolver, read once per catalog."""

    cat: Catalog
    workarounds: WorkaroundLookup | None
    deprecations: dict[str, list[str]]  # op → replacements ("" = none named)
    has_api_docs: bool  # catalogs written before the per-API tables lack them
    op_names: tuple[str, ...] = ()  # the catalog's ops, sorted: overloads of an op are a run

    @classmethod
    def load(cls, cat: Catalog, workarounds: WorkaroundLookup | None = None) -> HistoryFacts:
        deps: dict[str, list[str]] = {}
        for d in reads.deprecations(cat.engine):
            deps.setdefault(d.op, []).append(d.replacement)
        has_api = reads.has_api_docs(cat.engine)
        return cls(cat, workarounds, deps, has_api, tuple(sorted(cat.operators)))


@dataclass
class ApiMatrix:
    """Python APIs that call an op × hardware products, from the newest doc set that covers
    each pair: documented facts, shown as the docs state them."""

    products: list[str]  # "" = the doc names no product
    rows: list[tuple[str, dict[str, dict[str, str]]]]  # api → product → cell
    restrictions: list[dict[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {"products": self.products,
                "apis": {api: cells for api, cells in self.rows},
                "restrictions": self.restrictions}


def api_matrix(facts: HistoryFacts, op: str) -> ApiMatrix | None:
    if not facts.has_api_docs:
        return None
    rows = reads.op_api_docs(facts.cat.engine, op)
    newest: dict[tuple[str, str], reads.ApiDocRow] = {}
    for r in rows:
        key = (r.api, r.hardware)
        if key not in newest or (release_key(r.doc_version or "0")
                                 > release_key(newest[key].doc_version or "0")):
            newest[key] = r
    products = sorted({hw for _, hw in newest}, key=lambda h: (h == "", h))
    by_api: dict[str, dict[str, dict[str, str]]] = {}
    restrictions = []
    for (api, hw), r in sorted(newest.items()):
        sup = r.supported
        mark = "yes" if sup is True else "no" if sup is False else "?"
        dtypes = (f"only {r.only_dtypes}" if r.only_dtypes else "") + (
            f" not {r.unsupported_dtypes}" if r.unsupported_dtypes else "")
        by_api.setdefault(api, {})[hw] = {"supported": mark, "dtypes": dtypes.strip(),
                                          "doc_version": r.doc_version}
        if r.only_dtypes or r.unsupported_dtypes or r.arg_limits or r.restriction:
            restrictions.append({
                "api": api, "hardware": hw, "doc_version": r.doc_version,
                "only_dtypes": r.only_dtypes, "unsupported_dtypes": r.unsupported_dtypes,
                "arg_limits": r.arg_limits, "restriction": r.restriction,
                "link": r.url,
            })
    return ApiMatrix(products, sorted(by_api.items()), restrictions)


@dataclass
class OpHistory:
    op: str
    known: bool
    info: OperatorInfo | None = None  # None: an op with kernels but no PyTorch definition
    rows: list[HistoryRow] = field(default_factory=list)  # every release, oldest first
    workarounds: list[str] = field(default_factory=list)  # entry ids
    deprecated_for: list[str] = field(default_factory=list)
    api: ApiMatrix | None = None  # None: the catalog has no per-API documentation tables
    suggestions: list[str] = field(default_factory=list)  # for an unknown op
    # the aclnn functions its kernel calls and their documented contract per CANN version
    aclnn: list[dict[str, Any]] = field(default_factory=list)
    # graph mode (torch.compile with torchair): the converter's status per release
    graph: list[dict[str, Any]] = field(default_factory=list)

    @property
    def first_npu(self) -> str:
        return next((h.release.torch_npu for h in self.rows
                     if h.resolution and h.resolution.status == Status.NPU), "")

    @property
    def matrix_only(self) -> list[str]:
        """Releases without a kernel list, oldest first."""
        return [h.release.torch_npu for h in self.rows if h.resolution is None]

    def to_json(self) -> dict[str, Any]:
        info = self.info
        return {
            "schema_version": SCHEMA_VERSION, "op": self.op, "known": self.known,
            "kernel_kind": info.kernel_kind if info else "",
            "structured_delegate": info.structured_delegate if info else "",
            "first_npu_release": self.first_npu,
            "releases": [
                {"torch_npu": h.release.torch_npu, "torch": h.release.torch,
                 "train": h.release.train, "cann": h.release.cann,
                 "kernel_source": h.release.kernel_source,
                 "status": h.resolution.status if h.resolution else None,
                 "kernel": h.resolution.kernel if h.resolution else None,
                 "aclnn": h.resolution.aclnn if h.resolution else None,
                 "via": list(h.resolution.via) if h.resolution else [],
                 "reason": h.resolution.reason if h.resolution else None}
                for h in self.rows
            ],
            "workarounds": self.workarounds,
            "deprecated_for": self.deprecated_for,
            "apis": self.api.to_json() if self.api else None,
            "suggestions": self.suggestions,
            "aclnn": self.aclnn,
            "graph": self.graph,
        }


def _suggestions(cat: Catalog, name: str) -> list[str]:
    stem = name.split(".", 1)[0]
    sugg = sorted(o for o in cat.operators if o == stem or o.startswith(stem + "."))
    if not sugg and len(stem) >= 3:
        short = stem.split("::")[-1]
        sugg = sorted(o for o in cat.operators if short in o)
    return sugg[:30]


def workaround_ids(facts: HistoryFacts, op: str, releases: Iterable[HistoryRow]) -> list[str]:
    """Entries the workaround lookup gives on some release for the op itself, for its
    overload packet (``aten::normal_`` covers ``aten::normal_.Tensor_float``) or for one of
    its overloads."""
    if facts.workarounds is None:
        return []
    stem = op.split(".", 1)[0] if "." in op.split("::", 1)[-1] else op
    names = facts.op_names
    start = bisect.bisect_left(names, op + ".")
    overloads = itertools.takewhile(lambda o: o.startswith(op + "."),
                                    itertools.islice(names, start, None))
    keys = dict.fromkeys([op, stem, *overloads])
    ids = {ref.id for h in releases for key in keys
           for ref in facts.workarounds(key, h.release)}
    return sorted(ids)


def describe_op(facts: HistoryFacts, name: str) -> OpHistory:
    """Everything known about one (canonical) op on every release of the catalog."""
    cat = facts.cat
    info = cat.operators.get(name)
    if info is None and not cat.kernel_releases([name]):
        return OpHistory(name, known=False, suggestions=_suggestions(cat, name))
    rows = op_history(cat, name)
    return OpHistory(
        name, known=True, info=info, rows=rows,
        workarounds=workaround_ids(facts, name, rows),
        deprecated_for=facts.deprecations.get(name, []),
        api=api_matrix(facts, name),
        aclnn=aclnn_summary(cat, name),
        graph=op_graph(cat, name),
    )


def release_runs(rows: Iterable[dict[str, Any]], keys: tuple[str, ...]) -> list[dict[str, Any]]:
    """Consecutive release rows (``torch_npu`` plus ``keys``) with equal ``keys`` as one run:
    ``first``, ``last``, ``count`` and the shared values, oldest first. For long per-release
    lists shown on one screen (graph-mode status per release)."""
    runs: list[dict[str, Any]] = []
    for row in rows:
        values = {k: row.get(k) for k in keys}
        if runs and all(runs[-1][k] == v for k, v in values.items()):
            runs[-1]["last"] = row["torch_npu"]
            runs[-1]["count"] += 1
        else:
            runs.append({"first": row["torch_npu"], "last": row["torch_npu"], "count": 1,
                         **values})
    return runs


def aclnn_lines(item: dict[str, Any]) -> list[tuple[str, str, str]]:
    """One aclnn entry of the op-history document as (indent, text, link) lines: the function,
    then per documented CANN version (newest first) its products and, per parameter, the
    dtypes with what each product lacks. For the terminal and plain-text views."""
    rels = item.get("releases") or []
    span = f"{rels[0]} … {rels[-1]}" if len(rels) > 1 else "".join(rels)
    head = item["function"] + (f" (through {item['via']})" if item.get("via") else "")
    out = [("", head + (f": called in {len(rels)} releases ({span})" if rels else ""), "")]
    for doc in reversed(item.get("docs") or []):
        no = f"; × {', '.join(doc['unsupported'])}" if doc.get("unsupported") else ""
        out.append(("  ", f"CANN {doc['cann']} ({doc['library']}): "
                          f"{', '.join(doc['supported']) or 'no product'}{no}", doc["url"]))
        for p in doc["params"]:
            if not p["dtypes"]:
                continue
            gaps = [f"{prod}: no {', '.join(sorted(set(p['dtypes']) - set(have)))}"
                    for prod, have in p["by_product"].items() if set(p["dtypes"]) - set(have)]
            out.append(("    ", f"{p['param']}: {', '.join(p['dtypes'])}"
                                + (f" ({'; '.join(gaps)})" if gaps else ""), p["url"]))
        for c in doc["constraints"]:
            if c["kind"] != "text":
                out.append(("    ", f"constraint {c['kind']} {c['subject']} {c['value']}".strip()
                            + (f" on {', '.join(c['products'])}" if c["products"] else ""),
                            c["url"]))
    return out
