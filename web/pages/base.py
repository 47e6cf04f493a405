"""What a page of the site declares, and what every page's template gets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opcheck.core.vocab import Status
from opcheck.web.app import DB_NAME
from opcheck.web.state import ServeState, state_for

View = Callable[[Any, Any], Awaitable[Any]]  # (datasette, request) → Response

# Background of a status badge; a status missing here (a new one) is shown in neutral grey.
STATUS_BACKGROUND = {
    Status.NPU: "#d4f4d4", Status.COMPOSITE: "#e0ecff", Status.CPU_FALLBACK: "#ffe9b3",
    Status.UNSUPPORTED: "#ffc8c8",
}
NEUTRAL = "#e6e6e6"


@dataclass(frozen=True)
class Page:
    """One custom page: its route, template and view; the plugin derives its hooks (routes,
    template variables, page cache, CSRF) from these."""

    view_name: str  # Datasette's view name, what `extra_template_vars` sees
    route: str  # Datasette route regex
    path: str  # URL prefix of every request the page answers
    template: str
    view: View
    cached: bool = True  # False: the answer depends on what is posted, never kept
    csrf_exempt: bool = False  # posts change nothing on the server: no token needed
    warm: Callable[[ServeState], object] | None = None  # run at start-up, before visitors
    max_body: int = 0  # largest request body accepted (bytes); 0: the site's small default


def status_css() -> str:
    """The badge rules for every status, from the vocabulary (templates name none)."""
    return " ".join(f".st-{s.value} {{ background: {STATUS_BACKGROUND.get(s, NEUTRAL)}; }}"
                    for s in Status)


def op_url(datasette: Any, op: str) -> str:
    from urllib.parse import quote

    return str(datasette.urls.path("/-/op/" + quote(op, safe=":")))


def template_helpers(datasette: Any) -> dict[str, Any]:
    """What every page's template gets besides its own context (the plugin adds these for
    the site's pages; the op-list report, rendered off the event loop, gets them too)."""
    from datasette.utils import tilde_encode
    from markupsafe import Markup

    return {
        "status_class": lambda s: f"st-{s}",
        "status_css": Markup(status_css()),
        "op_url": lambda o: op_url(datasette, o),
        "row_url": lambda t, pk: datasette.urls.row(DB_NAME, t, tilde_encode(str(pk))),
        "db": DB_NAME,
    }


def serve_state(datasette: Any) -> ServeState | None:
    """The shared state of the catalog this Datasette serves (None: it serves none)."""
    db = datasette.databases.get(DB_NAME)
    if db is None or db.path is None:
        return None
    return state_for(str(db.path))
