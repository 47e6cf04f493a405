"""The one Markdown pipe-table reader the API docs and the compatibility tables share."""

from __future__ import annotations

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import apidocs, releases
from opcheck.scrapers.rows import Origin
from opcheck.scrapers.tables import is_delimiter, pipe_tables, split_row, table_at


@pytest.mark.parametrize(
    ("line", "cells"),
    [
        ("| a | b |", ["a", "b"]),
        ("a | b", ["a", "b"]),
        ("| a |  |", ["a", ""]),
        (r"| x \| y | z |", ["x | y", "z"]),  # an escaped pipe is text
        ("| `a|b` | c |", ["`a|b`", "c"]),  # so is a pipe in code
        (r"| a \|", [r"a |"]),  # an escaped closing pipe is not a border
    ],
)
def test_split_row(line: str, cells: list[str]) -> None:
    assert split_row(line) == cells


@pytest.mark.parametrize(
    ("line", "expected"),
    [("|---|---|", True), ("| :-: | --: |", True), ("-|-", True), ("| a | - |", False),
     ("|   |", False), ("| -- x |", False)],
)
def test_is_delimiter(line: str, expected: bool) -> None:
    assert is_delimiter(line) is expected


def test_tables_with_lines_and_runs_that_are_not_tables() -> None:
    text = (
        "# t\n"
        "| A | B |\n"  # line 2
        "|---|---|\n"
        "| 1 | 2 |\n"
        "| 3 |\n"  # short rows are the caller's business
        "\n"
        "| not | a table |\n"  # no delimiter under it
        "| x | y |\n"
        "\n"
        "| C |\n"  # line 10
        "| - |\n"
    )
    tables = pipe_tables(text)
    assert [(t.line, t.header, t.rows) for t in tables] == [
        (2, ("A", "B"), ((4, ("1", "2")), (5, ("3",)))),
        (10, ("C",), ()),
    ]
    lines = text.splitlines()
    assert table_at(lines, 6) == (None, 8)  # the run is skipped as a whole


def test_both_parsers_read_escaped_pipes_the_same_way() -> None:
    """One table reader: a cell with an escaped pipe is one cell for both parsers."""
    compat = (
        "| PyTorch版本 | Python版本 |\n|---|---|\n"
        r"| 2.1.0 | Python3.8.x, Python3.9.x \| Python3.10.x |" "\n"
    )
    _, pythons = releases.parse_compat(compat, origin=Origin("c.md"))
    assert pythons[0].pythons == ("3.8", "3.9", "3.10")
    doc = (
        "| API名称 | 是否支持 | 限制与说明 |\n|---|---|---|\n"
        r"| torch.abs | 是 | 支持fp16 \| fp32 |" "\n"
    )
    (row,) = apidocs.parse_markdown(doc, origin=Origin("docs/zh/native_apis/pytorch_2-1-0/x.md"))
    assert (row.api, row.restriction, row.line) == ("torch.abs", "支持fp16 | fp32", 3)


def test_a_short_compat_row_still_names_file_and_line() -> None:
    text = "| PyTorch版本 | Python版本 |\n|---|---|\n| 2.1.0 |\n"
    with pytest.raises(ScrapeError, match=r"^c\.md:3: table row has 1 cells, header has 2$"):
        releases.parse_compat(text, origin=Origin("c.md"))
