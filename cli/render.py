"""Rendering shared by the commands: tables that adapt to where they are written, statuses in
their colours (rich markup only; no logic).

A table (``Grid``) is drawn one of three ways: on a terminal at least ``COMPACT_BELOW`` columns
wide, as columns whose free-text cells wrap at spaces while identifiers keep their full width;
on a narrower terminal, as one line of identifiers per row with the rest on an indented line
below; and when stdout is no terminal (a pipe, a file), as tab-separated lines with a header,
nothing cut, so ``grep``/``cut``/``awk`` see every id whole. ``--format csv`` writes the same
rows as CSV.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import functools
import io
import os
import sys
import textwrap
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from rich.console import Console
    from rich.text import Text

COMPACT_BELOW = 100  # terminal columns under which tables switch to the compact layout
WIDTH_ENV = "OPCHECK_WIDTH"  # lay tables out for this width even when piped (0: piped)


def status_text(status: str) -> str:
    """A status in its colour (``Status.style``); text that is no status stays plain."""
    try:
        style = Status(status).style
    except ValueError:
        return status
    return f"[{style}]{status}[/{style}]"


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class StdoutConsole(Console):
        def on_broken_pipe(self) -> None:
            # rich would exit 1, the code for findings: let the command's handle_errors end
            # it quietly with the exit code the command decided
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")

    return StdoutConsole


def stdout_console(width: int | None = None) -> Console:
    """A console on stdout, whose reader may close it early (``| head -1``)."""
    return _console_class()(width=width)


def terminal_width() -> int | None:
    """The width to lay tables out for: the terminal's, or None when stdout is no terminal
    (then tables are tab-separated and nothing is cut). ``$OPCHECK_WIDTH`` overrides it
    (``0``: as if piped), for screenshots and tests."""
    forced = os.environ.get(WIDTH_ENV, "").strip()
    if forced.isdigit():
        return int(forced) or None
    try:
        if not sys.stdout.isatty():
            return None
    except ValueError:  # stdout closed
        return None
    import shutil

    return shutil.get_terminal_size((120, 24)).columns


def wide_console() -> Console:
    """A console for lines around tables: the terminal's width; when piped, lines are never
    wrapped (a wrapped id could not be found with grep)."""
    width = terminal_width()
    if width is None:
        con = stdout_console(width=10_000)
        con.soft_wrap = True
        return con
    return stdout_console(width=width)


@dataclass(frozen=True)
class Column:
    """One column of a ``Grid``.

    ``wrap``: free text that may wrap at spaces; otherwise the cells are identifiers (op
    names, releases, workaround ids), never split: a cell holding several has one per line.
    ``compact``: kept as a column in the compact layout; otherwise shown under the row as
    ``name: value``. ``style``: the rich style of a cell's text, on a terminal only.
    """

    name: str
    wrap: bool = False
    compact: bool = True
    style: Callable[[str], str] | None = None


@dataclass
class Grid:
    """A table as plain strings: the one shape every layout and CSV are drawn from."""

    columns: list[Column]
    rows: list[list[str]] = field(default_factory=list)
    title: str = ""

    def add(self, *cells: str) -> None:
        if len(cells) != len(self.columns):
            raise ValueError(f"{len(cells)} cells for {len(self.columns)} columns")
        self.rows.append([c or "" for c in cells])


def status_style(status: str) -> str:
    try:
        return Status(status).style
    except ValueError:
        return ""


def _one_line(cell: str) -> str:
    # several ids in one cell stay on one line, comma-separated; a tab would shift columns
    return ", ".join(x for x in cell.replace("\t", " ").split("\n") if x)


def grid_tsv(grid: Grid) -> str:
    lines = ["\t".join(c.name for c in grid.columns)]
    lines += ["\t".join(_one_line(c) for c in row) for row in grid.rows]
    return "\n".join(lines) + "\n"


def grid_csv(grid: Grid) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([c.name for c in grid.columns])
    w.writerows([[_one_line(c) for c in row] for row in grid.rows])
    return buf.getvalue()


def _id_width(grid: Grid, i: int) -> int:
    col = grid.columns[i]
    return max([len(col.name), *(len(line) for row in grid.rows for line in row[i].split("\n"))])


_MIN_TEXT = 12  # narrowest a wrapping column may get before the compact layout is used
_GAP = 3  # padding and rule between two columns


def fits_wide(grid: Grid, width: int) -> bool:
    if width < COMPACT_BELOW:
        return False
    need = sum(_MIN_TEXT if c.wrap else _id_width(grid, i) for i, c in enumerate(grid.columns))
    return need + _GAP * (len(grid.columns) - 1) <= width


def _cell(text: str, col: Column) -> Text:
    from rich.text import Text

    return Text(text, style=col.style(text) if col.style and text else "")


def _draw_wide(grid: Grid, con: Console) -> None:
    from rich.table import Table
    from rich.text import Text

    if grid.title:  # a line of its own: a table title wraps at the table's width
        con.print(Text(grid.title, style="italic"))
    table = Table(show_edge=False, header_style="bold")
    for i, c in enumerate(grid.columns):
        head = Text(c.name)  # a name is no rich markup or emoji code (file.py:x)
        if c.wrap:
            table.add_column(head, overflow="fold", min_width=_MIN_TEXT)
        else:
            w = _id_width(grid, i)
            table.add_column(head, no_wrap=True, min_width=w, max_width=w)
    for row in grid.rows:
        table.add_row(*(_cell(v, c) for v, c in zip(row, grid.columns, strict=True)))
    con.print(table)


def _draw_compact(grid: Grid, con: Console, width: int) -> None:
    from rich.text import Text

    main = [i for i, c in enumerate(grid.columns) if c.compact]
    rest = [i for i, c in enumerate(grid.columns) if not c.compact]
    widths = {i: max([len(grid.columns[i].name),
                      *(len(_one_line(r[i])) for r in grid.rows)]) for i in main}
    if grid.title:
        con.print(Text(grid.title, style="italic"))
    head = Text("  ".join(grid.columns[i].name.ljust(widths[i]) for i in main).rstrip(),
                style="bold")
    con.print(head, no_wrap=True, overflow="ignore", crop=False)
    for row in grid.rows:
        line = Text()
        for n, i in enumerate(main):
            value = _one_line(row[i])
            col = grid.columns[i]
            line.append(value, style=col.style(value) if col.style and value else "")
            if n < len(main) - 1:
                line.append(" " * (widths[i] - len(value) + 2))
        # ids are never split: a line longer than the terminal runs on rather than folds
        con.print(line, no_wrap=True, overflow="ignore", crop=False)
        extra = [f"{grid.columns[i].name}: {_one_line(row[i])}" for i in rest if row[i]]
        if extra:
            # wrapped at spaces only: an id longer than the line runs on rather than splits
            text = textwrap.fill(" · ".join(extra), width=max(width - 1, 20),
                                 initial_indent="    ", subsequent_indent="    ",
                                 break_long_words=False, break_on_hyphens=False)
            con.print(Text(text, style="dim"), no_wrap=True, overflow="ignore", crop=False)


def draw_grid(grid: Grid, con: Console, width: int | None) -> None:
    """Draw ``grid`` for a terminal ``width`` columns wide, or tab-separated when None."""
    if width is None:
        con.file.write(grid_tsv(grid))
        return
    if fits_wide(grid, width):
        _draw_wide(grid, con)
    else:
        _draw_compact(grid, con, width)


def show_grid(grid: Grid, fmt: str = "table", *, file: TextIO | None = None,
              width: int | None = -1) -> None:
    """Write ``grid`` to stdout (or ``file``) as ``fmt`` (table | csv); ``width`` -1: the
    terminal's (``terminal_width``)."""
    out = file or sys.stdout
    if fmt == "csv":
        out.write(grid_csv(grid))
        return
    w = terminal_width() if width == -1 else width
    if w is None:
        out.write(grid_tsv(grid))
        return
    con = stdout_console(width=w) if file is None else _console_class()(file=file, width=w)
    draw_grid(grid, con, w)


def fit_text(text: str, width: int | None) -> str:
    """Plain text for a terminal ``width`` wide: a longer line is wrapped at spaces, its
    continuation indented under it (an id longer than the line runs on, never splits); piped
    (None), unchanged."""
    if width is None:
        return text
    out = []
    for line in text.split("\n"):
        if len(line) <= width:
            out.append(line)
            continue
        indent = " " * (len(line) - len(line.lstrip(" ")) + 4)
        out += textwrap.wrap(line, width=max(width - 1, 20), subsequent_indent=indent,
                             break_long_words=False, break_on_hyphens=False) or [line]
    return "\n".join(out)


def console_for(file: TextIO, width: int | None) -> Console:
    """A console writing to ``file`` at ``width`` (None: piped, lines never wrapped)."""
    con = _console_class()(file=file, width=width or 10_000)
    if width is None:
        con.soft_wrap = True
    return con


def report_grid(report: object, *, all_ops: bool = False) -> Grid:
    """The ops of a Report (its problems, or every op) as a table."""
    from opcheck.checker.check import Report
    from opcheck.checker.formats.text import relative_location, report_root
    from opcheck.checker.kernel_path import brief

    assert isinstance(report, Report)
    root = report_root(report)
    shown = report.ops if all_ops else report.problems
    # the kernel path per product, a column of its own (free text under the row when narrow:
    # in the status cell it made the row 100+ characters wide)
    paths = any(f.path for f in shown)
    grid = Grid([
        Column("op"), Column("status", style=status_style), Column("calls"),
        *([Column("kernel path", wrap=True, compact=False)] if paths else []),
        Column("dtypes", wrap=True, compact=False), Column("where", wrap=True, compact=False),
        Column("first NPU release", compact=False), Column("workarounds", compact=False),
    ], title="ops" if all_ops else "problems")
    for f in shown:
        first = f.first_npu_release or (f"{f.first_npu_release_any}*" if f.first_npu_release_any
                                        else "none")
        if f.status.runs_on_npu and not f.restricted:
            first = ""
        where = "\n".join(relative_location(x, root) for x in (f.locations or f.modules)[:2])
        grid.add(f.op, f.status.value + (" (restricted)" if f.restricted else ""),
                 str(f.count), *([brief(f.path) if f.path else ""] if paths else []),
                 " ".join(f.dtypes), where, first, "\n".join(w.id for w in f.workarounds))
    return grid


def matrix_grid(matrix: dict[str, object]) -> tuple[Grid, list[str]]:
    """The ``--all-releases`` matrix: ops × groups of consecutive releases with identical
    columns (``G1`` …, named in the legend lines returned with it)."""
    from opcheck.checker.formats.text import (
        first_full_npu,
        matrix_cell,
        matrix_groups,
        matrix_rows,
    )

    groups = matrix_groups(matrix)
    shown, clean = matrix_rows(groups)
    star = first_full_npu(groups)
    names = [f"G{i + 1}" + ("*" if i == star else "") for i in range(len(groups))]
    grid = Grid([Column("op"), *(Column(n, style=_matrix_style) for n in names)],
                title="ops × releases (groups of releases with the same statuses)")
    for op in shown:
        grid.add(op, *(matrix_cell(g.statuses[op]) for g in groups))
    legend = [f"{n}: {g.label} ({len(g.releases)} release{'s' if len(g.releases) > 1 else ''})"
              for n, g in zip(names, groups, strict=True)]
    legend.append(f"{clean} other ops run on the NPU in every release that receives them; "
                  "cells: npu, comp(osite), cpu (fallback), NO (unsupported), ? (unknown), "
                  "– (not received)")
    return grid, legend


def _draw_narrow_matrix(report: object, con: Console, width: int | None) -> bool:
    """The ``--all-releases`` matrix one op at a time, when its group columns do not fit the
    terminal (False: they fit, or the output is piped; the caller draws the table)."""
    from opcheck.checker.check import Report

    assert isinstance(report, Report) and report.matrix is not None
    if width is None or _grid_width(matrix_grid(report.matrix)[0]) <= width:
        return False
    _draw_op_runs(report.matrix, con, width, target=str(report.target.get("torch_npu", "")))
    oldest = report.matrix.get("oldest_full_npu_release") or "none"
    con.print(f"oldest release running the whole model on the NPU: [bold]{oldest}[/bold]")
    return True


def _grid_width(grid: Grid) -> int:
    """The width of the matrix drawn as columns (two spaces between columns)."""
    return sum(_id_width(grid, i) for i in range(len(grid.columns))) + 2 * (len(grid.columns) - 1)


def _draw_op_runs(matrix: dict[str, object], con: Console, width: int, *,
                  target: str = "") -> None:
    """The matrix one op at a time when its columns do not fit the terminal: each op that
    is not on the NPU somewhere, then its statuses over runs of consecutive releases."""
    from rich.text import Text

    from opcheck.checker.formats.text import matrix_groups, matrix_rows, op_runs

    shown, clean = matrix_rows(matrix_groups(matrix))
    for line in textwrap.wrap("every release, per op (runs of consecutive releases with one "
                              "status):", width=max(width - 1, 20)):
        con.print(Text(line, style="italic"), no_wrap=True, overflow="ignore", crop=False)
    for op, runs in op_runs(matrix, shown).items():
        con.print(Text(op, style="bold"), no_wrap=True, overflow="ignore", crop=False)
        cell_w = max(len(_run_word(r.status)) for r in runs)
        for r in runs:
            word = _run_word(r.status)
            n = len(r.releases)
            text = Text("  ")
            text.append(word.ljust(cell_w), style=_matrix_style(word) if r.status else "dim")
            label = (f"  {r.label}" + (f" ({n} releases)" if n > 1 else "")
                     + ("  ◀ target" if target in r.releases else ""))
            for i, part in enumerate(textwrap.wrap(label, width=max(width - 3 - cell_w, 20),
                                                   break_long_words=False,
                                                   break_on_hyphens=False)):
                if i:
                    text = Text(" " * (2 + cell_w) + "  " + part.strip())
                else:
                    text.append(part)
                con.print(text, no_wrap=True, overflow="ignore", crop=False)
    legend = (f"{clean} other ops run on the NPU in every release that receives them. "
              "npu, comp(osite), cpu (fallback), NO (unsupported), ? (unknown), "
              "– (the release does not receive the op)")
    for line in textwrap.wrap(legend, width=width - 1, break_long_words=False):
        con.print(Text(line, style="dim"), no_wrap=True, overflow="ignore", crop=False)


def _run_word(status: str) -> str:
    from opcheck.checker.formats.text import matrix_cell

    return matrix_cell(status)


def _matrix_style(cell: str) -> str:
    from opcheck.checker.formats.text import MATRIX_CELL

    for status, word in MATRIX_CELL.items():
        if word == cell:
            return status.style
    return ""


def _print_fixes(report: object, con: Console, width: int | None) -> None:
    """Each workaround the problems name: the fix's first line and the command printing it
    whole, wrapped to the terminal (never when piped: an id must stay greppable)."""
    from rich.text import Text

    from opcheck.checker.check import Report
    from opcheck.checker.formats.text import fix_hints

    assert isinstance(report, Report)
    hints = fix_hints(report)
    if not hints:
        return
    head = ("fixes (`opcheck workaround show ID` prints one whole, `opcheck fix OP` those "
            "for an op):")
    for line in [head] if width is None else textwrap.wrap(head, width=max(width - 1, 20)):
        con.print(Text(line, style="bold"), no_wrap=True, overflow="ignore", crop=False)
    for h in hints:
        ops = ", ".join(h.ops[:3]) + (f" +{len(h.ops) - 3}" if len(h.ops) > 3 else "")
        text = f"{h.id} ({ops}): {h.summary}"
        lines = ([text] if width is None else textwrap.wrap(
            text, width=max(width - 1, 20), initial_indent="  ", subsequent_indent="    ",
            break_long_words=False, break_on_hyphens=False))
        for line in lines:
            con.print(Text(line), no_wrap=True, overflow="ignore", crop=False)


def render_report(report: object, console: object | None = None, *,
                  width: int | None = -1, all_ops: bool = False) -> None:
    """The terminal view of a Report (``--format table``): header, verdict, the problems
    table (every op with ``all_ops``), the release matrix when there is one, then notes.
    ``width``: the layout's width (-1: the terminal's; None: piped, tables tab-separated)."""
    from rich.console import Console
    from rich.markup import escape

    from opcheck.checker.check import Report
    from opcheck.checker.formats.text import summary_line, target_line

    assert isinstance(report, Report)
    w = terminal_width() if width == -1 else width
    con: Console = (console if isinstance(console, Console)
                    else wide_console() if width == -1 else console_for(sys.stdout, w))
    con.print(f"[bold]opcheck[/bold] {escape(report.model)}  ·  "
              f"{report.method} ({report.ir}, {report.mode})")
    con.print(f"target: {escape(target_line(report))}")
    for warn in report.warnings:
        con.print(f"[yellow]warning:[/yellow] {escape(warn)}")
    verdict_style = report.verdict.style
    con.print(f"[{verdict_style}]{summary_line(report)}[/{verdict_style}]")
    problems = report.problems
    if problems or all_ops:
        draw_grid(report_grid(report, all_ops=all_ops), con, w)
        if any(not f.first_npu_release and f.first_npu_release_any for f in problems):
            con.print("* only on another torch line")
        for f in problems:
            for r in f.restrictions:
                if r.violated:
                    # hccl's and the aclnn contract's are their own sentences (what, where, why)
                    what = (r.text if r.unsupported and r.source in ("hccl", "cann")
                            else f"not supported on {r.hardware}" if r.unsupported
                            else f"{', '.join(r.dtypes_seen_outside)} outside: {r.text}")
                    con.print(f"restricted {f.op} via {r.api}: {escape(what)}  {r.link}")
        _print_fixes(report, con, w)
    if report.matrix and not _draw_narrow_matrix(report, con, w):
        m = report.matrix
        grid, legend = matrix_grid(m)
        if grid.rows:
            draw_grid(grid, con, w)
        for line in legend:
            for part in [line] if w is None else textwrap.wrap(
                    line, width=w - 1, subsequent_indent="  ", break_long_words=False):
                con.print(escape(part), style="dim", no_wrap=True, overflow="ignore", crop=False)
        oldest = m.get("oldest_full_npu_release") or "none"
        con.print(f"oldest release running the whole model on the NPU: [bold]{oldest}[/bold]"
                  + (" (G*)" if oldest != "none" else ""))
    if report.speed is not None:
        _render_speed(report.speed, con)
    for n in report.notes:
        con.print(f"note: {escape(n)}")


def _render_speed(speed: dict[str, Any], con: Any) -> None:
    """The speed section: each finding on one line, then the fused-op tips."""
    from rich.markup import escape

    from opcheck.checker.speed import speed_lines, tip_lines

    lines, tips = speed_lines(speed), tip_lines(speed)
    if not lines and not tips:
        con.print("[green]speed: no host syncs, AI CPU calls, CPU round trips or per-tensor "
                  "foreach paths found[/green]")
        return
    for line in lines:
        con.print(f"[yellow]speed:[/yellow] {escape(line)}")
    for line in tips:
        con.print(f"[cyan]tip:[/cyan] {escape(line)}")


@contextlib.contextmanager
def progress(label: str, *, quiet: bool = False) -> Iterator[Callable[[str], None]]:
    """A spinner with the elapsed time on stderr while slow work runs (a sync, the zoo, a
    trace); yields ``update(message)``. Only on a terminal and without ``--quiet``: a log or a
    pipe gets no spinner frames."""
    try:
        shown = not quiet and sys.stderr.isatty()
    except ValueError:  # stderr closed
        shown = False
    if not shown:
        yield lambda _message: None
        return
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import Progress, SpinnerColumn, TextColumn, TimeElapsedColumn

    with Progress(SpinnerColumn(), TextColumn("{task.description}"), TimeElapsedColumn(),
                  console=Console(stderr=True), transient=True) as bar:
        task = bar.add_task(escape(label), total=None)

        def update(message: str) -> None:
            bar.update(task, description=escape(f"{label}: {message}" if message else label))

        yield update


def print_entry(d: object) -> None:
    """One workaround entry whole (``opcheck workaround show``, ``opcheck fix``): plain text,
    the fix and the rewrite code as written (Markdown, code blocks copyable)."""
    import textwrap as tw

    import typer

    from opcheck.contrib.workaround_catalog import EntryDetail

    assert isinstance(d, EntryDetail)
    ranges = ", ".join(
        f"{r.get('min') or 'any'} – {r.get('max') or 'newest'}" for r in d.releases) or "every release"
    lines = [f"{d.id}: {d.title}", f"kind: {d.kind}"]
    if d.ops:
        lines.append(f"ops: {', '.join(d.ops)}")
    lines.append(f"applies to: torch_npu {ranges}; hardware: {', '.join(d.hardware) or 'all'}")
    if d.fixed_in or d.cann_min:
        lines.append("fixed in: " + ", ".join(x for x in (
            f"torch_npu {d.fixed_in}" if d.fixed_in else "",
            f"CANN {d.cann_min}" if d.cann_min else "") if x))
    def fill(text: str) -> str:  # an id (isin-tensor-tensor-rewrite) is never split
        return tw.indent(tw.fill(text.replace("\n", " "), 88, break_on_hyphens=False,
                                 break_long_words=False), "  ")

    lines += ["", "problem:", fill(d.problem),
              "", "fix:", tw.indent(d.fix.rstrip(), "  ")]
    if d.env:
        lines += ["", "environment:", *(f"  export {k}={v}" for k, v in d.env.items())]
    if d.rewrite_code:
        lines += ["", f"rewrite of {d.rewrite_api} (replacement() takes its arguments):",
                  tw.indent(d.rewrite_code.rstrip(), "  ")]
    lines += ["", "verification:", fill(d.verification),
              "sources:", *(f"  {s}" for s in d.sources)]
    if d.path:
        lines.append(f"entry: {d.path}")
    typer.echo("\n".join(lines))
