"""``opcheck``: the Typer app. Commands parse options, call the library and render.

``opcheck MODEL`` is the main verb: a first argument that is not a sub-command is routed to
``check``. Library errors (``OpcheckError``) become one line on stderr and exit code 2.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

app = typer.Typer(
    name="opcheck",
    help="Will this PyTorch model run on an Ascend NPU, at full speed, on these versions?\n\n"
    "`opcheck MODEL` checks a model (same as `opcheck check MODEL`).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    # sub-commands inherit it: `opcheck check -h` works too
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from opcheck import __version__

        typer.echo(f"opcheck {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[bool, typer.Option(
        "--version", "-V", callback=_print_version, is_eager=True,
        help="Print opcheck's version and exit.")] = False,
) -> None:
    # Everything a command prints reaches the terminal without control characters from its
    # input (main installs it too; this covers a command invoked through a test runner).
    from opcheck.cli import config, safeout

    safeout.install()
    # [tool.opcheck] in the nearest pyproject.toml: the defaults of `check` and `run`, which
    # their own options override (Click's default_map)

    if ctx.invoked_subcommand not in config.COMMANDS:
        return  # the other commands take none of it (and a bad table must not stop them)
    from opcheck.cli.common import handle_errors

    with handle_errors():
        found = config.load()
    if found.values:
        ctx.default_map = {**(ctx.default_map or {}), **found.default_map()}
        # said once on stderr: a report's "asked for with --torch-npu" may come from here
        typer.echo(f"note: defaults from [tool.opcheck] in {found.path}", err=True)


def _register() -> None:
    # Command modules import their heavy dependencies lazily, so registering them is cheap
    # and `opcheck --help` never imports torch or the database layer.
    from opcheck.cli import (
        commands_atlas,
        commands_catalog,
        commands_check,
        commands_data,
        commands_env,
        commands_run,
        commands_serve,
        commands_zoo,
    )

    for module in (commands_catalog, commands_check, commands_env, commands_data, commands_serve,
                   commands_zoo, commands_atlas, commands_run):
        module.register(app)


def command_names() -> set[str]:
    names = set()
    for c in app.registered_commands:
        names.add(c.name or (c.callback.__name__.replace("_", "-") if c.callback else ""))
    for g in app.registered_groups:
        if g.name:
            names.add(g.name)
    return names


def route(argv: list[str]) -> list[str]:
    """``opcheck MODEL [opts]`` → ``opcheck check MODEL [opts]``."""
    if not argv:
        return argv
    first = argv[0]
    if first in ("--help", "-h", "--version", "-V"):
        return argv
    if first.startswith("-") or first not in command_names():
        return ["check", *argv]
    return argv


_register()


def main() -> None:
    from opcheck.cli import safeout

    safeout.install()  # before Click, whose usage errors quote the arguments
    try:
        app(args=route(sys.argv[1:]), prog_name="opcheck")
    finally:
        # Output still buffered when the reader of stdout has gone (`| head -1`) would fail
        # at exit with "Exception ignored" and exit code 120: flush it here, quietly.
        try:
            sys.stdout.flush()
        except BrokenPipeError:
            from opcheck.cli.common import quiet_stdout

            quiet_stdout()
