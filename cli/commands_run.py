"""``run``: check a whole script (``opcheck run train.py --epochs 3``) on the recorded device."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from opcheck.checker.formats import REPORT_FORMATS
from opcheck.cli.common import EXIT_ERROR, CatalogOpt, handle_errors
from opcheck.core.vocab import FailOn

ScriptArg = Annotated[
    Path, typer.Argument(help="The script, run as `python SCRIPT ARGS` would", show_default=False)
]
ScriptArgs = Annotated[
    list[str] | None,
    typer.Argument(help="The script's own arguments (everything after SCRIPT)", show_default=False),
]


def run(
    script: ScriptArg,
    script_args: ScriptArgs = None,
    torch_npu: Annotated[
        str | None,
        typer.Option(
            "--torch-npu", help="Target torch_npu release, e.g. 2.6.0.post5", show_default=False
        ),
    ] = None,
    cann: Annotated[
        str | None,
        typer.Option("--cann", help="Target CANN version, e.g. 8.3.RC1", show_default=False),
    ] = None,
    torch: Annotated[
        str | None,
        typer.Option("--torch", help="Target torch version line, e.g. 2.6", show_default=False),
    ] = None,
    hardware: Annotated[
        str | None,
        typer.Option(
            "--hardware",
            help="Narrow to a product family (needs the API docs data)",
            show_default=False,
        ),
    ] = None,
    no_cpu_fallback: Annotated[
        bool,
        typer.Option(
            "--no-cpu-fallback",
            help="Model TORCH_NPU_FALLBACK_CPU_DISABLE=1: fallbacks become errors",
        ),
    ] = False,
    all_releases: Annotated[
        bool,
        typer.Option(
            "--all-releases",
            help="ops × releases matrix and the oldest release that runs the whole script on the NPU",
        ),
    ] = False,
    fmt: Annotated[str, typer.Option("--format", "-f", help=REPORT_FORMATS.help_text())] = "table",
    output: Annotated[
        Path | None,
        typer.Option("--output", "-o", help="Write the report to a file", show_default=False),
    ] = None,
    fail_on: Annotated[
        str, typer.Option("--fail-on", help=f"Exit 1 on: {' | '.join(FailOn)}")
    ] = FailOn.UNSUPPORTED.value,
    partial: Annotated[
        bool,
        typer.Option(
            "--partial",
            help="When the script raises or is stopped (timeout, memory), exit per --fail-on on the ops before that (default: exit 2)",
        ),
    ] = False,
    max_steps: Annotated[
        int,
        typer.Option(
            "--max-steps",
            help="Stop after N steps (optimizer steps, or forward calls of the top module when there is no optimizer); 0: run to the end",
        ),
    ] = 2,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the sandboxed run may take")
    ] = 300.0,
    memory_mb: Annotated[
        int, typer.Option("--memory-mb", help="Memory limit of the sandboxed run")
    ] = 8192,
    catalog: CatalogOpt = None,
) -> None:
    """Run a script on a recorded NPU device with real data and check every op it sends.

    CUDA calls are redirected to the device as torch_npu's transfer_to_npu does. Options go
    before SCRIPT; everything after it is the script's. Exit codes: 0 clean under --fail-on,
    1 findings, 2 bad input, or the script raised (its error line on stderr; --partial
    checks the ops before it instead).
    """
    code = 0
    with handle_errors():
        REPORT_FORMATS.get(fmt)  # an unknown format is a usage error before any work
        from opcheck.checker.check import all_releases_matrix, exit_code, fail_level
        from opcheck.checker.check import check as run_check
        from opcheck.checker.engine import engine_lookup
        from opcheck.checker.queries import select_target
        from opcheck.checker.restrictions import all_restrictions
        from opcheck.cli.commands_check import _emit, _installed_torch
        from opcheck.cli.common import open_catalog, resolve_catalog_path
        from opcheck.contrib.workarounds import workaround_lookup
        from opcheck.db.catalog import Catalog
        from opcheck.tracers.composites import watched_composites
        from opcheck.tracers.script import run_script

        level = fail_level(fail_on)
        cat = Catalog.load(open_catalog(catalog))
        target = select_target(
            cat, torch_npu=torch_npu, cann=cann, torch=torch, installed_torch=_installed_torch()
        )
        composites = watched_composites(resolve_catalog_path(catalog))
        result = run_script(
            script,
            script_args or [],
            max_steps=max_steps,
            timeout=timeout,
            memory_mb=memory_mb,
            composites=composites,
        )
        report = run_check(
            cat,
            result.oplist,
            target,
            cpu_fallback=not no_cpu_fallback,
            workarounds=workaround_lookup(cat),
            restrictions=all_restrictions(cat, hardware),
            cann=cann,
            engine=engine_lookup(cat, hardware),
        )
        if all_releases:
            report.matrix = all_releases_matrix(
                cat, result.oplist, cpu_fallback=not no_cpu_fallback
            )
        # --partial: the user accepts the ops before the error as the answer
        code = exit_code(report, level, allow_incomplete=partial)
        _emit(report, fmt, output)
        if result.error or result.stopped:
            why = f"raised at {result.error}" if result.error else f"stopped: {result.stopped}"
            typer.echo(f"opcheck: {script.name} {why}", err=True)
            if not partial:
                code = EXIT_ERROR
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command(
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    )(run)
