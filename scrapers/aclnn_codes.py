"""aclnn return codes from the CANN operator docs (hicann ops-* repositories).

Two kinds of page hold them, both as HTML tables inside Markdown (a pipe table is read too):

* the shared return-code page (``docs/**/aclnn返回码.md``, ``aclnn_return_code.md``): one row
  per status (name, value such as ``161002`` or the family ``561xxx``, meaning);
* each ``aclnnXxx.md`` page: its own rows under "返回值", one per trigger condition, the name
  and value cells spanning several rows (``rowspan``).

A table is a return-code table when its header names a status-name column, a value column and
a description column (Chinese or English headings); other tables of the page are skipped. Inside
one, every row must give a value of six digits or a ``NNNxxx`` family: anything else is a
:class:`~opcheck.core.errors.ScrapeError` naming the line, so an upstream layout change is seen
instead of silently read as nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import PurePosixPath

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import html
from opcheck.scrapers.rows import Origin
from opcheck.scrapers.tables import pipe_tables

__all__ = ["ReturnCodeRow", "is_code_page", "is_function_page", "page_function", "parse_return_codes"]

CODE_PAGES = ("aclnn返回码.md", "aclnn_return_code.md")

_CODE = re.compile(r"^(?:\d{6}|\d{3}xxx|0)$")
_FUNCTION = re.compile(r"^#{1,3}\s*(aclnn[A-Z][A-Za-z0-9_]*)\s*$", re.MULTILINE)
_ALL = 1_000_000  # rowspan="0"
_SPLIT = re.compile(r"[/、,，]")
_SPACES = re.compile(r"\s+")
_TAGS = re.compile(r"<[^>]{0,400}>")
_TERM = re.compile(r"</?term>")  # the reader writes <term> around product names

# header words, lower-cased: which column is which
_NAME_HEADS = ("返回码", "状态码名称", "return code", "status code name", "返回值")
_VALUE_HEADS = ("错误码", "状态码值", "error code", "status code value", "code value")
_DESC_HEADS = ("描述", "说明", "description", "状态码说明")


# Kinds of trigger condition and the words (lower-cased) that name them in a description.
TRIGGERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("nullptr", ("空指针", "nullptr", "null pointer")),
    ("dtype", ("数据类型", "dtype", "data type")),
    ("format", ("数据格式", "format")),
    ("shape", ("shape", "维度", "维数", "dim", "轴")),
    ("product", ("产品", "芯片", "soc", "product")),
    ("value", ("取值", "小于", "大于", "超过", "超出", "out of range")),
)
_PARAM = re.compile(r"(?<![A-Za-z0-9_])[a-z][A-Za-z0-9]*(?:[A-Z][A-Za-z0-9]*)?(?![A-Za-z0-9_])")
# lower-case words that are English prose or data types, not parameter names
_NOT_PARAMS = frozenset({
    "nullptr", "shape", "dtype", "format", "dim", "the", "and", "or", "is", "of", "in", "to",
    "not", "be", "if", "a", "an", "nd", "nchw", "nhwc", "true", "false", "size", "null",
    "tensor", "tensors", "kernel", "npu", "api", "aclnn",
})


@dataclass(frozen=True)
class ReturnCodeRow:
    """One row of a return-code table.

    ``function`` is the aclnn function of the page (empty on the shared page); ``code`` is the
    value as written (``161002`` or ``561xxx``); ``line`` is the 1-based line of the row's
    description cell in the page.
    """

    function: str
    name: str
    code: str
    description: str
    line: int

    @property
    def triggers(self) -> tuple[str, ...]:
        """What kind of condition the description names (:data:`TRIGGERS`), in that order."""
        low = self.description.lower()
        return tuple(k for k, words in TRIGGERS if any(w in low for w in words))

    @property
    def params(self) -> tuple[str, ...]:
        """The parameter names the description mentions, in order of first mention (none on
        the shared page: its rows name no function's parameters)."""
        seen: dict[str, None] = {}
        if not self.function:
            return ()
        for m in _PARAM.finditer(self.description):
            if m[0].lower() not in _NOT_PARAMS:
                seen.setdefault(m[0], None)
        return tuple(seen)


def is_code_page(path: str) -> bool:
    return PurePosixPath(path).name in CODE_PAGES


def is_function_page(path: str) -> bool:
    name = PurePosixPath(path).name
    return name.startswith("aclnn") and name.endswith(".md") and not is_code_page(path)


def page_function(path: str, text: str) -> str:
    """The aclnn function a page documents: its file name, else its first aclnn heading."""
    stem = PurePosixPath(path).stem
    if re.fullmatch(r"aclnn[A-Z][A-Za-z0-9_]*", stem):
        return stem
    m = _FUNCTION.search(text)
    return m[1] if m else ""


def _clean(cell: str) -> str:
    return _SPACES.sub(" ", _TAGS.sub(" ", cell)).strip()


@dataclass
class _Cell:
    text: str
    line: int
    rowspan: int


def _rowspan(value: str) -> int:
    # rowspan="0" spans the rest of the table (HTML's rule)
    if value == "0":
        return _ALL
    return int(value) if value.isdigit() and int(value) < 1000 else 1


def _html_tables(text: str) -> list[list[tuple[bool, list[_Cell]]]]:
    """Every <table> of a page as rows of cells (header rows marked), with line numbers."""
    out: list[list[tuple[bool, list[_Cell]]]] = []
    for t in html.tables(text, html.CANN_CELLS):
        out.append([(any(c.header for c in r.cells),
                     [_Cell(_clean(_TERM.sub("", c.text)), c.line, _rowspan(c.rowspan))
                      for c in r.cells])
                    for r in t.rows])
    return out


def _columns(header: list[str]) -> tuple[int, int, int] | None:
    """(name, value, description) column indexes of a return-code table header, else None."""
    low = [h.lower() for h in header]

    def find(words: tuple[str, ...], taken: set[int]) -> int:
        for i, h in enumerate(low):
            if i not in taken and any(w in h for w in words):
                return i
        return -1

    value = find(_VALUE_HEADS, set())
    name = find(_NAME_HEADS, {value})
    desc = find(_DESC_HEADS, {value, name})
    if min(value, name, desc) < 0:
        return None
    return name, value, desc


def _expand(rows: list[list[_Cell]], width: int) -> list[tuple[list[_Cell], int]]:
    """Fill the cells that ``rowspan`` carries down into the rows below; with each row, how
    many cells it has of its own."""
    carry: dict[int, tuple[_Cell, int]] = {}
    out: list[tuple[list[_Cell], int]] = []
    for row in rows:
        if len(row) >= width:
            carry.clear()  # a row with every cell of its own: an upstream rowspan was too long
        cells = iter(row)
        full: list[_Cell] = []
        for col in range(width):
            if col in carry:
                cell, left = carry[col]
                full.append(cell)
                if left <= 1:
                    del carry[col]
                else:
                    carry[col] = (cell, left - 1)
                continue
            nxt = next(cells, None)
            if nxt is None:
                break
            full.append(nxt)
            if nxt.rowspan > 1:
                carry[col] = (nxt, nxt.rowspan - 1)
        out.append((full, len(row)))
    return out


def _rows_of(function: str, header: list[str], body: list[list[_Cell]],
             origin: Origin) -> list[ReturnCodeRow]:
    cols = _columns(header)
    if cols is None:
        return []
    name_i, value_i, desc_i = cols
    out: list[ReturnCodeRow] = []
    prev: list[ReturnCodeRow] = []
    for row, own in _expand(body, len(header)):
        if not row or all(not c.text for c in row):
            continue
        line = row[-1].line
        if own == 1 and len(row) < len(header) and prev:
            # a description alone after a group whose rowspan upstream counted too short:
            # it belongs to the group above, as the rendered page shows it
            last = [c for c in row if c.rowspan == 1][-1]
            out += [ReturnCodeRow(function, p.name, p.code, last.text, line) for p in prev]
            continue
        if len(row) <= max(cols):
            # A row holding only the cells that span the rows below it opens a group whose
            # descriptions follow; any other short row is a layout we do not know.
            if len(row) == desc_i and desc_i == max(cols) and all(c.rowspan > 1 for c in row):
                continue
            raise ScrapeError(f"return-code row has {len(row)} cells, the header {len(header)}",
                              source=origin.path, line=line)
        name, value, desc = row[name_i], row[value_i], row[desc_i]
        if not name.text and not value.text and prev:
            # a pipe table's continuation row: blank name and value mean "as above"
            out += [ReturnCodeRow(function, p.name, p.code, desc.text, desc.line) for p in prev]
            continue
        codes = [c.strip() for c in _SPLIT.split(value.text.replace(" ", ""))]
        if not codes or not all(_CODE.match(c) for c in codes):
            raise ScrapeError(f"return code {value.text!r} is not 0, six digits or NNNxxx",
                              source=origin.path, line=value.line)
        prev = [ReturnCodeRow(function, name.text, c, desc.text, desc.line) for c in codes]
        out += prev
    return out


def parse_return_codes(text: str, *, origin: Origin) -> list[ReturnCodeRow]:
    """Every return-code row of one page (the shared code page or one aclnn function's page)."""
    function = "" if is_code_page(origin.path) else page_function(origin.path, text)
    out: list[ReturnCodeRow] = []
    for table in _html_tables(text):
        heads = [cells for is_head, cells in table if is_head]
        if not heads:
            continue
        header = [c.text for c in heads[0]]
        body = [cells for is_head, cells in table if not is_head]
        out += _rows_of(function, header, body, origin)
    for t in pipe_tables(text):
        body = [[_Cell(_clean(c), line, 1) for c in cells] for line, cells in t.rows]
        out += _rows_of(function, [_clean(h) for h in t.header], body, origin)
    return out
