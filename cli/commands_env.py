"""``opcheck env``: this machine's Python/torch/torch_npu/CANN/driver inventory, checked
against the release matrix, with the combination to install when they disagree."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from opcheck.cli.common import CatalogOpt, FormatOpt, handle_errors
from opcheck.core.vocab import EnvStatus

EXIT_MISMATCH = 1



def _catalog(path: Path | None) -> Any:
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    return Catalog.load(open_catalog(path))


def _version(x: Any, absent: str = "not installed") -> str:
    return f"{x.version}" if x is not None else absent


def render(assessment: Any, console: Any | None = None, width: int | None = -1) -> None:
    """The inventory and the checks as tables (adapting to the terminal, tab-separated when
    piped), then the verdict and what to install."""
    from rich.console import Console
    from rich.markup import escape

    from opcheck.cli.render import Column, Grid, draw_grid, terminal_width, wide_console
    from opcheck.env.assess import Assessment

    assert isinstance(assessment, Assessment)
    w = terminal_width() if width == -1 else width
    con = console if isinstance(console, Console) else wide_console()
    inv = assessment.inventory
    table = Grid([Column("what"), Column("version"), Column("from", wrap=True, compact=False)],
                 title="environment")
    table.add("Python", f"{inv.python} ({inv.implementation})", "")
    table.add("OS / arch", f"{inv.os_name} / {inv.arch}", "")
    table.add("torch", _version(inv.torch), inv.torch.source if inv.torch else "")
    table.add("torch_npu", _version(inv.torch_npu), inv.torch_npu.source if inv.torch_npu else "")
    if inv.cann is not None:
        table.add("CANN", f"{inv.cann.version} ({inv.cann.kind})", inv.cann.source)
    else:
        table.add("CANN", "not found", "")
    table.add("driver", _version(inv.driver, "not found"),
              inv.driver.source if inv.driver else "")
    table.add("firmware", _version(inv.firmware, "not found"),
              inv.firmware.source if inv.firmware else "")
    chips = ""
    if inv.npu_smi and inv.npu_smi.chips:
        names = list(dict.fromkeys(inv.npu_smi.chips))
        chips = ", ".join(f"{inv.npu_smi.chips.count(n)} × {n}" for n in names)
    table.add("NPUs", chips or (f"{len(inv.devices)} device node(s)" if inv.devices else "none"),
              "npu-smi info" if chips else "")
    for key, value in inv.environment.items():
        table.add(key, value, "environment")
    draw_grid(table, con, w)

    checks = Grid([Column("status", style=lambda st: EnvStatus(st).style), Column("check"),
                   Column("finding", wrap=True, compact=False)], title="checks")
    for f in assessment.findings:
        checks.add(f.status, f.check, f.message)
    draw_grid(checks, con, w)

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
        label = "  or" if i else "    "
        # an unknown part is said in words: "CANN ?" reads as a typo, not as a gap in the tables
        cann = (f"CANN {r.cann}" + (" (inferred from its train)"
                                    if getattr(r, "cann_inferred", False) else "")
                if r.cann else "the CANN its release notes name (not in the compatibility tables)")
        about = "; ".join(x for x in (f"train {r.train}" if r.train else "",
                                      f"Python {r.pythons.replace(',', ' ')}" if r.pythons
                                      else "") if x)
        con.print(f"{label} torch_npu [bold]{r.torch_npu}[/bold] + torch {r.torch} + "
                  f"{escape(cann)}" + (f" ({about})" if about else ""))
        for ch in c.changes:
            con.print(f"        {escape(ch)}")


def _speed(environment: dict[str, str], cat: Any) -> list[dict[str, str]]:
    """The environment variables that cost time, by the profiling advisor's rules."""
    from opcheck.checker.runsettings import env_findings
    from opcheck.db.advisor import advisor_rules

    return [{"op": f.op, "where": "environment", "why": f.why, "instead": f.instead,
             "source": f.source, "link": f.link}
            for f in env_findings(environment, advisor_rules(cat.engine))]


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
        speed = _speed(result.inventory.environment, cat)
        if fmt == "json":
            typer.echo(json.dumps({**result.to_json(), "speed": speed}, indent=2))
        else:
            render(result)
            for f in speed:
                typer.echo(f"speed: {f['op']} ({f['where']}): {f['why']}; instead "
                           f"{f['instead']} [{f['source']}]")
    if not result.consistent:
        raise typer.Exit(EXIT_MISMATCH)


def register(app: typer.Typer) -> None:
    app.command()(env)
