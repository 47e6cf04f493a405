"""The site's own pages, one module each. A new page is a module with a ``PAGE`` (its view,
route and template), its template in ``datasette/templates/``, and one line in ``PAGES``: the
plugin derives routes, template variables, cache exclusions and CSRF exemptions from here."""

from __future__ import annotations

from opcheck.web.pages import aclnn, atlas, check, explain, op, search
from opcheck.web.pages.base import Page, View

PAGES: tuple[Page, ...] = (
    op.PAGE,
    check.PAGE,
    search.PAGE,
    aclnn.PAGE,
    explain.PAGE,
    atlas.PAGE,
)


def routes() -> list[tuple[str, View]]:
    return [(p.route, p.view) for p in PAGES]


def view_names() -> frozenset[str]:
    return frozenset(p.view_name for p in PAGES)


def uncached_paths() -> tuple[str, ...]:
    return tuple(p.path for p in PAGES if not p.cached)


# Datasette's own forms (sign-in, permission debugging) post a few fields; nothing on this
# read-only site takes more, except pages that declare their own ``max_body``.
DEFAULT_MAX_BODY = 64 * 1024


def body_limit(path: str) -> int:
    """The largest request body ``path`` accepts, in bytes."""
    for p in PAGES:
        if p.max_body and path.startswith(p.path):
            return p.max_body
    return DEFAULT_MAX_BODY


def methods(path: str) -> frozenset[str]:
    """The methods ``path`` answers: a page's own, else what a read-only site needs. Datasette's
    own forms that post (sign-in, messages and permission debugging) serve nothing this site
    uses, so they are answered 405 like any other method a page does not take."""
    for p in PAGES:
        if path.startswith(p.path):
            return p.methods
    return frozenset({"GET", "HEAD"})


def csrf_exempt(path: str) -> bool:
    return any(path.startswith(p.path) for p in PAGES if p.csrf_exempt)
