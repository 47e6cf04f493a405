"""The check use case: one typed request in, one report and exit code out.

``opcheck check`` (one model or several), ``opcheck run`` and the web check page only build a
:class:`CheckRequest` and render the :class:`CheckResult`; everything between (the target
release and why it was chosen, the op list, the checker, restrictions, workarounds, the
all-releases matrix, graph mode, the baseline, the exit code) happens here, once, so the
three surfaces cannot drift apart.

The op list comes from one of three inputs: an op list already recorded (:class:`Recorded`:
a pasted JSON, a parsed runtime log), a model to trace (:class:`ModelInput`: a model file,
an op-list JSON file or ``--model`` code) or a script to run (:class:`ScriptInput`). Tracing
stays in ``opcheck.tracers`` (below this layer), imported on use so that checking an op list
never imports the sandbox. Collaborators from layers above (the contributed workarounds,
the CLI's progress display) are handed in.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpList
from opcheck.core.vocab import FailOn

if TYPE_CHECKING:
    # Imported on use: the CLI registers its commands (and their defaults from here) without
    # loading the database layer.
    from opcheck.checker.check import (
        EngineLookup,
        PathHook,
        Report,
        RestrictionLookup,
        WorkaroundLookup,
    )
    from opcheck.db.advisor import AdvisorRule
    from opcheck.db.catalog import Catalog, ReleaseInfo

# The exit code of a script that raised or was stopped (``opcheck run`` without --partial):
# the same code as bad input, since the report does not cover the whole script.
EXIT_INPUT_FAILED = 2

# Default limits of the sandboxed trace / run (the CLI's defaults).
TRACE_TIMEOUT = 120.0
TRACE_MEMORY_MB = 4096
RUN_TIMEOUT = 300.0
RUN_MEMORY_MB = 8192
RUN_MAX_STEPS = 20  # the hard stop (loops that repeat are shortened before: tracers.script)

@dataclass(frozen=True)
class Recorded:
    """An op list already in hand (pasted JSON, a parsed runtime log)."""

    oplist: OpList


@dataclass(frozen=True)
class ModelInput:
    """A model file, an op-list JSON file, or a model given as code (``--model``)."""

    model: str | None = None
    model_spec: str | None = None
    input_shape: str | None = None
    input_spec: str | None = None
    trust: bool = False
    train: bool = False
    static: bool = False
    fast: bool = False
    timeout: float = TRACE_TIMEOUT
    memory_mb: int = TRACE_MEMORY_MB

    @property
    def label(self) -> str:
        return self.model_spec or self.model or ""

    @property
    def is_oplist_file(self) -> bool:
        return self.model is not None and self.model_spec is None and self.model.endswith(".json")

    @property
    def runs_model(self) -> bool:
        """Whether the op list comes from running the model (a sandboxed runtime trace)."""
        return not self.static and (
            self.model_spec is not None
            or (self.trust and self.model is not None and not self.is_oplist_file))


@dataclass(frozen=True)
class ScriptInput:
    """A script run as ``python SCRIPT ARGS`` would, on the recorded device."""

    script: Path
    args: tuple[str, ...] = ()
    max_steps: int = RUN_MAX_STEPS
    timeout: float = RUN_TIMEOUT
    memory_mb: int = RUN_MEMORY_MB
    world_size: int = 0  # the group size collectives are checked for (0: the script's own)

    @property
    def label(self) -> str:
        return self.script.name


CheckInput = Recorded | ModelInput | ScriptInput


@dataclass(frozen=True)
class CheckRequest:
    """Everything a check needs from the user: the input, the target, the modes, the fail
    level and the baseline. Every surface builds one; options a surface has no use for keep
    their defaults."""

    input: CheckInput
    torch_npu: str | None = None  # as typed: "2.6" stands for the newest 2.6 release
    cann: str | None = None
    torch: str | None = None
    # the installed torch (picks the default target); None on the web, which has none
    installed_torch: str | None = None
    hardware: str | None = None  # a product alias or part of a product name
    # torch.npu.set_compile_mode(jit_compile=...) and inputs in an internal format (NZ): which
    # kernel runs a call (opcheck.checker.kernel_path); None: torch_npu's default
    jit_compile: bool | None = None
    internal_format: bool | None = None
    cpu_fallback: bool = True
    all_releases: bool = False
    graph: bool = False
    capture: bool = False  # ACL graph capture (torch.npu.NPUGraph) per call site
    fail_on: FailOn = FailOn.UNSUPPORTED
    # an op list that stopped early is not by itself a finding (`run --partial`)
    allow_incomplete: bool = False
    baseline: Mapping[str, Any] | None = None  # a previous report document
    # the surface's words for choosing another target (the end of the target note); None:
    # the command line's (``target_reason``'s default)
    how: str | None = None


@dataclass(frozen=True)
class Target:
    """The release a request is checked against, and the notes saying why."""

    release: ReleaseInfo
    notes: tuple[str, ...]


@dataclass
class CheckResult:
    report: Report
    exit_code: int
    # the input did not finish (a script raised or was stopped): one line for the user
    input_problem: str = ""


ProgressHook = Callable[[str], AbstractContextManager[object]]


def load_baseline(path: Path) -> dict[str, Any]:
    """A previous report JSON (``--baseline``), read as a usage error when it cannot be."""
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise UsageError(f"cannot read baseline {path}: {exc.strerror}") from None
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as exc:
        raise UsageError(f"cannot read baseline {path}: not JSON ({exc})") from None
    if not isinstance(doc, dict):
        raise UsageError(f"baseline {path} is not an opcheck report JSON (no ops list)")
    return doc


@contextmanager
def tracer_ahead(*inputs: CheckInput) -> Iterator[None]:
    """Start the sandbox before the catalog loads, so torch imports meanwhile: one worker for
    one runtime trace (a script, a model run), one torch-importing template that forks a
    child per model for several. Nothing for inputs that run no model."""
    from opcheck.tracers.sandbox import MIN_MEMORY_MB

    running = [i for i in inputs
               if isinstance(i, ScriptInput) or (isinstance(i, ModelInput) and i.runs_model)]
    # below the minimum, run_worker refuses before starting anything
    running = [i for i in running if i.memory_mb >= MIN_MEMORY_MB]
    ahead: AbstractContextManager[object] = nullcontext()
    if len(running) > 1:
        from opcheck.tracers.sandbox import shared_imports

        ahead = shared_imports()
    elif running:
        from opcheck.tracers.sandbox import worker_ahead

        ahead = worker_ahead(running[0].memory_mb)
    with ahead:
        yield


class CheckUseCase:
    """Checks requests against one catalog.

    ``workarounds``: the contributed workaround lookup (``opcheck.contrib``, a layer above,
    hands it in). ``restrictions``: False for a catalog without the per-API tables (written
    before them). ``progress``: how the surface shows a trace in progress."""

    def __init__(self, catalog: Catalog, *, workarounds: WorkaroundLookup | None = None,
                 restrictions: bool = True, progress: ProgressHook | None = None) -> None:
        self.catalog = catalog
        self.workarounds = workarounds
        self.with_restrictions = restrictions
        self.progress = progress
        self._restrictions: dict[str | None, RestrictionLookup | None] = {}
        self._paths: dict[tuple[str | None, bool | None, bool | None], PathHook | None] = {}
        self._engines: dict[str | None, EngineLookup | None] = {}
        self._composites: list[str] | None = None
        self._tagged: dict[str, tuple[tuple[str, ...], str]] | None = None
        self._advisor: list[AdvisorRule] | None = None

    # --- the target -----------------------------------------------------------------------

    def target(self, request: CheckRequest) -> Target:
        """The release ``request`` is checked on: ``select_target``'s rule, the same on every
        surface, with the notes the report starts with (how a typed prefix was read, why this
        release)."""
        from opcheck.checker.queries import select_target, target_reason
        from opcheck.core.versions import expand_release

        cat = self.catalog
        notes: list[str] = []
        torch_npu = request.torch_npu or None
        if torch_npu:  # 2.6 → 2.6.0.post6 (a release without kernels is refused by name)
            torch_npu, note = expand_release(
                torch_npu, [r.torch_npu for r in cat.releases if r.has_kernels],
                exact=[r.torch_npu for r in cat.releases])
            if note:
                notes.append(note)
        release = select_target(cat, torch_npu=torch_npu, cann=request.cann,
                                torch=request.torch, installed_torch=request.installed_torch)
        how = {} if request.how is None else {"how": request.how}
        notes.append(target_reason(cat, release, torch_npu=torch_npu, cann=request.cann,
                                   torch=request.torch, installed_torch=request.installed_torch,
                                   **how))
        return Target(release, tuple(notes))

    # --- the op list ----------------------------------------------------------------------

    def composites(self) -> list[str]:
        """The composite ops a runtime trace records at both levels (those the catalog knows
        a kernel for)."""
        if self._composites is None:
            from opcheck.tracers.composites import composites_with_kernels

            self._composites = composites_with_kernels(self.catalog)
        return self._composites

    def record(self, source: CheckInput) -> tuple[OpList, str]:
        """The op list of an input and what stopped it (a script's error line or why the
        sandbox stopped it; "" when it ran to its end or budget). Raises TraceError /
        UsageError. (What a run's recorded device refused is in the op list's notes.)"""
        if isinstance(source, Recorded):
            return source.oplist, ""
        if isinstance(source, ScriptInput):
            from opcheck.tracers.script import run_script

            # no progress display: the script's own output may go to the terminal
            run = run_script(source.script, list(source.args), max_steps=source.max_steps,
                             timeout=source.timeout, memory_mb=source.memory_mb,
                             composites=self.composites(), world_size=source.world_size)
            problem = (f"raised at {run.error}" if run.error
                       else f"stopped: {run.stopped}" if run.stopped else "")
            return run.oplist, problem
        return record_model(source, self.composites, self._progress), ""

    def _progress(self, what: str) -> AbstractContextManager[object]:
        return self.progress(what) if self.progress is not None else nullcontext()

    # --- the check ------------------------------------------------------------------------

    def run(self, request: CheckRequest, target: Target | None = None) -> CheckResult:
        """Check one request: ``target`` when the caller resolved it already (several models
        on one target), else the request's."""
        target = target or self.target(request)
        oplist, problem = self.record(request.input)
        jit = [s.get("jit_compile") for s in oplist.settings if s.get("kind") == "compile_mode"
               and isinstance(s.get("jit_compile"), bool)]
        if jit and request.jit_compile is None:
            # the script's own torch.npu.set_compile_mode: the kernel paths it chose
            request = replace(request, jit_compile=jit[-1])
        report = self.report(request, oplist, target)
        code = self.exit_code(request, report)
        if problem and not request.allow_incomplete:
            code = EXIT_INPUT_FAILED
        return CheckResult(report, code, problem)

    def report(self, request: CheckRequest, oplist: OpList, target: Target) -> Report:
        from opcheck.checker.check import all_releases_matrix, baseline_filter, check

        cat = self.catalog
        release = target.release
        report = check(cat, oplist, release, cpu_fallback=request.cpu_fallback,
                       workarounds=self.workarounds,
                       restrictions=self.restrictions(request.hardware), cann=request.cann,
                       kernel_paths=self.kernel_paths(request),
                       engine=self.engines(request.hardware) if self.with_restrictions else None)
        report.notes[:0] = target.notes
        report.speed = self.speed(request, oplist, report, release)
        if request.all_releases:
            report.matrix = all_releases_matrix(cat, oplist, cpu_fallback=request.cpu_fallback)
        if request.graph:
            from opcheck.checker.graph import graph_check, graph_matrix

            report.graph = graph_check(cat, oplist, release.torch_npu,
                                       cpu_fallback=request.cpu_fallback)
            if request.all_releases:
                report.graph["matrix"] = graph_matrix(cat, oplist)
        if request.capture:
            from opcheck.checker.capture import capture_check

            report.capture = capture_check(cat, report, oplist, release)
        if request.baseline is not None:
            report = baseline_filter(report, request.baseline)
        return report

    def speed(self, request: CheckRequest, oplist: OpList, report: Report,
              release: ReleaseInfo) -> dict[str, Any]:
        """The report's speed section: its findings and the fused-op tips."""
        from opcheck.checker.advisor import advisor_tips
        from opcheck.checker.aicpu_rules import aicpu_dtype_findings
        from opcheck.checker.runsettings import name_sync_causes, setting_findings
        from opcheck.checker.shapes import dynamic_shape_findings
        from opcheck.checker.speed import SYNC_TAGS, section, speed_findings
        from opcheck.checker.tips import fused_tips
        from opcheck.core.products import canonical_alias
        from opcheck.db.advisor import advisor_rules
        from opcheck.db.reads import ops_tagged

        if self._tagged is None:
            self._tagged = ops_tagged(self.catalog.engine, SYNC_TAGS)
        product = canonical_alias(request.hardware) if request.hardware else None
        findings, meta = speed_findings(report, oplist, self._tagged, product)
        if self._advisor is None:
            self._advisor = advisor_rules(self.catalog.engine)
        findings += setting_findings(oplist.settings, int(meta["steps"]), self._advisor)
        findings += aicpu_dtype_findings(oplist, self._advisor,
                                         report.target.get("cann") or release.cann,
                                         int(meta["steps"]))
        findings += dynamic_shape_findings(report, oplist, int(meta["steps"]),
                                           str(meta["judged_on"]))
        name_sync_causes(findings, oplist.settings)
        judged = replace(release, cann=report.target.get("cann") or release.cann)
        tips = fused_tips(self.catalog, oplist, judged, product)
        tips += advisor_tips(self.catalog, oplist, judged, product, {t["api"] for t in tips},
                             self._advisor)
        return section(findings, meta, tips)

    def restrictions(self, hardware: str | None) -> RestrictionLookup | None:
        if not self.with_restrictions:
            return None
        key = hardware or None
        if key not in self._restrictions:
            from opcheck.checker.restrictions import all_restrictions

            self._restrictions[key] = all_restrictions(self.catalog, key)
        return self._restrictions[key]

    def engines(self, hardware: str | None) -> EngineLookup | None:
        key = hardware or None
        if key not in self._engines:
            from opcheck.checker.engine import engine_lookup

            self._engines[key] = engine_lookup(self.catalog, key)
        return self._engines[key]

    def kernel_paths(self, request: CheckRequest) -> PathHook | None:
        key = (request.hardware or None, request.jit_compile, request.internal_format)
        if key not in self._paths:
            from opcheck.checker.kernel_path import Settings, kernel_path_hook

            self._paths[key] = kernel_path_hook(
                self.catalog, key[0], Settings(request.jit_compile, request.internal_format))
        return self._paths[key]

    @staticmethod
    def exit_code(request: CheckRequest, report: Report) -> int:
        """0 clean under the fail level, 1 findings (a graph verdict NO is one too)."""
        from opcheck.checker.check import exit_code

        code = exit_code(report, request.fail_on, allow_incomplete=request.allow_incomplete)
        if report.graph is not None and request.fail_on is not FailOn.NEVER:
            from opcheck.checker.graph import graph_exit

            code = max(code, graph_exit(report.graph))
        if report.capture is not None and request.fail_on is not FailOn.NEVER:
            from opcheck.checker.capture import capture_exit

            code = max(code, capture_exit(report.capture))
        return code


def record_model(source: ModelInput, composites: Callable[[], list[str]],
                 progress: Callable[[str], AbstractContextManager[object]] | None = None,
                 ) -> OpList:
    """The op list of a model input: an op-list JSON read as is, else the tracers' listing
    (``composites`` is asked only when a trace runs). Also ``opcheck trace``'s."""
    if source.fast and source.static:
        raise UsageError("--fast speeds up a runtime trace: not with --log or --static")
    if source.is_oplist_file:
        assert source.model is not None
        listed = OpList.load(Path(source.model))
        if source.fast:
            listed.notes.append("--fast applies to runtime traces: the op list was read as is")
        return listed
    if source.model is None and source.model_spec is None:
        raise UsageError("give a MODEL file, --model pkg.module:factory, or --log run.log")
    if source.model is not None and source.model_spec is None and source.model.endswith(".py"):
        raise UsageError(
            f"{source.model} is a Python file: run a script with `opcheck run {source.model} "
            f"[ARGS]`, or check a model it defines with `--model {source.model}:NAME` (a "
            "factory or an nn.Module)")
    from opcheck.tracers.api import trace
    from opcheck.tracers.inputs import resolve

    inputs = resolve(source.input_shape, source.input_spec)
    watch = composites()
    with progress(f"tracing {source.label}") if progress is not None else nullcontext():
        return trace(source.model, model_spec=source.model_spec, inputs=inputs,
                     trust=source.trust, train=source.train, static_only=source.static,
                     timeout=source.timeout, memory_mb=source.memory_mb, composites=watch,
                     fast=source.fast)
