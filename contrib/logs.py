"""Reading torch_npu / CANN runtime logs: the one line reader and the one CPU-fallback pattern.

Both readers of a log go through this module: ``opcheck explain`` (signatures,
:mod:`opcheck.contrib.troubleshoot`) and ``opcheck trace --log`` / ``check --log``
(:func:`parse_log`, called by the CLI: tracers sit below contrib and read no logs). They read
lines with :func:`iter_lines` and :func:`clean_line`, and recognise a CPU-fallback warning with
:data:`FALLBACK`, so a line is a fallback for one exactly when it is for the other.

What :func:`parse_log` recognises (any prefix before it: ``[W ...]``, ``UserWarning:``,
``CAUTION:``, ``[PTA]``):

* CPU-fallback warnings: ``The operator 'aten::isin.Tensor_Tensor_out' is not currently
  supported on the NPU backend and will fall back to run on the CPU`` -> the op, with the note
  that it ran on the host;
* missing aclnn symbols (CANN older than torch_npu expects): ``aclnnIsin ... not in
  libopapi.so`` / ``cannot find symbol aclnnIsin`` -> ``aclnn::aclnnIsin``;
* dtype gaps: ``"isin" not implemented for 'Double'`` / ``... not implemented for DT_DOUBLE``
  -> the op with that dtype;
* error codes (``EZ1001``, ``EE9999``, ``ERR01007`` ...) -> counted in the notes.

Memory stays bounded whatever the file: it is read in fixed-size chunks, long or binary
"lines" are cut, and binary junk is skipped.

Both readers take the log through :func:`decoded` (UTF-16 as PowerShell's ``>`` writes it, a
UTF-8 BOM) and :func:`iter_records`, which reads a line longer than 16 KB as the log records it
holds (cut at timestamps, ``[rankN]:`` prefixes, log levels), so a log written without newlines
reads like one with them.

:func:`parse_record` is the structured half of ``explain``: the fields of each failure shape
(:class:`Finding`: ``call aclnnXxx failed, error code is N``, ``OPS function error``, EZ9999 /
E40021 lines with their message, ``ERR00100``, aicore exceptions and kernel names, missing
symbols, rejected dtypes, CPU fallbacks, Python exceptions); :class:`TracebackTracker` finds the
user's file:line nearest the failure.
"""

from __future__ import annotations

import codecs
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Protocol

from opcheck.core.errors import TraceError, UsageError
from opcheck.core.oplist import MAX_SAMPLES, OpList, OpUse
from opcheck.core.opname import canonical

MAX_LINE = 4096  # characters kept per line: every message we match is near its start
MAX_CODES = 500  # distinct error codes kept; more would only be noise
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

# bounded so a pathological line cannot make the matching quadratic
_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_OPNAME = rf"(?:{_IDENT}::)?{_IDENT}(?:\.{_IDENT})?"

# The CPU-fallback warning. It stops at "on the NPU": a terminal that wraps the line right
# after it must still count, and a bare op name (older torch_npu) means aten.
FALLBACK = re.compile(
    rf"operator\s+'(?P<op>{_OPNAME})'\s+is not currently (?:supported|implemented) on the NPU",
    re.IGNORECASE,
)
FALLBACK_NEEDLE = "not currently"  # in every match, lower-cased: a cheap test before the regex


def fallback_op(line: str) -> str | None:
    """The canonical op a CPU-fallback warning in ``line`` names, else None."""
    m = FALLBACK.search(line) if FALLBACK_NEEDLE in line.lower() else None
    if m is None:
        return None
    try:
        return canonical(m["op"], default_namespace="aten")
    except UsageError:
        return None


# ---------------------------------------------------------------------------- lines


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


# ---------------------------------------------------------------------------- log -> op list

_ACLNN = re.compile(
    r"(?P<sym>aclnn[A-Z][A-Za-z0-9_]*)[^\n]{0,120}?(?:not (?:found )?in libopapi\.so|"
    r"is not (?:found|supported) in (?:libopapi|opapi))"
    r"|(?:cannot|can't|could not|failed to) (?:find|load|get)[^\n]{0,40}?(?:symbol|function)[^\n]{0,20}?"
    r"(?P<sym2>aclnn[A-Z][A-Za-z0-9_]*)",
    re.IGNORECASE,
)
_DTYPE = re.compile(
    rf"[\"']?(?P<op>{_OPNAME})[\"':]?\s*(?:\([^)]{{0,200}}\)\s*)?(?:is\s+)?not implemented for\s+"
    r"[\"']?(?P<dtype>DT_[A-Z0-9_]+|[A-Za-z0-9]+)[\"']?",
)
_CODE = re.compile(r"\b(?P<code>E[A-Z0-9]\d{4}|ERR\d{5})\b")

_DTYPE_NAMES = {
    "DT_DOUBLE": "float64", "Double": "float64", "DT_FLOAT": "float32", "Float": "float32",
    "DT_FLOAT16": "float16", "Half": "float16", "DT_BF16": "bfloat16", "BFloat16": "bfloat16",
    "DT_INT64": "int64", "Long": "int64", "DT_INT32": "int32", "Int": "int32",
    "DT_INT16": "int16", "Short": "int16", "DT_INT8": "int8", "Char": "int8",
    "DT_UINT8": "uint8", "Byte": "uint8", "DT_BOOL": "bool", "Bool": "bool",
    "DT_COMPLEX64": "complex64", "ComplexFloat": "complex64",
    "DT_COMPLEX128": "complex128", "ComplexDouble": "complex128",
}  # fmt: skip


class _LogCollector:
    def __init__(self) -> None:
        self.ops: dict[str, OpUse] = {}
        self.codes: Counter[str] = Counter()
        self.fallback: set[str] = set()
        self.aclnn: set[str] = set()
        self.dtype_gaps: set[str] = set()

    def add(self, op: str, *, dtype: str = "", where: str = "") -> OpUse:
        use = self.ops.get(op)
        if use is None:
            use = self.ops[op] = OpUse(op=op)
        use.count += 1
        if dtype and dtype not in use.dtypes and len(use.dtypes) < MAX_SAMPLES:
            use.dtypes.append(dtype)
        if where and where not in use.locations and len(use.locations) < MAX_SAMPLES:
            use.locations.append(where)
        return use

    def feed(self, line: str, lineno: int, source: str) -> None:
        where = f"{source}:{lineno}"
        low = line.lower()
        op = fallback_op(line)
        if op:
            self.fallback.add(op)
            self.add(op, where=where)
        m2 = _ACLNN.search(line) if "aclnn" in low else None
        if m2:
            sym = m2["sym"] or m2["sym2"]
            self.aclnn.add(sym)
            self.add(f"aclnn::{sym}", where=where)
        m3 = _DTYPE.search(line) if "not implemented for" in low else None
        if m3 and m3["dtype"] in _DTYPE_NAMES:
            try:
                op = canonical(m3["op"].removesuffix("_npu").removesuffix("_cpu"),
                               default_namespace="aten")
            except UsageError:
                op = None
            if op:
                dtype = _DTYPE_NAMES[m3["dtype"]]
                self.dtype_gaps.add(f"{op} ({dtype})")
                self.add(op, dtype=dtype, where=where)
        for c in _CODE.finditer(line):
            if c["code"] in self.codes or len(self.codes) < MAX_CODES:
                self.codes[c["code"]] += 1


def parse_log(path: Path) -> OpList:
    """Stream ``path`` and collect every op the log names. Raises TraceError if unreadable."""
    col = _LogCollector()
    junk = 0
    try:
        with path.open("rb") as fh:
            for lineno, raw in iter_records(decoded(fh)):
                line = clean_line(raw)
                if is_binary(raw, line):
                    junk += 1
                    continue
                col.feed(line, lineno, path.name)
    except OSError as exc:
        raise TraceError(f"cannot read log {path}: {exc.strerror}") from None
    notes: list[str] = []
    if col.fallback:
        notes.append(
            f"{len(col.fallback)} op(s) fell back to the CPU (slow; every call copies to the host): "
            + ", ".join(sorted(col.fallback)[:20])
        )
    if col.aclnn:
        notes.append(
            "aclnn functions missing from libopapi.so (the installed CANN is older than this "
            "torch_npu expects): " + ", ".join(sorted(col.aclnn)[:20])
        )
    if col.dtype_gaps:
        notes.append("dtype not implemented on NPU: " + ", ".join(sorted(col.dtype_gaps)[:20]))
    if col.codes:
        notes.append("error codes: " + ", ".join(f"{c} x{n}" for c, n in col.codes.most_common(20)))
    if junk:
        notes.append(f"{junk} unreadable (binary) line(s) skipped")
    if not col.ops:
        notes.append("no operator names found in the log")
    return OpList(
        model=path.name,
        method="log",
        ir="log",
        torch_version="",
        mode="inference",
        notes=notes,
        ops=sorted(col.ops.values(), key=lambda u: u.op),
    )


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


# ---------------------------------------------------------------------------- findings

ACLNN_CALL = re.compile(
    r"call (?P<fn>aclnn[A-Z][A-Za-z0-9_]{0,120}) failed(?:, error code is (?P<code>\d{1,10}))?")
OPS_ERROR = re.compile(
    r"OPS function error: (?P<op>[A-Za-z_][\w:.]{0,120}), error code is (?P<code>\d{1,10})")
NPU_CALL = re.compile(
    r"NPU function error: (?!call aclnn)(?P<fn>[A-Za-z_][\w:]{0,160})\(.{0,200}?\), error code is "
    r"(?P<code>\d{1,10})")
CANN_CODE = re.compile(r"(?<![\w'\"-])(?P<code>E[0-9A-Z]\d{4})(?=[:)\]\s!\[]|$)")
PTA_CODE = re.compile(r"\b(?P<code>ERR\d{5}) (?P<component>[A-Z]{2,8}) (?P<message>[^.\n]{1,200})")
DEVICE_EXCEPTION = re.compile(
    r"there is an? (?:exception of )?(?:fftsplus )?(?P<unit>aicore|aivec|aic|aiv|vector core|aicpu)"
    r"[\w ]{0,20}?(?:error|exception)|\[(?P<unit2>aicore|vector core|aicpu) exception\]",
    re.IGNORECASE)
KERNEL_NAME = re.compile(
    r"(?:kernel_name|kernel name|kernelName)\s*(?:=|is|:)\s*\[?(?P<kernel>[A-Za-z_][\w.-]{0,160})"
    r"|Kernel Run failed\. opType: \d+, (?P<kernel2>\w{1,160})"
    r"|launch failed for (?P<kernel3>\w{1,160}), errno:\s*(?P<code>\d{1,10})")
RETURN_CODE = re.compile(r"(?:failed|error code is|errno|ret(?:urn)?\s*code)\s*[:=]?\s*(?P<code>50\d{4})\b")
UNDEFINED_SYMBOL = re.compile(r"undefined symbol: (?P<sym>[A-Za-z_][\w]{0,200})")
TRACE_FRAME = re.compile(r'(?<![\w"])File "(?P<file>[^"]{1,500})", line (?P<line>\d{1,9}), in (?P<func>\S{1,200})')
EXCEPTION_LINE = re.compile(r"^(?:[\w.]{0,80}\.)?(?P<exc>[A-Z]\w{0,60}(?:Error|Exception|Interrupt))(?::\s*(?P<msg>.*))?$")
REJECTED_DTYPE = re.compile(
    r"not implemented for\s+['\"]?(?P<dtype>DT_[A-Z0-9_]+|[A-Z][A-Za-z0-9]+)\b"
    r"|scalar_type:\s*(?P<dtype2>\w+?)\s*is not sur?pp?orted")
PRODUCT = re.compile(
    r"\bAscend\s?(?P<soc>910(?:A|B\d?|ProA|ProB|PremiumA|_93\d{0,2})?|310(?:P\d?|B\d?)?|950\w{0,4})\b")
# the installed kernels lack an op type (for this SoC, dtype or in the package)
NO_BINARY = re.compile(r"\bOp (?P<op>[A-Z]\w{0,120}) does not has any binary")
SOC_OPTYPE = re.compile(r"socVersion \[(?P<soc>\w{1,40})\] does not support opType \[(?P<op>\w{1,120})\]")
OPTYPE_NAMED = re.compile(r"\bop ?type(?:\s*[:=]\s*|\s+)\[?(?P<op>[A-Z][A-Za-z0-9]{1,120})\]?", re.IGNORECASE)
# TBE (jit) compile failures: E9xxxx "Compile operator failed", E40021 "Failed to compile Op [..]"
COMPILE_FAILED = re.compile(r"Compile operator failed|Failed to compile Op \[(?P<op>[^\]]{1,200})\]"
                            r"|Compile op\[(?P<op2>[^\]]{1,200})\] failed")
TBE_DTYPE = re.compile(r"\b(?P<dtype>bfloat16|float16|float32|float64|int64|int32|int16|int8|uint8|"
                       r"bool|double|complex64) of tbe\.[\w.]{1,80} is not supported")
ATTEN_MASK_SHAPE = re.compile(r"the shape is (?P<shape>\[[\d, ]{1,80}\])")

_PID_TS = re.compile(
    r"\[PID:\s*\d+\]|\(PID:\s*\d+[^)]*\)|\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d(?:\.\d+)*|\[FUNC:[^\]]*\]"
    r"|\[FILE:[^\]]*\]|\[LINE:\d+\]|\((?:E[0-9A-Z]\d{4})\):?")
_USER_FRAME_SKIP = ("site-packages", "dist-packages", "/lib/python", "<frozen", "<string>")


@dataclass
class Finding:
    """One recognised shape in a log, with the fields parsed out of it.

    ``kind``: ``aclnn_call`` (call aclnnXxx failed), ``ops_error`` (OPS function error),
    ``acl_call`` (another NPU function error with a code), ``cann_error`` (EZ9999, E40021 ...),
    ``pta_error`` (ERR00100 ...), ``device_exception`` (aicore / vector core exceptions),
    ``missing_symbol``, ``dtype``, ``cpu_fallback``, ``exception`` (a Python exception line),
    ``compile`` (a TBE compile failure), ``no_kernel`` (the installed kernels lack an op type:
    no binary, or the SoC rejected), ``message`` (a line the message index knows)."""

    kind: str
    line: int
    text: str
    code: str = ""
    function: str = ""  # aclnn or ACL function
    op: str = ""  # ATen op (fallback, dtype) or operator type (OPS error, kernel)
    message: str = ""
    dtype: str = ""  # a dtype the line says was rejected
    kernel: str = ""
    where: str = ""  # the user's file:line nearest the failure (from a Python traceback)
    template: str = ""  # the message template of the index this line matched (kind "message")
    hint: str = ""  # [FUNC:…][FILE:…][LINE:…] the line itself names
    count: int = 1
    lines: list[int] = field(default_factory=list)  # first lines it occurs on (bounded)
    signatures: list[str] = field(default_factory=list)  # troubleshooting signatures of its line

    @property
    def key(self) -> tuple[str, ...]:
        return (self.kind, self.code, self.function, self.op, self.message, self.dtype, self.kernel,
                self.template)

    def as_dict(self) -> dict[str, Any]:
        return {k: v for k, v in {
            "kind": self.kind, "line": self.line, "count": self.count, "code": self.code,
            "function": self.function, "op": self.op, "message": self.message,
            "dtype": self.dtype, "kernel": self.kernel, "where": self.where, "text": self.text,
            "template": self.template, "hint": self.hint,
        }.items() if v != ""}


def _message(line: str, end: int) -> str:
    """The message after a code: PID, timestamps and source positions dropped."""
    text = _PID_TS.sub(" ", line[end:]).lstrip(" :)]!\t").rstrip()
    return re.sub(r"\s{2,}", " ", text)[:300]


def dtype_name(raw: str) -> str:
    """``DT_BFLOAT16`` / ``BFloat16`` → ``bfloat16`` (unknown names lower-cased)."""
    return _DTYPE_NAMES.get(raw) or raw.removeprefix("DT_").lower()


def parse_record(text: str, line: int) -> list[Finding]:
    """Every shape :class:`Finding` knows in one log record (a line, or a piece of one)."""
    out: list[Finding] = []
    snippet = text.strip()[:300]
    low = text.lower()

    def add(kind: str, *, code: str = "", function: str = "", op: str = "", message: str = "",
            dtype: str = "", kernel: str = "") -> Finding:
        f = Finding(kind, line, snippet, code=code, function=function, op=op, message=message,
                    dtype=dtype, kernel=kernel)
        out.append(f)
        return f

    if "call aclnn" in text:
        for m in ACLNN_CALL.finditer(text):
            add("aclnn_call", function=m["fn"], code=m["code"] or "")
    if "OPS function error" in text:
        for m in OPS_ERROR.finditer(text):
            add("ops_error", op=m["op"], code=m["code"])
    if "NPU function error" in text:
        for m in NPU_CALL.finditer(text):
            add("acl_call", function=m["fn"], code=m["code"])
    if "ERR" in text:
        for m in PTA_CODE.finditer(text):
            add("pta_error", code=m["code"], message=f"{m['component']} {m['message'].strip()}")
    if "E" in text:
        for m in CANN_CODE.finditer(text):
            add("cann_error", code=m["code"], message=_message(text, m.end()))
    if "exception" in low or "error" in low:
        dm = DEVICE_EXCEPTION.search(text)
        if dm:
            unit = (dm["unit"] or dm["unit2"] or "").lower()
            add("device_exception", op=unit)
    if "kernel" in low or "launch failed" in text:
        km = KERNEL_NAME.search(text)
        if km:
            kernel = km["kernel"] or km["kernel2"] or km["kernel3"] or ""
            add("kernel", kernel=kernel, code=km["code"] or "")
    if "does not has any binary" in text:
        for m in NO_BINARY.finditer(text):
            add("no_kernel", kernel=m["op"], message="no binary")
    if "does not support opType" in text:
        for m in SOC_OPTYPE.finditer(text):
            add("no_kernel", kernel=m["op"], message=f"socVersion {m['soc']} rejects it")
    if "ompile" in text:
        cm = COMPILE_FAILED.search(text)
        if cm:
            add("compile", op=(cm["op"] or cm["op2"] or "").strip(" ,"))
    if "of tbe." in text:
        tm = TBE_DTYPE.search(text)
        if tm:
            add("dtype", dtype=dtype_name(tm["dtype"]))
    if ("optype" in low or "op type" in low) and not any(f.kernel for f in out):
        om = OPTYPE_NAMED.search(text)
        if om:
            add("kernel", kernel=om["op"])
    if "not implemented for" in text or "scalar_type" in text:
        dm2 = REJECTED_DTYPE.search(text)
        if dm2:
            add("dtype", dtype=dtype_name(dm2["dtype"] or dm2["dtype2"] or ""))
    op = fallback_op(text)
    if op:
        add("cpu_fallback", op=op)
    if "aclnn" in low:
        sm = _ACLNN.search(text)
        if sm:
            add("missing_symbol", function=sm["sym"] or sm["sym2"])
    if "undefined symbol" in text:
        um = UNDEFINED_SYMBOL.search(text)
        if um:
            add("missing_symbol", function=um["sym"])
    if not out and ("Error" in text or "Exception" in text):
        em = EXCEPTION_LINE.match(text.strip())
        if em:
            add("exception", op=em["exc"], message=(em["msg"] or "").strip()[:300])
    if len(out) > 1:  # "EZ9999[PID..] (EZ9999): msg" names its code twice
        out = list({f.key: f for f in reversed(out)}.values())[::-1]
    return out


class TracebackTracker:
    """Follows Python tracebacks through a log: the user's frame nearest the failure.

    A frame is the user's when its file is outside site-packages, dist-packages and the
    standard library; the innermost such frame of the traceback in progress is the answer."""

    def __init__(self) -> None:
        self.where = ""

    def feed(self, text: str) -> None:
        if "Traceback (most recent call last)" in text:
            self.where = ""
            return
        if 'File "' in text:
            m = TRACE_FRAME.search(text)
            if m and not any(s in m["file"] for s in _USER_FRAME_SKIP):
                self.where = f"{m['file']}:{m['line']}"


def looks_like_error(text: str) -> bool:
    """A line a person would read as an error (for the "nothing recognised" summary)."""
    low = text.lower()
    return any(w in low for w in ("error", "failed", "exception", "traceback", "fatal"))


def products_in(text: str) -> list[str]:
    """Ascend SoC names a line mentions (``910A``, ``310P3``, ``910B2``)."""
    return [m["soc"] for m in PRODUCT.finditer(text)] if "Ascend" in text else []


def atten_mask_shape(message: str) -> str:
    m = ATTEN_MASK_SHAPE.search(message)
    return m["shape"] if m else ""


# ---------------------------------------------------------------------------- message index

_LOG_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")
_HINTS = re.compile(r"\[FUNC:(?P<func>\w{1,120})\]|\[FILE:(?P<file>[\w.-]{1,120})\]"
                    r"|\[LINE:(?P<line>\d{1,7})\]")
_DIGITS = re.compile(r"\d+")
MAX_SHAPES = 4096  # line shapes remembered (bounded memory)
MIN_LITERAL = 12  # literal characters a template needs before a match names its line of code


@dataclass
class MessageMatch:
    """A log line matched to a template of the message index."""

    template: str
    literal: int
    func: str = ""  # [FUNC:…] / [FILE:…] / [LINE:…] the log line itself carries (CANN plog)
    file: str = ""
    line: int = 0


class MessageIndex:
    """The templates of the message index (``message_template``), keyed on each one's anchor
    word (its rarest literal word): a line is searched only with the templates whose anchor
    it contains, each compiled on first use. Memory: the templates' text and the compiled
    patterns of those a log actually reached."""

    def __init__(self, templates: list[tuple[str, str, int]]) -> None:
        from opcheck.scrapers.messages import longest_literal, template_pattern

        self._pattern = template_pattern
        self._by_word: dict[str, list[int]] = {}
        self._templates: list[tuple[str, int]] = []
        self._needles: list[str] = []  # each template's longest literal: a substring test first
        for template, anchor, literal in templates:
            if literal < MIN_LITERAL:
                continue
            self._by_word.setdefault(anchor, []).append(len(self._templates))
            self._templates.append((template, literal))
            # a run of spaces in the template matches any whitespace: test its longest word
            self._needles.append(max(longest_literal(template).split(), key=len, default=""))
        self._compiled: dict[int, re.Pattern[str]] = {}
        self._words = frozenset(self._by_word)
        self._seen: dict[str, tuple[str, int] | None] = {}  # line shape → its best template

    def __len__(self) -> int:
        return len(self._templates)

    def match(self, line: str, context: str = "") -> MessageMatch | None:
        """The most specific template (most literal characters) that ``line`` matches;
        ``context``: the whole log line, when ``line`` is the message part of it (its
        [FUNC:…][FILE:…][LINE:…] hints are read there)."""
        words = self._words.intersection(_LOG_WORD.findall(line))  # in C: most lines have none
        if not words:
            return None
        # a log repeats its lines with other numbers: the same line shape matches the same way
        shape = _DIGITS.sub("0", line) if len(line) < 2000 else ""
        if shape and shape in self._seen:
            got = self._seen[shape]
            return None if got is None else self._hints(MessageMatch(*got), context or line)
        by_word = self._by_word
        cands = [i for w in words for i in by_word[w]]
        best: tuple[str, int] | None = None
        needles = self._needles
        for i in cands:
            template, literal = self._templates[i]
            if (best is not None and literal <= best[1]) or needles[i] not in line:
                continue
            rx = self._compiled.get(i)
            if rx is None:
                try:
                    rx = self._compiled[i] = re.compile(self._pattern(template))
                except re.error:  # pragma: no cover - the scraper escapes every literal
                    continue
            if rx.search(line):
                best = (template, literal)
        if shape:
            if len(self._seen) >= MAX_SHAPES:
                self._seen.clear()
            self._seen[shape] = best
        if best is None:
            return None
        return self._hints(MessageMatch(best[0], best[1]), context or line)

    @staticmethod
    def _hints(m: MessageMatch, context: str) -> MessageMatch:
        if "[FUNC:" in context or "[FILE:" in context:
            for h in _HINTS.finditer(context):
                m.func = h["func"] or m.func
                m.file = h["file"] or m.file
                m.line = int(h["line"]) if h["line"] else m.line
        return m
