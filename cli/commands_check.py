"""``check`` (the main verb) and ``trace``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.checker.formats import REPORT_FORMATS
from opcheck.cli.common import CatalogOpt, handle_errors
from opcheck.core.vocab import FailOn

ModelArg = Annotated[
    str | None,
    typer.Argument(help="Model file (.pt2, TorchScript, pickled module), an op list JSON from "
                   "`opcheck trace`, or omitted with --model / --log.", show_default=False),
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
    timeout: float, memory_mb: int, composites: list[str] | None = None,
) -> Any:
    from opcheck.core.errors import UsageError
    from opcheck.core.oplist import OpList

    if log is not None:
        from opcheck.contrib.logs import parse_log

        return parse_log(log)
    if model is None and model_spec is None:
        raise UsageError("give a MODEL file, --model pkg.module:factory, or --log run.log")
    if model is not None and model_spec is None and model.endswith(".json"):
        return OpList.load(Path(model))
    if model is not None and model_spec is None and model.endswith(".py"):
        raise UsageError(
            f"{model} is a Python file: run a script with `opcheck run {model} [ARGS]`, or check "
            f"a model it defines with `--model {model}:NAME` (a factory or an nn.Module)"
        )
    from opcheck.tracers.api import trace
    from opcheck.tracers.inputs import resolve

    return trace(
        model, model_spec=model_spec, inputs=resolve(input_shape, input_spec),
        trust=trust, train=train, static_only=static, timeout=timeout, memory_mb=memory_mb,
        composites=composites,
    )


def check(
    model: ModelArg = None,
    torch_npu: Annotated[str | None, typer.Option("--torch-npu", help="Target torch_npu release, e.g. 2.6.0.post5", show_default=False)] = None,
    cann: Annotated[str | None, typer.Option("--cann", help="Target CANN version, e.g. 8.3.RC1", show_default=False)] = None,
    torch: Annotated[str | None, typer.Option("--torch", help="Target torch version line, e.g. 2.6", show_default=False)] = None,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Narrow to a product family (needs the API docs data)", show_default=False)] = None,
    no_cpu_fallback: Annotated[bool, typer.Option("--no-cpu-fallback", help="Model TORCH_NPU_FALLBACK_CPU_DISABLE=1: fallbacks become errors")] = False,
    all_releases: Annotated[bool, typer.Option("--all-releases", help="ops × releases matrix and the oldest release that runs the whole model on the NPU")] = False,
    baseline: Annotated[Path | None, typer.Option("--baseline", help="A previous report JSON: show only what changed", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help=REPORT_FORMATS.help_text())] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file", show_default=False)] = None,
    fail_on: Annotated[str, typer.Option("--fail-on", help=f"Exit 1 on: {' | '.join(FailOn)}")] = FailOn.UNSUPPORTED.value,
    allow_incomplete: AllowIncompleteOpt = False,
    model_spec: ModelSpecOpt = None,
    input_shape: InputShapeOpt = None,
    input_spec: InputSpecOpt = None,
    log: LogOpt = None,
    trust: TrustOpt = False,
    train: TrainOpt = False,
    static: StaticOpt = False,
    timeout: TimeoutOpt = 120.0,
    memory_mb: MemoryOpt = 4096,
    catalog: CatalogOpt = None,
) -> None:
    """Check a model against the catalog: every problem at once, for the versions you have.

    Exit codes: 0 clean under --fail-on, 1 findings, 2 bad input or usage.
    """
    code = 0
    with handle_errors():
        from opcheck.core.errors import UsageError

        REPORT_FORMATS.get(fmt)  # an unknown format is a usage error before any work
        from opcheck.cli.common import ensure_writable

        ensure_writable(output)
        from opcheck.checker.check import all_releases_matrix, baseline_filter, fail_level
        from opcheck.checker.check import check as run_check
        from opcheck.checker.queries import select_target
        from opcheck.cli.common import open_catalog
        from opcheck.db.catalog import Catalog

        level = fail_level(fail_on)
        cat = Catalog.load(open_catalog(catalog))
        target = select_target(cat, torch_npu=torch_npu, cann=cann, torch=torch,
                               installed_torch=_installed_torch())
        from opcheck.tracers.composites import composites_with_kernels

        oplist = _oplist(model, model_spec, input_shape, input_spec, log, trust, train, static,
                         timeout, memory_mb, composites_with_kernels(cat))
        from opcheck.checker.restrictions import restriction_lookup
        from opcheck.contrib.workarounds import workaround_lookup

        report = run_check(cat, oplist, target, cpu_fallback=not no_cpu_fallback,
                           workarounds=workaround_lookup(cat),
                           restrictions=restriction_lookup(cat, hardware))
        if all_releases:
            report.matrix = all_releases_matrix(cat, oplist, cpu_fallback=not no_cpu_fallback)
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
        _emit(report, fmt, output)
    raise typer.Exit(code)


def _emit(report: Any, fmt: str, output: Path | None) -> None:
    from opcheck.checker.formats import RenderContext

    spec = REPORT_FORMATS.get(fmt)
    if spec.terminal:
        from opcheck.cli.render import render_report

        if output is not None:
            from rich.console import Console

            from opcheck.cli.common import output_file

            with output_file(output) as fh:
                render_report(report, Console(file=fh, width=140))
        else:
            render_report(report)
        return
    ctx = RenderContext()
    if spec.wants_environment:
        # A migration report records where it was made: the environment inventory.
        from opcheck.env.assess import summary
        from opcheck.env.probe import collect

        ctx = RenderContext(environment=summary(collect()))
    text = REPORT_FORMATS.render(fmt, report, ctx)
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
    timeout: TimeoutOpt = 120.0,
    memory_mb: MemoryOpt = 4096,
    catalog: CatalogOpt = None,
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
                         timeout, memory_mb, watch)
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
