"""What every command shares: the catalog and format options, and error handling."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated

import typer

from opcheck.core.errors import OpcheckError

EXIT_ERROR = 2

CatalogOpt = Annotated[
    Path | None,
    typer.Option("--catalog", help="Catalog file (default: built from the bundled snapshot).",
                 envvar="OPCHECK_CATALOG", show_default=False),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table | json")]


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn the library's errors into one line on stderr and exit code 2."""
    try:
        yield
    except OpcheckError as exc:
        typer.echo(f"opcheck: error: {exc}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
    except KeyboardInterrupt:
        typer.echo("opcheck: interrupted", err=True)
        raise typer.Exit(130) from None


