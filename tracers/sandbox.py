"""Run the runtime tracer in a child process with a timeout and an address-space limit.

Model files are untrusted code; even with ``--trust`` they run only in this child. The parent
exchanges JSON files with it and never unpickles anything.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError

DEFAULT_TIMEOUT = 300.0
DEFAULT_MEMORY_MB = 8192
# importing torch alone maps ~1-2 GB of address space; below this the worker cannot start.
MIN_MEMORY_MB = 2048
STDERR_TAIL = 4000


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


def run_limited(argv: list[str], *, cwd: str, env: dict[str, str], timeout: float,
                memory_mb: int) -> ChildRun:
    """Run ``argv`` in its own process group under an address-space limit; kill the whole
    group at the timeout (or when the caller is interrupted)."""
    proc = subprocess.Popen(
        argv,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd,
        env=env,
        start_new_session=True,  # so a timeout kills the whole process group
        # preexec_fn (not a wrapper script): the limit must be in place before python starts
        preexec_fn=lambda: set_limits(memory_mb),
    )
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        kill_group(proc)
        proc.communicate()
        return ChildRun(None, "")
    except BaseException:
        kill_group(proc)
        raise
    return ChildRun(proc.returncode, err.decode("utf-8", "replace"))


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
            cwd=tmp, env=child_env, timeout=timeout, memory_mb=memory_mb,
        )
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
_OWN_DIR = str(Path(__file__).resolve().parent.parent)


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
