"""The op-list page (/-/check): an op list pasted, uploaded or POSTed as JSON, checked exactly
as ``opcheck check`` checks it: the page builds a request for the check use case
(``opcheck.checker.usecase``) and renders its report.

Form fields (and, for a JSON POST, query parameters): ``release``, ``cann``, ``hardware``,
``jit_compile`` and ``internal_format`` (on/off), ``no_cpu_fallback``, ``all_releases``,
``graph``, ``capture``; the form also takes a ``baseline`` report
JSON (file), like ``--baseline``."""

from __future__ import annotations

import asyncio
import dataclasses
import email.parser
import email.policy
import functools
import json
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qs

from opcheck.checker.check import Report
from opcheck.core import jsonio
from opcheck.core.errors import OpcheckError, UsageError
from opcheck.web.guard import FairRation, client_of
from opcheck.web.pages.base import Page, plain_template, serve_state, template_helpers
from opcheck.web.state import ServeState

VIEW_NAME = "opcheck-check"
TEMPLATE = "opcheck_check.html"
REPORT_TEMPLATE = "_opcheck_report.html"
PATH = "/-/check"
MAX_UPLOAD = 5 * 1024 * 1024  # an op list of a large model is ~100 kB; anything bigger is not one
# Distinct ops (and call paths) of one op list: a large model has a few hundred, the ATen
# universe ~3,700. The report page lists each on the event loop, so a list of 40,000 made-up
# names is refused rather than rendered.
MAX_OPS = 5000
MAX_FORM_PARTS = 32  # the form has eleven fields


# How the page says how to choose another target (the end of the report's target note).
HOW_WEB = "; pick another above"


@dataclass(frozen=True)
class Submission:
    text: str  # the op list JSON, pasted or uploaded
    release: str
    cpu_fallback: bool = True
    hardware: str = ""  # product name or part of it; "" = limits that hold on every product
    cann: str = ""
    jit_compile: bool | None = None  # None: torch_npu's default on the product
    internal_format: bool | None = None
    all_releases: bool = False
    graph: bool = False
    capture: bool = False  # ACL graph capture (opcheck.checker.capture)
    baseline: str = ""  # a previous report JSON: only what changed is shown


def parse_form(content_type: str, body: bytes) -> dict[str, str]:
    """Form fields of a POST: urlencoded or multipart (an uploaded file is read as text)."""
    if len(body) > MAX_UPLOAD:
        raise UsageError(f"the upload is larger than {MAX_UPLOAD // (1024 * 1024)} MB: "
                         "an op list is far smaller")
    ctype = content_type.split(";", 1)[0].strip().lower()
    parts = _form_parts(ctype, content_type, body)
    if parts > MAX_FORM_PARTS:
        # counted before parsing: 90,000 parts took the parser 20 s of a check slot
        raise UsageError(f"the form has {parts} parts: this page's form has {MAX_FORM_PARTS} "
                         "at most")
    if ctype == "multipart/form-data":
        head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        fields: dict[str, str] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            payload = part.get_payload(decode=True)
            raw = payload if isinstance(payload, bytes) else b""
            fields[name] = _as_text(raw)
        return fields
    if ctype in ("application/x-www-form-urlencoded", ""):
        return {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"),
                                              keep_blank_values=True).items()}
    raise UsageError(f"unsupported content type {ctype!r}")


def _form_parts(ctype: str, content_type: str, body: bytes) -> int:
    if ctype == "multipart/form-data":
        boundary = ""
        for param in content_type.split(";")[1:]:
            key, _, value = param.strip().partition("=")
            if key.lower() == "boundary":
                boundary = value.strip('"')
        return body.count(b"--" + boundary.encode("latin-1", "replace")) - 1 if boundary else 0
    return body.count(b"&") + 1 if body else 0


def _as_text(raw: bytes) -> str:
    # Model archives and pickles are refused by their first bytes: this page reads op lists
    # only and never loads a model.
    if raw.startswith((b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")):
        raise UsageError("that looks like a model file: this page takes the op-list JSON "
                         "written by `opcheck trace MODEL -o ops.json`, never a model")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError("the upload is not UTF-8 text: expected an op-list JSON") from None


def submission_from_fields(fields: dict[str, str], text: str | None = None) -> Submission:
    """The submission of the form's fields (``text``: the op list POSTed as the body)."""
    from opcheck.checker.kernel_path import on_off

    if text is None:
        text = fields.get("file", "").strip() or fields.get("oplist", "").strip()
        if not text:
            raise UsageError("paste an op list or choose a file (the JSON from `opcheck trace`, "
                             "or `opcheck trace --run SCRIPT` for a script)")
    return Submission(text, fields.get("release", "").strip(),
                      cpu_fallback=fields.get("no_cpu_fallback", "") == "",
                      hardware=fields.get("hardware", "").strip(),
                      cann=fields.get("cann", "").strip(),
                      jit_compile=on_off(fields.get("jit_compile", "").strip() or None,
                                         "jit_compile"),
                      internal_format=on_off(fields.get("internal_format", "").strip() or None,
                                             "internal_format"),
                      all_releases=fields.get("all_releases", "") != "",
                      graph=fields.get("graph", "") != "",
                      capture=fields.get("capture", "") != "",
                      baseline=fields.get("baseline", "").strip())


# The options a JSON POST takes as query parameters (the form's fields of the same names).
# ``_format=json``: the report document instead of the page (also for a form POST).
QUERY_OPTIONS = ("release", "cann", "hardware", "jit_compile", "internal_format",
                 "no_cpu_fallback", "all_releases", "graph", "capture", "_format",
                 "problems")  # problems: the page's grid starts with problems only


# json.loads parses in C without letting go of the GIL: a 4 MB document would stop the event
# loop for ~0.2 s even though the check runs on its own thread. Above this size the parser
# that builds objects and arrays in Python is used: slower, but it takes turns with the loop.
C_PARSE_MAX = 256 * 1024


def parse_json(text: str) -> Any:
    return jsonio.loads(text, yielding=len(text) > C_PARSE_MAX)


def run_check(state: ServeState, sub: Submission) -> Report:
    """The checker's report for a submitted op list, made by the use case ``opcheck check``
    uses, from the same request."""
    from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
    from opcheck.core.oplist import OpList

    doc = _json_document(sub.text, "the op list written by `opcheck trace`")
    if isinstance(doc, dict) and doc.get("kind") in ("opcheck.report", "opcheck.reports"):
        # a report was checked on one release, at the level that release receives: read back
        # as an op list it would be wrong on another (composites decompose per release)
        raise UsageError("that is a report (`opcheck run` / `opcheck check` output), already "
                         "checked on one release: this page checks op lists; write one with "
                         "`opcheck trace --run SCRIPT [-- ARGS] -o ops.json` (or `opcheck trace "
                         "MODEL -o ops.json`)")
    try:
        oplist = OpList.from_json(doc, source="the submitted op list")
    except (ValueError, TypeError, OverflowError, KeyError, AttributeError,
            RecursionError) as exc:
        # What the document reader lets through is still the visitor's malformed input
        # (a 400), never a server fault.
        raise UsageError(f"the submitted op list is malformed: {exc}") from None
    if len(oplist.ops) > MAX_OPS:
        raise UsageError(f"the op list has {len(oplist.ops)} entries: this page checks at most "
                         f"{MAX_OPS} (run `opcheck check` on larger ones)")
    baseline = _json_document(sub.baseline, "a report JSON") if sub.baseline else None
    if baseline is not None and not isinstance(baseline, dict):
        raise UsageError("the baseline is not an opcheck report JSON (no ops list)")
    request = CheckRequest(
        Recorded(oplist), torch_npu=sub.release or None, cann=sub.cann or None,
        hardware=sub.hardware or None, jit_compile=sub.jit_compile,
        internal_format=sub.internal_format, cpu_fallback=sub.cpu_fallback,
        all_releases=sub.all_releases, graph=sub.graph, capture=sub.capture, baseline=baseline,
        how=HOW_WEB)
    usecase = CheckUseCase(state.catalog, workarounds=state.facts.workarounds,
                           restrictions=state.has_api_docs)
    return usecase.run(request).report


def _json_document(text: str, what: str) -> Any:
    try:
        return parse_json(text)
    except jsonio.JsonInputError as exc:
        raise UsageError(f"{exc}: expected {what}") from None


# A 5 MB op list takes seconds of CPU to read and check. Checks run on one thread per worker
# process, so the event loop keeps serving other pages meanwhile (the thread takes turns with
# it for the GIL), and are rationed: one per client, one at a time on the thread, the rest in a
# short queue served to the clients that used it least first (issue 39: four flooding
# addresses left a visitor 57% of its checks on a loaded machine; with four admitted at once,
# a visitor's check waited behind three floods in the thread's own queue).
CHECKS = FairRation("op-list checks", per_client=1, in_flight=1, queue=16, wait=30.0)
_pool: ThreadPoolExecutor | None = None


def check_pool() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="opcheck-check")
    return _pool


@dataclass
class Outcome:
    report: Report
    html: str = ""  # the report part of the page
    json: bytes = b""  # the report document, for API use


def render_report(report: Report, helpers: dict[str, Any], grid: Grid | None = None,
                  grid_note: str = "") -> str:
    """The report part of the page, from its own template on a plain Jinja environment (the
    page around it is Datasette's, rendered on the event loop)."""
    from opcheck.checker.formats.report_markdown import to_markdown

    return str(plain_template(REPORT_TEMPLATE).render(report=report, markdown=to_markdown(report),
                                                      grid=grid, grid_note=grid_note,
                                                      **helpers))


def check_posted(state: ServeState, ctype: str, body: bytes, args: dict[str, str],
                 fields: dict[str, str], helpers: dict[str, Any]) -> Outcome:
    """The check of one POST (runs on the check thread): a JSON op list (API use: the options
    are query parameters) or the page's form, whose fields are added to ``fields``. The
    answer is the report document for a JSON op list or ``?_format=json``, else HTML."""
    if _is_json(ctype):
        sub = submission_from_fields(args, text=body.decode("utf-8", "replace"))
    else:
        fields.update(parse_form(ctype, body))
        sub = submission_from_fields(fields)
    if _wants_json(ctype, args):
        report = run_check(state, sub)
        # Serialised here too: a large report's document takes a while to write.
        # The pure-Python encoder (iterencode) takes turns with the event loop for the GIL.
        text = "".join(json.JSONEncoder().iterencode(report.to_json()))
        return Outcome(report, json=text.encode())
    # the page's grid needs every release; the report shows the matrix only when it was
    # asked for
    drawn = grid_wanted(sub)
    report = run_check(state, dataclasses.replace(sub, all_releases=True) if drawn else sub)
    matrix = report.matrix or {}
    if not sub.all_releases:
        report.matrix = None
        if report.graph is not None:
            report.graph.pop("matrix", None)
    grid = (release_grid(report, matrix, problems_only=wants_problems_only(args, fields),
                         baseline=bool(sub.baseline)) if matrix else None)
    note = "" if drawn else (f"The ops × releases grid is drawn for op lists of up to "
                             f"{GRID_MAX_OPS} ops; tick “every release” to draw it for this one.")
    return Outcome(report, html=render_report(report, helpers, grid, note))


def _is_json(ctype: str) -> bool:
    return ctype.split(";")[0].strip().lower() == "application/json"


def _wants_json(ctype: str, args: dict[str, str]) -> bool:
    return _is_json(ctype) or args.get("_format") == "json"


async def view(datasette: Any, request: Any) -> Any:
    from datasette.utils.asgi import Response
    from markupsafe import Markup

    from opcheck.checker.queries import select_target, target_reason

    state = serve_state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    releases = state.usable_releases
    report = None
    report_html = ""
    error = ""
    # the default target of `opcheck check` on a machine without torch: one rule everywhere
    default = select_target(state.catalog) if releases else None
    fields: dict[str, str] = {"release": default.torch_npu if default else ""}
    default_reason = (target_reason(state.catalog, default, how=HOW_WEB)
                      if default else "")
    if request.method == "POST":
        ctype = request.headers.get("content-type", "")
        client = client_of(request.scope)
        refused = await CHECKS.admit(client)
        if refused is not None:
            return Response.text(refused[1], status=refused[0])
        try:
            body = await request.post_body()
            outcome = await asyncio.get_running_loop().run_in_executor(
                check_pool(), functools.partial(check_posted, state, ctype, body,
                                                {k: request.args.get(k, "")
                                                 for k in QUERY_OPTIONS}, fields,
                                                template_helpers(datasette)))
            if outcome.json:
                return Response(outcome.json, content_type="application/json; charset=utf-8")
            report, report_html = outcome.report, outcome.html
        except OpcheckError as exc:
            if _wants_json(ctype, {"_format": request.args.get("_format", "")}):
                return Response.json({"error": str(exc)}, status=400)
            error = str(exc)
        finally:
            CHECKS.leave(client)
    html = await datasette.render_template(
        TEMPLATE,
        {"releases": releases, "report": report, "report_html": Markup(report_html),
         "error": error, "default_reason": default_reason,
         "fields": fields, "products": state.products},
        request=request, view_name=VIEW_NAME,
    )
    return Response.html(html, status=400 if error else 200)


# The page changes nothing on the server, so a forged POST can do no harm; a CSRF token would
# also stop scripts that POST op lists as JSON.
PAGE = Page(VIEW_NAME, rf"^{PATH}$", PATH, TEMPLATE, view, cached=False, csrf_exempt=True,
            max_body=MAX_UPLOAD, methods=frozenset({"GET", "HEAD", "POST"}))


# --- the ops × releases grid (caniuse-style) -------------------------------------------------

PROBLEMS_PARAM = "problems"  # ?problems=1 (or the form's field): the grid starts with problems only
# Every release costs ~5 ms per op (a 300-op model: ~1.5 s more than its check): above this
# many ops the grid is drawn only when "every release" is asked for anyway.
GRID_MAX_OPS = 400
GRID_SMALL_TEXT = 64 * 1024  # a document whose ops are not a top-level list: judged by size


def grid_wanted(sub: Submission) -> bool:
    """Whether the page draws the grid of this submission without being asked (a small op
    list; read with the C parser, which only small texts go to)."""
    if sub.all_releases:
        return True
    if len(sub.text) > C_PARSE_MAX:
        return False
    try:
        doc = json.loads(sub.text)
    except (ValueError, RecursionError):
        return False
    ops = doc.get("ops") if isinstance(doc, dict) else None
    if not isinstance(ops, list):  # another document kind: small enough text, small enough list
        return len(sub.text) <= GRID_SMALL_TEXT
    return len(ops) <= GRID_MAX_OPS


@dataclass(frozen=True)
class GridColumn:
    """Consecutive releases that answer the same for every op of the model; the target release
    has a column of its own."""

    releases: tuple[str, ...]  # oldest first
    target: bool = False

    @property
    def first(self) -> str:
        return self.releases[0]

    @property
    def last(self) -> str:
        return self.releases[-1]


@dataclass(frozen=True)
class GridRow:
    op: str
    cells: tuple[str, ...]  # status per column ("" = that release does not receive the op)
    target_status: str  # "" = the target does not receive the op
    problem: bool  # a problem on the target (status or a documented limit the trace breaks)
    locations: tuple[str, ...] = ()  # the call sites the report has (path:line)
    count: int = 0
    restricted: bool = False  # the trace breaks a documented limit on the target


@dataclass(frozen=True)
class Grid:
    target: str
    columns: tuple[GridColumn, ...]
    rows: tuple[GridRow, ...]  # problems first, worst first
    problems_only: bool = False

    @property
    def problem_count(self) -> int:
        return sum(r.problem for r in self.rows)

    @property
    def words(self) -> dict[str, str]:
        """status → the short word its cells show (the vocabulary's matrix cell)."""
        from opcheck.core.vocab import Status

        return {s.value: s.cell for s in Status}


def release_grid(report: Report, matrix: dict[str, Any], *, problems_only: bool = False,
                 baseline: bool = False) -> Grid:
    """The report's ops × releases, from the ``--all-releases`` matrix: releases folded into
    runs with the same answer for every op (as the text matrix folds them), the target cut out
    into its own column, rows with a problem on the target first."""
    from opcheck.checker.formats.text import matrix_groups
    from opcheck.core.vocab import Status

    target = report.target.get("torch_npu", "")
    columns: list[GridColumn] = []
    statuses: list[dict[str, str]] = []
    for g in matrix_groups(matrix):
        rels = g.releases
        if target in rels:
            i = rels.index(target)
            parts = [(rels[:i], False), ((target,), True), (rels[i + 1:], False)]
        else:
            parts = [(rels, False)]
        for part, is_target in parts:
            if part:
                columns.append(GridColumn(tuple(part), is_target))
                statuses.append(g.statuses)
    findings = {f.op: f for f in report.ops}
    ops = list(matrix.get("ops", {}))
    if baseline:  # the report keeps only what changed since the baseline: so does the grid
        ops = [o for o in ops if o in findings]
    rows: list[GridRow] = []
    for op in ops:
        f = findings.get(op)
        status = str(f.status) if f is not None else ""
        problem = f is not None and (f.status.is_problem or f.restricted)
        rows.append(GridRow(op, tuple(s.get(op, "") for s in statuses), status, problem,
                            tuple(f.locations) if f is not None else (),
                            f.count if f is not None else 0,
                            f is not None and f.restricted))

    def severity(s: str) -> int:
        try:
            return Status(s).severity
        except ValueError:
            return -1

    def worst_elsewhere(r: GridRow) -> int:
        return max((severity(s) for s in r.cells if s), default=-1)

    rows.sort(key=lambda r: (not r.problem, -severity(r.target_status), -worst_elsewhere(r),
                             r.op))
    return Grid(target, tuple(columns), tuple(rows), problems_only)


def wants_problems_only(args: dict[str, str], fields: dict[str, str]) -> bool:
    value = args.get(PROBLEMS_PARAM) or fields.get(PROBLEMS_PARAM) or ""
    return value.strip().lower() not in ("", "0", "off", "no", "false")
