"""A real server for browser tests and benchmarks: ``opcheck serve`` in a child process on
127.0.0.1 only. Imported by tests/web (pytest puts this folder on sys.path) and by
benchmarks/bench_serve.py."""

from __future__ import annotations

import socket
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from opcheck.core.errors import OpcheckError


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(catalog: Path, *, port: int | None = None, workers: int = 1,
                   timeout: float = 30.0, allow_sql: bool | None = None,
                   log: list[str] | None = None,
                   pids: list[int] | None = None) -> Iterator[str]:
    """Serve ``catalog`` on 127.0.0.1 in a child process; yields the base URL once every
    worker has started, and stops the child on exit. Loopback only: tests and benchmarks
    never expose the server. ``log`` collects the server's stderr lines (access log, faults)
    instead of passing them on; ``pids`` gets the server process's id (with one worker, the
process that serves); ``allow_sql`` None is the loopback default (on)."""
    import subprocess
    import threading
    import time
    import urllib.request

    port = port or free_port()
    code = ("import sys; from pathlib import Path; from opcheck.web.server import serve; "
            "serve(Path(sys.argv[1]), host='127.0.0.1', port=int(sys.argv[2]), "
            "workers=int(sys.argv[3]), allow_sql={'1': True, '0': False}.get(sys.argv[4]))")
    sql = {True: "1", False: "0", None: "-"}[allow_sql]
    proc = subprocess.Popen([sys.executable, "-c", code, str(catalog), str(port), str(workers),
                             sql], stderr=subprocess.PIPE, text=True)
    if pids is not None:
        pids.append(proc.pid)
    all_ready = threading.Event()

    def relay() -> None:  # the child's messages still reach the terminal
        assert proc.stderr is not None
        for line in proc.stderr:
            if "worker processes ready" in line:
                all_ready.set()
            elif log is not None:
                log.append(line)
            elif not line.startswith('{"time"'):  # access lines would drown the output
                sys.stderr.write(line)

    threading.Thread(target=relay, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise OpcheckError(f"the server exited with code {proc.returncode}")
            try:
                if workers <= 1 or all_ready.is_set():
                    with urllib.request.urlopen(url + "/-/versions.json", timeout=2):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise OpcheckError(f"the server did not answer on {url} within "
                                   f"{timeout:.0f} s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
