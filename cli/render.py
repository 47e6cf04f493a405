"""Small rendering helpers shared by the commands (rich markup only; no logic)."""

from __future__ import annotations

import errno
import functools
from typing import TYPE_CHECKING

from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from rich.console import Console


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


def wide_console() -> Console:
    """A console for tables: the terminal's width, or 140 columns when piped (CI logs, make)."""
    import sys

    return stdout_console() if sys.stdout.isatty() else stdout_console(width=140)


def render_report(report: object, console: object | None = None) -> None:
    """The terminal view of a Report (``--format table``): header, verdict, problems table,
    then notes."""
    from rich.console import Console
    from rich.table import Table

    from opcheck.checker.check import Report
    from opcheck.checker.formats.text import summary_line, target_line

    assert isinstance(report, Report)
    con: Console = console if isinstance(console, Console) else wide_console()
    con.print(f"[bold]opcheck[/bold] {report.model}  ·  {report.method} ({report.ir}, {report.mode})")
    con.print(f"target: {target_line(report)}")
    for w in report.warnings:
        con.print(f"[yellow]warning:[/yellow] {w}")
    verdict_style = report.verdict.style
    con.print(f"[{verdict_style}]{summary_line(report)}[/{verdict_style}]")
    problems = report.problems
    if problems:
        table = Table(show_edge=False, title="problems", title_justify="left")
        table.add_column("op", no_wrap=True)
        table.add_column("status", no_wrap=True)
        for col in ("calls", "dtypes", "where", "first NPU release", "workarounds"):
            table.add_column(col, overflow="fold")
        for f in problems:
            first = f.first_npu_release or (f"{f.first_npu_release_any}*" if f.first_npu_release_any else "none")
            where = "\n".join((f.locations or f.modules)[:2])
            status = status_text(f.status) + (" [yellow](restricted)[/yellow]" if f.restricted else "")
            table.add_row(f.op, status, str(f.count), ",".join(f.dtypes), where, first,
                          "\n".join(w.id for w in f.workarounds))
        con.print(table)
        if any(not f.first_npu_release and f.first_npu_release_any for f in problems):
            con.print("* only on another torch line")
        for f in problems:
            for r in f.restrictions:
                if r.violated:
                    what = (f"not supported on {r.hardware}" if r.unsupported
                            else f"{', '.join(r.dtypes_seen_outside)} outside: {r.text}")
                    con.print(f"restricted {f.op} via {r.api}: {what}  {r.link}")
    if report.matrix:
        m = report.matrix
        con.print(f"oldest release running the whole model on the NPU: "
                  f"[bold]{m['oldest_full_npu_release'] or 'none'}[/bold]")
    for n in report.notes:
        con.print(f"note: {n}")
