"""What a page of the site declares, and what every page's template gets."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from opcheck.core.vocab import Status
from opcheck.web.app import DB_NAME
from opcheck.web.state import ServeState, state_for

View = Callable[[Any, Any], Awaitable[Any]]  # (datasette, request) → Response



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
    methods: frozenset[str] = frozenset({"GET", "HEAD"})  # others are answered 405


@functools.cache
def status_css() -> str:
    """The badge rules for every status, from the vocabulary (templates name none)."""
    return " ".join(f".st-{s.value} {{ background: {s.background}; }}"
                    for s in Status)


def op_url(datasette: Any, op: str) -> str:
    from urllib.parse import quote

    return str(datasette.urls.path("/-/op/" + quote(op, safe=":")))


def aclnn_url(datasette: Any, function: str) -> str:
    from urllib.parse import quote

    return str(datasette.urls.path("/-/aclnn/" + quote(function, safe="")))


def release_ranges(text: str) -> str:
    """A workaround's stored release ranges (``[{"min": "2.1.0", "max": "2.3.1"}]``) as a
    reader writes them: ``2.1.0 – 2.3.1, 2.6.0 and later``."""
    import json

    try:
        ranges = json.loads(text or "[]")
    except ValueError:
        return text
    if not isinstance(ranges, list):
        return text
    parts = []
    for r in ranges:
        if not isinstance(r, dict):
            parts.append(str(r))
            continue
        lo, hi = r.get("min") or "", r.get("max") or ""
        parts.append(f"{lo} – {hi}" if lo and hi else f"{lo} and later" if lo
                     else f"up to {hi}" if hi else "every release")
    return ", ".join(parts)


CODE_TAGS = ["div", "span", "pre", "code", "table", "thead", "tbody", "tr", "th", "td"]


def markdown_html(text: str) -> Any:
    """Contributed Markdown (a workaround's problem and fix) as sanitised HTML, fenced code
    blocks highlighted (``codehilite``; the colours are ``code_css``)."""
    from datasette_render_markdown import render_markdown

    return render_markdown(text or "", extensions=["fenced_code", "codehilite", "tables"],
                           extra_tags=CODE_TAGS,
                           extra_attrs={"div": ["class"], "span": ["class"], "code": ["class"]})


@functools.cache  # pygments builds the rules anew each call (~0.7 ms, every page)
def code_css() -> str:
    from pygments.formatters import HtmlFormatter

    return str(HtmlFormatter(style="friendly").get_style_defs(".codehilite"))


@functools.cache
def plain_template(name: str) -> Any:
    """A template of ours on a plain (synchronous) Jinja environment, for the parts of a page
    rendered off Datasette's async one: the op page's content (its many small loops cost
    several times more there) and the checker page's report (rendered on the check thread)."""
    import jinja2

    from opcheck.web.app import DATASETTE_DIR

    env = jinja2.Environment(loader=jinja2.FileSystemLoader(DATASETTE_DIR / "templates"),
                             autoescape=True)
    return env.get_template(name)


def template_helpers(datasette: Any) -> dict[str, Any]:
    """What every page's template gets besides its own context (the plugin adds these for
    the site's pages; the op-list report, rendered off the event loop, gets them too)."""
    from datasette.utils import tilde_encode
    from markupsafe import Markup, escape

    return {
        "status_class": lambda s: f"st-{s}",
        "statuses": tuple(Status),  # the legend's words, from the vocabulary
        "status_css": Markup(status_css()),
        "op_url": lambda o: op_url(datasette, o),
        "aclnn_url": lambda f: aclnn_url(datasette, f),
        "row_url": lambda t, pk: datasette.urls.row(DB_NAME, t, tilde_encode(str(pk))),
        "db": DB_NAME,
        "release_ranges": release_ranges,
        # break opportunities after `::` and `.`: a narrow column wraps an op name there
        "op_html": lambda o: Markup(str(escape(o)).replace("::", "::<wbr>")
                                    .replace(".", ".<wbr>")),
        "markdown_html": markdown_html,
        "code_css": Markup(code_css()),
    }


def serve_state(datasette: Any) -> ServeState | None:
    """The shared state of the catalog this Datasette serves (None: it serves none)."""
    db = datasette.databases.get(DB_NAME)
    if db is None or db.path is None:
        return None
    return state_for(str(db.path))
