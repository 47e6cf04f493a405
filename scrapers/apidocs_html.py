"""The per-API support tables as published on the vendor's HTML documentation site.

The site renders the same Markdown sources (or their DITA originals: ``<table>`` with
``<thead><tr><th class="cellrowborder"><p>API名称</p></th>…``, ``<strong>`` labels,
``<blockquote>`` method markers). This module only turns HTML into the block stream of
``apidocs``; the generation detection and every layout rule are shared with the Markdown
parser, so a page and its Markdown source give the same rows.
"""

from __future__ import annotations

import html as htmllib
import re
from collections.abc import Iterable

from bs4 import BeautifulSoup
from bs4.element import Comment, NavigableString, PageElement, Tag

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.apidocs import (
    ApiSupportRow,
    Block,
    Heading,
    Marker,
    Para,
    Table,
    TableRow,
    clean_lines,
    detect_generation_blocks,
    interpret_blocks,
)
from opcheck.scrapers.rows import Origin

_HEADINGS = {f"h{i}": i for i in range(1, 7)}
_SKIP = {"script", "style", "head", "nav", "noscript", "template", "button", "svg"}
_PARA = {"p", "pre", "dt", "dd", "figcaption", "caption"}
_ORPHAN_MARKER = re.compile(r"(?m)^(-|\d+\.)\n")
_BLOCK_TEXT = {
    "p",
    "div",
    "li",
    "tr",
    "pre",
    "table",
    "ul",
    "ol",
    "h1",
    "h2",
    "h3",
    "h4",
    "h5",
    "h6",
}


def _text(node: PageElement, *, skip_lists: bool = False) -> str:
    """Visible text; ``<br>`` and block children break lines, ``<code>`` keeps its backticks
    (the Markdown keeps them too, and they mark argument names in restrictions)."""
    out: list[str] = []

    def walk(n: PageElement) -> None:
        if isinstance(n, Comment):
            return
        if isinstance(n, NavigableString):
            out.append(str(n).replace("\n", " "))
            return
        if not isinstance(n, Tag) or n.name in _SKIP:
            return
        if n.name == "br":
            out.append("\n")
            return
        if n.name == "code" and n.parent is not None and n.parent.name != "pre":
            out.append("`" + n.get_text() + "`")
            return
        if n.name == "pre":
            out.append("\n" + n.get_text() + "\n")
            return
        if skip_lists and n is not node and n.name in ("ul", "ol"):
            return
        if n.name == "li":
            parent = n.parent
            if isinstance(parent, Tag) and parent.name == "ol":
                items = [c for c in parent.children if isinstance(c, Tag) and c.name == "li"]
                start = int(str(parent.get("start", "1") or "1"))
                out.append(f"\n{start + items.index(n)}. ")
            else:
                out.append("\n- ")
        elif n.name in _BLOCK_TEXT:
            out.append("\n")
        for c in n.children:
            walk(c)
        if n.name in _BLOCK_TEXT:
            out.append("\n")

    walk(node)
    # A loose list item wraps its text in <p>: keep the marker on the text's line.
    return _ORPHAN_MARKER.sub(r"\1 ", clean_lines(htmllib.unescape("".join(out))))


def _line(tag: Tag) -> int:
    return tag.sourceline or 0


def _children(tag: Tag, names: tuple[str, ...]) -> list[Tag]:
    return [c for c in tag.children if isinstance(c, Tag) and c.name in names]


def _table(tag: Tag, source: str) -> Table:
    # Direct children only: a nested table inside a cell is cell content, not rows.
    rows: list[tuple[Tag, bool]] = []
    for child in _children(tag, ("tr", "thead", "tbody", "tfoot")):
        if child.name == "tr":
            rows.append((child, False))
        else:
            rows.extend((tr, child.name == "thead") for tr in _children(child, ("tr",)))
    if not rows:
        raise ScrapeError("HTML table without rows", source=source, line=_line(tag))
    first, in_thead = rows[0]
    first_cells = _children(first, ("th", "td"))
    if not (in_thead or all(c.name == "th" for c in first_cells)):
        raise ScrapeError("HTML table without a header row", source=source, line=_line(tag))
    header = tuple(_text(c) for c in first_cells)
    body = [
        TableRow(tuple(_text(c) for c in _children(tr, ("th", "td"))), _line(tr))
        for tr, _ in rows[1:]
    ]
    return Table(header, tuple(body), _line(tag))


def _para(tag: Tag, *, skip_lists: bool = False) -> Para | None:
    text = _text(tag, skip_lists=skip_lists)
    if not text:
        return None
    links = tuple((_text(a), str(a.get("href", ""))) for a in tag.find_all("a") if a.get("href"))
    return Para(text, _line(tag), links)


def html_blocks(text: str, *, source: str = "") -> list[Block]:
    """HTML page → the shared block stream (document order)."""
    soup = BeautifulSoup(text, "html.parser")
    blocks: list[Block] = []

    def walk(children: Iterable[PageElement]) -> None:
        for n in children:
            if isinstance(n, Comment):
                continue
            if isinstance(n, NavigableString):
                s = clean_lines(str(n))
                if s:
                    line = n.parent.sourceline if isinstance(n.parent, Tag) else 0
                    blocks.append(Para(s, line or 0))
                continue
            if not isinstance(n, Tag) or n.name in _SKIP:
                continue
            if n.name in _HEADINGS:
                blocks.append(Heading(_HEADINGS[n.name], _text(n), _line(n)))
            elif n.name == "table":
                blocks.append(_table(n, source))
            elif n.name == "blockquote":
                blocks.append(Marker(_text(n), _line(n)))
            elif n.name in _PARA or n.name == "li":
                if n.name == "li" and n.find(["ul", "ol", "table"]):
                    own = _para(n, skip_lists=True)
                    if own is not None:
                        blocks.append(own)
                    walk(
                        c
                        for c in n.children
                        if isinstance(c, Tag) and c.name in ("ul", "ol", "table")
                    )
                    continue
                p = _para(n)
                if p is not None:
                    blocks.append(p)
            else:
                walk(n.children)

    walk(soup.children)
    return blocks


def detect_generation_html(text: str) -> str | None:
    return detect_generation_blocks(html_blocks(text))


def parse_html(text: str, *, origin: Origin) -> list[ApiSupportRow]:
    """Rows of one site page; same row semantics as ``apidocs.parse_markdown``."""
    return interpret_blocks(html_blocks(text, source=origin.path), origin=origin)
