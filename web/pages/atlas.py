"""The model atlas (/-/atlas): architectures × release groups, like caniuse.

Rows are the catalog's ``model_coverage`` (``opcheck atlas``); columns are runs of consecutive
releases on which no shown architecture changes (so filtering to one library or task gives
fewer, wider columns); a cell is the verdict, coloured, linking to that architecture's report
(/-/atlas/LIBRARY/ARCHITECTURE: problem ops per run of releases, their fixes, speed findings).
Filters: library, task, product, verdict, and a search box over architecture names.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from opcheck.core.versions import release_key
from opcheck.db.atlas import catalog_coverage
from opcheck.db.data import CoverageRec
from opcheck.web.pages.base import Page, serve_state
from opcheck.web.state import ServeState

VIEW_NAME = "opcheck-atlas"
TEMPLATE = "opcheck_atlas.html"
PER_PAGE = 150  # architectures per page
FILTERS = ("library", "task", "product", "verdict")
NO_RUN = ("ERROR", "SKIPPED")
# the query parameters the page reads: the page cache keys on these alone
PARAMS = ("_format", "q", "page", *FILTERS)

_ROWS: dict[str, list[CoverageRec]] = {}
_FIXES: dict[str, dict[str, list[tuple[str, str]]]] = {}


def rows_for(state: ServeState) -> list[CoverageRec]:
    """The catalog's atlas, read once per served catalog (it changes only with the catalog)."""
    if state.path not in _ROWS:
        _ROWS[state.path] = catalog_coverage(state.catalog.engine)
    return _ROWS[state.path]


@dataclass
class Model:
    library: str
    architecture: str
    task: str
    recorder: str
    product: str
    train: bool
    traced: str = ""  # forward only / forward+backward, and how it was made to run
    forward: str = ""  # multimodal: the full forward or the text path only
    runs: list[CoverageRec] = field(default_factory=list)

    @property
    def key(self) -> tuple[str, str]:
        return self.library, self.architecture

    def at(self, release: str, order: dict[str, int]) -> CoverageRec | None:
        """The run covering ``release`` (the one row of an ERROR/SKIPPED model)."""
        for r in self.runs:
            if r.verdict in NO_RUN:
                return r
            if order[r.first_release] <= order[release] <= order[r.last_release]:
                return r
        return None


def models_of(rows: Sequence[CoverageRec]) -> list[Model]:
    by: dict[tuple[str, str, bool, str], Model] = {}
    for r in rows:
        k = (r.library, r.architecture, r.train, r.product)
        if k not in by:
            by[k] = Model(r.library, r.architecture, r.task, r.recorder, r.product, r.train,
                          r.traced, r.forward)
        by[k].runs.append(r)
    return sorted(by.values(), key=lambda m: (m.library, m.architecture, m.train, m.product))


def columns(models: Sequence[Model], releases: Sequence[str]) -> list[tuple[str, str]]:
    """Runs of consecutive releases (oldest first) on which none of ``models`` changes."""
    starts = {r.first_release for m in models for r in m.runs if r.first_release}
    out: list[tuple[str, str]] = []
    for rel in releases:
        if not out or rel in starts:
            out.append((rel, rel))
        else:
            out[-1] = (out[-1][0], rel)
    return out


def view_model(rows: Sequence[CoverageRec], releases: Sequence[str],
               args: dict[str, str]) -> dict[str, Any]:
    q = args.get("q", "").strip().lower()[:100]
    chosen = {k: args.get(k, "") for k in FILTERS}
    options = {k: sorted({str(getattr(r, k)) for r in rows} - {""}) for k in FILTERS}
    kept = [r for r in rows if all(not v or str(getattr(r, k)) == v
                                   for k, v in chosen.items() if k != "verdict")]
    models = [m for m in models_of(kept) if not q or q in m.architecture.lower()]
    if chosen["verdict"]:  # a model whose newest run has that verdict
        models = [m for m in models if m.runs[-1].verdict == chosen["verdict"]]
    try:
        page = max(1, int(args.get("page", "1")))
    except ValueError:
        page = 1
    pages = max(1, -(-len(models) // PER_PAGE))
    page = min(page, pages)
    shown = models[(page - 1) * PER_PAGE:page * PER_PAGE]
    used = [rel for rel in releases if any(r.first_release for m in shown for r in m.runs)]
    cols = columns(shown, used)
    order = {rel: i for i, rel in enumerate(releases)}
    grid = [(m, [m.at(first, order) for first, _last in cols]) for m in shown]
    traced = sum(1 for m in models if m.runs[-1].verdict not in NO_RUN)
    return {"q": q, "chosen": chosen, "options": options, "columns": cols, "grid": grid,
            "count": len(models), "traced": traced, "page": page, "pages": pages,
            "newest": releases[-1] if releases else ""}


def report_model(rows: Sequence[CoverageRec], library: str, architecture: str,
                 fixes: dict[str, list[tuple[str, str]]]) -> dict[str, Any] | None:
    # in release order (the page lists them newest first): the catalog keeps runs grouped by
    # fact, which read as a shuffled history
    mine = sorted((r for r in rows if r.library == library and r.architecture == architecture),
                  key=lambda r: (release_key(r.first_release), release_key(r.last_release)))
    if not mine:
        return None
    runs = []
    for r in mine:
        problems = [p.split("=", 1) for p in r.problem_ops.split(",") if "=" in p]
        runs.append({"row": r, "problems": [
            {"op": op, "status": status, "fixes": fixes.get(op, [])} for op, status in problems]})
    first = mine[0]
    return {"library": library, "architecture": architecture, "first": first, "runs": runs}


def _fixes(state: ServeState) -> dict[str, list[tuple[str, str]]]:
    """op → the contributed workarounds (id, title) that name it, read once per catalog."""
    from opcheck.db.reads import workaround_ops

    if state.path not in _FIXES:
        out: dict[str, list[tuple[str, str]]] = defaultdict(list)
        for w in workaround_ops(state.catalog.engine):
            out[w.op].append((w.id, w.title))
        _FIXES[state.path] = dict(out)
    return _FIXES[state.path]


async def view(datasette: Any, request: Any) -> Any:
    from datasette.utils.asgi import Response

    state = serve_state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    rows = rows_for(state)
    releases = [r.torch_npu for r in state.catalog.releases if r.has_kernels]
    library = request.url_vars.get("library")
    want_json = request.args.get("_format") == "json"
    if library:
        arch = request.url_vars.get("architecture", "")
        ctx = report_model(rows, library, arch, _fixes(state))
        if ctx is None:
            return Response.text(f"no architecture {library}/{arch} in the atlas", status=404)
        if want_json:
            return Response.json({"library": library, "architecture": arch,
                                  "rows": [asdict(x["row"]) for x in ctx["runs"]]})
        html = await datasette.render_template("opcheck_atlas_model.html", ctx,
                                               request=request, view_name=VIEW_NAME)
        return Response.html(html)
    args = {k: str(request.args.get(k) or "") for k in PARAMS}
    ctx = view_model(rows, releases, args)
    if want_json:
        return Response.json({
            "count": ctx["count"], "traced": ctx["traced"], "page": ctx["page"],
            "pages": ctx["pages"], "columns": [list(c) for c in ctx["columns"]],
            "models": [{"library": m.library, "architecture": m.architecture, "task": m.task,
                        "traced": m.traced, "forward": m.forward,
                        "cells": [c.verdict if c else "" for c in cells]}
                       for m, cells in ctx["grid"]]})
    html = await datasette.render_template(TEMPLATE, ctx, request=request, view_name=VIEW_NAME)
    return Response.html(html)


def warm(state: ServeState) -> None:
    rows_for(state)
    _fixes(state)


PAGE = Page(VIEW_NAME, r"^/-/atlas(/(?P<library>[^/]+)/(?P<architecture>[^/]+))?$", "/-/atlas",
            TEMPLATE, view, warm=warm)
