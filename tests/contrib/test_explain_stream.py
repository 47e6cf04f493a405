"""explain's fast reader (:class:`Candidates`: only the lines holding a marker are read) finds
what the full reader finds, on the test logs and on the shapes that stress the reader (long
lines, logs without newlines, colour codes, CRLF, UTF-16, a partial last line); big logs and
deep tracebacks neither hang nor hold memory."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.contrib.explain import scan, signatures
from opcheck.contrib.explain.reader import Candidates, log_records

LOGS = sorted((TESTS / "fixtures" / "logs").glob("*.log"))
SIGS = signatures.load_dir()


def _both(data: bytes) -> tuple[dict[str, object], dict[str, object]]:
    full = scan.explain(log_records(io.BytesIO(data)), SIGS)
    fast = scan.explain_stream(io.BytesIO(data), SIGS)
    return full.as_dict(), fast.as_dict()


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.name)
def test_fast_reader_reads_what_the_full_reader_reads(log: Path) -> None:
    full, fast = _both(log.read_bytes())
    assert full["findings"], log  # each test log has something to find
    assert fast == full


def _mixed() -> bytes:
    text = b"".join(p.read_bytes() for p in LOGS)
    filler = b"step 12 loss 0.25 lr 1e-4\n" * 3000
    long_ok = b"x" * 70_000 + b"\n"
    long_err = (b"y" * 20_000 + b" [ERROR] 2024-01-01 10:00:00 call aclnnAdd failed, error code is "
                b"161002 " + b"z" * 30_000 + b"\n")
    colour = b"\x1b[31mRuntimeEr\x1b[0mror: call aclnnMul failed, error code is 161002\r\n"
    return filler + text + long_ok + filler + long_err + colour + filler + text[:5000]


def test_fast_reader_on_long_lines_colours_and_a_partial_last_line() -> None:
    data = _mixed()
    full, fast = _both(data)
    assert fast == full
    assert full["lines"] == data.count(b"\n") + (not data.endswith(b"\n"))


def test_fast_reader_on_a_log_without_newlines_and_in_utf16() -> None:
    data = _mixed().replace(b"\n", b" ")
    assert _both(data)[1] == _both(data)[0]
    utf16 = _mixed().decode("utf-8", "replace").encode("utf-16")
    full, fast = _both(utf16)
    assert fast == full and full["findings"]


def test_only_marked_lines_are_read() -> None:
    data = b"step 1 loss 0.5\n" * 1000 + b"EZ9999: Inner Error!\n" + b"step 2\n" * 10
    c = Candidates(io.BytesIO(data), *scan.Explainer(SIGS).prefilter, chunk_size=4096)
    assert list(c) == [(1001, b"EZ9999: Inner Error!")]
    assert c.lines == 1011
