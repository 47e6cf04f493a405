"""``zoo``: kept as a thin alias of ``opcheck atlas zoo`` (one way to check many models)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from opcheck.checker.formats import ATLAS_FORMATS
from opcheck.cli.common import CatalogOpt, QuietOpt, handle_errors

NOTE = ("note: `opcheck zoo` is deprecated: it runs `opcheck atlas zoo` (same options; "
        "the models as --only)")


def zoo(
    models: Annotated[list[str] | None, typer.Argument(help="Zoo models to run (default: all)", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help=ATLAS_FORMATS.help_text())] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the result to a file", show_default=False)] = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Check against the snapshot in DIR and store the rows in DIR/atlas.tsv", show_default=False)] = None,
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds each sandboxed trace may take")] = 300.0,
    memory_mb: Annotated[int, typer.Option("--memory-mb", help="Memory limit of each sandboxed trace")] = 4096,
    jobs: Annotated[int, typer.Option("--jobs", "-j", help="Traces run at once")] = 2,
    catalog: CatalogOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Deprecated: `opcheck atlas zoo` (opcheck's nine well-known models × every release).

    Exit codes: 0 every model traced, 1 a model's trace failed, 2 bad usage.
    """
    specs = [m for m in models or [] if ":" in m]
    if specs:
        with handle_errors():
            from opcheck.core.errors import UsageError

            raise UsageError(f"{specs[0]}: a model of your own is `opcheck check --model "
                             f"{specs[0]}`; the zoo runs its own models only")
    from opcheck.cli.commands_atlas import atlas

    try:
        atlas(["zoo"], only=",".join(models) if models else None, train=False, hardware=None,
              jobs=jobs, fmt=fmt, output=output, store=None, snapshot=snapshot, ray=None,
              timeout=timeout, memory_mb=memory_mb, catalog=catalog, quiet=quiet)
    except typer.Exit as done:
        if done.exit_code != 2:  # bad usage stays one line
            typer.echo(NOTE, err=True)
        raise


def register(app: typer.Typer) -> None:
    app.command()(zoo)
