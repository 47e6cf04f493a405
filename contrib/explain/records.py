"""The structured half of ``explain``: the fields of each failure shape a torch_npu / CANN log
line takes (:class:`Finding`: ``call aclnnXxx failed, error code is N``, ``OPS function error``,
EZ9999 / E40021 lines with their message, ``ERR00100``, aicore exceptions and kernel names,
missing symbols, rejected dtypes, CPU fallbacks, Python exceptions), read by :func:`parse_record`
from one record; :class:`TracebackTracker` finds the user's file:line nearest the failure.

The CPU-fallback warning has one pattern (:data:`FALLBACK`), shared with ``trace --log``, so a
line is a fallback for one reader exactly when it is for the other. Pure: no catalog, no I/O.
"""

from __future__ import annotations

import re
from collections import deque
from dataclasses import dataclass, field
from typing import Any

from opcheck.core.errors import UsageError
from opcheck.core.opname import canonical

# bounded so a pathological line cannot make the matching quadratic
_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
OPNAME = rf"(?:{_IDENT}::)?{_IDENT}(?:\.{_IDENT})?"

# The CPU-fallback warning. It stops at "on the NPU": a terminal that wraps the line right
# after it must still count, and a bare op name (older torch_npu) means aten.
FALLBACK = re.compile(
    rf"operator\s+'(?P<op>{OPNAME})'\s+is not currently (?:supported|implemented) on the NPU",
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



MISSING_ACLNN = re.compile(
    r"(?P<sym>aclnn[A-Z][A-Za-z0-9_]*)[^\n]{0,120}?(?:not (?:found )?in libopapi\.so|"
    r"is not (?:found|supported) in (?:libopapi|opapi))"
    r"|(?:cannot|can't|could not|failed to) (?:find|load|get)[^\n]{0,40}?(?:symbol|function)[^\n]{0,20}?"
    r"(?P<sym2>aclnn[A-Z][A-Za-z0-9_]*)",
    re.IGNORECASE,
)

DTYPE_NAMES = {
    "DT_DOUBLE": "float64", "Double": "float64", "DT_FLOAT": "float32", "Float": "float32",
    "DT_FLOAT16": "float16", "Half": "float16", "DT_BF16": "bfloat16", "BFloat16": "bfloat16",
    "DT_INT64": "int64", "Long": "int64", "DT_INT32": "int32", "Int": "int32",
    "DT_INT16": "int16", "Short": "int16", "DT_INT8": "int8", "Char": "int8",
    "DT_UINT8": "uint8", "Byte": "uint8", "DT_BOOL": "bool", "Bool": "bool",
    "DT_COMPLEX64": "complex64", "ComplexFloat": "complex64",
    "DT_COMPLEX128": "complex128", "ComplexDouble": "complex128",
}  # fmt: skip


# torch_npu refusing an acl_op kernel during graph capture names the op type it was running
ACLOP_WORKING = re.compile(r"Current working aclop is (?P<op>[A-Za-z_]\w{0,120})")
ACLNN_CALL = re.compile(
    r"call (?P<fn>aclnn[A-Z][A-Za-z0-9_]{0,120}) failed(?:, error code is (?P<code>\d{1,10}))?")
OPS_ERROR = re.compile(
    r"OPS function error: (?P<op>[A-Za-z_][\w:.]{0,120}), error code is (?P<code>\d{1,10})")
NPU_CALL = re.compile(
    r"NPU function error: ?(?!call aclnn)(?P<fn>[A-Za-z_][\w:]{0,160})\(.{0,200}?\), ?error code is "
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
# torch_npu's "The Inner error is reported as above … the current working operator name is X"
WORKING_OP = re.compile(r"current working operator name is (?P<name>[A-Za-z_]\w{0,160})")
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
_USER_FRAME_SKIP = ("site-packages", "dist-packages", "/lib/python", "<frozen", "<string>",
                    "/torch/", "/torch_npu/")


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
    call_line: str = ""  # the source line of ``where``, when the traceback shows it
    template: str = ""  # the message template of the index this line matched (kind "message")
    also: tuple[str, ...] = ()  # the other templates it matches (kind "message")
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
            "dtype": self.dtype, "kernel": self.kernel, "where": self.where,
            "call_line": self.call_line, "text": self.text,
            "template": self.template, "hint": self.hint,
        }.items() if v != ""}


def _message(line: str, end: int) -> str:
    """The message after a code: PID, timestamps and source positions dropped."""
    text = _PID_TS.sub(" ", line[end:]).lstrip(" :)]!\t").rstrip()
    return re.sub(r"\s{2,}", " ", text)[:300]


def dtype_name(raw: str) -> str:
    """``DT_BFLOAT16`` / ``BFloat16`` → ``bfloat16`` (unknown names lower-cased)."""
    return DTYPE_NAMES.get(raw) or raw.removeprefix("DT_").lower()


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
    if "working operator name" in text:
        wm = WORKING_OP.search(text)
        if wm and wm["name"].startswith("aclnn"):
            add("aclnn_call", function=wm["name"])
        elif wm:
            add("kernel", kernel=wm["name"])
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
    if "working aclop is" in text:
        for m in ACLOP_WORKING.finditer(text):
            add("kernel", kernel=m["op"])
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
        sm = MISSING_ACLNN.search(text)
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


@dataclass
class UserCall:
    """The user's frame of one Python traceback in the log: the last frame outside torch,
    torch_npu and site-packages (the call to change), with the source line the traceback
    shows under it."""

    where: str  # file:line
    func: str
    code: str  # the source line, when the traceback prints it
    first: int  # the traceback's first line in the log
    last: int  # its exception line
    exception: str  # the exception line, cut

    def as_dict(self) -> dict[str, Any]:
        return {"where": self.where, "func": self.func, "code": self.code, "first": self.first,
                "last": self.last, "exception": self.exception}


# torch_npu's [ERROR] records may name a Python file and line ("[ERROR] ... train.py:20 ...")
_PY_POS = re.compile(r"(?P<file>[\w./\\~-]{1,400}\.py):(?P<line>\d{1,9})\b")
# a logger's prefix before each line of a traceback it relays (vLLM's "ERROR 01-21 06:59:30
# [core.py:634] ", "(Worker_TP0 pid=415) ", torchrun's "[rank0]: ")
_LOG_PREFIX = re.compile(r"^(?:\(\w{1,40} pid=\d{1,9}\) )?(?:(?:ERROR|WARNING|INFO|DEBUG) "
                         r"\d\d-\d\d \d\d:\d\d:\d\d(?:\.\d+)? \[[\w.]{1,80}:\d{1,6}\] ?)?"
                         r"(?:\[rank\d{1,6}\]: ?)?")
MAX_CALLS = 64  # closed tracebacks kept (the last ones): a log of a thousand repeats stays small


def is_user_file(path: str) -> bool:
    return not any(s in path for s in _USER_FRAME_SKIP)


class TracebackTracker:
    """Follows Python tracebacks through a log: the user's frame nearest the failure.

    A frame is the user's when its file is outside site-packages, dist-packages, the standard
    library and torch / torch_npu checkouts; the innermost such frame of the traceback in
    progress is :attr:`where` (with its source line, :attr:`code`). Each traceback closed by
    its exception line is kept in :attr:`closed` (the last :data:`MAX_CALLS`); a chain
    ("During handling of the above exception …") is one traceback per link. Memory: one
    frame per traceback, whatever its depth."""

    def __init__(self) -> None:
        self.where = ""
        self.func = ""
        self.code = ""
        self.closed: deque[UserCall] = deque(maxlen=MAX_CALLS)
        self._start = 0
        self._open = False
        self._want_code = False

    def feed(self, text: str, line: int = 0) -> None:
        if text[:1] in "(EWID[":
            text = _LOG_PREFIX.sub("", text, count=1)
        if self._want_code:
            self._want_code = False
            if text[:1].isspace() and text.strip() and 'File "' not in text:
                self.code = text.strip()[:200]
                return
        if "Traceback (most recent call last)" in text:
            self.where = self.func = self.code = ""
            self._start, self._open = line, True
            return
        if 'File "' in text:
            m = TRACE_FRAME.search(text)
            if m and is_user_file(m["file"]):
                self.where, self.func, self.code = f"{m['file']}:{m['line']}", m["func"], ""
                self._want_code = True
            return
        if self._open and ("Error" in text or "Exception" in text or "Interrupt" in text) \
                and not text[:1].isspace() and EXCEPTION_LINE.match(text.strip()):
            self._open = False
            if self.where:
                self.closed.append(UserCall(self.where, self.func, self.code, self._start, line,
                                            text.strip()[:300]))
            return
        if "[ERROR]" in text and ".py:" in text:
            pm = _PY_POS.search(text)
            if pm and is_user_file(pm["file"]):
                self.where, self.func, self.code = f"{pm['file']}:{pm['line']}", "", ""


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
