"""``opcheck run SCRIPT ARGS``: run a whole script on the recorded ``npu`` device.

Parent side (:func:`run_script`, stdlib only): builds a ``"kind": "script"`` request for the
sandboxed worker, which calls :func:`handle` here. Worker side: the script runs with ``runpy``
as ``python SCRIPT ARGS`` would (``sys.argv``, ``__main__``, its directory first on
``sys.path``, the caller's working directory), with CUDA redirected to the recorded device
(:mod:`opcheck.tracers.redirect`) and every op reaching the device recorded and streamed
(:mod:`opcheck.tracers.realdevice`).

Budget (a budget of work, not of code): the script's own ``for`` and ``while`` loops are
compiled to ask the :class:`Budget` before each iteration, and so is every ``DataLoader``
iterator (wherever its loop is); a loop whose last iteration did work (an optimizer step or a
top forward call) but recorded no new op or dtype ends there, and the code after it runs.
``max_steps`` is the hard stop for what cannot be shortened (a ``range`` loop in another
module): the run ends after that many steps, and the op list says it is incomplete and names
the line where it stopped. ``max_steps=0``: no budget, the script runs unchanged to its end.
"""

from __future__ import annotations

import ast
import contextlib
import os
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from importlib.machinery import PathFinder, SourceFileLoader
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import RECORDER_REAL, LoopCut, OpList, loop_cuts_text
from opcheck.tracers import sandbox

DEFAULT_MAX_STEPS = 20
METHOD = "run"


@dataclass
class ScriptRun:
    """What a run produced: the op list (``complete: false`` when the script did not end),
    the script's error line (empty when it ended or the budget stopped it), why the sandbox
    stopped it (timeout, memory limit, crash; empty otherwise) and the findings (what the
    recorded device cannot run, with lines)."""

    oplist: OpList
    error: str = ""
    findings: list[str] = field(default_factory=list)
    stopped: str = ""


def run_script(
    script: str | Path,
    args: list[str] | tuple[str, ...] = (),
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    timeout: float = sandbox.DEFAULT_TIMEOUT,
    memory_mb: int = sandbox.DEFAULT_MEMORY_MB,
    composites: list[str] | tuple[str, ...] | None = None,
    world_size: int = 0,
) -> ScriptRun:
    """Run ``script ARGS`` in the sandbox on the recorded device. Raises TraceError (one line)
    when the script cannot be started or the run recorded nothing before it died."""
    path = Path(script)
    if not path.is_file():
        raise TraceError(f"{path}: no such script" if not path.exists() else f"{path}: not a file")
    if max_steps < 0:
        raise TraceError("--max-steps must be 0 (no limit) or more")
    if composites is None:
        from opcheck.tracers.composites import watched_composites

        composites = watched_composites()
    request = {
        "kind": "script", "script": str(path.resolve()), "argv": [str(a) for a in args],
        "cwd": os.getcwd(), "max_steps": max_steps, "composites": list(composites),
        "label": path.name, "world_size": world_size,
    }  # fmt: skip
    result = sandbox.run_worker(request, timeout=timeout, memory_mb=memory_mb)
    if result.get("ok"):
        ol = OpList.from_json(result.get("oplist"), source="run worker")
        return ScriptRun(ol, str(result.get("script_error") or ""),
                         [str(f) for f in result.get("findings") or []])  # fmt: skip
    error = str(result.get("error", "unknown error"))
    if result.get("partial"):
        # the worker died (timeout, memory, crash): what it streamed until then
        ol = OpList.from_json(result["partial"], source="run worker")
        ol.method = METHOD
        ol.stopped = f"{error}; {ol.stopped}" if ol.stopped else error
        ol.complete = False
        ol.notes.insert(0, "the distinct ops seen until the run stopped are listed (counts are "
                        "not final)")  # fmt: skip
        return ScriptRun(ol, stopped=error)
    raise TraceError(f"{path.name}: {error}")


# ---------------------------------------------------------------- worker side


class StopRun(BaseException):
    """Raised from a step hook to end the script (a BaseException: ``except Exception`` in
    the script must not swallow it)."""


# The names the rewritten script calls (see :class:`_Loops`): injected into its globals.
LOOP = "__opcheck_loop__"
WHILE = "__opcheck_while__"


class Budget:
    """The run's budget: shortens loops whose iterations repeat, counts steps, and stops the
    run at ``max_steps`` steps (the hard stop for loops it cannot shorten).

    A step is an optimizer step, or (in a script with no optimizer) a forward call of a top
    module (one with parameters, called outside any other module); with several optimizers
    (one per parameter group, GAN pairs) it is a step of the first optimizer that steps, and
    the hard stop waits for the next top forward or that optimizer's next step, so the other
    optimizers of the same iteration still run.

    A loop iteration that did work (an optimizer step or a top forward call) and recorded no
    new op and no new dtype of an op ends its loop: the loop's later iterations would send
    the same ops, and the code after the loop still runs (Lightning's ``fast_dev_run`` idea,
    decided by the ops seen instead of a fixed batch count)."""

    def __init__(self, recorder: Any, max_steps: int) -> None:
        self.recorder = recorder
        self.max_steps = max_steps
        self.optimizers = 0  # optimizers constructed: then steps are optimizer steps
        self.lead: int | None = None  # id of the optimizer whose steps are counted
        self.opt_steps = 0
        self.forwards = 0
        self.work = 0  # optimizer steps (any optimizer) and top forward calls so far
        self.steps: list[str] = []
        self.stopped = ""
        # where a loop was shortened → (iterations run, iterations it had or None) per time
        self.cuts: dict[str, list[tuple[int, int | None]]] = {}
        self._pending = ""
        self._calls = 0
        self._distinct = 0
        self._novelty = (-1, 0)  # (work, novelty) when novelty was last computed

    # --- loops --------------------------------------------------------------------------

    def _novel(self) -> int:
        """Grows with each new op record or new dtype of one: not with new shapes or
        arguments (a batch of another length is the same ops)."""
        ops = self.recorder.ops
        return len(ops) + sum(len(u.dtypes) for u in ops.values())

    def mark(self) -> tuple[int, int]:
        """Where the run is at the start of an iteration. O(1) while no work happened (a
        plain Python loop pays a tuple compare per iteration)."""
        if self._novelty[0] != self.work:
            self._novelty = (self.work, self._novel())
        return self._novelty

    def repeats(self, mark: tuple[int, int]) -> bool:
        """Whether the iteration that began at ``mark`` did work and saw nothing new."""
        if not self.max_steps or self.work == mark[0]:
            return False
        self._novelty = (self.work, self._novel())
        return self._novelty[1] == mark[1]

    def cut(self, where: str, done: int, iterable: Any) -> None:
        total: int | None
        try:
            total = len(iterable)
        except Exception:  # generators, iterators: no length
            total = None
        self.cuts.setdefault(where, []).append((done, total))

    def loop(self, iterable: Any, where: str) -> Any:
        """``for x in ITER`` (line ``where``) of the script becomes ``for x in loop(ITER,
        where)``."""
        return self._loop(iterable, where)

    def _loop(self, iterable: Any, where: str) -> Iterator[Any]:
        it = iter(iterable)
        done = 0
        mark = self.mark()
        while True:
            if done and self.repeats(mark):
                self.cut(where, done, iterable)
                return  # the iterator is dropped as a `break` drops it
            try:
                item = next(it)
            except StopIteration:
                return
            mark = self.mark()
            done += 1
            yield item

    def while_loop(self, where: str) -> _WhileState:
        """``while TEST`` of the script becomes ``while state.more() and (TEST)``."""
        return _WhileState(self, where)

    def batch(self, loader_iter: Any, take: Callable[[Any], Any]) -> Any:
        """``DataLoader`` iterators (also those consumed in library code or the user's own
        modules, which are not rewritten): the same rule, per iterator."""
        state = loader_iter.__dict__.get("_opcheck_budget")
        if state is not None and self.repeats(state[0]):
            where = self.recorder.location() or "a DataLoader"
            self.cut(f"{where} (DataLoader)", state[1], loader_iter)
            raise StopIteration
        item = take(loader_iter)
        loader_iter.__dict__["_opcheck_budget"] = (self.mark(), (state[1] if state else 0) + 1)
        return item

    def loop_cuts(self) -> list[LoopCut]:
        """The loops shortened, in the order they were first cut."""
        return [LoopCut(where, done, total) for where, runs in self.cuts.items()
                for done, total in runs]  # fmt: skip

    def cut_lines(self) -> str:
        """The loops shortened, for the op list's notes ("" when none was)."""
        return loop_cuts_text(self.loop_cuts())

    # --- steps --------------------------------------------------------------------------

    def _close(self, what: str) -> int:
        """Record the step that just ended; return how many new distinct ops it added."""
        calls = sum(u.count for u in self.recorder.ops.values())
        distinct = len(self.recorder.ops)
        new = distinct - self._distinct
        self.steps.append(f"{what}: {calls - self._calls} op calls, {new} new")
        self._calls, self._distinct = calls, distinct
        return new

    def _stop_if_pending(self) -> None:
        if self._pending:
            self.stopped = self._pending
            raise StopRun(self.stopped)

    def optimizer_step(self, optimizer: Any) -> None:
        self.work += 1
        if self.lead is None:
            self.lead = id(optimizer)
        if id(optimizer) != self.lead:
            return
        self._stop_if_pending()
        self.opt_steps += 1
        self._close(f"step {self.opt_steps} (optimizer)")
        self._pending = self._why(self.opt_steps, "optimizer steps")

    def forward_start(self, module: Any) -> None:
        if not any(True for _ in module.parameters()):
            return  # loss modules and other parameter-free helpers
        self._stop_if_pending()
        self.work += 1
        if self.optimizers:
            return  # with an optimizer, steps are optimizer steps
        self.forwards += 1
        if self.forwards == 1:
            self._close("before the first forward")
            return
        self._close(f"step {self.forwards - 1} (forward of {type(module).__name__})")
        self._pending = self._why(self.forwards - 1, "forward calls")
        self._stop_if_pending()

    def _why(self, done: int, unit: str) -> str:
        if self.max_steps and done >= self.max_steps:
            return f"stopped by the budget after {done} {unit} (--max-steps {self.max_steps})"
        return ""

    def finish(self) -> None:
        """The script ended: the ops after the last step boundary are a step of their own."""
        if self._calls != sum(u.count for u in self.recorder.ops.values()):
            self._close("after the last step")


class _WhileState:
    """One run of a rewritten ``while`` loop (see :meth:`Budget.while_loop`)."""

    __slots__ = ("budget", "done", "mark", "where")

    def __init__(self, budget: Budget, where: str) -> None:
        self.budget, self.where, self.done = budget, where, 0
        self.mark = budget.mark()

    def more(self) -> bool:
        if self.done and self.budget.repeats(self.mark):
            self.budget.cut(self.where, self.done, None)
            return False
        self.mark = self.budget.mark()
        self.done += 1
        return True


class _Loops(ast.NodeTransformer):
    """Routes the script's own ``for`` and ``while`` loops through the budget (line numbers
    kept: tracebacks and op locations still name the script's lines). Comprehensions are
    left alone: what they build is data the script reads."""

    def __init__(self, path: str) -> None:
        from opcheck.tracers import device

        self.file = device._short_path(path)  # as reports show it
        self.n = 0

    def visit_For(self, node: ast.For) -> ast.AST:
        self.generic_visit(node)
        where = ast.Constant(f"{self.file}:{node.lineno}")
        call = ast.Call(ast.Name(LOOP, ast.Load()), [node.iter, where], [])
        node.iter = ast.copy_location(call, node.iter)
        return node

    def visit_While(self, node: ast.While) -> list[ast.stmt]:
        self.generic_visit(node)
        self.n += 1
        state = f"__opcheck_w{self.n}__"
        where = ast.Constant(f"{self.file}:{node.lineno}")
        start = ast.Assign([ast.Name(state, ast.Store())],
                           ast.Call(ast.Name(WHILE, ast.Load()), [where], []))
        more = ast.Call(ast.Attribute(ast.Name(state, ast.Load()), "more", ast.Load()), [], [])
        node.test = ast.copy_location(ast.BoolOp(ast.And(), [more, node.test]), node.test)
        return [ast.copy_location(start, node), node]


def _budgeted_code(source: str | bytes, path: str) -> Any:
    tree = _Loops(path).visit(ast.parse(source, path))
    return compile(ast.fix_missing_locations(tree), path, "exec", dont_inherit=True)


def _compile_budgeted(script: str) -> Any:
    """The script's code with its loops routed through the budget."""
    import tokenize

    with tokenize.open(script) as fh:  # honours a coding cookie, as runpy does
        return _budgeted_code(fh.read(), script)


class _UserModules:
    """An import finder for the user's own modules (``.py`` files under the script's folder,
    not an installed package): their loops go through the budget too, since training loops
    often live in an ``engine.py`` next to ``train.py``. Compiled from source each time: the
    rewritten code never reaches ``__pycache__``."""

    def __init__(self, root: str) -> None:
        from opcheck.tracers import device

        self.root = os.path.join(os.path.realpath(root), "")
        self.skip = device._TRACER_DIR  # torch and the rest are installed: site-packages

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        spec = PathFinder.find_spec(name, path)
        origin = getattr(spec, "origin", None) or ""
        real = os.path.realpath(origin) if origin.endswith(".py") else ""
        if (spec is None or not real.startswith(self.root) or real.startswith(self.skip)
                or "site-packages" in real or "dist-packages" in real):  # fmt: skip
            return None
        spec.loader = _UserLoader(name, origin)
        return spec


class _UserLoader(SourceFileLoader):
    def get_code(self, fullname: str) -> Any:
        path = self.get_filename(fullname)
        return _budgeted_code(self.get_data(path), path)


@contextlib.contextmanager
def budgeted(budget: Budget, root: str) -> Iterator[None]:
    """Within the block, rewritten code finds the budget (its loop names are builtins, so a
    module needs nothing injected) and the user's modules under ``root`` are rewritten when
    imported."""
    import builtins

    finder = _UserModules(root)
    setattr(builtins, LOOP, budget.loop)
    setattr(builtins, WHILE, budget.while_loop)
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        with contextlib.suppress(ValueError):
            sys.meta_path.remove(finder)
        for name in (LOOP, WHILE):
            with contextlib.suppress(AttributeError):
                delattr(builtins, name)


def _run_main(code: Any, script: str, extra: dict[str, Any] | None = None) -> None:
    """Run ``code`` as ``__main__``, as ``runpy.run_path`` runs a script file."""
    import types

    module = types.ModuleType("__main__")
    module.__dict__.update(__file__=script, __cached__=None, __loader__=None,
                           __package__=None, __spec__=None, **(extra or {}))  # fmt: skip
    saved = sys.modules.get("__main__")
    sys.modules["__main__"] = module
    try:
        exec(code, module.__dict__)
    finally:
        if saved is not None:
            sys.modules["__main__"] = saved


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Worker entry: run the script, return ``{"ok": true, "oplist": ..., "script_error": ...,
    "findings": [...]}``."""

    from opcheck.tracers import composite_kernels, realdevice, redirect, runtime
    from opcheck.tracers import settings as run_settings

    script = str(request["script"])
    argv = [str(a) for a in request.get("argv") or []]
    cwd = str(request.get("cwd") or os.getcwd())
    max_steps = int(request.get("max_steps", DEFAULT_MAX_STEPS))
    label = str(request.get("label") or Path(script).name)
    if request.get("world_size"):
        os.environ["OPCHECK_WORLD_SIZE"] = str(int(request["world_size"]))
    os.environ["OPCHECK_TRACE_CWD"] = cwd
    os.chdir(cwd)  # relative data paths in the script resolve as they do for `python SCRIPT`
    stream = runtime.Stream(str(request["stream"])) if request.get("stream") else None
    recorder = runtime.Recorder()
    recorder.stream = stream
    realdevice.install()  # first: the redirection answers torch.cuda.* with torch.npu.*
    findings = redirect.install(redirect.Findings())
    composites = frozenset(str(c) for c in request.get("composites") or [])
    composite_kernels.install_composite_kernels(composites)
    recorder.watched = composites & composite_kernels._COMPOSITE_INSTALLED
    session = realdevice.Session(recorder)
    budget = Budget(recorder, max_steps)
    session.on_forward_start = budget.forward_start
    session.on_optimizer_step = budget.optimizer_step
    sys.argv = [script, *argv]
    sys.path.insert(0, str(Path(script).parent))
    recorded = run_settings.Settings(findings.user_line)
    try:
        with _budget_hooks(budget, max_steps), session.active(), \
                run_settings.recording(recorded):
            error, stop_line = _run_script(script, budget, max_steps)
    finally:
        budget.finish()
        if stream is not None:
            stream.close()
    if error and budget.cut_lines():
        # a loop cut short may be why (a list the script indexes later is shorter)
        error += (f" (after opcheck shortened loops: {budget.cut_lines()}; --max-steps 0 runs "
                  "every iteration)")
    ol = _script_oplist(recorder, budget, findings, label, error, stop_line)
    ol.settings = recorded.rows
    return {"ok": True, "oplist": ol.to_json(), "script_error": error,
            "findings": list(findings.lines)}  # fmt: skip


@contextlib.contextmanager
def _budget_hooks(budget: Budget, max_steps: int) -> Iterator[None]:
    """Optimizers counted as they are made; with ``max_steps`` every DataLoader's iterator
    (wherever the loop over it is, library code too) asks the budget for its next batch."""
    import torch

    optimizer_init = torch.optim.Optimizer.__init__
    loader_iter = torch.utils.data.dataloader._BaseDataLoaderIter
    loader_next = loader_iter.__next__

    def counted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        budget.optimizers += 1
        optimizer_init(self, *args, **kwargs)

    def budgeted_next(self: Any) -> Any:
        return budget.batch(self, loader_next)

    torch.optim.Optimizer.__init__ = counted_init  # type: ignore[method-assign]
    if max_steps:
        loader_iter.__next__ = budgeted_next  # type: ignore[method-assign]
    try:
        yield
    finally:
        torch.optim.Optimizer.__init__ = optimizer_init  # type: ignore[method-assign]
        loader_iter.__next__ = loader_next  # type: ignore[method-assign]


def _run_script(script: str, budget: Budget, max_steps: int) -> tuple[str, str]:
    """Run the script as ``__main__``: ``(error, stop_line)``, the script's own failure as one
    line (its ops kept) and the line where the step budget stopped it."""
    import runpy

    error = ""
    stop_line = ""
    try:
        if max_steps:
            with budgeted(budget, str(Path(script).parent)):
                _run_main(_compile_budgeted(script), script)
        else:
            runpy.run_path(script, run_name="__main__")
    except StopRun as exc:
        stop_line = _script_line(exc.__traceback__, script)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            where = _script_line(exc.__traceback__, script)
            error = f"{where}: SystemExit: exited with status {exc.code}".lstrip(": ")
    except MemoryError:
        raise
    except BaseException as exc:  # the script's own failure: reported, ops kept
        where = _script_line(exc.__traceback__, script)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        what = f"{type(exc).__name__}: {text}".rstrip(": ")
        error = f"{where}: {what}" if where else what
    return error, stop_line


def _script_oplist(
    recorder: Any, budget: Budget, findings: Any, label: str, error: str, stop_line: str
) -> OpList:
    """The run's OpList: the ops, the redirection's findings, the loops cut short and why the
    run stopped."""
    import torch

    loop_cuts = budget.loop_cuts()
    cuts = loop_cuts_text(loop_cuts)
    ops = recorder.sorted_ops()
    group_note = findings.collectives.merge_into(ops)
    # nothing reached the device: a YES over no op would be silent about everything
    no_device = _no_device(budget) if not (ops or error or budget.stopped) else ""
    phases = {m for u in ops for m in u.modules}
    notes = [f"finding: {f}" for f in findings.lines] + ([group_note] if group_note else [])
    stopped = no_device
    if budget.stopped:
        at = f" at {stop_line}" if stop_line else ""
        stopped = (f"{budget.stopped}{at}: that line and the code after it did not run "
                   "(loops in other modules over a range, and loops whose iterations keep "
                   "sending new ops, are not shortened; --max-steps 0 runs to the end)")
    if cuts:
        notes.append("loops shortened (inferred: their later iterations repeat ops and dtypes "
                     "already recorded; an op only a later iteration sends, e.g. a branch taken "
                     f"at epoch 10, is not seen; --max-steps 0 runs every iteration): {cuts}")
    if budget.steps:
        notes.append("op calls per step: " + "; ".join(budget.steps))
    notes.append(
        "recorded on a real-data npu device (CPU kernels): CUDA calls redirected as "
        "transfer_to_npu does; kernels torch_npu picks by shape at run time and numerical "
        "differences are not visible"
    )
    return OpList(
        model=label, method=METHOD, ir="runtime-dispatch",
        torch_version=torch.__version__.split("+")[0],
        mode="train" if {"backward", "optimizer"} & phases else "inference",
        notes=notes, ops=ops, complete=not (error or stopped),
        stopped=f"the script raised at {error}" if error else stopped,
        recorder=RECORDER_REAL, on_device=bool(ops), loop_cuts=loop_cuts,
    )  # fmt: skip


def _no_device(budget: Budget) -> str:
    """Why a run that recorded no op is not a YES: what ran on the CPU instead."""
    ran = [f"{n} {what}" for n, what in ((budget.forwards, "forward calls"),
                                         (budget.opt_steps, "optimizer steps")) if n]
    return ("no tensor reached the device: the model and data stay on the CPU (no .cuda() / "
            ".to(device) in the script" + (f"; {' and '.join(ran)} ran on the CPU" if ran
                                            else "") + ")")


def _script_line(tb: Any, script: str) -> str:
    """The innermost traceback line in the user's own files (not torch, not an installed
    library, not opcheck), else the innermost line of the script itself."""
    from opcheck.tracers import device

    torch_dirs = device._torch_dirs()
    stdlib = os.path.dirname(os.__file__)
    own = ""
    in_script = ""
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        line = f"{device._short_path(fn)}:{tb.tb_lineno}"
        if fn == script:
            in_script = line
        if not (fn.startswith(torch_dirs) or fn.startswith(device._TRACER_DIR)
                or fn.startswith(stdlib) or fn.startswith("<")
                or "site-packages" in fn or "dist-packages" in fn):  # fmt: skip
            own = line
        tb = tb.tb_next
    return own or in_script
