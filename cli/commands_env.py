"""``opcheck env``: this machine's Python/torch/torch_npu/CANN/driver inventory, checked
against the release matrix, with the combination to install when they disagree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from opcheck.cli.common import CatalogOpt, FormatOpt, handle_errors

EXIT_MISMATCH = 1

_STYLE = {"ok": "green", "mismatch": "bold red", "warning": "yellow", "absent": "dim"}


def _catalog(path: Path | None) -> Any:
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    return Catalog.load(open_catalog(path))


def _version(x: Any, absent: str = "not installed") -> str:
    return f"{x.version}" if x is not None else f"[dim]{absent}[/dim]"


def render(assessment: Any, console: Any | None = None) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    from opcheck.cli.render import stdout_console
    from opcheck.env.assess import Assessment

    assert isinstance(assessment, Assessment)
    con = console if isinstance(console, Console) else stdout_console()
    inv = assessment.inventory
    table = Table(show_edge=False, show_header=False, title="environment", title_justify="left")
    table.add_column("what", style="bold")
    table.add_column("version")
    table.add_column("from", overflow="fold")
    table.add_row("Python", f"{inv.python} ({inv.implementation})", "")
    table.add_row("OS / arch", escape(f"{inv.os_name} / {inv.arch}"), "")
    table.add_row("torch", _version(inv.torch), escape(inv.torch.source) if inv.torch else "")
    table.add_row("torch_npu", _version(inv.torch_npu),
                  escape(inv.torch_npu.source) if inv.torch_npu else "")
    if inv.cann is not None:
        table.add_row("CANN", f"{inv.cann.version} ({inv.cann.kind})", escape(inv.cann.source))
    else:
        table.add_row("CANN", "[dim]not found[/dim]", "")
    table.add_row("driver", _version(inv.driver, "not found"),
                  escape(inv.driver.source) if inv.driver else "")
    table.add_row("firmware", _version(inv.firmware, "not found"),
                  escape(inv.firmware.source) if inv.firmware else "")
    chips = ""
    if inv.npu_smi and inv.npu_smi.chips:
        names = list(dict.fromkeys(inv.npu_smi.chips))
        chips = ", ".join(f"{inv.npu_smi.chips.count(n)} × {n}" for n in names)
    table.add_row("NPUs", chips or (f"{len(inv.devices)} device node(s)" if inv.devices
                                    else "[dim]none[/dim]"),
                  "npu-smi info" if chips else "")
    for key, value in inv.environment.items():
        table.add_row(key, escape(value), "environment")
    con.print(table)

    checks = Table(show_edge=False, title="checks", title_justify="left")
    checks.add_column("status")
    checks.add_column("check")
    checks.add_column("finding", overflow="fold")
    for f in assessment.findings:
        style = _STYLE.get(f.status, "")
        checks.add_row(f"[{style}]{f.status}[/{style}]", f.check, escape(f.message))
    con.print(checks)

    rec = assessment.recommendation
    if assessment.consistent:
        con.print("[bold green]consistent:[/bold green] no mismatch with the release matrix")
    else:
        con.print("[bold red]mismatch:[/bold red] the installed versions do not pair up")
    if not rec.needed:
        return
    con.print(f"[bold]install[/bold] ({escape(rec.reason)}):")
    for i, c in enumerate(rec.combinations):
        r = c.release
        pys = r.pythons.replace(",", " ") or "?"
        label = "  or" if i else "    "
        con.print(f"{label} torch_npu [bold]{r.torch_npu}[/bold] + torch {r.torch} + "
                  f"CANN {r.cann or '?'} (train {r.train}; Python {pys})")
        for ch in c.changes:
            con.print(f"        {escape(ch)}")


def env(fmt: FormatOpt = "table", catalog: CatalogOpt = None) -> None:
    """What is installed (Python, torch, torch_npu, CANN, driver, firmware, NPUs), checked
    against the release matrix, and the combination to install when it does not pair up.

    Exit codes: 0 consistent (absent pieces are not a mismatch), 1 mismatch, 2 bad input.
    """
    with handle_errors():
        from opcheck.core.errors import UsageError

        if fmt not in ("table", "json"):
            raise UsageError(f"unknown format {fmt!r} (choose from table, json)")
        from opcheck.env.assess import assess
        from opcheck.env.probe import collect

        cat = _catalog(catalog)
        result = assess(collect(), cat)
        if fmt == "json":
            typer.echo(json.dumps(result.to_json(), indent=2))
        else:
            render(result)
    if not result.consistent:
        raise typer.Exit(EXIT_MISMATCH)


def register(app: typer.Typer) -> None:
    app.command()(env)
