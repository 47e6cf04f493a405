"""The op-list page (/-/check): an op list pasted, uploaded or POSTed as JSON, checked exactly
as ``opcheck check`` checks it: the page builds a request for the check use case
(``opcheck.checker.usecase``) and renders its report.

Form fields (and, for a JSON POST, query parameters): ``release``, ``cann``, ``hardware``,
``jit_compile`` and ``internal_format`` (on/off), ``no_cpu_fallback``, ``all_releases``,
``graph``, ``capture``; the form also takes a ``baseline`` report
JSON (file), like ``--baseline``."""

from __future__ import annotations

import asyncio
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
from opcheck.web.guard import Ration, client_of
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
            raise UsageError("paste an op list or choose a file (the JSON from `opcheck trace`)")
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
                 "no_cpu_fallback", "all_releases", "graph", "capture",
                 "_format")


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
# it for the GIL), and are rationed: one per client, a few queued in all.
CHECKS = Ration("op-list checks", per_client=1, in_flight=4)
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


def render_report(report: Report, helpers: dict[str, Any]) -> str:
    """The report part of the page, from its own template on a plain Jinja environment (the
    page around it is Datasette's, rendered on the event loop)."""
    from opcheck.checker.formats.report_markdown import to_markdown

    return str(plain_template(REPORT_TEMPLATE).render(report=report, markdown=to_markdown(report),
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
    report = run_check(state, sub)
    if _wants_json(ctype, args):
        # Serialised here too: a large report's document takes a while to write.
        # The pure-Python encoder (iterencode) takes turns with the event loop for the GIL.
        text = "".join(json.JSONEncoder().iterencode(report.to_json()))
        return Outcome(report, json=text.encode())
    return Outcome(report, html=render_report(report, helpers))


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
        refused = CHECKS.enter(client)
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
