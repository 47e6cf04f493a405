"""``check`` (the main verb) and ``trace``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.cli.common import CatalogOpt, handle_errors

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


def _installed_torch() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("torch")
    except PackageNotFoundError:
        return None


def _oplist(
    model: str | None, model_spec: str | None, input_shape: str | None,
    input_spec: str | None, log: Path | None, trust: bool, train: bool, static: bool,
    timeout: float, memory_mb: int,
) -> Any:
    from opcheck.core.errors import UsageError
    from opcheck.core.oplist import OpList

    if log is not None:
        from opcheck.tracers.api import trace_log

        return trace_log(log)
    if model is None and model_spec is None:
        raise UsageError("give a MODEL file, --model pkg.module:factory, or --log run.log")
    if model is not None and model_spec is None and model.endswith(".json"):
        return OpList.load(Path(model))
    from opcheck.tracers.api import trace
    from opcheck.tracers.inputs import resolve

    return trace(
        model, model_spec=model_spec, inputs=resolve(input_shape, input_spec),
        trust=trust, train=train, static_only=static, timeout=timeout, memory_mb=memory_mb,
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
    fmt: Annotated[str, typer.Option("--format", "-f", help="table | json | markdown | sarif | junit")] = "table",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write the report to a file", show_default=False)] = None,
    fail_on: Annotated[str, typer.Option("--fail-on", help="Exit 1 on: unsupported | fallback | restricted | never")] = "unsupported",
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
    from opcheck.checker.report import FORMATS

    code = 0
    with handle_errors():
        from opcheck.core.errors import UsageError

        if fmt not in FORMATS:
            raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(FORMATS)})")
        from opcheck.checker.check import FAIL_ON, all_releases_matrix, baseline_filter
        from opcheck.checker.check import check as run_check
        from opcheck.checker.queries import select_target
        from opcheck.db.catalog import Catalog
        from opcheck.db.engine import open_catalog

        if fail_on not in FAIL_ON:
            raise UsageError(f"--fail-on must be one of {', '.join(FAIL_ON)}")
        cat = Catalog.load(open_catalog(catalog))
        target = select_target(cat, torch_npu=torch_npu, cann=cann, torch=torch,
                               installed_torch=_installed_torch())
        oplist = _oplist(model, model_spec, input_shape, input_spec, log, trust, train, static,
                         timeout, memory_mb)
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
            except (OSError, json.JSONDecodeError) as exc:
                raise UsageError(f"cannot read baseline {baseline}: {exc}") from None
            report = baseline_filter(report, doc)
        from opcheck.checker.check import exit_code

        code = exit_code(report, fail_on)
        _emit(report, fmt, output)
    raise typer.Exit(code)


def _emit(report: Any, fmt: str, output: Path | None) -> None:
    from opcheck.checker import report as rep

    if fmt == "table":
        from opcheck.cli.render import render_report

        if output is not None:
            from rich.console import Console

            with output.open("w", encoding="utf-8") as fh:
                render_report(report, Console(file=fh, width=140))
        else:
            render_report(report)
        return
    if fmt == "markdown":
        # A migration report records where it was made: the environment inventory.
        from opcheck.env.environment import collect, summary

        text = rep.to_markdown(report, environment=summary(collect()))
    else:
        text = {"json": rep.to_json, "sarif": rep.to_sarif, "junit": rep.to_junit}[fmt](report)
    if output is not None:
        output.write_text(text, encoding="utf-8")
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
) -> None:
    """List the ops a model sends to the NPU backend, as a versioned op-list JSON."""
    with handle_errors():
        oplist = _oplist(model, model_spec, input_shape, input_spec, log, trust, train, static,
                         timeout, memory_mb)
        text = oplist.dumps()
        if output is not None:
            output.write_text(text, encoding="utf-8")
            typer.echo(f"{len(oplist.ops)} ops ({oplist.method}, {oplist.ir}) → {output}", err=True)
        else:
            typer.echo(text, nl=False)


def register(app: typer.Typer) -> None:
    app.command()(check)
    app.command()(trace)
