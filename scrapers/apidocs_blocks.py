"""torch_npu's API docs (Markdown, with HTML tables in places) read into blocks: headings,
paragraphs, support markers and table rows with their line numbers. The first step of
:mod:`opcheck.scrapers.apidocs`; pure."""

from __future__ import annotations

import html
import re
from dataclasses import dataclass
from functools import lru_cache

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.html import CellText
from opcheck.scrapers.html import tables as html_tables
from opcheck.scrapers.tables import table_at

# --------------------------------------------------------------------------- block model


@dataclass(frozen=True)
class Heading:
    level: int
    text: str
    line: int


@dataclass(frozen=True)
class Para:
    text: str
    line: int
    links: tuple[tuple[str, str], ...] = ()  # (text, href)


@dataclass(frozen=True)
class Marker:
    """A structural boundary: a method marker (``> <font>abs()</font>``), a ``</div>``."""

    text: str
    line: int


@dataclass(frozen=True)
class TableRow:
    cells: tuple[str, ...]
    line: int


@dataclass(frozen=True)
class Table:
    header: tuple[str, ...]
    rows: tuple[TableRow, ...]
    line: int


Block = Heading | Para | Marker | Table

# --------------------------------------------------------------------------- text helpers

_TAG = re.compile(r"</?[A-Za-z][^>]*>")
_BR = re.compile(r"<br\s*/?>", re.I)
_MD_LINK = re.compile(r"!?\[([^\]]*)\]\(([^)\s]*)(?:\s+\"[^\"]*\")?\)")
_MD_ESCAPE = re.compile(r"\\([\\`*_{}\[\]()#+\-.!|<>~])")
_WS = re.compile(r"[ \t\r\f\v\u00a0\u3000]+")
_INLINE_SPECIAL = re.compile(r"[<\[*\\&]")
_HTML_LINK = re.compile(r"<a\s[^>]*href=\"([^\"]*)\"[^>]*>(.*?)</a>", re.I | re.S)


def clean_lines(text: str) -> str:
    """Collapse blanks per line, drop empty lines: both readers end with this."""
    if "\n" not in text:
        return _WS.sub(" ", text).strip()
    lines = (_WS.sub(" ", ln).strip() for ln in text.split("\n"))
    return "\n".join(ln for ln in lines if ln)


@lru_cache(maxsize=65536)
def md_inline(s: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """Markdown/inline-HTML text → (plain text, links). Backticks are kept: they mark args."""
    if not _INLINE_SPECIAL.search(s):
        return clean_lines(s), ()
    links: list[tuple[str, str]] = []

    def _link(m: re.Match[str]) -> str:
        links.append((_MD_ESCAPE.sub(r"\1", m.group(1)), _MD_ESCAPE.sub(r"\1", m.group(2))))
        return m.group(1)

    s = _MD_LINK.sub(_link, s)
    s = _BR.sub("\n", s)
    for m in _HTML_LINK.finditer(s):
        links.append((_TAG.sub("", m.group(2)), m.group(1)))
    s = _TAG.sub("", s)
    s = s.replace("**", "")
    s = _MD_ESCAPE.sub(r"\1", s)
    s = html.unescape(s)
    return clean_lines(s), tuple(links)


# the old English HTML tables: paragraphs and list items end a line, <code> marks an argument
_API_CELLS = CellText(breaks=frozenset({"br"}), ends=frozenset({"p", "li", "div"}),
                      marks=(("code", "`", "`"),))


_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_BULLET = re.compile(r"^[*+]\s+")
_FENCE = re.compile(r"^(```|~~~)")
_FONT_MARKER = re.compile(r"^>\s*<font[^>]*>(.*?)</font>\s*$")


def _html_table_chunk(chunk: str, first_line: int, source: str) -> Table:
    header: tuple[str, ...] | None = None
    rows: list[TableRow] = []
    for t in html_tables(chunk, _API_CELLS):
        for r in t.rows:
            cells = tuple(clean_lines(c.text) for c in r.cells)
            line = first_line + r.line - 1
            if header is None and cells and all(c.header for c in r.cells):
                header = cells
                continue
            rows.append(TableRow(cells, line))
    if header is None:
        raise ScrapeError("HTML table without a header row", source=source, line=first_line)
    return Table(header, tuple(rows), first_line)


def markdown_blocks(text: str, *, source: str = "") -> list[Block]:
    """Tokenise Markdown (with embedded HTML tables) into the shared block stream."""
    lines = text.split("\n")
    blocks: list[Block] = []
    i, n = 0, len(lines)
    while i < n:
        raw = lines[i]
        s = raw.strip()
        lineno = i + 1
        if not s:
            i += 1
            continue
        if s.lower().startswith("<table"):
            j = i
            while j < n and "</table>" not in lines[j].lower():
                j += 1
            if j >= n:
                raise ScrapeError("unterminated <table>", source=source, line=lineno)
            blocks.append(_html_table_chunk("\n".join(lines[i : j + 1]), lineno, source))
            i = j + 1
            continue
        fence = _FENCE.match(s)
        if fence:
            j = i + 1
            while j < n and not lines[j].strip().startswith(fence.group(1)):
                j += 1
            code = clean_lines("\n".join(lines[i + 1 : j]))
            if code:
                blocks.append(Para(code, lineno))
            i = j + 1
            continue
        h = _HEADING.match(s) if raw.startswith("#") else None
        if h:
            blocks.append(Heading(len(h.group(1)), md_inline(h.group(2))[0], lineno))
            i += 1
            continue
        if s.startswith("|"):
            pipe, j = table_at(lines, i)
            if pipe is not None:
                header = tuple(md_inline(c)[0] for c in pipe.header)
                rows = tuple(
                    TableRow(tuple(md_inline(c)[0] for c in cells), line)
                    for line, cells in pipe.rows
                )
                blocks.append(Table(header, rows, lineno))
            else:
                for k in range(i, j):
                    blocks.append(Para(md_inline(lines[k].strip())[0], k + 1))
            i = j
            continue
        fm = _FONT_MARKER.match(s)
        if fm:
            blocks.append(Marker(md_inline(fm.group(1))[0], lineno))
            i += 1
            continue
        low = s.lower()
        if low.startswith("</div") or low.startswith("<div"):
            blocks.append(Marker("", lineno))
            i += 1
            continue
        body, links = md_inline(_BULLET.sub("- ", s))
        if body:
            blocks.append(Para(body, lineno, links))
        i += 1
    return blocks
