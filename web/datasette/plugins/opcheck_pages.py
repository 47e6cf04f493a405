"""Datasette plugin: the op page (/-/op/<op>), the op-list page (/-/check) and op links.

Thin glue: opcheck.web.serve gathers the facts (through the resolver and the checker) and the
templates lay them out.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar, cast
from urllib.parse import quote

from datasette import hookimpl as _hookimpl
from datasette.utils import tilde_encode
from datasette.utils.asgi import Request, Response
from markupsafe import Markup, escape

from opcheck.core.errors import OpcheckError
from opcheck.web import serve

DB = serve.DB_NAME
F = TypeVar("F", bound=Callable[..., Any])


def hookimpl(fn: F) -> F:
    # Datasette's marker is untyped; this keeps the hook functions' own signatures checked.
    return cast(F, _hookimpl(fn))


def _state(datasette: Any) -> serve.ServeState | None:
    db = datasette.databases.get(DB)
    if db is None or db.path is None:
        return None
    return serve.state_for(str(db.path))


def _op_url(datasette: Any, op: str) -> str:
    return str(datasette.urls.path("/-/op/" + quote(op, safe=":")))


async def op_view(datasette: Any, request: Request) -> Response:
    state = _state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    page = serve.op_page(state, request.url_vars["op"])
    if request.args.get("_format") == "json":
        return Response.json(page.to_json(), status=200 if page.known else 404)
    html = await datasette.render_template(
        "opcheck_op.html", {"page": page},
        request=request, view_name="opcheck-op",
    )
    return Response.html(html, status=200 if page.known else 404)


async def check_view(datasette: Any, request: Request) -> Response:
    state = _state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    releases = state.usable_releases
    report = None
    markdown = ""
    error = ""
    fields: dict[str, str] = {"release": releases[0].torch_npu if releases else ""}
    if request.method == "POST":
        from opcheck.checker.report import to_markdown

        ctype = request.headers.get("content-type", "")
        try:
            body = await request.post_body()
            if ctype.split(";")[0].strip() == "application/json":
                # API use: the body is the op list itself, the release a query parameter.
                sub = serve.Submission(body.decode("utf-8", "replace"),
                                       request.args.get("release", ""))
                rep = serve.run_check(state, sub)
                return Response.json(rep.to_json())
            fields.update(serve.parse_form(ctype, body))
            sub = serve.submission_from_fields(fields)
            report = serve.run_check(state, sub)
            markdown = to_markdown(report)
        except OpcheckError as exc:
            if ctype.startswith("application/json"):
                return Response.json({"error": str(exc)}, status=400)
            error = str(exc)
    html = await datasette.render_template(
        "opcheck_check.html",
        {"releases": releases, "report": report, "markdown": markdown, "error": error,
         "fields": fields, "products": state.products},
        request=request, view_name="opcheck-check",
    )
    return Response.html(html, status=400 if error else 200)


@hookimpl
def register_routes() -> list[tuple[str, Any]]:
    return [
        (r"^/-/op/(?P<op>[^/]+)$", op_view),
        (r"^/-/check$", check_view),
    ]


@hookimpl
def skip_csrf(scope: dict[str, Any]) -> bool | None:
    # The op-list page changes nothing on the server, so a forged POST can do no harm; the
    # token would also stop scripts that POST op lists as JSON.
    return True if scope.get("path") == "/-/check" else None


@hookimpl
def render_cell(value: Any, column: str, table: str | None, database: str,
                datasette: Any) -> Markup | None:
    # Op names in query results and in tables that store them as plain text link to the op
    # page (npukernel.op is a foreign key: Datasette links it to the operator row already).
    if database != DB or column != "op" or not isinstance(value, str) or "::" not in value:
        return None
    if table not in (None, "workaround_op", "deprecation"):
        return None
    return Markup(f'<a href="{escape(_op_url(datasette, value))}">{escape(value)}</a>')


@hookimpl
def startup(datasette: Any) -> Any:
    async def warm() -> None:
        # Resolving an op on every release reads every release's kernel list once; doing it
        # at startup keeps the first visitor's op page fast.
        state = _state(datasette)
        if state is not None and state.catalog.operators:
            serve.op_page(state, next(iter(state.catalog.operators)))

    return warm


@hookimpl
def extra_template_vars(view_name: str, datasette: Any) -> dict[str, Any]:
    if view_name not in ("opcheck-op", "opcheck-check"):
        return {}
    return {
        "status_class": lambda s: f"st-{s}",
        "op_url": lambda o: _op_url(datasette, o),
        "row_url": lambda t, pk: datasette.urls.row(DB, t, tilde_encode(str(pk))),
        "db": DB,
    }


@hookimpl
def asgi_wrapper(datasette: Any) -> Callable[[Any], Any]:
    # The catalog is immutable, so a GET page is the same for every anonymous visitor until
    # the server restarts (which is how a new catalog gets served): popular pages are kept.
    config = datasette.plugin_config("opcheck") or {}
    cache = serve.ResponseCache(int(config.get("cache_entries", 512)),
                                int(config.get("cache_bytes", 64 * 1024 * 1024)))
    return cache.wrap
