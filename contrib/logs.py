"""Reading a torch_npu / CANN runtime log as an op list (``opcheck trace --log`` / ``check
--log``, called by the CLI: tracers sit below contrib and read no logs).

It reads the log with explain's reader (:mod:`opcheck.contrib.explain.reader`) and recognises
a CPU-fallback warning with the one pattern of :mod:`opcheck.contrib.explain.records`, so a
line is a fallback here exactly when it is for ``explain``. What it recognises (any prefix
before it: ``[W ...]``, ``UserWarning:``, ``CAUTION:``, ``[PTA]``):

* CPU-fallback warnings: ``The operator 'aten::isin.Tensor_Tensor_out' is not currently
  supported on the NPU backend and will fall back to run on the CPU`` -> the op, with the note
  that it ran on the host;
* missing aclnn symbols (CANN older than torch_npu expects): ``aclnnIsin ... not in
  libopapi.so`` / ``cannot find symbol aclnnIsin`` -> ``aclnn::aclnnIsin``;
* dtype gaps: ``"isin" not implemented for 'Double'`` / ``... not implemented for DT_DOUBLE``
  -> the op with that dtype;
* error codes (``EZ1001``, ``EE9999``, ``ERR01007`` ...) -> counted in the notes.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from opcheck.contrib.explain.reader import clean_line, decoded, is_binary, iter_records
from opcheck.contrib.explain.records import DTYPE_NAMES, MISSING_ACLNN, OPNAME, fallback_op
from opcheck.core.errors import TraceError, UsageError
from opcheck.core.oplist import MAX_SAMPLES, OpList, OpUse
from opcheck.core.opname import canonical

MAX_CODES = 500  # distinct error codes kept; more would only be noise

_DTYPE = re.compile(
    rf"[\"']?(?P<op>{OPNAME})[\"':]?\s*(?:\([^)]{{0,200}}\)\s*)?(?:is\s+)?not implemented for\s+"
    r"[\"']?(?P<dtype>DT_[A-Z0-9_]+|[A-Za-z0-9]+)[\"']?",
)
_CODE = re.compile(r"\b(?P<code>E[A-Z0-9]\d{4}|ERR\d{5})\b")


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
        m2 = MISSING_ACLNN.search(line) if "aclnn" in low else None
        if m2:
            sym = m2["sym"] or m2["sym2"]
            self.aclnn.add(sym)
            self.add(f"aclnn::{sym}", where=where)
        m3 = _DTYPE.search(line) if "not implemented for" in low else None
        if m3 and m3["dtype"] in DTYPE_NAMES:
            try:
                op = canonical(m3["op"].removesuffix("_npu").removesuffix("_cpu"),
                               default_namespace="aten")
            except UsageError:
                op = None
            if op:
                dtype = DTYPE_NAMES[m3["dtype"]]
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
