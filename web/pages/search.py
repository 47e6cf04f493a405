"""The search page (/-/search?q=…): the box on every page. An op, an op's overloads, a Python
API (``torch.isin``, ``F.interpolate``) or an aclnn function, read by ``checker.names`` as
``opcheck op`` reads it; one op goes straight to its page, an aclnn function to its own page,
several ops are listed with their status on the default target, a miss lists close names."""

from __future__ import annotations

from typing import Any

from opcheck.checker.names import NameMatch, Names
from opcheck.web.pages.base import Page, aclnn_url, op_url, serve_state
from opcheck.web.state import ServeState

VIEW_NAME = "opcheck-search"
TEMPLATE = "opcheck_search.html"
MAX_QUERY = 200  # longer text is no name

_NAMES: dict[str, Names] = {}


def names_for(state: ServeState) -> Names:
    """The catalog's names, read once per served catalog."""
    if state.path not in _NAMES:
        _NAMES[state.path] = Names(state.catalog)
    return _NAMES[state.path]


def statuses(state: ServeState, match: NameMatch) -> list[dict[str, str]]:
    """Each op of a match with its status on the newest release with a kernel list."""
    from opcheck.checker.resolve import Resolver

    usable = state.usable_releases
    if not usable:
        return [{"op": o, "status": "", "kernel": ""} for o in match.ops]
    resolver = Resolver(state.catalog, usable[0].torch_npu)
    return [{"op": o, "status": str(r.status), "kernel": r.kernel}
            for o, r in zip(match.ops, resolver.resolve_many(match.ops), strict=True)]


async def view(datasette: Any, request: Any) -> Any:
    from datasette.utils.asgi import Response

    state = serve_state(datasette)
    if state is None:
        return Response.text("no catalog database", status=404)
    q = (request.args.get("q") or "").strip()[:MAX_QUERY]
    match = names_for(state).match(q) if q else NameMatch("", "none")
    if match.kind == "aclnn" and request.args.get("_format") != "json":
        # an aclnn function has its own page, which lists the ops that call it
        return Response.redirect(aclnn_url(datasette, match.name))
    if match.single and request.args.get("_format") != "json":
        return Response.redirect(op_url(datasette, match.single))
    rows = statuses(state, match) if match.ops else []
    release = state.usable_releases[0].torch_npu if state.usable_releases else ""
    if request.args.get("_format") == "json":
        return Response.json({"query": q, "kind": match.kind, "name": match.name,
                              "description": match.describe() if q else "",
                              "decomposed": match.decomposed,
                              "release": release, "ops": rows,
                              "suggestions": match.suggestions},
                             status=200 if match.ops else 404)
    html = await datasette.render_template(
        TEMPLATE, {"q": q, "match": match, "rows": rows, "release": release},
        request=request, view_name=VIEW_NAME)
    return Response.html(html, status=200 if match.ops or not q else 404)


def warm(state: ServeState) -> None:
    names = names_for(state)
    names.match("torch.isin")
    names.match("aclnnAdd")
    names.match("grid_sample")  # the API-name index


PAGE = Page(VIEW_NAME, r"^/-/search$", "/-/search", TEMPLATE, view, warm=warm)
