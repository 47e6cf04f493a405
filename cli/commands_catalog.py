"""Catalog commands: ``op``, ``releases``, ``diff``, ``sync``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.cli.common import CatalogOpt, FormatOpt, handle_errors


def _catalog(path: Path | None) -> Any:
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    return Catalog.load(open_catalog(path))


def _check_format(fmt: str, allowed: tuple[str, ...] = ("table", "json")) -> None:
    from opcheck.core.errors import UsageError

    if fmt not in allowed:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(allowed)})")


def op(
    name: Annotated[str, typer.Argument(help="Operator, e.g. aten::repeat_interleave.self_Tensor")],
    fmt: FormatOpt = "table",
    catalog: CatalogOpt = None,
) -> None:
    """An op's history across releases: status and kernel family per release."""
    with handle_errors():
        _check_format(fmt)
        from opcheck.checker.history import HistoryFacts, describe_op
        from opcheck.contrib.workarounds import workaround_lookup
        from opcheck.core.errors import UsageError
        from opcheck.core.opname import canonical

        cat = _catalog(catalog)
        opname = canonical(name)
        hist = describe_op(HistoryFacts.load(cat, workaround_lookup(cat)), opname)
        if not hist.known:
            raise UsageError(f"{opname} is not in the catalog "
                             "(check the spelling: aten::name.overload)")
        rows, info, first_any = hist.rows, hist.info, hist.first_npu
        if fmt == "json":
            typer.echo(json.dumps(hist.to_json(), indent=2))
            return
        from rich.table import Table

        from opcheck.cli.render import status_text, wide_console

        console = wide_console()
        kind = ""
        if info and info.kernel_kind:
            delegate = (f", delegates to {info.structured_delegate}"
                        if info.structured_delegate else "")
            kind = f"  ({info.kernel_kind}{delegate})"
        console.print(f"[bold]{opname}[/bold]{kind}")
        console.print(f"first release with an NPU kernel: [bold]{first_any or 'none'}[/bold]")
        table = Table(show_edge=False)
        for col in ("torch_npu", "torch", "train", "CANN", "status", "kernel"):
            table.add_column(col, no_wrap=True)
        table.add_column("aclnn / via", overflow="fold")
        matrix_only = []
        for h in rows:
            r = h.resolution
            if r is None:
                matrix_only.append(h.release.torch_npu)
                continue
            note = " → ".join(r.via[1:]) if len(r.via) > 1 else (r.aclnn or "")
            table.add_row(h.release.torch_npu, h.release.torch, h.release.train, h.release.cann,
                          status_text(r.status), r.kernel, note)
        console.print(table)
        if matrix_only:
            console.print(f"{len(matrix_only)} older releases have no kernel list in the catalog "
                          f"({matrix_only[0]} … {matrix_only[-1]})", style="dim")


def releases(fmt: FormatOpt = "table", catalog: CatalogOpt = None) -> None:
    """The release matrix: torch_npu ↔ PyTorch ↔ CANN ↔ Python, and where kernel facts come from."""
    with handle_errors():
        _check_format(fmt)
        cat = _catalog(catalog)
        if fmt == "json":
            typer.echo(json.dumps({"schema_version": 1, "releases": [
                {"torch_npu": r.torch_npu, "torch": r.torch, "train": r.train, "cann": r.cann,
                 "pythons": [p for p in r.pythons.split(",") if p], "tag": r.tag,
                 "cpu_fallback": r.has_cpu_fallback, "kernel_source": r.kernel_source,
                 "date": r.date}
                for r in cat.releases]}, indent=2))
            return
        from rich.table import Table

        from opcheck.cli.render import stdout_console

        table = Table(show_edge=False)
        for col in ("torch_npu", "torch", "train", "CANN", "Python", "tag", "kernels from"):
            table.add_column(col)
        for r in cat.releases:
            table.add_row(r.torch_npu, r.torch, r.train, r.cann or "?", r.pythons.replace(",", " "),
                          r.tag, r.kernel_source)
        stdout_console().print(table)


def diff(
    old: Annotated[str, typer.Argument(help="Older torch_npu release")],
    new: Annotated[str, typer.Argument(help="Newer torch_npu release")],
    fmt: FormatOpt = "table",
    catalog: CatalogOpt = None,
) -> None:
    """Kernels added, removed, or whose family changed between two releases."""
    with handle_errors():
        _check_format(fmt)
        from opcheck.checker.queries import release_diff

        cat = _catalog(catalog)
        d = release_diff(cat, cat.release(old).torch_npu, cat.release(new).torch_npu)
        if fmt == "json":
            typer.echo(json.dumps({"schema_version": 1, "old": old, "new": new,
                                   "added": d.added, "removed": d.removed,
                                   "family_changed": [list(x) for x in d.family_changed]},
                                  indent=2))
            return
        typer.echo(f"{old} → {new}: {len(d.added)} kernels added, {len(d.removed)} removed, "
                   f"{len(d.family_changed)} changed family")
        for op_name in d.added:
            typer.echo(f"  + {op_name}")
        for op_name in d.removed:
            typer.echo(f"  - {op_name}")
        for op_name, a, b in d.family_changed:
            typer.echo(f"  ~ {op_name}: {a} → {b}")




def sync(
    mirror: Annotated[Path | None, typer.Option("--mirror", help="Read upstream files from a mirror directory (the ../shared/upstream layout)", show_default=False)] = None,
    live: Annotated[bool, typer.Option("--live", help="Fetch upstream files over HTTP")] = False,
    host: Annotated[str, typer.Option("--host", help="Live source: github | gitcode")] = "github",
    wheels: Annotated[str, typer.Option("--wheels", help="Live: which published wheels to read with pip download: all | none | V1,V2")] = "all",
    save_mirror: Annotated[Path | None, typer.Option("--save-mirror", help="Also save every fetched file into DIR (an offline mirror)", show_default=False)] = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Also write the diffable snapshot into DIR", show_default=False)] = None,
    catalog: CatalogOpt = None,
) -> None:
    """Rebuild the catalog from upstream (a mirror directory or live), atomically.

    Every source is tried; failures are listed at the end with exit code 1 and the previous
    catalog stays in place.
    """
    with handle_errors():
        from rich.console import Console
        from rich.markup import escape

        from opcheck.contrib.workarounds import attach
        from opcheck.sync.pipeline import SyncOptions, run_sync

        opts = SyncOptions(mirror=mirror, live=live, host=host, wheels=wheels,
                           save_mirror=save_mirror, snapshot=snapshot, catalog=catalog)
        # soft_wrap: a failure is one line naming file:line; wrapping at the console width
        # would cut the path in two (CI logs). escape: upstream text is not rich markup.
        err = Console(stderr=True, soft_wrap=True)
        with err.status("collecting") as status:
            out = run_sync(opts, progress=lambda m: status.update(m), before_write=attach)
        result = out.result
        for note in result.notes:
            err.print(f"note: {escape(note)}")
        if out.catalog is None:
            for f in result.failures:
                err.print(f"[red]failed:[/red] {escape(f)}")
            err.print(f"{len(result.failures)} source(s) failed; the catalog was not replaced")
            raise typer.Exit(1)
        d = result.data
        usable = sum(1 for r in d.releases if r.kernel_source != "none")
        err.print(f"catalog {out.catalog}: {len(d.releases)} releases ({usable} with kernel lists), "
                  f"{len(d.operators)} operators, {len(d.kernels)} kernel facts, "
                  f"{len(d.sources)} sources; {len(result.conflicts)} table conflicts resolved")
        if out.snapshot is not None:
            err.print(f"snapshot written to {out.snapshot}")


def register(app: typer.Typer) -> None:
    app.command()(op)
    app.command()(releases)
    app.command()(diff)
    app.command()(sync)
