"""``opcheck run SCRIPT ARGS``: run a whole script on the recorded ``npu`` device.

Parent side (:func:`run_script`, stdlib only): builds a ``"kind": "script"`` request for the
sandboxed worker, which calls :func:`handle` here. Worker side: the script runs with ``runpy``
as ``python SCRIPT ARGS`` would (``sys.argv``, ``__main__``, its directory first on
``sys.path``, the caller's working directory), with CUDA redirected to the recorded device
(:mod:`opcheck.tracers.redirect`) and every op reaching the device recorded and streamed
(:mod:`opcheck.tracers.realdevice`).

Budget: a step is an optimizer step, or (in a script with no optimizer) a forward call of a
top module (one with parameters, called outside any other module). The run stops after
``max_steps`` steps, or earlier when a step after the first adds no new op: the ops of a loop
repeat, and the report needs each distinct call once. ``max_steps=0``: no budget.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import OpList
from opcheck.tracers import sandbox

DEFAULT_MAX_STEPS = 2
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
        "label": path.name,
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


class Budget:
    """Counts steps, keeps per-step op counts and stops the run when the budget is spent.

    With several optimizers (one per parameter group, GAN pairs) a step is one step of the
    first optimizer that steps; the stop then waits for the next top forward or that
    optimizer's next step, so the other optimizers of the same iteration still run."""

    def __init__(self, recorder: Any, max_steps: int) -> None:
        self.recorder = recorder
        self.max_steps = max_steps
        self.optimizers = 0  # optimizers constructed: then steps are optimizer steps
        self.lead: int | None = None  # id of the optimizer whose steps are counted
        self.opt_steps = 0
        self.forwards = 0
        self.steps: list[str] = []
        self.stopped = ""
        self._pending = ""
        self._calls = 0
        self._distinct = 0

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
        if self.lead is None:
            self.lead = id(optimizer)
        if id(optimizer) != self.lead:
            return
        self._stop_if_pending()
        self.opt_steps += 1
        new = self._close(f"step {self.opt_steps} (optimizer)")
        self._pending = self._why(self.opt_steps, new, "optimizer steps")

    def forward_start(self, module: Any) -> None:
        if not any(True for _ in module.parameters()):
            return  # loss modules and other parameter-free helpers
        self._stop_if_pending()
        if self.optimizers:
            return  # with an optimizer, steps are optimizer steps
        self.forwards += 1
        if self.forwards == 1:
            self._close("before the first forward")
            return
        new = self._close(f"step {self.forwards - 1} (forward of {type(module).__name__})")
        self._pending = self._why(self.forwards - 1, new, "forward calls")
        self._stop_if_pending()

    def _why(self, done: int, new: int, unit: str) -> str:
        if not self.max_steps:
            return ""  # no budget: the script runs to its end
        if done >= self.max_steps:
            return f"stopped by the budget after {done} {unit} (--max-steps {self.max_steps})"
        if done >= 2 and new == 0:
            return f"stopped after {done} {unit}: the last one added no new op"
        return ""

    def finish(self) -> None:
        """The script ended: the ops after the last step boundary are a step of their own."""
        if self._calls != sum(u.count for u in self.recorder.ops.values()):
            self._close("after the last step")


def handle(request: dict[str, Any]) -> dict[str, Any]:
    """Worker entry: run the script, return ``{"ok": true, "oplist": ..., "script_error": ...,
    "findings": [...]}``."""
    import runpy

    import torch

    from opcheck.tracers import composite_kernels, realdevice, redirect, runtime

    script = str(request["script"])
    argv = [str(a) for a in request.get("argv") or []]
    cwd = str(request.get("cwd") or os.getcwd())
    max_steps = int(request.get("max_steps", DEFAULT_MAX_STEPS))
    label = str(request.get("label") or Path(script).name)
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
    optimizer_init = torch.optim.Optimizer.__init__

    def counted_init(self: Any, *args: Any, **kwargs: Any) -> None:
        budget.optimizers += 1
        optimizer_init(self, *args, **kwargs)

    torch.optim.Optimizer.__init__ = counted_init  # type: ignore[method-assign]
    error = ""
    sys.argv = [script, *argv]
    sys.path.insert(0, str(Path(script).parent))
    try:
        with session.active():
            try:
                runpy.run_path(script, run_name="__main__")
            except StopRun:
                pass
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
    finally:
        budget.finish()
        torch.optim.Optimizer.__init__ = optimizer_init  # type: ignore[method-assign]
        if stream is not None:
            stream.close()
    ops = recorder.sorted_ops()
    phases = {m for u in ops for m in u.modules}
    notes = [f"finding: {f}" for f in findings.lines]
    if budget.stopped:
        notes.append(f"{budget.stopped}; code after that point did not run")
    if budget.steps:
        notes.append("op calls per step: " + "; ".join(budget.steps))
    notes.append(
        "recorded on a real-data npu device (CPU kernels): CUDA calls redirected as "
        "transfer_to_npu does; kernels torch_npu picks by shape at run time and numerical "
        "differences are not visible"
    )
    ol = OpList(
        model=label, method=METHOD, ir="runtime-dispatch",
        torch_version=torch.__version__.split("+")[0],
        mode="train" if {"backward", "optimizer"} & phases else "inference",
        notes=notes, ops=ops, complete=not error,
        stopped=f"the script raised at {error}" if error else "",
    )  # fmt: skip
    return {"ok": True, "oplist": ol.to_json(), "script_error": error,
            "findings": list(findings.lines)}  # fmt: skip


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
