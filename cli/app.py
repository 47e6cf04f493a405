"""``opcheck`` entry point (placeholder until the commands land)."""

from __future__ import annotations

import typer

app = typer.Typer(no_args_is_help=True, add_completion=False)


@app.command()
def version() -> None:
    """Print the opcheck version."""
    from opcheck import __version__

    typer.echo(__version__)


def main() -> None:
    app()
