"""Turn a torch_npu / CANN runtime log into an op list.

What is recognised (any prefix before it: ``[W ...]``, ``UserWarning:``, ``CAUTION:``, ``[PTA]``):

* CPU-fallback warnings: ``The operator 'aten::isin.Tensor_Tensor_out' is not currently
  supported on the NPU backend and will fall back to run on the CPU`` -> the op, with the note
  that it ran on the host;
* missing aclnn symbols (CANN older than torch_npu expects): ``aclnnIsin ... not in
  libopapi.so`` / ``cannot find symbol aclnnIsin`` -> ``aclnn::aclnnIsin``;
* dtype gaps: ``"isin" not implemented for 'Double'`` / ``... not implemented for DT_DOUBLE``
  -> the op with that dtype;
* error codes (``EZ1001``, ``EE9999``, ``ERR01007`` ...) -> counted in the notes.

The file is streamed line by line with a bounded line length; binary junk is skipped, so a
multi-GB log or a log with core-dump garbage costs constant memory.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from opcheck.core.errors import TraceError
from opcheck.core.oplist import MAX_SAMPLES, OpList, OpUse

MAX_LINE = 64 * 1024
MAX_CODES = 500  # distinct error codes kept; more would only be noise

# bounded so a pathological line cannot make the matching quadratic
_IDENT = r"[A-Za-z_][A-Za-z0-9_]{0,127}"
_OPNAME = rf"(?:{_IDENT}::)?{_IDENT}(?:\.{_IDENT})?"
_FALLBACK = re.compile(
    rf"operator\s+'(?P<op>{_OPNAME})'\s+is not currently (?:supported|implemented) on the NPU backend",
    re.IGNORECASE,
)
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
_LOCATION = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+)')

_DTYPE_NAMES = {
    "DT_DOUBLE": "float64", "Double": "float64", "DT_FLOAT": "float32", "Float": "float32",
    "DT_FLOAT16": "float16", "Half": "float16", "DT_BF16": "bfloat16", "BFloat16": "bfloat16",
    "DT_INT64": "int64", "Long": "int64", "DT_INT32": "int32", "Int": "int32",
    "DT_INT16": "int16", "Short": "int16", "DT_INT8": "int8", "Char": "int8",
    "DT_UINT8": "uint8", "Byte": "uint8", "DT_BOOL": "bool", "Bool": "bool",
    "DT_COMPLEX64": "complex64", "ComplexFloat": "complex64",
    "DT_COMPLEX128": "complex128", "ComplexDouble": "complex128",
}  # fmt: skip


def _canonical(op: str) -> str:
    op = op.strip()
    if "::" not in op:
        op = "aten::" + op
    ns, _, rest = op.partition("::")
    name, _, overload = rest.partition(".")
    return f"{ns}::{name}.{overload}" if overload and overload != "default" else f"{ns}::{name}"


def _is_junk(line: str) -> bool:
    if not line:
        return False
    bad = sum(1 for ch in line if (ord(ch) < 32 and ch not in "\t\r\n") or ch == "\ufffd")
    return bad * 10 > len(line)


class _LogCollector:
    def __init__(self) -> None:
        self.ops: dict[str, OpUse] = {}
        self.codes: Counter[str] = Counter()
        self.fallback: set[str] = set()
        self.aclnn: set[str] = set()
        self.dtype_gaps: set[str] = set()
        self.last_location = ""

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
        loc = _LOCATION.search(line) if 'File "' in line else None
        if loc and "/torch/" not in loc["file"] and "/torch_npu/" not in loc["file"]:
            self.last_location = f"{loc['file']}:{loc['line']}"
        where = f"{source}:{lineno}"
        low = line.lower()
        m = _FALLBACK.search(line) if "not currently" in low else None
        if m:
            op = _canonical(m["op"])
            self.fallback.add(op)
            self.add(op, where=where)
        m2 = _ACLNN.search(line) if "aclnn" in low else None
        if m2:
            sym = m2["sym"] or m2["sym2"]
            op = f"aclnn::{sym}"
            self.aclnn.add(sym)
            self.add(op, where=where)
        m3 = _DTYPE.search(line) if "not implemented for" in low else None
        if m3 and m3["dtype"] in _DTYPE_NAMES:
            op = _canonical(m3["op"].removesuffix("_npu").removesuffix("_cpu"))
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
            lineno = 0
            while True:
                raw = fh.readline(MAX_LINE)
                if not raw:
                    break
                lineno += 1
                if len(raw) == MAX_LINE and not raw.endswith(b"\n"):
                    # an over-long line: keep its head, drop the rest up to the newline
                    while True:
                        more = fh.readline(MAX_LINE)
                        if not more or more.endswith(b"\n"):
                            break
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                if b"\x00" in raw or _is_junk(line):
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
