"""Progress on slow work: a spinner with the step and the elapsed time on stderr, only when
stderr is a terminal and ``--quiet`` is not given; a pipe or a log gets nothing."""

from __future__ import annotations

import os
import pty
import subprocess
import sys

import pytest

from opcheck.cli.render import progress

SNIPPET = """
import sys, time
from opcheck.cli.render import progress
with progress("zoo", quiet="-q" in sys.argv) as update:
    update("tracing bert")
    time.sleep(0.3)
print("done")
"""


def _stderr_on_a_terminal(*args: str) -> str:
    main, child = pty.openpty()
    try:
        p = subprocess.run([sys.executable, "-c", SNIPPET, *args], stderr=child,
                           stdout=subprocess.PIPE, timeout=60, check=True)
        os.close(child)
        child = -1
        chunks = []
        while True:
            try:
                data = os.read(main, 4096)
            except OSError:  # the terminal closed: everything was read
                break
            if not data:
                break
            chunks.append(data)
        assert p.stdout.strip() == b"done"
        return b"".join(chunks).decode("utf-8", "replace")
    finally:
        os.close(main)
        if child != -1:
            os.close(child)


@pytest.mark.skipif(sys.platform == "win32", reason="needs a pseudo-terminal")
def test_spinner_on_a_terminal_only_and_not_with_quiet() -> None:
    assert "zoo: tracing bert" in _stderr_on_a_terminal()
    assert "zoo" not in _stderr_on_a_terminal("-q")


def test_no_progress_when_stderr_is_no_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    seen = []
    with progress("sync") as update:
        update("collecting")
        seen.append("ran")
    assert seen == ["ran"] and capfd.readouterr().err == ""
