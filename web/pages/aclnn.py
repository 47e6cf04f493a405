"""The aclnn function page (/-/aclnn/<function>): what CANN documents of one aclnn function
per CANN version (products, parameter dtypes with what each product lacks, per-product
exceptions, constraints, each with its doc page and line), the ATen ops whose NPU kernel calls
it per torch_npu release, and how CANN runs it (launches with engine and condition, kernel
binaries per SoC). Reads only: ``db.contract`` and ``db.cann_engine``."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from opcheck.db import cann_engine, contract
from opcheck.web.pages.base import Page, serve_state
from opcheck.web.state import ServeState

VIEW_NAME = "opcheck-aclnn"
TEMPLATE = "opcheck_aclnn.html"
PATH = "/-/aclnn/"
MAX_NAME = 120


@dataclass(frozen=True)
class OpUse:
    """An ATen op whose kernel calls the function, and in which releases."""

    op: str
    releases: tuple[str, ...]  # oldest first
    ranges: str  # the releases as runs of consecutive releases ("2.1.0 – 2.1.0.post3, 2.5.1")


@dataclass(frozen=True)
class Launch:
    cann: str
    library: str
    op_type: str
    engine: str  # aicore | aicpu | …
    when: str  # "always" or the source lines that decide it
    launch: str  # path:line
    url: str


@dataclass
class AclnnPage:
    function: str
    known: bool = False
    docs: list[dict[str, Any]] = field(default_factory=list)  # per CANN version, oldest first
    ops: list[OpUse] = field(default_factory=list)
    launches: list[Launch] = field(default_factory=list)
    binaries: list[cann_engine.BinaryRow] = field(default_factory=list)
    codes: list[tuple[str, str, str, str]] = field(default_factory=list)
    has_contract: bool = True
    has_engine: bool = True

    @property
    def newest(self) -> dict[str, Any] | None:
        return self.docs[-1] if self.docs else None

    @property
    def products(self) -> list[str]:
        """Every product some CANN version documents, in the docs' order."""
        out: dict[str, None] = {}
        for d in self.docs:
            out.update(dict.fromkeys([*d["supported"], *d["unsupported"]]))
        return list(out)

    @property
    def params(self) -> list[tuple[str, dict[str, dict[str, Any]]]]:
        """parameter → CANN version → its documented facts (dtypes, per-product dtypes)."""
        out: dict[str, dict[str, dict[str, Any]]] = {}
        for d in self.docs:
            for p in d["params"]:
                out.setdefault(p["param"], {})[d["cann"]] = p
        return list(out.items())

    def to_json(self) -> dict[str, Any]:
        return {"function": self.function, "known": self.known, "docs": self.docs,
                "ops": [{"op": o.op, "releases": list(o.releases)} for o in self.ops],
                "launches": [vars(x) for x in self.launches],
                "binaries": [vars(b) for b in self.binaries]}


def release_ranges(releases: list[str], order: list[str]) -> str:
    """Releases as runs of consecutive catalog releases: ``2.1.0 – 2.1.0.post3, 2.5.1``."""
    index = {r: i for i, r in enumerate(order)}
    known = sorted((r for r in releases if r in index), key=index.__getitem__)
    runs: list[list[str]] = []
    for r in known:
        if runs and index[r] == index[runs[-1][-1]] + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    parts = [run[0] if len(run) == 1 else f"{run[0]} – {run[-1]}" for run in runs]
    parts += [r for r in releases if r not in index]
    return ", ".join(parts)


def _when(condition: str) -> str:
    """A launch's routing condition in words: ``always``, or the files and lines deciding it
    (the formula itself is for ``checker.engine``, which evaluates it per call)."""
    try:
        doc = json.loads(condition or "{}")
    except ValueError:
        return condition
    formula = doc.get("f") if isinstance(doc, dict) else None
    if formula is True:
        return "always"
    if formula is False:
        return "never (dead code)"
    tests = doc.get("t") or [] if isinstance(doc, dict) else []
    return "when " + "; ".join(str(t) for t in tests) if tests else "under a condition"


def aclnn_page(state: ServeState, name: str) -> AclnnPage:
    from opcheck.checker.contract import doc_json  # the op page's per-version document
    from opcheck.core.versions import cann_key

    engine = state.catalog.engine
    page = AclnnPage(name)
    page.has_contract = contract.has_contract(engine)
    page.has_engine = cann_engine.has_engine_facts(engine)
    if not page.has_contract:
        return page
    function = contract.known_function(engine, name)
    if not function:
        return page
    page.function, page.known = function, True
    docs = contract.function_docs(engine, function)
    page.docs = [doc_json(docs[v]) for v in sorted(docs, key=cann_key)]
    for d, v in zip(page.docs, sorted(docs, key=cann_key), strict=True):
        d["line_url"] = docs[v].url(docs[v].line)  # the function's heading on the page
        d["products_url"] = docs[v].url(docs[v].products_line)
    order = [r.torch_npu for r in state.catalog.releases]
    index = {r: i for i, r in enumerate(order)}
    for op, rels in contract.function_ops(engine, function).items():
        rels = sorted(rels, key=lambda r: index.get(r, len(index)))
        page.ops.append(OpUse(op, tuple(rels), release_ranges(rels, order)))
    page.codes = contract.return_codes(engine, function)
    if page.has_engine:
        sites = cann_engine.site_rows(engine, [function]).get(function, [])
        for s in sorted(sites, key=lambda s: (cann_key(s.cann), s.op_type, s.engine)):
            path, _, line = s.launch.rpartition(":")
            page.launches.append(Launch(s.cann, s.library, s.op_type, s.engine,
                                        _when(s.condition), s.launch,
                                        f"{s.base_url}{path}#L{line}" if s.base_url and path
                                        else ""))
        types = sorted({s.op_type for s in sites})
        for rows in cann_engine.binary_rows(engine, types).values():
            page.binaries.extend(sorted(rows, key=lambda b: (b.op_type, cann_key(b.cann), b.soc)))
    return page


async def view(datasette: Any, request: Any) -> Any:
    from datasette.utils.asgi import Response

    state = serve_state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    page = aclnn_page(state, request.url_vars["function"].strip()[:MAX_NAME])
    status = 200 if page.known else 404
    if request.args.get("_format") == "json":
        return Response.json(page.to_json(), status=status)
    html = await datasette.render_template(TEMPLATE, {"page": page}, request=request,
                                           view_name=VIEW_NAME)
    return Response.html(html, status=status)


PAGE = Page(VIEW_NAME, r"^/-/aclnn/(?P<function>[^/]+)$", PATH, TEMPLATE, view)
