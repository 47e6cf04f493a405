"""``check`` (the main verb) and ``trace``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from opcheck.checker.formats import REPORT_FORMATS
from opcheck.cli.common import CatalogOpt, QuietOpt, handle_errors
from opcheck.core.products import HARDWARE_HELP
from opcheck.core.vocab import FailOn

if TYPE_CHECKING:
    from opcheck.checker.check import Report
    from opcheck.checker.formats import RenderContext
    from opcheck.checker.formats.several import Outcome
    from opcheck.checker.usecase import (
        CheckInput,
        CheckRequest,
        CheckUseCase,
        ModelInput,
        Recorded,
    )

ModelArg = Annotated[
    str | None,
    typer.Argument(help="Model file (.pt2, TorchScript, pickled module), an op list JSON from "
                   "`opcheck trace`, or omitted with --model / --log.", show_default=False),
]
ModelsArg = Annotated[
    list[str] | None,
    typer.Argument(metavar="MODEL",
                   help="Model file (.pt2, TorchScript, pickled module), an op list JSON from "
                   "`opcheck trace`, or omitted with --model / --log. Several: one report each "
                   "(table, markdown or json), torch imported once.", show_default=False),
]
ModelSpecOpt = Annotated[
    str | None,
    typer.Option("--model", help="Model as code: pkg.module:ClassOrFactory or file.py:factory",
                 show_default=False),
]
InputShapeOpt = Annotated[
    str | None,
    typer.Option("--input-shape", help="Input shape, e.g. 1,3,224,224 (several: 1,3,224,224;1,10)",
                 show_default=False),
]
InputSpecOpt = Annotated[
    str | None,
    typer.Option("--input-spec", help="Inputs with dtypes, e.g. 'x:1,3,224,224:float16;mask:1,128:bool' "
                 "or a JSON file", show_default=False),
]
LogOpt = Annotated[
    Path | None, typer.Option("--log", help="A torch_npu/CANN runtime log instead of a model",
                              show_default=False),
]
TrustOpt = Annotated[bool, typer.Option("--trust", help="Allow code execution when loading the "
                                        "model file (pickled modules, runtime .pt2/TorchScript)")]
TrainOpt = Annotated[bool, typer.Option("--train", help="Also trace backward and an optimizer step")]
StaticOpt = Annotated[bool, typer.Option("--static", help="Static listing only (no model code runs)")]
FastOpt = Annotated[bool, typer.Option(
    "--fast", help="Trace a few of N identical blocks (transformer layers) and extrapolate the "
    "counts when their op counts agree (checked; a note in the report says so, and why not when "
    "it falls back to the full trace)")]
TimeoutOpt = Annotated[float, typer.Option("--timeout", help="Seconds the sandboxed trace may take")]
MemoryOpt = Annotated[int, typer.Option("--memory-mb", help="Memory limit of the sandboxed trace")]
AllowIncompleteOpt = Annotated[bool, typer.Option(
    "--allow-incomplete", help="An op list that stopped early (verdict INCOMPLETE) is not by "
    "itself a finding for --fail-on")]

# The target, mode and report options `check` and `run` share (one spelling, one help text).
TorchNpuOpt = Annotated[str | None, typer.Option(
    "--torch-npu", help="Target torch_npu release, e.g. 2.6.0.post5, or 2.6 for the newest 2.6 "
    "release", show_default=False)]
CannOpt = Annotated[str | None, typer.Option(
    "--cann", help="Target CANN version, e.g. 8.3.RC1", show_default=False)]
TorchOpt = Annotated[str | None, typer.Option(
    "--torch", help="Target torch version line, e.g. 2.6", show_default=False)]
HardwareOpt = Annotated[str | None, typer.Option("--hardware", help=HARDWARE_HELP, show_default=False)]
JitCompileOpt = Annotated[str | None, typer.Option("--jit-compile", help="on | off: torch.npu.set_compile_mode(jit_compile=...) (ops with both kernels run aclnn only with it off); default: torch_npu's default on the product", show_default=False)]
InternalFormatOpt = Annotated[str | None, typer.Option("--internal-format", help="on | off: inputs in an internal format such as NZ (ops with both kernels then run acl_op); default: off (base format assumed)", show_default=False)]
NoCpuFallbackOpt = Annotated[bool, typer.Option(
    "--no-cpu-fallback", help="Model TORCH_NPU_FALLBACK_CPU_DISABLE=1: fallbacks become errors")]
AllReleasesOpt = Annotated[bool, typer.Option(
    "--all-releases", help="ops × releases matrix and the oldest release that runs the whole "
    "model on the NPU")]
AllOpsOpt = Annotated[bool, typer.Option(
    "--all-ops", help="List every op the model uses, not only the problems")]
BaselineOpt = Annotated[Path | None, typer.Option(
    "--baseline", help="A previous report JSON: show only what changed", show_default=False)]
ReportFormatOpt = Annotated[str, typer.Option("--format", "-f", help=REPORT_FORMATS.help_text())]
ReportOutputOpt = Annotated[Path | None, typer.Option(
    "--output", "-o", help="Write the report to a file", show_default=False)]
FailOnOpt = Annotated[str, typer.Option("--fail-on", help=f"Exit 1 on: {' | '.join(FailOn)}")]
GraphOpt = Annotated[bool, typer.Option(
    "--graph", help="Also check graph mode (torch.compile with torchair): will each op convert "
    "on the target release (with --all-releases: on every release); a graph verdict NO is a "
    "finding")]
CaptureOpt = Annotated[bool, typer.Option(
    "--capture", help="Also check ACL graph capture (torch.npu.NPUGraph, aclgraph) on the "
    "target release: the first call that breaks it and every other one, with source lines "
    "(host syncs, dynamic shapes, CPU fallbacks, acl_op kernels, random ops); a capture "
    "verdict NO is a finding")]


def _installed_torch() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def _input(
    model: str | None, model_spec: str | None, input_shape: str | None,
    input_spec: str | None, log: Path | None, trust: bool, train: bool, static: bool,
    timeout: float, memory_mb: int, fast: bool = False,
) -> Recorded | ModelInput:
    """The check input the options name: a runtime log read now, else a model to trace (or an
    op-list JSON to read)."""
    from opcheck.checker.usecase import ModelInput, Recorded
    from opcheck.core.errors import UsageError

    if log is not None:
        if fast:
            raise UsageError("--fast speeds up a runtime trace: not with --log or --static")
        from opcheck.contrib.logs import parse_log

        return Recorded(parse_log(log))
    return ModelInput(model, model_spec, input_shape, input_spec, trust=trust, train=train,
                      static=static, fast=fast, timeout=timeout, memory_mb=memory_mb)


def _usecase(catalog: Path | None, quiet: bool, hardware: str | None = None) -> CheckUseCase:
    """The check use case on the command's catalog, with the contributed workarounds (those
    that cover ``hardware`` when a product is named) and the terminal's progress display."""
    from opcheck.checker.usecase import CheckUseCase
    from opcheck.cli.common import open_catalog
    from opcheck.cli.render import progress
    from opcheck.contrib.workaround_catalog import workaround_lookup
    from opcheck.db.catalog import Catalog

    cat = Catalog.load(open_catalog(catalog))
    return CheckUseCase(cat, workarounds=workaround_lookup(cat, hardware),
                        progress=lambda what: progress(what, quiet=quiet))


def check(
    models: ModelsArg = None,
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
    allow_incomplete: AllowIncompleteOpt = False,
    graph: GraphOpt = False,
    capture: CaptureOpt = False,
    model_spec: ModelSpecOpt = None,
    input_shape: InputShapeOpt = None,
    input_spec: InputSpecOpt = None,
    log: LogOpt = None,
    trust: TrustOpt = False,
    train: TrainOpt = False,
    static: StaticOpt = False,
    fast: FastOpt = False,
    timeout: TimeoutOpt = 120.0,
    memory_mb: MemoryOpt = 4096,
    catalog: CatalogOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Check a model against the catalog: every problem at once, for the versions you have.

    Exit codes: 0 clean under --fail-on, 1 findings, 2 bad input or usage.
    """
    code = 0
    with handle_errors():
        REPORT_FORMATS.get(fmt)  # an unknown format is a usage error before any work
        from opcheck.checker.check import fail_level
        from opcheck.checker.usecase import CheckRequest, load_baseline
        from opcheck.cli.common import ensure_writable

        ensure_writable(output)
        level = fail_level(fail_on)
        from opcheck.checker.kernel_path import on_off

        jit, internal = on_off(jit_compile, "--jit-compile"), on_off(internal_format,
                                                                      "--internal-format")
        several = models is not None and len(models) > 1
        if several:
            _refuse_for_several(fmt, model_spec=model_spec, log=log, baseline=baseline)
        given: list[str | None] = list(models) if models else [None]
        inputs: list[CheckInput] = [
            _input(m, model_spec, input_shape, input_spec, log, trust, train, static, timeout,
                   memory_mb, fast) for m in given]
        request = CheckRequest(
            inputs[0], torch_npu=torch_npu, cann=cann, torch=torch,
            installed_torch=_installed_torch(), hardware=hardware, jit_compile=jit,
            internal_format=internal, cpu_fallback=not no_cpu_fallback,
            all_releases=all_releases, graph=graph, capture=capture,
            fail_on=level, allow_incomplete=allow_incomplete,
            baseline=load_baseline(baseline) if baseline is not None else None)
        if several:
            assert models is not None
            outcomes, code = _check_several(models, inputs, request, catalog=catalog,
                                            quiet=quiet)
            _emit_several(outcomes, fmt, output, all_ops=all_ops)
        else:
            from opcheck.checker.usecase import tracer_ahead

            with tracer_ahead(request.input):  # the sandbox starts while the catalog loads
                result = _usecase(catalog, quiet, request.hardware).run(request)
            code = result.exit_code  # decided before writing: a reader that leaves keeps it
            _emit(result.report, fmt, output, all_ops=all_ops)
    raise typer.Exit(code)


def _refuse_for_several(fmt: str, *, model_spec: str | None, log: Path | None,
                        baseline: Path | None) -> None:
    from opcheck.checker.formats import several
    from opcheck.core.errors import UsageError

    if model_spec is not None or log is not None:
        raise UsageError("several MODEL files are checked one by one: --model and --log take "
                         "the place of a single MODEL")
    if baseline is not None:
        raise UsageError("--baseline compares one report: give one MODEL")
    several.check_format(fmt)


def _check_several(models: list[str], inputs: list[CheckInput], request: CheckRequest, *,
                   catalog: Path | None, quiet: bool) -> tuple[list[Outcome], int]:
    """``opcheck a.pt2 b.pt2 …``: each model traced in its own sandboxed process (forked from
    one template that imported torch once when several run), checked against the same
    target; one report each. The exit code is the worst model's; a model whose op list could
    not be made is reported and counts as 2, and the others are still checked."""
    from dataclasses import replace

    from opcheck.checker.formats import several
    from opcheck.checker.usecase import tracer_ahead
    from opcheck.cli.common import EXIT_ERROR
    from opcheck.core.errors import TraceError

    outcomes: list[several.Outcome] = []
    code = 0
    with tracer_ahead(*inputs):  # imports torch while the catalog loads
        usecase = _usecase(catalog, quiet, request.hardware)
        target = usecase.target(request)
        for m, one in zip(models, inputs, strict=True):
            try:
                result = usecase.run(replace(request, input=one), target)
            except TraceError as exc:  # this model only: the others are still checked
                typer.echo(f"opcheck: error: {m}: {exc}", err=True)
                outcomes.append((m, str(exc)))
                code = EXIT_ERROR
                continue
            outcomes.append((m, result.report))
            code = max(code, result.exit_code)
    return outcomes, code


def _emit_several(outcomes: list[Outcome], fmt: str, output: Path | None, *,
                  all_ops: bool) -> None:
    """The reports one after another (table: each under its own header line)."""
    from opcheck.checker.formats import several

    if not REPORT_FORMATS.get(fmt).terminal:
        _put(several.render(fmt, outcomes, _context(fmt, all_ops)), output)
        return
    from rich.markup import escape

    from opcheck.checker.capture import capture_text
    from opcheck.checker.graph import graph_text
    from opcheck.cli.render import (
        console_for,
        fit_text,
        render_report,
        terminal_width,
        wide_console,
    )

    def draw(console: Any, width: int | None, write: Any) -> None:
        for i, (model, outcome) in enumerate(outcomes):
            if i:
                console.print()
            if isinstance(outcome, str):
                console.print(f"[bold]opcheck[/bold] {escape(model)}  ·  not checked: "
                              f"{escape(outcome)}")
                continue
            render_report(outcome, console, width=width, all_ops=all_ops)
            if outcome.graph is not None:
                write(graph_text(outcome.graph))
            if outcome.capture is not None:
                write(capture_text(outcome.capture))

    if output is not None:
        from opcheck.cli.common import output_file

        with output_file(output) as fh:
            # a file gets what a pipe gets: tab-separated tables, nothing cut
            draw(console_for(fh, None), None, fh.write)
    else:
        draw(wide_console(), -1,
             lambda text: typer.echo(fit_text(text, terminal_width()), nl=False))


def _emit(report: Report, fmt: str, output: Path | None, *, all_ops: bool = False) -> None:
    spec = REPORT_FORMATS.get(fmt)
    if spec.terminal:
        from opcheck.checker.capture import capture_text
        from opcheck.checker.graph import graph_text
        from opcheck.cli.render import fit_text, render_report, terminal_width

        if output is not None:
            from opcheck.cli.common import output_file
            from opcheck.cli.render import console_for

            with output_file(output) as fh:
                # a file gets what a pipe gets: tab-separated tables, nothing cut
                render_report(report, console_for(fh, None), width=None, all_ops=all_ops)
                if report.graph is not None:
                    fh.write(graph_text(report.graph))
                if report.capture is not None:
                    fh.write(capture_text(report.capture))
        else:
            render_report(report, all_ops=all_ops)
            width = terminal_width()  # the graph and capture notes wrap as the tables do
            if report.graph is not None:
                typer.echo(fit_text(graph_text(report.graph), width), nl=False)
            if report.capture is not None:
                typer.echo(fit_text(capture_text(report.capture), width), nl=False)
        return
    _put(REPORT_FORMATS.render(fmt, report, _context(fmt, all_ops)), output)


def _context(fmt: str, all_ops: bool) -> RenderContext:
    """The render context of a file format."""
    from opcheck.checker.formats import RenderContext

    if REPORT_FORMATS.get(fmt).wants_environment:
        # A migration report records where it was made: the environment inventory.
        from opcheck.env.assess import summary
        from opcheck.env.probe import collect

        return RenderContext(environment=summary(collect()), all_ops=all_ops)
    return RenderContext(all_ops=all_ops)


def _put(text: str, output: Path | None) -> None:
    if output is not None:
        from opcheck.cli.common import write_output

        write_output(output, text)
    else:
        typer.echo(text, nl=False)


def trace(
    model: ModelArg = None,
    script_args: Annotated[
        list[str] | None,
        typer.Argument(metavar="SCRIPT_ARGS", help="With --run: the script's arguments, "
                       "after `--`", show_default=False),
    ] = None,
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the op list JSON here", show_default=False)] = None,
    model_spec: ModelSpecOpt = None,
    input_shape: InputShapeOpt = None,
    input_spec: InputSpecOpt = None,
    log: LogOpt = None,
    trust: TrustOpt = False,
    train: TrainOpt = False,
    static: StaticOpt = False,
    fast: FastOpt = False,
    run: Annotated[bool, typer.Option(
        "--run", help="MODEL is a script: run it as `opcheck run` does (recorded device, "
        "budget) and write the ops it sent; its arguments go after `--`")] = False,
    max_steps: Annotated[int | None, typer.Option(
        "--max-steps", help="With --run: as `opcheck run --max-steps`", show_default=False)] = None,
    timeout: Annotated[float | None, typer.Option(
        "--timeout", help="Seconds the sandboxed trace may take (default 120; --run: 300)",
        show_default=False)] = None,
    memory_mb: Annotated[int | None, typer.Option(
        "--memory-mb", help="Memory limit of the sandboxed trace (default 4096; --run: 8192)",
        show_default=False)] = None,
    catalog: CatalogOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """List the ops a model (or with --run, a script) sends to the NPU backend, as a
    versioned op-list JSON (check it later with `opcheck check ops.json` or on the web)."""
    with handle_errors():
        from opcheck.checker.usecase import (
            RUN_MAX_STEPS,
            RUN_MEMORY_MB,
            RUN_TIMEOUT,
            TRACE_MEMORY_MB,
            TRACE_TIMEOUT,
            Recorded,
            record_model,
        )
        from opcheck.cli.common import ensure_writable, open_catalog
        from opcheck.cli.render import progress
        from opcheck.core.errors import UsageError
        from opcheck.db.catalog import Catalog
        from opcheck.tracers.composites import composites_with_kernels

        ensure_writable(output)

        def watched() -> list[str]:
            # the composite ops to record at both levels: those the catalog knows a kernel for
            return composites_with_kernels(Catalog.load(open_catalog(catalog)))

        if run:
            if model is None or model_spec or log or input_shape or input_spec or static:
                raise UsageError("--run takes a SCRIPT (and its arguments after `--`) only")
            from opcheck.tracers.script import run_script

            # no progress display: the script's own output may go to the terminal
            ran = run_script(model, list(script_args or ()),
                             max_steps=RUN_MAX_STEPS if max_steps is None else max_steps,
                             timeout=RUN_TIMEOUT if timeout is None else timeout,
                             memory_mb=RUN_MEMORY_MB if memory_mb is None else memory_mb,
                             composites=watched())
            oplist = ran.oplist
            if not oplist.complete:  # the op list says so; the terminal hears it too
                typer.echo(f"opcheck: {Path(model).name}: incomplete op list: {oplist.stopped}",
                           err=True)
        else:
            if script_args:
                raise UsageError(f"unexpected argument {script_args[0]}: arguments after MODEL "
                                 "are a script's (give --run SCRIPT)")
            if max_steps is not None:
                raise UsageError("--max-steps applies to a script run: give --run SCRIPT")
            source = _input(model, model_spec, input_shape, input_spec, log, trust, train,
                            static, TRACE_TIMEOUT if timeout is None else timeout,
                            TRACE_MEMORY_MB if memory_mb is None else memory_mb, fast)
            if isinstance(source, Recorded):
                oplist = source.oplist
            else:
                oplist = record_model(source, watched, lambda what: progress(what, quiet=quiet))
        text = oplist.dumps()
        if output is not None:
            from opcheck.cli.common import write_output

            write_output(output, text)
            typer.echo(f"{len(oplist.ops)} ops ({oplist.method}, {oplist.ir}) → {output}", err=True)
        else:
            typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    app.command()(check)
    app.command()(trace)
