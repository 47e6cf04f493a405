"""What every command shares: the catalog and format options, opening the catalog, and error
handling."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TextIO

import typer

from opcheck.core.errors import OpcheckError, UsageError

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from opcheck.db.catalog import Catalog
    from opcheck.db.data import CatalogData
    from opcheck.db.engine import Contributions

EXIT_ERROR = 2

CatalogOpt = Annotated[
    Path | None,
    typer.Option("--catalog", help="Catalog file (default: built from the bundled snapshot).",
                 envvar="OPCHECK_CATALOG", show_default=False),
]
FormatOpt = Annotated[str, typer.Option("--format", "-f", help="table | json")]
QuietOpt = Annotated[bool, typer.Option("--quiet", "-q", help="No progress display on stderr "
                                         "(it shows only on a terminal anyway)")]


@contextmanager
def handle_errors() -> Iterator[None]:
    """Turn the library's errors, and files that cannot be read or written, into one line on
    stderr and exit code 2 (1 means findings, so an I/O failure must never end with it).

    A reader that closes our stdout early (``opcheck ops.json | head -1``) is no error: the
    rest of the output is dropped and the command ends with the exit code it had decided
    before writing (commands decide it before they write)."""
    try:
        yield
    except BrokenPipeError:
        quiet_stdout()
    except OpcheckError as exc:
        typer.echo(f"opcheck: error: {exc}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
    except OSError as exc:
        typer.echo(f"opcheck: error: {describe_os_error(exc)}", err=True)
        raise typer.Exit(EXIT_ERROR) from None
    except KeyboardInterrupt:
        typer.echo("opcheck: interrupted", err=True)
        raise typer.Exit(130) from None


def describe_os_error(exc: OSError) -> str:
    """``cannot write out/r.json: No such file or directory``: one line, no errno noise."""
    reason = exc.strerror or str(exc) or type(exc).__name__
    return f"{exc.filename}: {reason}" if exc.filename else reason


def quiet_stdout() -> None:
    """The reader of stdout went away: point fd 1 at /dev/null so what is still buffered, and
    the flush at exit, cannot raise again (Python would print "Exception ignored" and exit
    120)."""
    try:
        fd = os.open(os.devnull, os.O_WRONLY)
        try:
            os.dup2(fd, sys.stdout.fileno())
        finally:
            os.close(fd)
    except (OSError, ValueError):  # no real file descriptor (a test runner's buffer)
        pass


def ensure_writable(path: Path | None) -> None:
    """Refuse an ``--output`` path that cannot be written before any work is done (a zoo run
    takes minutes); the write itself still reports what this cannot foresee."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"cannot write {path}: it is a directory")
    parent = path.parent
    if not parent.is_dir():
        raise UsageError(f"cannot write {path}: no directory {parent}")
    if not os.access(parent, os.W_OK) and not (path.exists() and os.access(path, os.W_OK)):
        raise UsageError(f"cannot write {path}: permission denied")


def write_output(path: Path, text: str) -> None:
    """Write a command's ``--output`` file; a path that cannot be written (missing folder, a
    directory, /proc, a full disk) is a usage error, one line and exit 2, and leaves the
    previous file as it was."""
    with output_file(path) as fh:
        fh.write(text)


@contextmanager
def output_file(path: Path) -> Iterator[TextIO]:
    """``open(path, "w")`` for renderers that stream (rich consoles), failing as
    :func:`write_output` does. A regular file is written beside itself and renamed over the
    old one once whole: a full disk must not leave half a report where the last one was."""
    special = path.exists() and not path.is_file()  # /dev/stdout, a FIFO: no rename possible
    target = path if special else path.with_name(f".{path.name}.opcheck-{os.getpid()}.tmp")
    try:
        try:
            with target.open("w", encoding="utf-8") as fh:
                yield fh
                fh.flush()
                if not special:
                    os.fsync(fh.fileno())
            if not special:
                os.replace(target, path)
        finally:
            if not special:
                target.unlink(missing_ok=True)
    except OSError as exc:  # opening, writing, the flush at close, or the rename
        raise UsageError(f"cannot write {path}: {exc.strerror or exc}") from None


def _workarounds_digest() -> str:
    from opcheck.contrib.workaround_catalog import folder_digest

    return folder_digest()


def _attach_workarounds(data: CatalogData) -> None:
    from opcheck.contrib.workaround_catalog import attach

    attach(data)


def workaround_contributions() -> Contributions:
    """The contributed workarounds (data/workarounds/ and op-plugin's deprecations), which the
    catalog built on first use holds: storage does not import contrib, so they are handed in.
    Imported on use only: most commands get a catalog that exists already."""
    from opcheck.db.engine import Contributions

    return Contributions(digest=_workarounds_digest, attach=_attach_workarounds)


def resolve_catalog_path(explicit: Path | None = None) -> Path:
    """The catalog file a command uses (``opcheck.db.engine.resolve_catalog_path``, with the
    contributed workarounds in a catalog built on first use)."""
    from opcheck.db import engine

    return engine.resolve_catalog_path(explicit, contributions=workaround_contributions())


def open_catalog(explicit: Path | None = None) -> Engine:
    """A read-only engine on the catalog a command uses, its schema checked."""
    from opcheck.db import engine

    return engine.open_catalog(explicit, contributions=workaround_contributions())


def release_arg(cat: Catalog, text: str) -> str:
    """A release as typed (``2.6``, ``v2.6.0.post5``) → the catalog's release, the choice
    noted on stderr (``opcheck.core.versions.expand_release``)."""
    from opcheck.core.versions import expand_release

    # a release without a kernel list is taken as typed: the command refuses it by name
    release, note = expand_release(text, [r.torch_npu for r in cat.releases if r.has_kernels],
                                   exact=[r.torch_npu for r in cat.releases])
    if note:
        typer.echo(f"note: {note}", err=True)
    return release


def emit_table(result: Any, fmt: str, output: Path | None, formats: Any,
               render_table: Callable[[Any, Any, int | None], None]) -> None:
    """A many-models result (``zoo``, ``atlas``): the coloured table drawn by
    ``render_table`` for a terminal format (160 columns into a file), else the format's text."""
    if formats.get(fmt).terminal:
        from rich.console import Console

        from opcheck.cli.render import terminal_width, wide_console

        if output is not None:
            with output_file(output) as fh:
                render_table(result, Console(file=fh, width=160), 160)
        else:
            render_table(result, wide_console(), terminal_width())
        return
    text = formats.render(fmt, result)
    if output is not None:
        write_output(output, text)
    else:
        typer.echo(text, nl=False)
