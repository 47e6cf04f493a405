"""``run``: check a whole script (``opcheck run train.py --epochs 3``) on the recorded device."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

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

if TYPE_CHECKING:
    from opcheck.checker.formats.several import Outcome
    from opcheck.checker.usecase import CheckRequest

ScriptArg = Annotated[
    Path, typer.Argument(help="The script, run as `python SCRIPT ARGS` would", show_default=False)
]
ScriptArgs = Annotated[
    list[str] | None,
    typer.Argument(help="The script's own arguments (everything after SCRIPT; after `SCRIPT --` "
                   "on purpose, also when one is named like an option of run); with --each, "
                   "more scripts", show_default=False),
]


WorldSizeOpt = Annotated[
    int,
    typer.Option("--world-size", min=0, help="Ranks the script runs on (one process per "
                 "NPU): the group size its collectives are checked for; default: the "
                 "script's init_process_group(world_size=...) or WORLD_SIZE"),
]


def run(
    ctx: typer.Context,
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
            help="Hard stop after N steps (optimizer steps, or forward calls of the top module when there is no optimizer): the report is INCOMPLETE and names the line. Loops whose iterations repeat the ops already seen end early anyway and the code after them runs; 0: no budget, every iteration runs",
        ),
    ] = RUN_MAX_STEPS,
    timeout: Annotated[
        float, typer.Option("--timeout", help="Seconds the sandboxed run may take")
    ] = RUN_TIMEOUT,
    memory_mb: Annotated[
        int, typer.Option("--memory-mb", help="Memory limit of the sandboxed run")
    ] = RUN_MEMORY_MB,
    world_size: WorldSizeOpt = 0,
    each: Annotated[
        bool,
        typer.Option("--each", help="SCRIPT and the arguments after it are scripts, each run "
                     "without arguments (torch imported once); one report each"),
    ] = False,
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

        args = list(script_args or ())
        scripts = [script]
        if each:
            scripts, args = _each_scripts(script, args, fmt, baseline)
        elif args[:1] == ["--"]:
            args = args[1:]  # `SCRIPT -- ARGS`: the script's, on purpose
        else:
            warning = misplaced_warning(script.name, args, _own_options(ctx))
            if warning:
                typer.echo(warning, err=True)
        ensure_writable(output)
        request = CheckRequest(
            ScriptInput(script, tuple(args), max_steps=max_steps, timeout=timeout,
                        memory_mb=memory_mb, world_size=world_size),
            torch_npu=torch_npu, cann=cann, torch=torch, installed_torch=_installed_torch(),
            hardware=hardware, jit_compile=on_off(jit_compile, "--jit-compile"),
            internal_format=on_off(internal_format, "--internal-format"),
            cpu_fallback=not no_cpu_fallback, all_releases=all_releases,
            graph=graph, capture=capture, fail_on=fail_level(fail_on),
            # --partial: the user accepts the ops before the error as the answer
            allow_incomplete=partial,
            baseline=load_baseline(baseline) if baseline is not None else None)
        if each:
            code = _run_each(scripts, request, catalog=catalog, fmt=fmt, output=output,
                             all_ops=all_ops)
        else:
            with tracer_ahead(request.input):  # the sandbox starts while the catalog loads
                result = _usecase(catalog, quiet=True, hardware=request.hardware).run(request)
            code = result.exit_code
            _emit(result.report, fmt, output, all_ops=all_ops)
            if result.input_problem:
                typer.echo(f"opcheck: {script.name} {result.input_problem}", err=True)
    raise typer.Exit(code)


def _own_options(ctx: typer.Context) -> list[str]:
    """The option names of the running ``run`` command (``--torch-npu``, ``-f``, ...)."""
    return [o for p in ctx.command.params if p.param_type_name == "option"
            for o in (*p.opts, *p.secondary_opts)]


def misplaced_warning(script: str, args: list[str], options: list[str]) -> str:
    """One line when arguments after SCRIPT are named like ``run``'s own options: they went
    to the script. The run goes on: scripts often have options of the same names (``-o``,
    ``--timeout``), and a script that does not know one stops with its own usage error."""
    names = set(options)
    found: list[str] = []
    for arg in args:
        if arg == "--":
            break  # what follows the script's own `--` is its business
        name = arg.split("=", 1)[0]
        if name in names and name not in found:
            found.append(name)
    if not found:
        return ""
    which = ", ".join(found)
    return (f"opcheck: warning: {which} after {script} went to the script, not to "
            f"`opcheck run` ({'it is one of' if len(found) == 1 else 'they are'} run's own "
            f"options): put {'it' if len(found) == 1 else 'them'} before {script}, or write "
            f"`{script} -- {found[0]} ...` to pass {'it' if len(found) == 1 else 'them'} to "
            "the script on purpose")


def _each_scripts(script: Path, more: list[str], fmt: str,
                  baseline: Path | None) -> tuple[list[Path], list[str]]:
    """``--each``: the scripts (no script arguments), or a usage error."""
    from opcheck.checker.formats import several
    from opcheck.core.errors import UsageError

    flags = [a for a in more if a.startswith("-")]
    if flags:
        raise UsageError(f"--each runs scripts without arguments: {flags[0]} is not a script "
                         "(options of run go before the first script)")
    if baseline is not None:
        raise UsageError("--baseline compares one report: give one SCRIPT")
    several.check_format(fmt)
    return [script, *map(Path, more)], []


def _run_each(scripts: list[Path], request: CheckRequest, *, catalog: Path | None, fmt: str,
              output: Path | None, all_ops: bool) -> int:
    """``opcheck run --each a.py b.py``: each script run in its own sandboxed child, all
    forked from one template that imported torch once, checked against one target; one
    report each (json: one ``opcheck.reports`` document). The exit code is the worst
    script's; a script that could not be started counts as 2 and the others still run."""
    from dataclasses import replace

    from opcheck.checker.usecase import ScriptInput, tracer_ahead
    from opcheck.cli.commands_check import _emit_several, _usecase
    from opcheck.cli.common import EXIT_ERROR
    from opcheck.core.errors import TraceError

    first = request.input
    assert isinstance(first, ScriptInput)
    inputs = [replace(first, script=s) for s in scripts]
    outcomes: list[Outcome] = []
    code = 0
    with tracer_ahead(*inputs):  # one torch-importing template while the catalog loads
        usecase = _usecase(catalog, quiet=True, hardware=request.hardware)
        target = usecase.target(request)
        for path, one in zip(scripts, inputs, strict=True):
            try:
                result = usecase.run(replace(request, input=one), target)
            except TraceError as exc:  # this script only: the others still run
                typer.echo(f"opcheck: error: {path}: {exc}", err=True)
                outcomes.append((str(path), str(exc)))
                code = max(code, EXIT_ERROR)
                continue
            if result.input_problem:
                typer.echo(f"opcheck: {path.name} {result.input_problem}", err=True)
            outcomes.append((str(path), result.report))
            code = max(code, result.exit_code)
    _emit_several(outcomes, fmt, output, all_ops=all_ops)
    return code


def register(app: typer.Typer) -> None:
    app.command(
        context_settings={"allow_interspersed_args": False, "ignore_unknown_options": True},
    )(run)
