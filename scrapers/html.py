"""The one HTML-table reader of the scrapers: aclnn pages, return-code pages, torch_npu API docs.

Upstream Markdown embeds HTML ``<table>`` blocks. :func:`tables` finds each block (from
``<table`` to the first ``</table>``, as a Markdown renderer sees a raw-HTML block), parses only
that block with Beautiful Soup (a :class:`~bs4.SoupStrainer` keeps the rest of the page out of
the tree) and returns its rows: every ``<td>``/``<th>`` with its text, 1-based line, rowspan and
colspan. Expanding spans is left to the caller: the pages' own span mistakes are handled
differently by each kind of table.

Parser: ``lxml``, measured against ``html.parser`` on the 2,042 upstream pages with a
``<table>``: 10.2 s against 14.1 s of CPU, the same rows except on 24 pages of broken markup,
where lxml reads as a browser does (a cell whose ``</td>`` is missing ends at the next cell
or row; ``&lt`` without ``;`` is ``<``) and html.parser's tree nests the following rows inside
the open cell. Beautiful Soup's lxml builder gives no source lines, so the lines of the
``<tr>``/``<td>``/``<th>`` tags are read off the block's text and matched to the tree's cells
in document order; when the tree does not hold exactly those tags in that order, the block is
parsed again with ``html.parser``, whose tree carries each tag's line (no upstream page needs
it today).

A parsed block is kept (by its text and the cell-text style) so identical tables, common across
the CANN versions of one page, are parsed once per process.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from bs4 import BeautifulSoup
from bs4.element import NavigableString, Tag
from bs4.filter import SoupStrainer

__all__ = ["CANN_CELLS", "Cell", "CellText", "Row", "Table", "tables"]

PARSER = "lxml"
_FALLBACK = "html.parser"


@dataclass(frozen=True)
class CellText:
    """How a cell's markup becomes text: ``breaks`` start tags and ``ends`` end tags that put
    a newline, ``marks`` tags written around their content (``term`` → ``<term>…</term>``,
    ``code`` → `` `…` ``). Other tags leave only their text."""

    breaks: frozenset[str] = frozenset({"br", "li", "p"})
    ends: frozenset[str] = frozenset()
    marks: tuple[tuple[str, str, str], ...] = ()


# The CANN pages write product names as <term>…</term>, in cells too: the aclnn page reader
# needs them, the return-code reader drops them. One style, so a page both read is parsed once.
CANN_CELLS = CellText(marks=(("term", "<term>", "</term>"),))

@dataclass(frozen=True)
class Cell:
    text: str  # as written (entities decoded), not yet normalised
    line: int  # 1-based line of the <td>/<th> in the whole text
    rowspan: str  # the attribute as written ("" when absent): callers differ on bad values
    colspan: str
    header: bool  # <th>


@dataclass(frozen=True)
class Row:
    line: int  # 1-based line of the <tr> (of the first cell when the row has no <tr>)
    cells: tuple[Cell, ...]


@dataclass(frozen=True)
class Table:
    rows: tuple[Row, ...]
    line: int  # line of "<table"
    end_line: int  # line of "</table>"


_BLOCK = re.compile(r"<table\b.*?</table>", re.S | re.I)
_TAGS = re.compile(r"<(tr|td|th)(?=[\s/>])", re.I)
_ROW_TAGS = ("tr", "td", "th")
_STRAINER = SoupStrainer("table")


def tables(text: str, style: CellText = CellText()) -> list[Table]:
    """Every ``<table>…</table>`` block of a Markdown text, in order."""
    out: list[Table] = []
    line, pos = 1, 0
    for m in _BLOCK.finditer(text):
        line += text.count("\n", pos, m.start())
        pos = m.start()
        block = m.group(0)
        out.append(Table(tuple(_shift(r, line - 1) for r in _rows(block, style)), line,
                         line + block.count("\n")))
    return out


def _shift(row: Row, by: int) -> Row:
    if not by:
        return row
    return Row(row.line + by, tuple(Cell(c.text, c.line + by, c.rowspan, c.colspan, c.header)
                                    for c in row.cells))


@lru_cache(maxsize=8192)
def _rows(block: str, style: CellText) -> tuple[Row, ...]:
    """Rows of one block, lines relative to it."""
    found = _rows_by(block, style, PARSER)
    return found if found is not None else _rows_by(block, style, _FALLBACK) or ()


def _rows_by(block: str, style: CellText, parser: str) -> tuple[Row, ...] | None:
    soup = BeautifulSoup(block, parser, parse_only=_STRAINER, multi_valued_attributes=None)
    every = [t for t in soup.descendants if isinstance(t, Tag) and t.name in _ROW_TAGS]
    if parser == _FALLBACK:
        lines = {id(t): t.sourceline or 1 for t in every}
    else:
        written = list(_TAGS.finditer(block))
        if len(written) != len(every) or any(
                m.group(1).lower() != t.name for m, t in zip(written, every, strict=True)):
            return None  # the tree is not the tags as written: let html.parser give lines
        lines = {}
        line, at = 1, 0
        for m, t in zip(written, every, strict=True):
            line += block.count("\n", at, m.start())
            at = m.start()
            lines[id(t)] = line
    rows: list[Row] = []
    for tr, cells in _walk(soup):
        found = tuple(Cell(_text(c, style), lines[id(c)], _attr(c, "rowspan"),
                           _attr(c, "colspan"), c.name == "th") for c in cells)
        rows.append(Row(lines[id(tr)] if tr is not None else found[0].line, found))
    return tuple(rows)


def _walk(top: Tag) -> list[tuple[Tag | None, list[Tag]]]:
    """(row, its cells) in document order; consecutive cells outside any ``<tr>`` make a row
    of their own (the ``<tr>`` a browser implies; upstream forgets one now and then).
    Cells are not entered: a table inside a cell is part of that cell's text. A ``<table>``
    written again inside the table itself (seen upstream: a stray second ``<table>`` after the
    ``<colgroup>``) nests nothing: its rows are the table's rows."""
    rows: list[tuple[Tag | None, list[Tag]]] = []

    def visit(el: Tag, row: list[Tag] | None) -> None:
        for child in el.children:
            if not isinstance(child, Tag):
                continue
            if child.name in ("td", "th"):
                if row is not None:
                    row.append(child)
                elif rows and rows[-1][0] is None:
                    rows[-1][1].append(child)  # cells between rows make one (implied <tr>)
                else:
                    rows.append((None, [child]))
            elif child.name == "tr":
                rows.append((child, []))
                visit(child, rows[-1][1])
            else:
                visit(child, row)

    visit(top, None)
    return rows


def _attr(tag: Tag, name: str) -> str:
    value = tag.get(name)
    return value.strip() if isinstance(value, str) else ""


def _text(tag: Tag, style: CellText) -> str:
    out: list[str] = []
    _collect(tag, style, out)
    return "".join(out)


def _collect(tag: Tag, style: CellText, out: list[str]) -> None:
    for child in tag.children:
        if isinstance(child, Tag):
            name = child.name
            if name in style.breaks:
                out.append("\n")
            mark = next((m for m in style.marks if m[0] == name), None)
            if mark is not None:
                out.append(mark[1])
            _collect(child, style, out)
            if mark is not None:
                out.append(mark[2])
            if name in style.ends:
                out.append("\n")
        elif type(child) is NavigableString:  # comments, CDATA, declarations: not text
            out.append(child)
