"""The log reader: bytes of a log in any encoding torch_npu users write it in, as (line number,
record) pairs with bounded memory, each line cleaned the way the terminal showed it.

Both readers of a log go through here: ``opcheck explain`` and ``opcheck trace --log`` /
``check --log`` (:func:`opcheck.contrib.logs.parse_log`). A log is taken through
:func:`decoded` (UTF-16 as PowerShell's ``>`` writes it, a UTF-8 BOM) and :func:`iter_records`,
which reads a line longer than 16 KB as the log records it holds (cut at timestamps,
``[rankN]:`` prefixes, log levels), so a log written without newlines reads like one with them.
Memory stays bounded whatever the file: it is read in fixed-size chunks, long or binary
"lines" are cut, and binary junk is flagged.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Callable, Iterator
from typing import IO, Protocol

MAX_LINE = 4096  # characters kept per line: every message we match is near its start
MAX_CODES = 500  # distinct error codes kept; more would only be noise
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def iter_lines(stream: IO[bytes], *, chunk_size: int = 1 << 16, max_line: int = MAX_LINE * 4) -> Iterator[bytes]:
    """Lines of a binary stream, each cut to ``max_line`` bytes, reading fixed-size chunks.

    A file with no newline at all (a core dump, a tarball) costs one chunk of memory, not the
    file: the tail of an over-long line is dropped as it streams past.
    """
    buf = b""
    dropping = False
    while True:
        chunk = stream.read(chunk_size)
        if not chunk:
            break
        start = 0
        while True:
            nl = chunk.find(b"\n", start)
            if nl < 0:
                if not dropping:
                    buf += chunk[start:]
                    if len(buf) > max_line:
                        yield buf[:max_line]
                        buf, dropping = b"", True
                break
            if not dropping:
                yield (buf + chunk[start:nl])[:max_line]
            buf, dropping = b"", False
            start = nl + 1
    if buf and not dropping:
        yield buf


def clean_line(raw: bytes | str) -> str:
    """A line as the terminal showed it: decoded, cut to MAX_LINE, colours removed."""
    if isinstance(raw, bytes):
        raw = raw[: MAX_LINE * 4].decode("utf-8", errors="replace")
    text = raw[:MAX_LINE]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    # Progress bars rewrite a line with \r; the last segment is what the terminal showed.
    if "\r" in text.rstrip("\r\n"):
        text = text.rstrip("\r\n").rsplit("\r", 1)[-1]
    return text


_BAD_CHARS = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffd]")


def is_binary(raw: bytes, text: str) -> bool:
    """A NUL byte, or more than a tenth control / undecodable characters."""
    if b"\x00" in raw:
        return True
    if text.isprintable() and "\ufffd" not in text:  # the common case, tested in C
        return False
    bad = len(_BAD_CHARS.findall(text))
    return bad * 10 > len(text)



# ---------------------------------------------------------------------------- encodings


class Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


class _Recoded:
    """A UTF-16 byte stream read as UTF-8 bytes, chunk by chunk (bounded memory)."""

    def __init__(self, head: bytes, rest: Readable, encoding: str) -> None:
        self._head, self._rest = head, rest
        self._decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
        self._done = False

    def read(self, size: int = -1, /) -> bytes:
        while not self._done:
            raw, self._head = self._head + self._rest.read(size if size > 0 else 1 << 16), b""
            text = self._decoder.decode(raw, final=not raw)
            self._done = not raw
            if text:
                return text.encode("utf-8", errors="replace")
        return b""


class _Prefixed:
    """A stream with bytes already read put back in front."""

    def __init__(self, head: bytes, rest: Readable) -> None:
        self._head, self._rest = head, rest

    def read(self, size: int = -1, /) -> bytes:
        if self._head:
            out, self._head = self._head, b""
            return out
        return self._rest.read(size)


def sniff_encoding(head: bytes) -> str:
    """``utf-16-le``/``utf-16-be`` (a BOM, or NULs at every other byte: what PowerShell's
    ``>`` writes), ``utf-8-sig`` (a UTF-8 BOM), else ``utf-8``."""
    if head.startswith((b"\xff\xfe", b"\xfe\xff")):
        return "utf-16"  # the decoder reads the BOM and drops it
    if head.startswith(b"\xef\xbb\xbf"):
        return "utf-8-sig"
    sample = head[:64]
    if len(sample) >= 4:
        odd, even = sample[1::2], sample[0::2]
        if odd.count(0) * 4 >= len(odd) * 3 and even.count(0) == 0:
            return "utf-16-le"
        if even.count(0) * 4 >= len(even) * 3 and odd.count(0) == 0:
            return "utf-16-be"
    return "utf-8"


def decoded(stream: Readable) -> Readable:
    """``stream`` as UTF-8 bytes, whatever of :func:`sniff_encoding`'s encodings it is in."""
    head = stream.read(64)
    enc = sniff_encoding(head)
    if enc.startswith("utf-16"):
        return _Recoded(head, stream, enc)
    if enc == "utf-8-sig":
        head = head[3:]
    return _Prefixed(head, stream)


# ---------------------------------------------------------------------------- records

# Where a new log record starts inside an over-long line: a rank prefix, a log level in
# brackets, a glog prefix ("[E205 11:47:24"), an ISO timestamp, a Python traceback.
RECORD_START = re.compile(
    rb"\[rank\d{1,6}\]:|\[(?:ERROR|WARNING|WARN|INFO|DEBUG|EVENT|TRACE)\]|\[[EWIF]\d{4} \d\d:\d\d"
    rb"|(?<![\d.:-])\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d|Traceback \(most recent call last\)"
)


def iter_records(stream: Readable, *, chunk_size: int = 1 << 16,
                 max_line: int = MAX_LINE * 4) -> Iterator[tuple[int, bytes]]:
    """(line number, record) of a binary stream: its lines, and each record of a line longer
    than ``max_line``, cut where :data:`RECORD_START` matches (a log written without newlines
    is read like one with them; its records share line number 1). A stretch with no record
    start is cut every ``max_line`` bytes. Memory stays within a chunk plus ``max_line``."""
    lineno, buf, pos = 1, b"", 0
    splitting = False  # inside a line longer than max_line: each of its records on its own
    eof = False
    while not eof or pos < len(buf):
        if not eof:
            chunk = stream.read(chunk_size)
            eof = not chunk
            buf = buf[pos:] + chunk  # one copy per chunk, never per record
            pos = 0
        while pos < len(buf):
            nl = buf.find(b"\n", pos, pos + max_line + 1)
            if not splitting:
                if nl >= 0:
                    yield lineno, buf[pos:nl]
                    lineno, pos = lineno + 1, nl + 1
                    continue
                if len(buf) - pos > max_line:
                    splitting = True
                    continue
                if eof:
                    yield lineno, buf[pos:]
                    pos = len(buf)
                break
            line_end = nl if nl >= 0 else (len(buf) if eof else -1)
            # a record start cut by the chunk's end is found once the next chunk is in
            safe = line_end if line_end >= 0 else len(buf) - 64
            m = RECORD_START.search(buf, pos + 1, min(safe, pos + max_line))
            if m:
                yield lineno, buf[pos:m.start()]
                pos = m.start()
            elif 0 <= line_end <= pos + max_line:
                yield lineno, buf[pos:line_end]
                pos = line_end + 1 if nl >= 0 else line_end
                if nl >= 0:
                    lineno, splitting = lineno + 1, False
            elif safe - pos >= max_line:
                yield lineno, buf[pos:pos + max_line]
                pos += max_line
            else:
                break



class Counting:
    """A stream that reports how many bytes were read, at most every ``step`` bytes."""

    def __init__(self, raw: Readable, progress: Callable[[int], None], step: int = 8 << 20) -> None:
        self._raw, self._progress, self._step = raw, progress, step
        self.read_bytes = 0
        self._next = step

    def read(self, size: int = -1, /) -> bytes:
        got = self._raw.read(size)
        self.read_bytes += len(got)
        if self.read_bytes >= self._next:
            self._next = self.read_bytes + self._step
            self._progress(self.read_bytes)
        return got


def log_records(stream: Readable) -> Iterator[tuple[int, bytes]]:
    """The records of a log stream in any of the encodings :func:`decoded` knows."""
    return iter_records(decoded(stream))


FOLLOWED = frozenset({b'file "'})  # markers whose next line is read too


class Candidates:
    """The records of a log that hold a marker, with their line numbers, and the number of
    lines read (:attr:`lines`).

    Most of a big log (steps, losses, INFO records) holds nothing explain reads: each 64 KB
    chunk is lower-cased and searched for each of ``markers`` (``bytes.find``, in C) and with
    each of ``patterns``; only the lines holding one are cut out, the others are counted. A
    matching line goes through :func:`iter_records` as before, so what is read is what the
    full reader reads, as long as every line any reader of the records acts on holds a marker
    or a pattern's match. A chunk with no newline (a log written without them) hands the rest
    of the stream to :func:`iter_records`."""

    def __init__(self, stream: Readable, markers: tuple[bytes, ...],
                 patterns: tuple[re.Pattern[bytes], ...] = (), *,
                 chunk_size: int = 1 << 16, max_line: int = MAX_LINE * 4) -> None:
        self._stream, self._markers, self._patterns = stream, markers, patterns
        self._chunk, self._max = chunk_size, max_line
        self._pending = False  # the next chunk's first line is a followed line's next
        self.lines = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        carry = b""
        while True:
            chunk = self._stream.read(self._chunk)
            if not chunk:
                break
            buf = carry + chunk
            end = buf.rfind(b"\n") + 1
            if end == 0:
                if len(buf) > self._max * 4:  # no newline in sight: read it as records
                    yield from self._records(_Prefixed(buf, self._stream), self.lines + 1)
                    return
                carry = buf
                continue
            yield from self._scan(buf, end)
            carry = buf[end:]
        if carry:
            yield from self._scan(carry + b"\n", len(carry) + 1)

    def _starts(self, buf: bytes, end: int) -> list[int]:
        """Where the lines of ``buf[:end]`` holding a marker or a pattern's match start."""
        low = buf[:end].lower()
        starts: set[int] = {0} if self._pending else set()
        self._pending = False
        for hay, needles in ((low, self._markers), (buf, self._patterns)):
            for needle in needles:
                pos = 0
                follow = needle in FOLLOWED
                while True:
                    if isinstance(needle, bytes):
                        at = hay.find(needle, pos, end)
                    else:
                        m = needle.search(hay, pos, end)
                        at = -1 if m is None else m.start()
                    if at < 0:
                        break
                    starts.add(hay.rfind(b"\n", 0, at) + 1)
                    pos = hay.find(b"\n", at, end) + 1
                    if pos <= 0:
                        break
                    if follow:  # a traceback frame's source line (maybe in the next chunk)
                        if pos < end:
                            starts.add(pos)
                        else:
                            self._pending = True
        return sorted(starts)

    def _scan(self, buf: bytes, end: int) -> Iterator[tuple[int, bytes]]:
        """The matching lines of ``buf[:end]`` (whole lines), counting every line."""
        base, counted = self.lines, 0
        for start in self._starts(buf, end):
            stop = buf.find(b"\n", start, end)
            lineno = base + buf.count(b"\n", counted, start) + 1
            base, counted = lineno - 1, start
            if stop - start <= self._max:
                yield lineno, buf[start:stop]
            else:
                yield from self._records(_Prefixed(buf[start:stop], _Empty()), lineno)
        self.lines = base + buf.count(b"\n", counted, end)

    def _records(self, stream: Readable, first: int) -> Iterator[tuple[int, bytes]]:
        last = first
        for n, rec in iter_records(stream, chunk_size=self._chunk, max_line=self._max):
            last = first + n - 1
            yield last, rec
        self.lines = max(self.lines, last)


class _Empty:
    def read(self, size: int = -1, /) -> bytes:
        return b""
