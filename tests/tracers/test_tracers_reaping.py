"""Issue 39's residuals of the sandbox: a setsid daemon started by a worker that crashed before
its own clean-up is dead afterwards, and a forked template child's stderr file stays small on
disk however much the child prints. Modules run with ``python -m`` semantics, no torch needed."""

from __future__ import annotations

import contextlib
import os
import tempfile
import textwrap
import threading
import time
from pathlib import Path

import pytest

from opcheck.tracers import sandbox
from opcheck.tracers.sandbox import STDERR_KEEP

DAEMON_THEN_CRASH = """
import os, signal, sys, time

pidfile = sys.argv[1]
if os.fork() == 0:  # the daemon: double fork and setsid, out of the worker's group
    os.setsid()
    if os.fork() == 0:
        with open(pidfile + ".tmp", "w") as fh:
            fh.write(str(os.getpid()))
        os.replace(pidfile + ".tmp", pidfile)
        time.sleep(120)
    os._exit(0)
while not os.path.exists(pidfile):
    time.sleep(0.01)
os.kill(os.getpid(), getattr(signal, sys.argv[2]))  # crash, nothing cleaned up
"""


def alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


@pytest.mark.parametrize("how", ["SIGKILL", "SIGSEGV"])
def test_a_crashed_workers_setsid_daemon_is_dead_afterwards(tmp_path: Path, how: str) -> None:
    (tmp_path / "daemon_mod.py").write_text(DAEMON_THEN_CRASH, encoding="utf-8")
    pidfile = tmp_path / "daemon.pid"
    run = sandbox.run_module("daemon_mod", [str(pidfile), how], cwd=str(tmp_path), timeout=60,
                             memory_mb=4096)
    daemon = int(pidfile.read_text())
    try:
        assert run.returncode == -getattr(__import__("signal"), how)  # it ended as it died
        deadline = time.monotonic() + 5
        while alive(daemon) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not alive(daemon), "the daemon outlived the worker that crashed"
    finally:
        if alive(daemon):
            os.kill(daemon, 9)


FLOOD = """
import sys

chunk = "x" * 65535 + "\\n"
for _ in range(int(sys.argv[1])):
    sys.stderr.write(chunk)
sys.stderr.write("the last line\\n")
"""


def test_a_forked_childs_stderr_file_is_capped_on_disk(tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "flood_mod.py").write_text(FLOOD, encoding="utf-8")
    spool = tmp_path / "spool"
    spool.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(spool))  # where the stderr file is made
    sizes: list[int] = []
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for f in spool.glob("opcheck-child-*/stderr.txt"):
                with contextlib.suppress(OSError):  # gone meanwhile
                    sizes.append(f.stat().st_size)
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        with sandbox.shared_imports(()):
            run = sandbox.run_module("flood_mod", ["800"], cwd=str(tmp_path), timeout=120,
                                     memory_mb=4096)  # 50 MB of stderr
    finally:
        stop.set()
        watcher.join()
    assert run.returncode == 0
    assert run.stderr.endswith("the last line\n")
    assert sizes, "the stderr file was never seen"
    assert max(sizes) <= 2 * STDERR_KEEP + 65536, max(sizes)


def test_module_output_is_unchanged_by_the_supervisor(tmp_path: Path) -> None:
    (tmp_path / "exit_mod.py").write_text(textwrap.dedent("""
        import sys
        print("to stderr", file=sys.stderr)
        sys.exit(7)
    """), encoding="utf-8")
    run = sandbox.run_module("exit_mod", [], cwd=str(tmp_path), timeout=60, memory_mb=4096)
    assert run.returncode == 7 and run.stderr.strip() == "to stderr"
