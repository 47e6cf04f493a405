"""Process trees of sandboxed children: what a script leaves behind is found and killed.

A traced script may fork workers, start a daemon (double fork + ``setsid``) or leave a child
holding its stderr. Process groups miss the daemon, and a pipe some leftover keeps open never
reaches end of file. So the process running user code becomes a *child subreaper*: orphans of
its descendants are re-parented to it instead of init, and before it exits it kills whatever is
left (:func:`kill_descendants`). From outside, :func:`kill_tree` stops and kills a process with
every descendant /proc shows. The parent reads stderr through :class:`TailReader`, which keeps
a bounded tail, so a flood costs no memory and a leftover holding the pipe costs no wait.
Linux facilities (prctl, /proc); elsewhere these are no-ops and process groups still apply.
"""

from __future__ import annotations

import os
import signal
import threading
from collections import deque
from contextlib import suppress
from typing import IO

__all__ = ["TailReader", "become_subreaper", "children", "descendants", "kill_descendants",
           "kill_tree"]

_PR_SET_CHILD_SUBREAPER = 36


def become_subreaper() -> None:
    """Orphaned descendants of this process become its children (Linux; else nothing)."""
    import ctypes

    with suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def _parents() -> dict[int, int]:
    """pid → parent pid of every process /proc lists (empty without /proc)."""
    out: dict[int, int] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as fh:
                stat = fh.read()
        except OSError:  # gone meanwhile
            continue
        # "pid (comm) state ppid ...": comm may hold spaces and parentheses
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) > 1:
            out[int(name)] = int(fields[1])
    return out


def children(pid: int) -> list[int]:
    return [p for p, parent in _parents().items() if parent == pid]


def descendants(pid: int) -> list[int]:
    parents = _parents()
    by_parent: dict[int, list[int]] = {}
    for p, parent in parents.items():
        by_parent.setdefault(parent, []).append(p)
    found: list[int] = []
    todo = [pid]
    while todo:
        for kid in by_parent.get(todo.pop(), []):
            if kid not in found:
                found.append(kid)
                todo.append(kid)
    return found


def kill_descendants(rounds: int = 20) -> int:
    """Kill and reap every child of this (subreaper) process, again for the orphans each kill
    hands over, until none is left; how many were killed."""
    me = os.getpid()
    killed = 0
    for _ in range(rounds):
        kids = children(me)
        if not kids:
            break
        for kid in kids:  # stop all first, so none forks while its siblings die
            with suppress(OSError):
                os.kill(kid, signal.SIGSTOP)
        for kid in kids:
            with suppress(OSError):
                os.kill(kid, signal.SIGKILL)
                killed += 1
        for kid in kids:
            with suppress(ChildProcessError, OSError):
                os.waitpid(kid, 0)
    return killed


def kill_tree(pid: int) -> None:
    """SIGKILL ``pid``, its process group and every descendant /proc shows (stopped first)."""
    tree = descendants(pid)
    for p in (pid, *tree):
        with suppress(OSError):
            os.kill(p, signal.SIGSTOP)
    # a descendant may have forked between the listing and the stop
    tree += [p for p in descendants(pid) if p not in tree]
    for p in (pid, *tree):
        with suppress(OSError):
            os.kill(p, signal.SIGKILL)
    with suppress(OSError):
        os.killpg(pid, signal.SIGKILL)


class TailReader:
    """Drain a pipe on a thread, keeping only its last ``limit`` bytes."""

    def __init__(self, pipe: IO[bytes], limit: int) -> None:
        self._pipe = pipe
        self._chunks: deque[bytes] = deque()
        self._size = 0
        self._limit = limit
        self.dropped = 0  # bytes read and not kept
        self._thread = threading.Thread(target=self._run, daemon=True, name="stderr-tail")
        self._thread.start()

    def _run(self) -> None:
        fd = self._pipe.fileno()
        with suppress(OSError, ValueError):
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    return
                self._chunks.append(chunk)
                self._size += len(chunk)
                while self._size - len(self._chunks[0]) >= self._limit:
                    old = self._chunks.popleft()
                    self._size -= len(old)
                    self.dropped += len(old)

    def text(self, wait: float = 2.0) -> str:
        """The tail read so far, once the pipe ended or ``wait`` seconds passed (a leftover
        process may hold the pipe open: its end is not waited for)."""
        # A reader still blocked then stays so, on a daemon thread, until the leftover dies:
        # closing the pipe under it would not wake it.
        self._thread.join(wait)
        data = b"".join(list(self._chunks))[-self._limit :]
        return data.decode("utf-8", "replace")
