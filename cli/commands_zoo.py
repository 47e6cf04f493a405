"""``zoo``: well-known architectures × every release → a coverage table."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.checker.formats import ZOO_FORMATS
from opcheck.cli.common import CatalogOpt, QuietOpt, emit_table, handle_errors

ERROR_STYLE = "magenta"  # a model whose trace failed (no verdict)


def zoo(
    models: Annotated[list[str] | None, typer.Argument(help="Zoo models to run (default: all), or file.py:factory specs", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help=ZOO_FORMATS.help_text())] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the table to a file", show_default=False)] = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Check against the snapshot in DIR and store the rows in DIR/zoo.tsv (rows of the models run are replaced)", show_default=False)] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds each sandboxed trace may take")] = 300.0,
    memory_mb: Annotated[int, typer.Option("--memory-mb", help="Memory limit of each sandboxed trace")] = 4096,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Traces run at once")] = 2,
    catalog: CatalogOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Check well-known architectures (CNN, ViT, BERT, GPT-2, LLaMA, Whisper, LSTM, UNet, YOLO)
    against every release: model × release → verdict, CPU fallbacks, unsupported ops.

    Exit codes: 0 every model traced, 1 a model's trace failed (an ERROR row), 2 bad usage.
    """
    code = 0
    with handle_errors():
        from opcheck.checker import zoo as zoo_mod
        from opcheck.cli.common import open_catalog, workaround_contributions
        from opcheck.core.errors import UsageError
        from opcheck.db.catalog import Catalog

        ZOO_FORMATS.get(fmt)  # an unknown format is a usage error before anything is traced
        from opcheck.cli.common import ensure_writable

        ensure_writable(output)
        if jobs < 1:
            raise UsageError("--jobs must be at least 1")
        zoo_mod.specs(models)  # a bad name is a usage error before anything is traced
        if snapshot is not None and catalog is not None:
            raise UsageError("--snapshot DIR checks against the catalog built from DIR's "
                             "snapshot: drop --catalog")
        from opcheck.tracers.sandbox import shared_imports

        # the tracer template imports torch while the catalog loads
        with tempfile.TemporaryDirectory(prefix="opcheck-zoo-") as tmp, \
                shared_imports(zoo_mod.preload(models)):
            if snapshot is not None:
                path = zoo_mod.catalog_from_snapshot(
                    snapshot, Path(tmp) / "catalog.sqlite",
                    attach=workaround_contributions().attach)
                cat = Catalog.load(open_catalog(path))
            else:
                cat = Catalog.load(open_catalog(catalog))
            result = _run(zoo_mod, cat, models, timeout, memory_mb, jobs, quiet)
            cat.engine.dispose()
        from rich.console import Console
        from rich.text import Text

        err = Console(stderr=True)
        failed = [r for r in result.rows if r.verdict == zoo_mod.ERROR]
        for r in failed:
            err.print(Text.assemble(("error: ", "magenta"), f"{r.model}: {r.error}"))
        if snapshot is not None:
            from opcheck.db.snapshot import read_zoo, write_zoo

            path = write_zoo(zoo_mod.merge_rows(read_zoo(snapshot), result), snapshot)
            err.print(Text(f"zoo rows written to {path} (the catalog is rebuilt from it on "
                           "next use)"))
        code = 1 if failed else 0  # decided before writing: a closed stdout must not change it
        _emit(result, fmt, output)
    raise typer.Exit(code)


def _run(zoo_mod: Any, cat: Any, models: list[str] | None, timeout: float, memory_mb: int,
         jobs: int, quiet: bool = False) -> Any:
    from opcheck.cli.render import progress

    with progress("zoo", quiet=quiet) as update:
        return zoo_mod.run_zoo(cat, models, timeout=timeout, memory_mb=memory_mb, jobs=jobs,
                               progress=update)


def _emit(result: Any, fmt: str, output: Path | None) -> None:
    emit_table(result, fmt, output, ZOO_FORMATS, render_table)


def render_table(result: Any, console: Any, width: int | None = 160) -> None:
    """Releases (runs of identical results folded into one line) × models; ``width`` None:
    tab-separated (piped)."""
    from rich.text import Text

    from opcheck.checker import zoo as zoo_mod
    from opcheck.cli.render import Column, Grid, draw_grid

    grid = Grid([Column("torch_npu"), *(Column(m, style=_cell_style) for m in result.models)],
                title=f"opcheck zoo: {len(result.models)} models × "
                      f"{len(result.releases)} releases")
    for first, last, cells in zoo_mod.grouped(result):
        grid.add(first if first == last else f"{first} – {last}", *cells)
    draw_grid(grid, console, width)
    newest = result.releases[-1] if result.releases else ""
    for m in result.models:
        row = result.row(m, newest)
        if row is None:
            continue
        if row.verdict == zoo_mod.ERROR:
            console.print(Text(f"{m}: ERROR: {row.error}"))
        elif row.problem_ops:
            ops = ", ".join(p.replace("=", " ") for p in row.problem_ops.split(","))
            console.print(Text(f"{m} on {newest}: {ops}"))
    console.print(Text("cell: verdict (ops that fall back to the CPU, are unsupported or unknown); "
                       f"problem ops are listed for the default target, the newest release "
                       f"({newest})"))


def _cell_style(cell: str) -> str:
    return str(_styled(cell).style)


def _styled(cell: str) -> Any:
    """A zoo cell (``MAYBE (2)``, ``ERROR``, ``–``) in its verdict's colour."""
    from rich.text import Text

    from opcheck.checker.zoo import ERROR
    from opcheck.core.vocab import Verdict

    word = cell.split(" ", 1)[0]
    try:
        style = ERROR_STYLE if word == ERROR else Verdict(word).cell_style
    except ValueError:
        style = ""
    return Text(cell, style=style)


def register(app: typer.Typer) -> None:
    app.command()(zoo)
