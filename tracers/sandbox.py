"""Run the runtime tracer in a child process with a timeout and an address-space limit.

Model files are untrusted code; even with ``--trust`` they run only in this child. The parent
exchanges JSON files with it and never unpickles anything.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError

DEFAULT_TIMEOUT = 300.0
DEFAULT_MEMORY_MB = 8192
# importing torch alone maps ~1-2 GB of address space; below this the worker cannot start.
MIN_MEMORY_MB = 2048
STDERR_TAIL = 4000


def _limits(memory_mb: int) -> None:
    import resource

    limit = memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    # no core dumps of a model that may hold secrets or fill the disk
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


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
        req.write_text(json.dumps(request), encoding="utf-8")
        child_env = dict(os.environ if env is None else env)
        # a model's own prints and warnings must not reach the parent's stdout
        child_env.setdefault("PYTHONWARNINGS", "ignore")
        proc = subprocess.Popen(
            [sys.executable, "-m", "opcheck.tracers.worker", str(req), str(out)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            cwd=tmp,
            env=child_env,
            start_new_session=True,  # so a timeout kills the whole process group
            # preexec_fn (not a wrapper script): the limit must be in place before python starts
            preexec_fn=lambda: _limits(memory_mb),
        )
        try:
            _, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            _kill_group(proc)
            proc.communicate()
            raise TraceError(f"tracing timed out after {timeout:g} s (raise --timeout)") from None
        except BaseException:
            _kill_group(proc)
            raise
        tail = err.decode("utf-8", "replace")[-STDERR_TAIL:]
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
        if _looks_oom(proc.returncode, tail):
            raise TraceError(f"tracing ran out of memory (limit {memory_mb} MB; raise --memory-mb)")
        if proc.returncode < 0:
            sig = signal.Signals(-proc.returncode).name
            raise TraceError(f"tracer worker crashed ({sig}){_last_line(tail)}")
        raise TraceError(f"tracer worker exited with code {proc.returncode}{_last_line(tail)}")


def _looks_oom(code: int | None, tail: str) -> bool:
    t = tail.lower()
    return (
        code == -signal.SIGKILL
        or "memoryerror" in t
        or "cannot allocate memory" in t
        or "std::bad_alloc" in t
        or "failed to allocate" in t
    )


def _last_line(tail: str) -> str:
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return f": {lines[-1][:300]}" if lines else ""


def _kill_group(proc: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        proc.kill()
