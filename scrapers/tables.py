"""GitHub-flavoured Markdown pipe tables, for every parser that reads tables out of Markdown.

A table is a run of lines starting with ``|`` whose second line is a delimiter row
(``| --- | :-: |``); a run without one is not a table (the caller decides what it is).
Cells are returned as written, only stripped: ``\\|`` and pipes inside backticks do not split a
row.  Interpreting cells (links, emphasis, HTML) is the caller's job, because the API docs
and the compatibility tables need different things from the same cell.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["PipeTable", "is_delimiter", "pipe_tables", "split_row", "table_at"]

_DELIMITER = re.compile(r"^\|?\s*:?-+:?\s*(\|\s*:?-+:?\s*)*\|?$")


@dataclass(frozen=True)
class PipeTable:
    header: tuple[str, ...]
    rows: tuple[tuple[int, tuple[str, ...]], ...]  # (1-based line, cells)
    line: int  # 1-based line of the header


def split_row(line: str) -> list[str]:
    """GFM pipe-row cells; ``\\|`` and pipes inside backticks do not split."""
    s = line.strip()
    if s.startswith("|"):
        s = s[1:]
    if s.endswith("|") and not s.endswith("\\|"):
        s = s[:-1]
    if "`" not in s and "\\" not in s:
        return [c.strip() for c in s.split("|")]
    cells: list[str] = []
    buf: list[str] = []
    in_code = False
    i = 0
    while i < len(s):
        ch = s[i]
        if ch == "\\" and i + 1 < len(s) and s[i + 1] == "|":
            buf.append("|")
            i += 2
            continue
        if ch == "`":
            in_code = not in_code
        if ch == "|" and not in_code:
            cells.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
        i += 1
    cells.append("".join(buf))
    return [c.strip() for c in cells]


def is_delimiter(line: str) -> bool:
    """The ``| --- | :-: |`` row under a table header."""
    return bool(_DELIMITER.match(line.strip()))


def table_at(lines: Sequence[str], i: int) -> tuple[PipeTable | None, int]:
    """The table starting at ``lines[i]`` (a line starting with ``|``), or None when the run
    of ``|`` lines there is not a table; and the index of the first line after the run."""
    j = i
    while j < len(lines) and lines[j].strip().startswith("|"):
        j += 1
    if j - i < 2 or not is_delimiter(lines[i + 1]):
        return None, j
    rows = tuple((k + 1, tuple(split_row(lines[k]))) for k in range(i + 2, j))
    return PipeTable(tuple(split_row(lines[i])), rows, i + 1), j


def pipe_tables(text: str) -> list[PipeTable]:
    """Every pipe table of a Markdown text, in order."""
    lines = text.splitlines()
    out: list[PipeTable] = []
    i = 0
    while i < len(lines):
        if not lines[i].strip().startswith("|"):
            i += 1
            continue
        table, i = table_at(lines, i)
        if table is not None:
            out.append(table)
    return out
