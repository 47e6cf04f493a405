"""``run``: check a whole script (``opcheck run train.py --epochs 3``) on the recorded device."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from opcheck.checker.formats import REPORT_FORMATS
from opcheck.checker.usecase import RUN_MAX_STEPS, RUN_MEMORY_MB, RUN_TIMEOUT
from opcheck.cli.commands_check import (
    AllOpsOpt,
    AllReleasesOpt,
    BaselineOpt,
    CannOpt,
    CaptureOpt,
    FailOnOpt,
    GraphOpt,
    HardwareOpt,
    InternalFormatOpt,
    JitCompileOpt,
    NoCpuFallbackOpt,
    ReportFormatOpt,
    ReportOutputOpt,
    TorchNpuOpt,
    TorchOpt,
)
from opcheck.cli.common import CatalogOpt, handle_errors
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
    torch_npu: TorchNpuOpt = None,
    cann: CannOpt = None,
    torch: TorchOpt = None,
    hardware: HardwareOpt = None,
    jit_compile: JitCompileOpt = None,
    internal_format: InternalFormatOpt = None,
    no_cpu_fallback: NoCpuFallbackOpt = False,
    all_releases: AllReleasesOpt = False,
    all_ops: AllOpsOpt = False,
    baseline: BaselineOpt = None,
    fmt: ReportFormatOpt = "table",
    output: ReportOutputOpt = None,
    fail_on: FailOnOpt = FailOn.UNSUPPORTED.value,
    partial: Annotated[
        bool,
        typer.Option(
            "--partial",
            help="When the script raises or is stopped (timeout, memory), exit per --fail-on on the ops before that (default: exit 2)",
        ),
    ] = False,
    graph: GraphOpt = False,
    capture: CaptureOpt = False,
    max_steps: Annotated[
        int,
        typer.Option(
            "--max-steps",
            help="Stop after N steps (optimizer steps, or forward calls of the top module when there is no optimizer); 0: run to the end",
        ),
    ] = RUN_MAX_STEPS,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the sandboxed run may take")
    ] = RUN_TIMEOUT,
    memory_mb: Annotated[
        int, typer.Option("--memory-mb", help="Memory limit of the sandboxed run")
    ] = RUN_MEMORY_MB,
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
        from opcheck.checker.check import fail_level
        from opcheck.checker.kernel_path import on_off
        from opcheck.checker.usecase import CheckRequest, ScriptInput, load_baseline, tracer_ahead
        from opcheck.cli.commands_check import _emit, _installed_torch, _usecase
        from opcheck.cli.common import ensure_writable

        ensure_writable(output)
        request = CheckRequest(
            ScriptInput(script, tuple(script_args or ()), max_steps=max_steps, timeout=timeout,
                        memory_mb=memory_mb),
            torch_npu=torch_npu, cann=cann, torch=torch, installed_torch=_installed_torch(),
            hardware=hardware, jit_compile=on_off(jit_compile, "--jit-compile"),
            internal_format=on_off(internal_format, "--internal-format"),
            cpu_fallback=not no_cpu_fallback, all_releases=all_releases,
            graph=graph, capture=capture, fail_on=fail_level(fail_on),
            # --partial: the user accepts the ops before the error as the answer
            allow_incomplete=partial,
            baseline=load_baseline(baseline) if baseline is not None else None)
        with tracer_ahead(request.input):  # the sandbox starts while the catalog loads
            result = _usecase(catalog, quiet=True, hardware=request.hardware).run(request)
        code = result.exit_code
        _emit(result.report, fmt, output, all_ops=all_ops)
        if result.input_problem:
            typer.echo(f"opcheck: {script.name} {result.input_problem}", err=True)
    raise typer.Exit(code)


def register(app: typer.Typer) -> None:
    app.command(
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    )(run)
