"""The log page (/-/explain): a torch_npu / CANN runtime log pasted or uploaded, explained as
``opcheck explain`` explains it (``contrib.explain``: each failure once with its log line,
error code, the rule it broke and the fix; known problems; the status of every op the log
names on the default target). The log is read, never kept."""

from __future__ import annotations

import asyncio
import functools
import io
from typing import Any

from opcheck.core.errors import OpcheckError, UsageError
from opcheck.web.guard import client_of
from opcheck.web.pages.base import Page, serve_state
from opcheck.web.pages.check import CHECKS, MAX_UPLOAD, check_pool, parse_form
from opcheck.web.state import ServeState

VIEW_NAME = "opcheck-explain"
TEMPLATE = "opcheck_explain.html"
PATH = "/-/explain"


def explain_log(state: ServeState, ctype: str, body: bytes,
                fields: dict[str, str]) -> Any:
    """The log report of one POST (runs on the check thread); ``fields`` gets the form's."""
    from opcheck.contrib.explain.reader import log_records
    from opcheck.contrib.explain.report import report_log
    from opcheck.contrib.explain.scan import explain

    fields.update(parse_form(ctype, body))
    text = fields.get("file", "").strip() or fields.get("log", "").strip()
    if not text:
        raise UsageError("paste a log or choose a log file")
    result = explain(log_records(io.BytesIO(text.encode("utf-8"))))
    release = fields.get("release", "").strip() or None
    return report_log(result, state.catalog, torch_npu=release)


async def view(datasette: Any, request: Any) -> Any:
    from datasette.utils.asgi import Response

    state = serve_state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    report = None
    error = ""
    fields: dict[str, str] = {}
    if request.method == "POST":
        client = client_of(request.scope)
        refused = await CHECKS.admit(client)
        if refused is not None:
            return Response.text(refused[1], status=refused[0])
        try:
            body = await request.post_body()
            report = await asyncio.get_running_loop().run_in_executor(
                check_pool(), functools.partial(explain_log, state,
                                                request.headers.get("content-type", ""),
                                                body, fields))
        except OpcheckError as exc:
            error = str(exc)
        finally:
            CHECKS.leave(client)
        if report is not None and request.args.get("_format") == "json":
            return Response.json(report.as_dict())
    html = await datasette.render_template(
        TEMPLATE, {"report": report, "error": error, "fields": fields,
                   "releases": state.usable_releases},
        request=request, view_name=VIEW_NAME)
    return Response.html(html, status=400 if error else 200)


# Like the check page: a POST changes nothing on the server, so it needs no CSRF token.
PAGE = Page(VIEW_NAME, rf"^{PATH}$", PATH, TEMPLATE, view, cached=False, csrf_exempt=True,
            max_body=MAX_UPLOAD, methods=frozenset({"GET", "HEAD", "POST"}))
