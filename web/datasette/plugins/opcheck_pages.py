"""Datasette plugin: the site's own pages (``opcheck.web.pages``), the page cache and op links.

Thin glue: every hook is derived from the page registry; the pages gather the facts (through
the resolver and the checker) and the templates lay them out.
"""

from __future__ import annotations

import gc
from collections.abc import Callable
from typing import Any, TypeVar, cast

from datasette import hookimpl as _hookimpl
from datasette.plugins import pm
from datasette.utils import add_cors_headers
from datasette.utils.asgi import Base400, Response
from datasette.views.base import DatasetteError
from markupsafe import Markup, escape

from opcheck.web import pages
from opcheck.web.app import DB_NAME as DB
from opcheck.web.cache import ResponseCache
from opcheck.web.guard import FAULTS, Guard, RatedRation, Ration, allowed_host_names

# Datasette's own exception handler prints every exception, a 404 included, with rich's
# traceback and local variables (0.2-0.4 s of CPU and ~30 kB of log each): a scanner's 404s
# would cost the server more than its visitors. ``handle_exception`` below replaces it.
if not pm.is_blocked("datasette.handle_exception"):
    pm.set_blocked("datasette.handle_exception")
from opcheck.web.pages.base import op_url, serve_state, template_helpers

F = TypeVar("F", bound=Callable[..., Any])


def hookimpl(fn: F) -> F:
    # Datasette's marker is untyped; this keeps the hook functions' own signatures checked.
    return cast(F, _hookimpl(fn))


@hookimpl
def register_routes() -> list[tuple[str, Any]]:
    return pages.routes()


@hookimpl
def skip_csrf(scope: dict[str, Any]) -> bool | None:
    return True if pages.csrf_exempt(scope.get("path", "")) else None


@hookimpl
def render_cell(value: Any, column: str, table: str | None, database: str,
                datasette: Any) -> Markup | None:
    # Op names in query results and in tables that store them as plain text link to the op
    # page (npukernel.op is a foreign key: Datasette links it to the operator row already).
    if database != DB or column != "op" or not isinstance(value, str) or "::" not in value:
        return None
    if table not in (None, "workaround_op", "deprecation"):
        return None
    return Markup(f'<a href="{escape(op_url(datasette, value))}">{escape(value)}</a>')


@hookimpl
def startup(datasette: Any) -> Any:
    async def warm() -> None:
        state = serve_state(datasette)
        if state is None:
            return
        for page in pages.PAGES:
            if page.warm is not None:
                page.warm(state)
        # The catalog's objects (~150 MB of them) live as long as the server: kept out of
        # the garbage collector's full passes, which otherwise walk them all and stop
        # every request for ~0.1 s whenever a large op list or page allocates a lot.
        gc.collect()
        gc.freeze()

    return warm


@hookimpl
def extra_template_vars(view_name: str, datasette: Any) -> dict[str, Any]:
    if view_name not in pages.view_names():
        return {}
    return template_helpers(datasette)


@hookimpl
def handle_exception(datasette: Any, request: Any, exception: Exception) -> Any:
    """The error page, as Datasette's default handler makes it; only real server faults (500)
    reach the log, with a traceback, rate-limited. A 404 or a rejected query is the visitor's
    mistake: its access-log line is all the log gets."""

    async def inner() -> Any:
        title = None
        info: dict[str, Any] = {}
        if isinstance(exception, Base400):
            status, message = exception.status, exception.args[0] if exception.args else ""
        elif isinstance(exception, DatasetteError):
            status, info, message = exception.status, exception.error_dict, exception.message
            if exception.message_is_html:
                message = Markup(message)
            title = exception.title
        else:
            status, message = 500, str(exception)
        if status >= 500:
            FAULTS.report(exception, request.path)
        info.update({"ok": False, "error": message, "status": status, "title": title})
        headers: dict[str, str] = {}
        if datasette.cors:
            add_cors_headers(headers)
        if request.path.split("?")[0].endswith(".json"):
            return Response.json(info, status=status, headers=headers)
        template = datasette.jinja_env.select_template([f"{status}.html", "error.html"])
        return Response.html(
            await template.render_async(dict(info, urls=datasette.urls,
                                             app_css_hash=datasette.app_css_hash(),
                                             menu_links=lambda: [])),
            status=status, headers=headers)

    return inner


@hookimpl
def asgi_wrapper(datasette: Any) -> Callable[[Any], Any]:
    # The catalog is immutable, so a GET page is the same for every anonymous visitor until
    # the server restarts (which is how a new catalog gets served): popular pages are kept.
    # The guard (access log, body caps, SQL rationing) sits outside the cache so that cache
    # hits are logged too.
    config = datasette.plugin_config("opcheck") or {}
    per_client = int(config.get("renders_per_client", 3))
    in_flight = int(config.get("renders_in_flight", 16))
    renders = Ration("page renders", per_client, in_flight)
    rehosts = RatedRation("renders of a page for another Host", per_client, in_flight,
                          per_second=float(config.get("rehosts_per_second", 5)),
                          burst=float(config.get("rehosts_burst", 30)))
    cache = ResponseCache(int(config.get("cache_entries", 512)),
                          int(config.get("cache_bytes", 64 * 1024 * 1024)),
                          uncached=pages.uncached_paths(), renders=renders, rehosts=rehosts)
    names = config.get("host_names")  # opcheck serve --host-name; None: any Host
    guard = Guard(pages.body_limit, sql_per_client=int(config.get("sql_per_client", 2)),
                  sql_in_flight=int(config.get("sql_in_flight", 8)), methods=pages.methods,
                  costly_per_client=int(config.get("costly_per_client", 1)),
                  costly_in_flight=int(config.get("costly_in_flight", 2)),
                  host_names=None if names is None else allowed_host_names(names))
    return lambda app: guard.wrap(cache.wrap(app))
