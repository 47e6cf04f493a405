"""Run the runtime tracer in a child process with a timeout and an address-space limit.

Model files are untrusted code; even with ``--trust`` they run only in this child. The parent
exchanges JSON files with it and never unpickles anything.

Several models in one invocation (``opcheck zoo``, ``opcheck a.pt2 b.pt2``, ``opcheck
workaround verify``) share one import of torch: inside :func:`shared_imports`,
:func:`run_worker` (and :func:`run_module`, ``python -m MODULE`` for other sandboxed children)
asks a :class:`ForkServer` (a template process that imported torch once, ``python -m
opcheck.tracers.worker --template``) to fork one child per model. Each child still gets its own
session, address-space limit, timeout and stderr, so a model that crashes or runs out of memory
takes only its own child down, with the reason a fresh process would give
(tests/tracers/test_tracers_forkserver.py). The template ends when its parent does (end of
input), killing its children; a child dies with a template killed outright (PDEATHSIG).
"""

from __future__ import annotations

import itertools
import json
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from opcheck.core.errors import TraceError
from opcheck.tracers.procs import TailReader, kill_tree

DEFAULT_TIMEOUT = 300.0
DEFAULT_MEMORY_MB = 8192
# importing torch alone maps ~1-2 GB of address space; below this the worker cannot start.
MIN_MEMORY_MB = 2048
# Seconds a worker may take to import torch before its --timeout starts: the timeout is the
# model's (or script's), and a loaded machine can take longer to start a process than a small
# model takes to trace.
STARTUP_LIMIT = 300.0
READY_FD_ENV = "OPCHECK_READY_FD"
STDERR_TAIL = 4000
# What is kept of a child's stderr: the tail the reports quote, with room for a traceback.
STDERR_KEEP = 64 * 1024


def set_limits(memory_mb: int) -> None:
    """In a child process before exec: an address-space limit and no core dumps."""
    import resource

    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # no core dumps of a model that may hold secrets or fill the disk
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@dataclass(frozen=True)
class ChildRun:
    returncode: int | None  # None: killed at the timeout
    stderr: str
    started: bool = True  # False: killed at STARTUP_LIMIT, still importing


def run_limited(argv: list[str], *, cwd: str, env: dict[str, str], timeout: float,
                memory_mb: int, signals_ready: bool = False) -> ChildRun:
    """Run ``argv`` in its own process group under an address-space limit; kill it with every
    descendant at the timeout (or when the caller is interrupted). Only the tail of its stderr
    is kept, and its end is not waited for past the child's own exit (a leftover may hold it).

    With ``signals_ready`` the child writes to the pipe named by ``OPCHECK_READY_FD`` once it
    has imported torch, and the timeout counts from then (see :func:`_wait`)."""
    proc, ready = _start_limited(argv, cwd=cwd, env=env, memory_mb=memory_mb,
                                 signals_ready=signals_ready)
    assert proc.stderr is not None
    tail = TailReader(proc.stderr, STDERR_KEEP)
    try:
        return _wait(proc, tail, timeout, ready)
    except BaseException:
        kill_tree(proc.pid)
        raise
    finally:
        with suppress(OSError):
            proc.stderr.close()


def _start_limited(argv: list[str], *, cwd: str, env: dict[str, str], memory_mb: int,
                   signals_ready: bool, stdin: int = subprocess.DEVNULL,
                   ) -> tuple[subprocess.Popen[bytes], int | None]:
    """The child of :func:`run_limited`, and the read end of its ready pipe (None unless
    ``signals_ready``)."""
    read, write = os.pipe() if signals_ready else (None, None)
    try:
        proc = subprocess.Popen(
            argv,
            stdin=stdin,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=cwd,
            env=env if write is None else {**env, READY_FD_ENV: str(write)},
            pass_fds=() if write is None else (write,),
            start_new_session=True,  # so a timeout kills the whole process group
            # preexec_fn (not a wrapper script): the limit must be in place before python starts
            preexec_fn=lambda: set_limits(memory_mb),
        )
    except BaseException:
        if read is not None:
            os.close(read)
        raise
    finally:
        if write is not None:
            os.close(write)
    return proc, read


def _wait(proc: subprocess.Popen[bytes], tail: TailReader, timeout: float,
          ready: int | None = None) -> ChildRun:
    """Wait for the child's exit, ``timeout`` seconds from the moment it signals ``ready``
    (or, when it dies importing, closes the pipe), and at most STARTUP_LIMIT before that."""
    if ready is not None:
        try:
            started = bool(select.select([ready], [], [], STARTUP_LIMIT)[0])
        finally:
            os.close(ready)
        if not started:
            kill_tree(proc.pid)
            proc.wait()
            return ChildRun(None, tail.text(wait=0.5), started=False)
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_tree(proc.pid)
        proc.wait()
        return ChildRun(None, tail.text(wait=0.5))
    # what the worker did not reap itself (it died abruptly): the rest of its group
    _kill_session(proc.pid)
    return ChildRun(proc.returncode, tail.text())


def run_worker(
    request: dict[str, Any],
    *,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
    env: dict[str, str] | None = None,
) -> dict[str, Any]:
    """Run one worker request; return its JSON result or raise TraceError (timeout, OOM, crash)."""
    if memory_mb < MIN_MEMORY_MB:
        raise TraceError(
            f"memory limit {memory_mb} MB is too low to start torch (minimum {MIN_MEMORY_MB} MB)"
        )
    server = _active
    if server is not None and env is None:
        return server.run(request, timeout=timeout, memory_mb=memory_mb)
    ahead = _ahead
    if ahead is not None and env is None and ahead.memory_mb == memory_mb and ahead.take():
        return ahead.run(request, timeout=timeout)
    with tempfile.TemporaryDirectory(prefix="opcheck-trace-") as tmp:
        req = Path(tmp) / "request.json"
        out = Path(tmp) / "result.json"
        records = Path(tmp) / "records.jsonl"
        req.write_text(json.dumps({**request, "stream": str(records)}), encoding="utf-8")
        child_env = dict(os.environ if env is None else env)
        # a model's own prints and warnings must not reach the parent's stdout
        child_env.setdefault("PYTHONWARNINGS", "ignore")
        child = run_limited(
            [sys.executable, "-m", "opcheck.tracers.worker", str(req), str(out)],
            cwd=tmp, env=child_env, timeout=timeout, memory_mb=memory_mb, signals_ready=True,
        )
        return _result(child, out, records, request, timeout=timeout, memory_mb=memory_mb)


def _result(child: ChildRun, out: Path, records: Path, request: dict[str, Any], *,
            timeout: float, memory_mb: int) -> dict[str, Any]:
    """What a finished (or killed) worker left: its result, or why it has none."""
    if not child.started:
        return _stopped(records, request, f"tracer worker did not finish importing torch within "
                        f"{STARTUP_LIMIT:g} s (is the machine overloaded?)")
    if child.returncode is None:
        return _stopped(
            records, request, f"tracing timed out after {timeout:g} s (raise --timeout)"
        )
    tail = child.stderr[-STDERR_TAIL:]
    if out.is_file():
        try:
            result: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError) as exc:
            raise TraceError(f"tracer worker wrote an unreadable result ({exc})") from None
        if result.get("oom"):
            raise TraceError(
                f"tracing ran out of memory (limit {memory_mb} MB; raise --memory-mb)"
            )
        return result
    if looks_oom(child.returncode, tail):
        why = f"tracing ran out of memory (limit {memory_mb} MB; raise --memory-mb)"
    elif child.returncode < 0:
        sig = signal.Signals(-child.returncode).name
        site = _crash_site(tail)
        why = f"tracer worker crashed ({sig})" + (
            f" in {site}" if site else _last_line(tail)
        )
    else:
        why = f"tracer worker exited with code {child.returncode}{_last_line(tail)}"
    return _stopped(records, request, why)


# What the template imports before forking: torch and the tracer (~1-2 s per process saved).
PRELOAD = ("torch", "opcheck.tracers.runtime")


class ForkServer:
    """A template process that imported torch once and forks one sandboxed child per request
    (see the module docstring). Thread-safe: requests from several threads run concurrently."""

    def __init__(self, preload: Sequence[str] = PRELOAD) -> None:
        env = dict(os.environ)
        env.setdefault("PYTHONWARNINGS", "ignore")
        # Not the caller's directory: a file there named like a module torch imports
        # (timeit.py) would shadow it (python -m puts the working directory on sys.path).
        self._home = tempfile.TemporaryDirectory(prefix="opcheck-template-")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "opcheck.tracers.worker", "--template", *preload],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
            cwd=self._home.name, env=env, start_new_session=True,
        )
        self._used = False
        self._ids = itertools.count(1)
        self._cond = threading.Condition()
        self._msgs: dict[int, dict[str, Any]] = {}
        self._dead = False
        assert self.proc.stdout is not None
        self._reader = threading.Thread(target=self._read, args=(self.proc.stdout,), daemon=True)
        self._reader.start()

    def _read(self, stream: IO[bytes]) -> None:
        for line in stream:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            with self._cond:
                self._msgs.setdefault(int(msg.get("id", 0)), {}).update(msg)
                self._cond.notify_all()
        with self._cond:
            self._dead = True
            self._cond.notify_all()

    def _wait(self, rid: int, key: str, deadline: float | None) -> dict[str, Any] | None:
        with self._cond:
            while key not in self._msgs.get(rid, {}):
                if self._dead:
                    raise TraceError("the tracer template process died")
                left = None if deadline is None else deadline - time.monotonic()
                if left is not None and left <= 0:
                    return None
                self._cond.wait(left)
            return self._msgs[rid]

    def run(self, request: dict[str, Any], *, timeout: float, memory_mb: int) -> dict[str, Any]:
        """Like :func:`run_worker`, in a child forked from the template."""
        with tempfile.TemporaryDirectory(prefix="opcheck-trace-") as tmp:
            req = Path(tmp) / "request.json"
            out = Path(tmp) / "result.json"
            records = Path(tmp) / "records.jsonl"
            req.write_text(json.dumps({**request, "stream": str(records)}), encoding="utf-8")
            child = self._fork({"request": str(req), "result": str(out)}, cwd=tmp,
                               timeout=timeout, memory_mb=memory_mb)
            return _result(child, out, records, request, timeout=timeout, memory_mb=memory_mb)

    def run_module(self, module: str, args: Sequence[str], *, cwd: str, timeout: float,
                   memory_mb: int) -> ChildRun:
        """Like :func:`run_limited` of ``python -m module args``, in a child forked from the
        template."""
        return self._fork({"module": module, "argv": list(args)}, cwd=cwd, timeout=timeout,
                          memory_mb=memory_mb)

    def _fork(self, what: dict[str, Any], *, cwd: str, timeout: float,
              memory_mb: int) -> ChildRun:
        """One child for ``what``: its exit status (None: killed at the timeout) and stderr."""
        with tempfile.TemporaryDirectory(prefix="opcheck-child-") as errdir:
            err = Path(errdir) / "stderr.txt"
            rid = next(self._ids)
            self._used = True
            job = {**what, "id": rid, "stderr": str(err), "cwd": cwd, "memory_mb": memory_mb}
            with self._cond:
                if self._dead or self.proc.stdin is None:
                    raise TraceError("the tracer template process died")
                try:
                    self.proc.stdin.write(json.dumps(job).encode() + b"\n")
                    self.proc.stdin.flush()
                except OSError:
                    raise TraceError("the tracer template process died") from None
            started = self._wait(rid, "pid", None)
            assert started is not None
            pid = int(started["pid"])
            try:
                done = self._wait(rid, "exit", time.monotonic() + timeout)
            except BaseException:
                kill_tree(pid)
                raise
            code: int | None
            if done is None:  # the timeout: the child and all it started go
                kill_tree(pid)
                self._wait(rid, "exit", None)
                code = None
            else:
                code = int(done["exit"])
            with self._cond:
                self._msgs.pop(rid, None)
            return ChildRun(code, _file_tail(err, STDERR_KEEP))

    def close(self) -> None:
        """End the template (its children are killed with it: see the worker)."""
        if not self._used:  # started ahead of a trace that never came: no need to wait
            kill_group(self.proc)
        if self.proc.stdin is not None:
            with suppress(OSError):
                self.proc.stdin.close()
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            kill_group(self.proc)
            self.proc.wait()
        self._reader.join(timeout=5)
        self._home.cleanup()


class WorkerAhead:
    """One worker process started before its request is known: it imports torch while the
    caller does its own work (loading the catalog), then runs the request it is handed, in
    itself: no fork, so none of the copy-on-write cost a forked child pays for one model."""

    def __init__(self, memory_mb: int) -> None:
        self.memory_mb = memory_mb
        self._tmp = tempfile.TemporaryDirectory(prefix="opcheck-trace-")
        tmp = Path(self._tmp.name)
        self.req, self.out, self.records = (tmp / "request.json", tmp / "result.json",
                                            tmp / "records.jsonl")
        env = dict(os.environ)
        env.setdefault("PYTHONWARNINGS", "ignore")
        self.proc, self._ready = _start_limited(
            [sys.executable, "-m", "opcheck.tracers.worker", "--ahead", str(self.req),
             str(self.out)],
            cwd=str(tmp), env=env, memory_mb=memory_mb, signals_ready=True,
            stdin=subprocess.PIPE,
        )
        assert self.proc.stderr is not None
        self._tail = TailReader(self.proc.stderr, STDERR_KEEP)
        self._taken = False
        self._lock = threading.Lock()

    def take(self) -> bool:
        """True once: the first request gets this process, later ones start their own."""
        with self._lock:
            taken, self._taken = self._taken, True
            return not taken

    def run(self, request: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        self.req.write_text(json.dumps({**request, "stream": str(self.records)}),
                            encoding="utf-8")
        proc = self.proc
        assert proc.stdin is not None
        try:
            # (a worker that died while importing: its exit status and stderr say why)
            with suppress(OSError):
                proc.stdin.write(b"go\n")
                proc.stdin.close()
            ready, self._ready = self._ready, None
            child = _wait(proc, self._tail, timeout, ready)
        except BaseException:
            kill_tree(proc.pid)
            raise
        return _result(child, self.out, self.records, request, timeout=timeout,
                       memory_mb=self.memory_mb)

    def close(self) -> None:
        if self._ready is not None:
            os.close(self._ready)
            self._ready = None
        if self.proc.poll() is None:  # never handed a request (or interrupted)
            kill_group(self.proc)
            self.proc.wait()
        for pipe in (self.proc.stdin, self.proc.stderr):
            if pipe is not None:
                with suppress(OSError):
                    pipe.close()
        self._tmp.cleanup()


_ahead: WorkerAhead | None = None


@contextmanager
def worker_ahead(memory_mb: int) -> Iterator[WorkerAhead]:
    """Within the block, the first :func:`run_worker` call (with this memory limit) is served
    by a worker started now, so its imports overlap the caller's work until then."""
    global _ahead
    with _active_lock:
        if _ahead is not None:
            raise TraceError("worker_ahead() is already active")
        worker = _ahead = WorkerAhead(memory_mb)
    try:
        yield worker
    finally:
        with _active_lock:
            _ahead = None
        worker.close()


def _file_tail(path: Path, limit: int) -> str:
    """The last ``limit`` bytes of a file a child wrote (it may have flooded gigabytes)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            fh.seek(max(0, fh.tell() - limit))
            return fh.read(limit).decode("utf-8", "replace")
    except OSError:
        return ""


def _kill_session(pid: int) -> None:
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)  # each child leads its own session


# The template run_worker uses while a shared_imports() block is open (None: fresh processes).
_active: ForkServer | None = None
_active_lock = threading.Lock()


def sharing() -> bool:
    """Whether a :func:`shared_imports` block is open (a caller may have opened it early)."""
    return _active is not None


def run_module(module: str, args: Sequence[str], *, cwd: str, timeout: float,
               memory_mb: int) -> ChildRun:
    """``python -m module args`` under :func:`run_limited`'s limits, with warnings off, the
    timeout counted once torch is imported (run by the worker, ``--module``); forked from the
    template instead while a :func:`shared_imports` block is open."""
    server = _active
    if server is not None:
        return server.run_module(module, args, cwd=cwd, timeout=timeout, memory_mb=memory_mb)
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    return run_limited([sys.executable, "-m", "opcheck.tracers.worker", "--module", module,
                        *args], cwd=cwd, env=env, timeout=timeout, memory_mb=memory_mb,
                       signals_ready=True)


@contextmanager
def shared_imports(preload: Sequence[str] = PRELOAD) -> Iterator[ForkServer]:
    """Within the block, :func:`run_worker` forks its children from one template process
    that imported ``preload`` once. Not nested: one block at a time per process."""
    global _active
    with _active_lock:
        if _active is not None:
            raise TraceError("shared_imports() is already active")
        server = _active = ForkServer(preload)
    try:
        yield server
    finally:
        with _active_lock:
            _active = None
        server.close()


def _stopped(records: Path, request: dict[str, Any], why: str) -> dict[str, Any]:
    """The worker died: the ops it streamed before dying, or TraceError when there are none."""
    partial = read_stream(records, label=str(request.get("label", "")))
    if partial is None:
        raise TraceError(why)
    return {"ok": False, "error": why, "stopped": True, "partial": partial}


def read_stream(path: Path, *, label: str = "") -> dict[str, Any] | None:
    """An op list document (``complete: false``) from a worker's JSON-lines records, or None
    when it recorded nothing. Counts are distinct records (one call each) and the last line
    says where the trace was when it stopped."""
    from opcheck.core.oplist import KIND, SCHEMA_VERSION

    try:
        lines = path.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    ops: list[dict[str, Any]] = []
    phase = "forward"
    for line in lines:
        try:
            doc = json.loads(line)
        except json.JSONDecodeError:  # the line the kill cut short
            continue
        if not isinstance(doc, dict):
            continue
        if "phase" in doc:
            phase = str(doc["phase"])
        elif "op" in doc:
            ops.append({**doc, "count": 1})
    if not ops:
        return None
    last = ops[-1]
    where = ", ".join(str(x) for x in (*last.get("modules", [])[:1],
                                        *last.get("locations", [])[:1]) if x)  # fmt: skip
    stopped = f"stopped during {phase} after {last['op']}" + (f" ({where})" if where else "")
    return {"schema_version": SCHEMA_VERSION, "kind": KIND, "model": label, "method": "runtime",
            "ir": "runtime-dispatch", "ops": ops, "complete": False, "stopped": stopped}  # fmt: skip


def looks_oom(code: int | None, tail: str) -> bool:
    t = tail.lower()
    return (
        code == -signal.SIGKILL
        or "memoryerror" in t
        or "cannot allocate memory" in t
        or "std::bad_alloc" in t
        or "failed to allocate" in t
    )


_FRAME = re.compile(r'^\s*File "([^"]+)", line (\d+) in (\S+)')
# opcheck's own folder, as its code runs from it and as it is on disk (see device._TRACER_DIR)
_OWN_DIR = tuple(dict.fromkeys((str(Path(os.path.abspath(__file__)).parent.parent),
                                str(Path(__file__).resolve().parent.parent))))


def _crash_site(tail: str) -> str:
    """From faulthandler's dump of a fatal signal: the innermost frame of the crashing thread
    outside installed packages and opcheck (``bw.py:9 (backward)``), or ""."""
    lines = tail.splitlines()
    start = next((i for i, ln in enumerate(lines) if ln.startswith(("Current thread",
                                                                     "Thread 0x"))), None)  # fmt: skip
    if start is None:
        return ""
    for ln in lines[start + 1 :]:
        m = _FRAME.match(ln)
        if m is None:
            if ln.strip():
                break  # end of this thread's stack
            continue
        path, line, func = m.groups()
        if "site-packages" in path or path.startswith(_OWN_DIR):
            continue
        return f"{Path(path).name}:{line} ({func})"
    return ""


def _last_line(tail: str) -> str:
    lines = [ln.strip() for ln in tail.splitlines()
             if ln.strip() and not ln.startswith("Extension modules:")]  # fmt: skip
    return f": {lines[-1][:300]}" if lines else ""


def kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
