"""The op page (/-/op/<op>): one op on every release, from ``checker.history``; the JSON form
(``?_format=json``) is the same document as ``opcheck op --format json``."""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

from opcheck.checker.history import ApiMatrix, OpHistory, describe_op, release_runs
from opcheck.checker.resolve import Resolution
from opcheck.core.errors import OpcheckError
from opcheck.core.vocab import KernelSource, Status
from opcheck.db import reads
from opcheck.db.catalog import ReleaseInfo
from opcheck.web.pages.base import Page, plain_template, serve_state, template_helpers
from opcheck.web.state import ServeState

VIEW_NAME = "opcheck-op"
TEMPLATE = "opcheck_op.html"
BODY_TEMPLATE = "_opcheck_op_body.html"


@dataclass(frozen=True)
class TimelineRow:
    release: ReleaseInfo
    resolution: Resolution
    source: dict[str, str] | None


@dataclass(frozen=True)
class TimelineRun:
    """Consecutive releases of one torch line where the op resolves the same way, from the
    same kind of source: the op page shows where things change, not 77 near-identical rows."""

    rows: tuple[TimelineRow, ...]  # newest first

    @property
    def head(self) -> TimelineRow:
        return self.rows[0]

    @property
    def releases(self) -> str:
        newest, oldest = self.rows[0].release.torch_npu, self.rows[-1].release.torch_npu
        return newest if len(self.rows) == 1 else f"{newest} … {oldest} ({len(self.rows)})"

    @property
    def cann(self) -> str:
        canns = list(dict.fromkeys(t.release.cann or "?" for t in reversed(self.rows)))
        return canns[0] if len(canns) == 1 else f"{canns[0]} – {canns[-1]}"

    @property
    def approximate(self) -> bool:
        return any(t.release.kernel_source == KernelSource.OP_PLUGIN_BRANCH for t in self.rows)


def run_key(t: TimelineRow) -> tuple[object, ...]:
    r = t.resolution
    src = (t.source or {}).get("scraper", "")
    return (t.release.torch_minor, r.status, r.kernel, r.aclnn, r.via, r.reason, src,
            t.release.kernel_source == KernelSource.OP_PLUGIN_BRANCH)


def timeline_runs(timeline: list[TimelineRow]) -> list[TimelineRun]:
    runs: list[list[TimelineRow]] = []
    for t in timeline:
        if runs and run_key(runs[-1][-1]) == run_key(t):
            runs[-1].append(t)
        else:
            runs.append([t])
    return [TimelineRun(tuple(r)) for r in runs]


@dataclass(frozen=True)
class StripCell:
    release: str
    label: str  # what the cell shows: the release after its torch version (rc1, post8)
    status: str


@dataclass
class StripLine:
    """One torch line of the op page's strip, oldest release first."""

    line: str  # torch minor, 2.1
    torch: str  # torch version of the line's releases, 2.1.0
    cells: list[StripCell] = field(default_factory=list)

    @property
    def runs(self) -> list[tuple[str, str, int, str]]:
        """(first, last, count, status) of consecutive releases with one status."""
        out: list[list[StripCell]] = []
        for c in self.cells:
            if out and out[-1][-1].status == c.status:
                out[-1].append(c)
            else:
                out.append([c])
        return [(r[0].release, r[-1].release, len(r), r[0].status) for r in out]


@dataclass
class OpPage:
    """The op's history and what only the page shows: upstream source links, the timeline
    newest first, a summary per torch line, the workaround texts."""

    history: OpHistory
    operator_source: dict[str, str] | None = None
    timeline: list[TimelineRow] = field(default_factory=list)  # newest first
    lines: list[dict[str, str]] = field(default_factory=list)  # per torch line summary
    workarounds: list[dict[str, str]] = field(default_factory=list)
    read_as: str = ""  # how the name in the address was read (torch.isin → aten::isin.…)
    matches: list[dict[str, str]] = field(default_factory=list)  # several ops the name means
    match_text: str = ""
    extras: dict[str, Any] = field(default_factory=dict)  # the history document (aclnn, graph)
    # fused torch_npu APIs whose patterns this op takes part in (opcheck.checker.tips)
    tips: list[dict[str, str]] = field(default_factory=list)

    @property
    def strip(self) -> list[tuple[str, list[tuple[str, str]]]]:
        """torch line → (release, status) oldest first: the page's release × status strip."""
        lines: dict[str, list[tuple[str, str]]] = {}
        for h in self.history.rows:
            if h.resolution is not None:
                lines.setdefault(h.release.torch_minor, []).append(
                    (h.release.torch_npu, str(h.resolution.status)))
        return list(lines.items())

    @property
    def strip_lines(self) -> list[StripLine]:
        """The strip per torch line, each cell with a label that names its release (the part
        after the torch version: ``post8`` on the torch 2.1.0 line) and the line's runs of
        one status (a line whose status changes is never labelled with one status)."""
        lines: dict[str, StripLine] = {}
        for h in self.history.rows:
            if h.resolution is None:
                continue
            rel, torch = h.release.torch_npu, h.release.torch
            line = lines.setdefault(h.release.torch_minor,
                                    StripLine(h.release.torch_minor, torch))
            short = rel[len(torch):].lstrip(".") if torch and rel.startswith(torch) else rel
            line.cells.append(StripCell(rel, short or rel, str(h.resolution.status)))
        return list(lines.values())

    @property
    def graph_runs(self) -> list[dict[str, Any]]:
        """Graph-mode status as runs of consecutive releases (the per-release list is long)."""
        rows = self.extras.get("graph") or []
        runs = release_runs(rows, ("status", "message", "condition"))
        urls = {r["torch_npu"]: r.get("url", "") for r in rows}
        return [{**run, "url": urls.get(run["last"], "")} for run in runs]

    @property
    def op(self) -> str:
        return self.history.op

    @property
    def known(self) -> bool:
        return self.history.known

    @property
    def suggestions(self) -> list[str]:
        return self.history.suggestions

    @property
    def namespace(self) -> str:
        return self.history.info.namespace if self.history.info else ""

    @property
    def kernel_kind(self) -> str:
        return self.history.info.kernel_kind if self.history.info else ""

    @property
    def structured_delegate(self) -> str:
        return self.history.info.structured_delegate if self.history.info else ""

    @property
    def schema(self) -> str:
        return self.history.info.schema if self.history.info else ""

    @property
    def first_npu(self) -> str:
        return self.history.first_npu

    @property
    def matrix_only(self) -> list[str]:
        return self.history.matrix_only

    @property
    def deprecated_for(self) -> list[str]:
        return self.history.deprecated_for

    @property
    def api(self) -> ApiMatrix | None:
        return self.history.api

    @property
    def runs(self) -> list[TimelineRun]:
        return timeline_runs(self.timeline)

    def to_json(self) -> dict[str, Any]:
        return self.history.to_json()


def op_page(state: ServeState, op: str) -> OpPage:
    """Everything the op page shows; statuses come from the resolver, one per release."""
    from opcheck.core.opname import canonical

    try:
        name = canonical(op)
    except OpcheckError:
        name = op.strip()
    page = OpPage(describe_op(state.facts, name))
    if not page.known:
        # the names `opcheck op` takes: isin, torch.isin, F.interpolate, aclnnIsIn
        from opcheck.web.pages.search import names_for, statuses

        match = names_for(state).match(op)
        if not match.single:
            page.matches = statuses(state, match) if match.ops else []
            page.match_text = match.describe() if match.ops else ""
            if match.suggestions:
                page.history.suggestions = match.suggestions
            return page
        name = match.single
        page = OpPage(describe_op(state.facts, name), read_as=f"{match.describe()}: {name}")
        if not page.known:
            return page
    engine = state.facts.cat.engine
    op_sid = reads.operator_source_id(engine, name)
    ksrc = reads.kernel_source_ids(engine, name)
    if op_sid is not None:
        page.operator_source = state.sources.get(op_sid)
    by_line: dict[str, list[TimelineRow]] = {}
    for h in page.history.rows:
        if h.resolution is None:
            continue
        sid = ksrc.get(h.release.torch_npu)
        trow = TimelineRow(h.release, h.resolution,
                           state.sources.get(sid) if sid is not None else None)
        page.timeline.append(trow)
        by_line.setdefault(h.release.torch_minor, []).append(trow)
    page.timeline.reverse()
    for minor, rows in reversed(by_line.items()):
        first = next((t.release.torch_npu for t in rows
                      if t.resolution.status == Status.NPU), "")
        page.lines.append({"torch": minor, "releases": str(len(rows)),
                           "oldest": rows[0].release.torch_npu,
                           "newest": rows[-1].release.torch_npu,
                           "first_npu": first, "latest_status": rows[-1].resolution.status,
                           "latest_kernel": rows[-1].resolution.kernel})
    code = rewrite_code()
    page.workarounds = [dict(state.workarounds[w], rewrite=code.get(w, ""))
                        for w in page.history.workarounds if w in state.workarounds]
    page.extras = page.history.to_json()
    from opcheck.checker.tips import tips_for_op

    page.tips = tips_for_op(state.facts.cat, name)
    return page


@functools.cache
def rewrite_code() -> dict[str, str]:
    """Workaround id → its rewrite's code, which the fix text calls "the rewrite below" and
    the catalog does not store (the YAML entries hold it)."""
    from opcheck.contrib.workarounds import load_dir

    try:
        return {w.id: w.rewrite.code for w in load_dir() if w.rewrite is not None}
    except OpcheckError:  # a broken entry must not take the op page down
        return {}


async def view(datasette: Any, request: Any) -> Any:
    from datasette.utils.asgi import Response
    from markupsafe import Markup

    state = serve_state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    page = op_page(state, request.url_vars["op"])
    if request.args.get("_format") == "json":
        return Response.json(page.to_json(), status=200 if page.known else 404)
    body = plain_template(BODY_TEMPLATE).render(
        page=page, urls=datasette.urls, **template_helpers(datasette))
    html = await datasette.render_template(TEMPLATE, {"page": page, "body": Markup(body)},
                                           request=request, view_name=VIEW_NAME)
    return Response.html(html, status=200 if page.known or page.matches else 404)


def warm(state: ServeState) -> None:
    # Resolving an op on every release reads every release's kernel list once; doing it at
    # start-up keeps the first visitor's op page fast.
    if state.catalog.operators:
        op_page(state, next(iter(state.catalog.operators)))


PAGE = Page(VIEW_NAME, r"^/-/op/(?P<op>[^/]+)$", "/-/op/", TEMPLATE, view, warm=warm)
