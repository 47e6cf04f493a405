"""scrapers/html.py: the one HTML-table reader (Beautiful Soup) of aclnn pages, return-code
pages and the torch_npu API docs."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from opcheck.scrapers import html
from opcheck.scrapers.html import CANN_CELLS, CellText, tables

PAGE = """# title

intro with a < sign and &amp;

<table>
<tr><th>参数名</th><th>数据类型</th></tr>
<tr>
  <td rowspan="2">self</td>
  <td>FLOAT、<br>FLOAT16 &amp; <term>Atlas 训练系列产品</term></td>
</tr>
<tr><td colspan=" 2 ">x<!-- a comment --></td></tr>
</table>

text between

<table><tr><td>a</td></tr></table>
"""


def _cells(t: html.Table) -> list[tuple[int, list[tuple[str, int, str, str, bool]]]]:
    return [(r.line, [(c.text, c.line, c.rowspan, c.colspan, c.header) for c in r.cells])
            for r in t.rows]


def test_rows_cells_lines_spans_and_text() -> None:
    first, second = tables(PAGE, CANN_CELLS)
    assert (first.line, first.end_line, second.line, second.end_line) == (5, 12, 16, 16)
    assert _cells(first) == [
        (6, [("参数名", 6, "", "", True), ("数据类型", 6, "", "", True)]),
        (7, [("self", 8, "2", "", False),
             ("FLOAT、\nFLOAT16 & <term>Atlas 训练系列产品</term>", 9, "", "", False)]),
        (11, [("x", 11, "", "2", False)]),  # comments are not text
    ]
    assert _cells(second) == [(16, [("a", 16, "", "", False)])]
    assert tables("no table here") == []


def test_cell_text_styles() -> None:
    block = "<table><tr><td><p>one</p><code>x</code><li>two</li><term>T</term></td></tr></table>"
    [t] = tables(block, CellText(breaks=frozenset({"br"}), ends=frozenset({"p", "li"}),
                                 marks=(("code", "`", "`"),)))
    assert t.rows[0].cells[0].text == "one\n`x`two\nT"
    [t] = tables(block)
    assert t.rows[0].cells[0].text == "\nonex\ntwoT"


def test_missing_end_tags_are_read_as_a_browser_does() -> None:
    """Upstream omits ``</td>`` before ``</tr>`` (and before the next ``<td>``): the cell is
    the rest of the row (the old event reader dropped it, or shifted the row's cells)."""
    block = ("<table>\n<tr><td>a</td><td>b</td></tr>\n<tr>\n<td>lost</tr>\n"
             "<tr><td>-\n<td>int64_t</td></tr>\n</table>")
    [t] = tables(block)
    assert [[c.text.strip() for c in r.cells] for r in t.rows] == [
        ["a", "b"], ["lost"], ["-", "int64_t"]]
    assert [c.line for c in t.rows[2].cells] == [5, 6]


def test_cells_without_a_tr_make_one_row() -> None:
    """Upstream (aclnnGeGluBackward, 8.5.0) forgets a ``<tr>``: the cells between two rows
    are one row, as a browser shows them (each cell was a row of its own, its text read as a
    parameter name)."""
    block = ("<table>\n<tr><td>a</td><td>b</td></tr>\n  <td>gelu</td>\n  <td>输入</td>\n"
             "</tr>\n<tr><td>dim</td><td>x</td></tr>\n</table>")
    [t] = tables(block)
    assert [(r.line, [c.text for c in r.cells]) for r in t.rows] == [
        (2, ["a", "b"]), (3, ["gelu", "输入"]), (6, ["dim", "x"])]


def test_a_stray_second_table_tag_nests_nothing() -> None:
    """Seen upstream: ``<table …><colgroup>…</colgroup>\\n<table><thead>…``: the rows are the
    table's own (they were read as a nested table's and lost)."""
    block = ("<table style='x'><colgroup><col></colgroup>\n<table><thead>\n<tr><th>h</th></tr>"
             "</thead>\n<tbody><tr><td>v</td></tr></tbody>\n</table>")
    [t] = tables(block)
    assert [(r.line, [c.text for c in r.cells]) for r in t.rows] == [(3, ["h"]), (4, ["v"])]


def test_a_table_inside_a_cell_is_that_cells_text() -> None:
    """Its rows are not the outer table's. The block ends at the first ``</table>``, as the
    readers before this one cut it: the outer cells after an inner table are not read."""
    block = ("<table><tr><td>outer<table><tr><td>inner</td></tr></table></td>"
             "<td>next</td></tr></table>")
    [t] = tables(block)
    assert [[c.text for c in r.cells] for r in t.rows] == [["outerinner"]]


def test_markup_lxml_repairs_falls_back_to_html_parser_lines() -> None:
    """A ``<tr`` the tree does not hold (here inside an attribute) breaks the tag-to-line
    matching: html.parser's own lines are used instead, and the rows are the same."""
    block = '<table>\n<tr>\n<td title="a <tr> b">x</td>\n</tr>\n<tr><td>y</td></tr>\n</table>'
    [t] = tables(block)
    assert [(r.line, [(c.text, c.line) for c in r.cells]) for r in t.rows] == [
        (2, [("x", 3)]), (5, [("y", 5)])]


def test_identical_blocks_are_parsed_once() -> None:
    block = "<table><tr><td>memo</td></tr></table>"
    html._rows.cache_clear()
    text = f"{block}\n\n{block}\n"
    a, b = tables(text)
    assert html._rows.cache_info().hits == 1
    assert (a.line, b.line) == (1, 3) and a.rows[0].cells[0].line == 1
    assert b.rows[0].cells[0].line == 3  # the shared rows are moved to each block's line


def _sample(upstream: Path, n: int) -> list[Path]:
    pages = sorted(p for p in (upstream / "github" / "hicann").rglob("aclnn*.md")
                   if "<table" in p.read_text(encoding="utf-8"))
    return random.Random(26).sample(pages, n)


def _both(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[list[html.Table], ...]:
    out = []
    for parser in ("lxml", "html.parser"):
        html._rows.cache_clear()
        monkeypatch.setattr(html, "PARSER", parser)
        out.append(tables(text, CANN_CELLS))
    html._rows.cache_clear()
    return tuple(out)


@pytest.mark.upstream
def test_lxml_and_html_parser_agree_on_well_formed_real_pages(
        upstream: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """On a seeded sample of real pages both parsers give the same rows and lines (all real
    pages: 24 of 2,042 with a <table> differ, every one broken markup: see below)."""
    for path in _sample(upstream, 40):
        fast, slow = _both(path.read_text(encoding="utf-8"), monkeypatch)
        assert fast == slow, path


@pytest.mark.upstream
def test_lxml_reads_broken_real_markup_as_a_browser(upstream: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Why lxml: it applies HTML's implied end tags and entity rules; Beautiful Soup's
    html.parser builder nests the next rows inside a cell left open and keeps ``&lt``."""
    base = upstream / "github" / "hicann"
    page = base / "ops-nn/v8.5.0/foreach/foreach_add_scalar/docs/aclnnForeachAddScalarV2.md"
    lxml_, parser_ = _both(page.read_text(encoding="utf-8"), monkeypatch)
    cells = [[c.text.strip() for c in r.cells] for t in lxml_ for r in t.rows]
    assert ["x或out中的Tensor的数据类型不一致。"] in cells  # a row of its own
    nested = [[c.text.strip() for c in r.cells] for t in parser_ for r in t.rows]
    assert ["x或out中的Tensor的数据类型不一致。"] not in nested
    page = base / "ops-math/v9.1.0/math/silent_check_v2/docs/aclnnSilentCheckV2.md"
    lxml_, parser_ = _both(page.read_text(encoding="utf-8"), monkeypatch)
    text = [c.text for t in lxml_ for r in t.rows for c in r.cells]
    assert any("0<beta1<1" in c for c in text)  # "0&ltbeta1&lt1" as a browser shows it
    assert not any("0<beta1<1" in c for t in parser_ for r in t.rows for c in [
        x.text for x in r.cells])
