"""``check`` (the main verb) and ``trace``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.checker.formats import REPORT_FORMATS
from opcheck.cli.common import CatalogOpt, QuietOpt, handle_errors, release_arg
from opcheck.core.vocab import FailOn

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


def _installed_torch() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def _oplist(
    model: str | None, model_spec: str | None, input_shape: str | None,
    input_spec: str | None, log: Path | None, trust: bool, train: bool, static: bool,
    timeout: float, memory_mb: int, composites: list[str] | None = None, quiet: bool = False,
    fast: bool = False,
) -> Any:
    from opcheck.core.errors import UsageError
    from opcheck.core.oplist import OpList

    if fast and (log is not None or static):
        raise UsageError("--fast speeds up a runtime trace: not with --log or --static")
    if log is not None:
        from opcheck.contrib.logs import parse_log

        return parse_log(log)
    if model is None and model_spec is None:
        raise UsageError("give a MODEL file, --model pkg.module:factory, or --log run.log")
    if model is not None and model_spec is None and model.endswith(".json"):
        listed = OpList.load(Path(model))
        if fast:
            listed.notes.append("--fast applies to runtime traces: the op list was read as is")
        return listed
    if model is not None and model_spec is None and model.endswith(".py"):
        raise UsageError(
            f"{model} is a Python file: run a script with `opcheck run {model} [ARGS]`, or check "
            f"a model it defines with `--model {model}:NAME` (a factory or an nn.Module)"
        )
    from opcheck.cli.render import progress
    from opcheck.tracers.api import trace
    from opcheck.tracers.inputs import resolve

    with progress(f"tracing {model_spec or model}", quiet=quiet):
        return trace(
            model, model_spec=model_spec, inputs=resolve(input_shape, input_spec),
            trust=trust, train=train, static_only=static, timeout=timeout, memory_mb=memory_mb,
            composites=composites, fast=fast,
        )


def _runs_model(model: str | None, model_spec: str | None, log: Path | None, trust: bool,
                static: bool) -> bool:
    """Whether the op list comes from running the model (a sandboxed runtime trace)."""
    return log is None and not static and (
        model_spec is not None or (trust and model is not None and not model.endswith(".json")))


def _tracer_ahead(model: str | None, model_spec: str | None, log: Path | None, trust: bool,
                  static: bool, memory_mb: int) -> Any:
    """For a runtime trace: the sandbox's worker, started before the catalog loads so torch
    imports meanwhile (opcheck.tracers.sandbox.worker_ahead); else nothing."""
    from contextlib import nullcontext

    if not _runs_model(model, model_spec, log, trust, static):
        return nullcontext()
    from opcheck.tracers.sandbox import MIN_MEMORY_MB, worker_ahead

    # below the minimum run_worker refuses before starting anything
    return worker_ahead(memory_mb) if memory_mb >= MIN_MEMORY_MB else nullcontext()


def check(
    models: ModelsArg = None,
    torch_npu: Annotated[str | None, typer.Option("--torch-npu", help="Target torch_npu release, e.g. 2.6.0.post5, or 2.6 for the newest 2.6 release", show_default=False)] = None,
    cann: Annotated[str | None, typer.Option("--cann", help="Target CANN version, e.g. 8.3.RC1", show_default=False)] = None,
    torch: Annotated[str | None, typer.Option("--torch", help="Target torch version line, e.g. 2.6", show_default=False)] = None,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Target product: 910A, 910B (A2), 910C (A3), 310P, 310B, 950; default: every product the docs name", show_default=False)] = None,
    no_cpu_fallback: Annotated[bool, typer.Option("--no-cpu-fallback", help="Model TORCH_NPU_FALLBACK_CPU_DISABLE=1: fallbacks become errors")] = False,
    all_releases: Annotated[bool, typer.Option("--all-releases", help="ops × releases matrix and the oldest release that runs the whole model on the NPU")] = False,
    all_ops: Annotated[bool, typer.Option("--all-ops", help="List every op the model uses, not only the problems")] = False,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="A previous report JSON: show only what changed", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help=REPORT_FORMATS.help_text())] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file", show_default=False)] = None,
    fail_on: Annotated[str, typer.Option("--fail-on", help=f"Exit 1 on: {' | '.join(FailOn)}")] = FailOn.UNSUPPORTED.value,
    allow_incomplete: AllowIncompleteOpt = False,
    graph: Annotated[bool, typer.Option("--graph", help="Also check graph mode (torch.compile with torchair): will each op convert on the target release (with --all-releases: on every release); a graph verdict NO is a finding")] = False,
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
        from opcheck.cli.common import ensure_writable

        ensure_writable(output)
        from opcheck.checker.check import fail_level

        level = fail_level(fail_on)
        if models is not None and len(models) > 1:
            code = _check_several(
                models, torch_npu=torch_npu, cann=cann, torch=torch, hardware=hardware,
                cpu_fallback=not no_cpu_fallback, all_releases=all_releases, all_ops=all_ops,
                baseline=baseline, fmt=fmt, output=output, level=level,
                allow_incomplete=allow_incomplete, graph=graph, model_spec=model_spec,
                input_shape=input_shape, input_spec=input_spec, log=log, trust=trust,
                train=train, static=static, fast=fast, timeout=timeout, memory_mb=memory_mb,
                catalog=catalog, quiet=quiet)
            raise typer.Exit(code)
        model = models[0] if models else None
        with _tracer_ahead(model, model_spec, log, trust, static, memory_mb):
            cat, target, why = _target(catalog, torch_npu, cann, torch)
            from opcheck.tracers.composites import composites_with_kernels

            oplist = _oplist(model, model_spec, input_shape, input_spec, log, trust, train,
                             static, timeout, memory_mb, composites_with_kernels(cat), quiet,
                             fast)
        report, code = _report(cat, oplist, target, why, level, cann=cann, hardware=hardware,
                               cpu_fallback=not no_cpu_fallback, all_releases=all_releases,
                               graph=graph, baseline=baseline,
                               allow_incomplete=allow_incomplete)
        _emit(report, fmt, output, all_ops=all_ops)
    raise typer.Exit(code)


def _target(catalog: Path | None, torch_npu: str | None, cann: str | None,
            torch: str | None) -> tuple[Any, Any, str]:
    """The catalog, the release to check against and why it was chosen (the report's first
    note)."""
    from opcheck.checker.queries import select_target, target_reason
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    cat = Catalog.load(open_catalog(catalog))
    torch_npu = release_arg(cat, torch_npu) if torch_npu else None  # 2.6 → 2.6.0.post6
    installed = _installed_torch()
    target = select_target(cat, torch_npu=torch_npu, cann=cann, torch=torch,
                           installed_torch=installed)
    why = target_reason(cat, target, torch_npu=torch_npu, cann=cann, torch=torch,
                        installed_torch=installed)
    return cat, target, why


def _report(cat: Any, oplist: Any, target: Any, why: str, level: FailOn, *, cann: str | None,
            hardware: str | None, cpu_fallback: bool, all_releases: bool, graph: bool,
            baseline: Path | None, allow_incomplete: bool) -> tuple[Any, int]:
    """The report of one op list on the target, and its exit code."""
    from opcheck.checker.check import all_releases_matrix, baseline_filter
    from opcheck.checker.check import check as run_check
    from opcheck.checker.engine import engine_lookup
    from opcheck.checker.restrictions import all_restrictions
    from opcheck.contrib.workarounds import workaround_lookup
    from opcheck.core.errors import UsageError

    report = run_check(cat, oplist, target, cpu_fallback=cpu_fallback,
                       workarounds=workaround_lookup(cat),
                       restrictions=all_restrictions(cat, hardware), cann=cann,
                       engine=engine_lookup(cat, hardware))
    report.notes.insert(0, why)
    if all_releases:
        report.matrix = all_releases_matrix(cat, oplist, cpu_fallback=cpu_fallback)
    if graph:
        from opcheck.checker.graph import graph_check, graph_matrix

        report.graph = graph_check(cat, oplist, target.torch_npu, cpu_fallback=cpu_fallback)
        if all_releases:
            report.graph["matrix"] = graph_matrix(cat, oplist)
    if baseline is not None:
        try:
            doc = json.loads(baseline.read_text(encoding="utf-8"))
        except OSError as exc:
            raise UsageError(f"cannot read baseline {baseline}: {exc.strerror}") from None
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
            raise UsageError(f"cannot read baseline {baseline}: not JSON ({exc})") from None
        report = baseline_filter(report, doc)
    from opcheck.checker.check import exit_code

    code = exit_code(report, level, allow_incomplete=allow_incomplete)
    if report.graph is not None and level is not FailOn.NEVER:
        from opcheck.checker.graph import graph_exit

        code = max(code, graph_exit(report.graph))
    return report, code


def _check_several(
    models: list[str], *, torch_npu: str | None, cann: str | None, torch: str | None,
    hardware: str | None, cpu_fallback: bool, all_releases: bool, all_ops: bool,
    baseline: Path | None, fmt: str, output: Path | None, level: FailOn,
    allow_incomplete: bool, graph: bool, model_spec: str | None, input_shape: str | None,
    input_spec: str | None, log: Path | None, trust: bool, train: bool, static: bool,
    fast: bool, timeout: float, memory_mb: int, catalog: Path | None, quiet: bool,
) -> int:
    """``opcheck a.pt2 b.pt2 …``: each model traced in its own sandboxed process (forked from
    one template that imported torch once when several run), checked against the same
    target; one report each. The exit code is the worst model's; a model whose op list could
    not be made is reported and counts as 2, and the others are still checked."""
    from contextlib import nullcontext

    from opcheck.checker.formats import several
    from opcheck.cli.common import EXIT_ERROR
    from opcheck.core.errors import TraceError, UsageError
    from opcheck.tracers.composites import composites_with_kernels
    from opcheck.tracers.sandbox import MIN_MEMORY_MB, shared_imports

    if model_spec is not None or log is not None:
        raise UsageError("several MODEL files are checked one by one: --model and --log take "
                         "the place of a single MODEL")
    if baseline is not None:
        raise UsageError("--baseline compares one report: give one MODEL")
    several.check_format(fmt)
    runtime = [m for m in models if _runs_model(m, None, None, trust, static)]
    template: Any = nullcontext()
    if len(runtime) > 1 and memory_mb >= MIN_MEMORY_MB:
        template = shared_imports()  # imports torch while the catalog loads
    elif runtime:
        template = _tracer_ahead(runtime[0], None, None, trust, static, memory_mb)
    outcomes: list[several.Outcome] = []
    code = 0
    with template:
        cat, target, why = _target(catalog, torch_npu, cann, torch)
        watch = composites_with_kernels(cat)
        for m in models:
            try:
                oplist = _oplist(m, None, input_shape, input_spec, None, trust, train, static,
                                 timeout, memory_mb, watch, quiet, fast)
            except TraceError as exc:  # this model only: the others are still checked
                typer.echo(f"opcheck: error: {m}: {exc}", err=True)
                outcomes.append((m, str(exc)))
                code = EXIT_ERROR
                continue
            report, one = _report(cat, oplist, target, why, level, cann=cann,
                                  hardware=hardware, cpu_fallback=cpu_fallback,
                                  all_releases=all_releases, graph=graph, baseline=None,
                                  allow_incomplete=allow_incomplete)
            outcomes.append((m, report))
            code = max(code, one)
    _emit_several(outcomes, fmt, output, all_ops=all_ops)
    return code


def _emit_several(outcomes: list[Any], fmt: str, output: Path | None, *,
                  all_ops: bool) -> None:
    """The reports one after another (table: each under its own header line)."""
    from opcheck.checker.formats import several

    if not REPORT_FORMATS.get(fmt).terminal:
        _put(several.render(fmt, outcomes, _context(fmt, all_ops)), output)
        return
    from rich.markup import escape

    from opcheck.checker.graph import graph_text
    from opcheck.cli.render import console_for, render_report, wide_console

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

    if output is not None:
        from opcheck.cli.common import output_file

        with output_file(output) as fh:
            # a file gets what a pipe gets: tab-separated tables, nothing cut
            draw(console_for(fh, None), None, fh.write)
    else:
        draw(wide_console(), -1, lambda text: typer.echo(text, nl=False))


def _emit(report: Any, fmt: str, output: Path | None, *, all_ops: bool = False) -> None:
    spec = REPORT_FORMATS.get(fmt)
    if spec.terminal:
        from opcheck.checker.graph import graph_text
        from opcheck.cli.render import render_report

        if output is not None:
            from opcheck.cli.common import output_file
            from opcheck.cli.render import console_for

            with output_file(output) as fh:
                # a file gets what a pipe gets: tab-separated tables, nothing cut
                render_report(report, console_for(fh, None), width=None, all_ops=all_ops)
                if report.graph is not None:
                    fh.write(graph_text(report.graph))
        else:
            render_report(report, all_ops=all_ops)
            if report.graph is not None:
                typer.echo(graph_text(report.graph), nl=False)
        return
    _put(REPORT_FORMATS.render(fmt, report, _context(fmt, all_ops)), output)


def _context(fmt: str, all_ops: bool) -> Any:
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
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the op list JSON here", show_default=False)] = None,
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
    """List the ops a model sends to the NPU backend, as a versioned op-list JSON."""
    with handle_errors():
        from opcheck.cli.common import ensure_writable, open_catalog
        from opcheck.db.catalog import Catalog
        from opcheck.tracers.composites import composites_with_kernels

        ensure_writable(output)

        # the composite ops to record at both levels: those the catalog knows a kernel for
        watch = composites_with_kernels(Catalog.load(open_catalog(catalog)))
        oplist = _oplist(model, model_spec, input_shape, input_spec, log, trust, train, static,
                         timeout, memory_mb, watch, quiet, fast)
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
