"""``atlas``: every architecture of the model libraries × every release, incrementally."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.checker.formats import ATLAS_FORMATS
from opcheck.cli.common import CatalogOpt, QuietOpt, emit_table, handle_errors


def atlas(
    libraries: Annotated[list[str] | None, typer.Argument(help="transformers, timm, torchvision, diffusers, zoo (default: those installed)", show_default=False)] = None,
    only: Annotated[str | None, typer.Option("--only", help="Only these architectures (NAME,NAME,...)", show_default=False)] = None,
    train: Annotated[bool, typer.Option("--train", help="Trace forward and backward")] = False,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Product the speed findings are judged on (910B, 310P, ...)", show_default=False)] = None,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Traces run at once")] = 2,
    fmt: Annotated[str, typer.Option("--format", "-f", help=ATLAS_FORMATS.help_text())] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the result to a file", show_default=False)] = None,
    store: Annotated[Path | None, typer.Option("--store", help="The atlas store (default: atlas.sqlite in the user cache)", show_default=False)] = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Check against the snapshot in DIR and store the rows of the libraries run in DIR/atlas.tsv", show_default=False)] = None,
    ray: Annotated[str | None, typer.Option("--ray", help="Run each trace as a Ray task: auto, or a cluster ADDRESS (pip install 'opcheck[cluster]')", show_default=False)] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds each sandboxed trace may take")] = 300.0,
    memory_mb: Annotated[int, typer.Option("--memory-mb", help="Memory limit of each sandboxed trace")] = 4096,
    catalog: CatalogOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Trace every architecture a model library ships (built from its config, no weights) and
    check it against every release; results are kept in the atlas store and only what changed
    is traced or checked again.

    Exit codes: 0 every architecture traced or was skipped with a reason, 1 some failed, 2 bad
    usage.
    """
    with handle_errors():
        from opcheck.checker import atlas as atlas_mod
        from opcheck.cli.common import ensure_writable
        from opcheck.core.errors import UsageError
        from opcheck.core.products import canonical_alias

        ATLAS_FORMATS.get(fmt)
        ensure_writable(output)
        if jobs < 1:
            raise UsageError("--jobs must be at least 1")
        product = ""
        if hardware:
            product = canonical_alias(hardware) or ""
            if not product:
                raise UsageError(f"unknown --hardware {hardware!r}")
        if snapshot is not None and catalog is not None:
            raise UsageError("--snapshot DIR checks against the catalog built from DIR's "
                             "snapshot: drop --catalog")
        libs = atlas_mod.installed(libraries)
        if not libs:
            raise UsageError("none of transformers, timm, torchvision, diffusers is installed "
                             "(name the zoo library to check opcheck's own models)")
        names = [n.strip() for n in (only or "").split(",") if n.strip()]
        tracer = _ray_tracer(ray, jobs, train, timeout, memory_mb) if ray else None
        settings = atlas_mod.Settings(train=train, product=product, jobs=jobs, timeout=timeout,
                                      memory_mb=memory_mb)
        result = _run(atlas_mod, libs, names, settings, store, snapshot, catalog, tracer, quiet)
        code = 1 if result.failed else 0
        _emit(result, fmt, output)
    raise typer.Exit(code)


def _ray_tracer(address: str, jobs: int, train: bool, timeout: float, memory_mb: int) -> Any:
    from opcheck.checker.atlas_ray import ray_tracer

    return ray_tracer(address, train=train, timeout=timeout, memory_mb=memory_mb)


def _run(atlas_mod: Any, libs: list[str], names: list[str], settings: Any, store: Path | None,
         snapshot: Path | None, catalog: Path | None, tracer: Any, quiet: bool) -> Any:
    from opcheck.cli.common import open_catalog, workaround_contributions
    from opcheck.cli.render import progress
    from opcheck.db.atlas import AtlasStore
    from opcheck.db.catalog import Catalog

    the_store = AtlasStore(store)
    with progress("atlas", quiet=quiet) as update:
        update("listing architectures")
        archs = [a for lib in libs for a in atlas_mod.architectures(lib, store=the_store)]
        archs = atlas_mod.select(archs, names)
        with tempfile.TemporaryDirectory(prefix="opcheck-atlas-") as tmp:
            if snapshot is not None:
                from opcheck.checker.zoo import catalog_from_snapshot

                path = catalog_from_snapshot(snapshot, Path(tmp) / "catalog.sqlite",
                                             attach=workaround_contributions().attach)
                cat = Catalog.load(open_catalog(path))
            else:
                cat = Catalog.load(open_catalog(catalog))
            try:
                result = atlas_mod.run_atlas(cat, the_store, archs, settings, tracer=tracer,
                                             progress=update)
            finally:
                cat.engine.dispose()
    if snapshot is not None:
        from opcheck.db.schema import ATLAS_FILE
        from opcheck.db.snapshot import read_rows, write_rows

        ran = {(a.library, a.name) for a in archs}
        kept = [r for r in read_rows(ATLAS_FILE, snapshot)
                if (r.library, r.architecture) not in ran]
        path = write_rows(ATLAS_FILE, kept + result.rows, snapshot)
        typer.echo(f"atlas rows written to {path}", err=True)
    typer.echo(f"atlas: {len(archs)} architecture(s): {result.traced} traced, "
               f"{result.rechecked} re-checked, {result.current} unchanged, "
               f"{len(result.skipped)} skipped, {len(result.failed)} failed "
               f"({result.seconds:.1f} s)", err=True)
    for line in result.failed:
        typer.echo(f"error: {line}", err=True)
    return result


def _emit(result: Any, fmt: str, output: Path | None) -> None:
    emit_table(result, fmt, output, ATLAS_FORMATS, render_table)


def render_table(result: Any, console: Any, width: int | None = 160) -> None:
    from opcheck.checker.atlas import summary
    from opcheck.cli.render import Column, Grid, draw_grid

    grid = Grid([Column("library"), Column("architecture"), Column("task"), Column("recorder"),
                 Column("newest", style=_cell_style), Column("YES since"),
                 Column("round trips"), Column("problem ops or reason")],
                title=f"opcheck atlas: {len(result.releases)} releases")
    for s in summary(result):
        grid.add(*(str(c) for c in s))
    draw_grid(grid, console, width)


ERROR_STYLE = "magenta"  # an architecture whose trace failed (no verdict)


def _cell_style(cell: str) -> str:
    return str(_styled(cell).style)


def _styled(cell: str) -> Any:
    """A verdict cell (``MAYBE (2)``, ``ERROR``, ``SKIPPED``) in its verdict's colour."""
    from rich.text import Text

    from opcheck.checker.atlas import ERROR
    from opcheck.core.vocab import Verdict

    word = cell.split(" ", 1)[0]
    try:
        style = ERROR_STYLE if word == ERROR else Verdict(word).cell_style
    except ValueError:
        style = ""
    return Text(cell, style=style)


def register(app: typer.Typer) -> None:
    app.command()(atlas)
