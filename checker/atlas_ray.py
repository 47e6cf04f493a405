"""``opcheck atlas --ray``: each architecture's sandboxed trace is one Ray task.

Ray schedules the tasks and retries one whose worker died (``max_retries``); the results come
back to the process that runs the atlas, which checks them and writes the store (its one
writer). Each task's result is taken once, as it completes (``ray.wait``), so an architecture
is written once; a task that still fails after its retries is reported as that architecture's
ERROR row, never dropped.

Ray is the ``opcheck[cluster]`` extra, imported only here and only when ``--ray`` is given.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import Any

from opcheck.checker.atlas import Architecture, Traced, Tracer, trace_one
from opcheck.core.errors import UsageError
from opcheck.db.atlas import CachedTrace

RETRIES = 2  # a worker that dies mid-task: its task runs again this many times
TaskFn = Callable[[str, bool, float, int, Any], tuple[str, str, float, str, bool]]


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError("--ray needs Ray: pip install 'opcheck[cluster]'") from None
    return ray


def connect(address: str, *, num_cpus: int | None = None) -> Any:
    """Join the cluster at ``address``; ``auto``: a running cluster, else a local one."""
    ray = _ray()
    if ray.is_initialized():
        return ray
    if address == "auto":
        try:
            ray.init(address="auto", logging_level="ERROR", log_to_driver=False)
        except ConnectionError:
            ray.init(num_cpus=num_cpus, logging_level="ERROR", log_to_driver=False,
                     include_dashboard=False)
    else:
        try:
            ray.init(address=address, logging_level="ERROR", log_to_driver=False)
        except (ConnectionError, ValueError) as exc:
            raise UsageError(f"--ray {address}: cannot join the Ray cluster ({exc})") from None
    return ray


def ray_tracer(address: str, *, train: bool = False, timeout: float = 300.0,
               memory_mb: int = 4096, task: TaskFn = trace_one,
               num_cpus: int | None = None) -> Tracer:
    """A tracer for :func:`opcheck.checker.atlas.run_atlas` running ``task`` (the sandboxed
    trace) as one Ray task per architecture."""

    def run(todo: Sequence[Architecture]) -> Iterator[Traced]:
        ray = connect(address, num_cpus=num_cpus)
        remote = ray.remote(max_retries=RETRIES, num_cpus=1)(task)
        pending = {remote.remote(a.spec, train, timeout, memory_mb, None): a for a in todo}
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            for ref in ready:
                a = pending.pop(ref)
                try:
                    got = ray.get(ref)
                except Exception as exc:  # Ray wraps whatever the task met, worker deaths too
                    got = ("", _why(exc), 0.0, "", False)
                text, err, took, rec, skipped = got
                yield a, CachedTrace(text, err, took, rec, a.model_class, a.task, bool(skipped))

    return run


def _why(exc: BaseException) -> str:
    name = type(exc).__name__
    first = (str(exc).strip().splitlines() or [""])[0]
    return f"ray: {name} after {RETRIES} retries: {first[:300]}".rstrip(": ")
