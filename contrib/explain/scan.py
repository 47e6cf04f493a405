"""One pass over a log: every record through the structured parser, the message index and the
signatures (:class:`Explainer`), collected into an :class:`ExplainResult` with bounded memory.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opcheck.contrib.explain.reader import (
    Candidates,
    Counting,
    Readable,
    clean_line,
    decoded,
    is_binary,
)
from opcheck.contrib.explain.records import (
    FALLBACK,
    FALLBACK_NEEDLE,
    Finding,
    TracebackTracker,
    UserCall,
    looks_like_error,
    parse_record,
    products_in,
)
from opcheck.contrib.explain.signatures import Category, Signature, load_dir, pattern_needle
from opcheck.contrib.explain.templates import MessageIndex
from opcheck.core.errors import UsageError
from opcheck.core.opname import canonical


@dataclass
class SignatureHit:
    signature: Signature
    count: int = 0
    first_line: int = 0
    first_text: str = ""
    codes: set[str] = field(default_factory=set)
    symbols: set[str] = field(default_factory=set)
    standalone: int = 0  # matched lines the structured parser did not read


@dataclass
class OpHit:
    op: str
    count: int = 0
    first_line: int = 0
    signatures: set[str] = field(default_factory=set)


_RELAYS = frozenset({"aclnn_call", "acl_call", "ops_error", "pta_error"})
MAX_FINDINGS = 2000  # distinct findings kept; a log repeating one failure stays one finding
MAX_LINES = 20  # line numbers kept per finding (for grouping)
# kinds whose lines the structured parser explains (a fallback warning is explained by its
# signature; an exception line only says where)
CLAIMING = frozenset({"aclnn_call", "ops_error", "acl_call", "cann_error", "pta_error",
                      "device_exception", "kernel", "dtype", "missing_symbol", "compile",
                      "no_kernel", "message"})


@dataclass
class ExplainResult:
    lines: int = 0
    hits: dict[str, SignatureHit] = field(default_factory=dict)  # in order of first appearance
    ops: dict[str, OpHit] = field(default_factory=dict)
    findings: dict[tuple[str, ...], Finding] = field(default_factory=dict)
    products: dict[str, int] = field(default_factory=dict)  # SoC name → first line
    error_lines: int = 0  # lines that read like errors
    first_error: tuple[int, str] = (0, "")
    binary_lines: int = 0
    calls: list[UserCall] = field(default_factory=list)  # the user's frame of each traceback

    @property
    def signature_ids(self) -> set[str]:
        return set(self.hits)

    @property
    def op_names(self) -> set[str]:
        return set(self.ops)

    def as_dict(self) -> dict[str, Any]:
        """Plain data for JSON output, signatures in order of first appearance."""
        return {
            "lines": self.lines,
            "signatures": [
                {
                    "id": h.signature.id,
                    "title": h.signature.title,
                    "category": h.signature.category.value,
                    "count": h.count,
                    "first_line": h.first_line,
                    "first_text": h.first_text,
                    "codes": sorted(h.codes),
                    "symbols": sorted(h.symbols),
                    "cause": h.signature.cause,
                    "fix": h.signature.fix,
                    "workarounds": h.signature.workarounds,
                    "ops": h.signature.ops,
                }
                for h in self.hits.values()
            ],
            "ops": [
                {"op": o.op, "count": o.count, "first_line": o.first_line,
                 "signatures": sorted(o.signatures), "fallback": o.op in self.fallback_ops}
                for o in self.ops.values()
            ],
            "findings": [f.as_dict() for f in self.findings.values()],
            "products": sorted(self.products),
            "error_lines": self.error_lines,
            "first_error": ({"line": self.first_error[0], "text": self.first_error[1]}
                            if self.first_error[0] else None),
            **({"calls": [c.as_dict() for c in self.calls]} if self.calls else {}),
        }

    @property
    def fallback_ops(self) -> set[str]:
        """Ops named by CPU-fallback warnings (the ones that still run, slowly)."""
        return {
            o.op
            for o in self.ops.values()
            if any(self.hits[s].signature.category is Category.fallback for s in o.signatures)
        }


# What any reader of a record acts on, lower-cased (a superset is safe, a miss is not):
# parse_record's triggers, the traceback tracker, products, looks_like_error, the message
# index's error/warning lines, and the escape codes clean_line removes (a marker may hide
# behind one). Each signature pattern adds its literal needle (or, with none, its regex).
MARKERS = (b"err", b"fail", b"exception", b"traceback", b"fatal", b"warn", b"kernel", b"aclnn",
           b"ompile", b"of tbe.", b"optype", b"op type", b"not implemented", b"scalar_type",
           b"not currently", b"not sur", b"undefined symbol", b"does not", b'file "', b"ascend",
           b"interrupt", b"\x1b")
_CODE_MARK = re.compile(rb"E[0-9A-Z]\d{4}")  # CANN codes: EZ9999, E40021


def prefilter(signatures: Iterable[Signature]) -> tuple[tuple[bytes, ...],
                                                         tuple[re.Pattern[bytes], ...]]:
    """Markers and patterns every line explain would act on holds one of (see
    :class:`Candidates`)."""
    markers = list(MARKERS)
    patterns = [_CODE_MARK]
    for s in signatures:
        for p in s.patterns:
            needle = pattern_needle(p).lower().encode()
            if needle and not any(m in needle for m in markers):
                markers.append(needle)
            elif not needle:  # its groups renamed away: two patterns may name the same group
                patterns.append(re.compile(re.sub(r"\(\?P<\w+>", "(?:", p).encode(),
                                           re.MULTILINE))
    return tuple(dict.fromkeys(markers)), tuple(patterns)


class Explainer:
    """Compiled signatures; reusable across logs.

    Every line goes through the structured parser and the signatures. CPU-fallback signatures
    match the one fallback pattern of :mod:`opcheck.contrib.logs` (what ``trace --log`` uses)
    before their own patterns, so both readers agree on which ops fell back; their own
    patterns still match lines that pattern does not know.
    """

    def __init__(self, signatures: Iterable[Signature],
                 messages: MessageIndex | None = None) -> None:
        self.signatures = list(signatures)
        self.messages = messages if messages is not None and len(messages) else None
        self._compiled = [
            (s, [(re.compile(p), pattern_needle(p)) for p in s.patterns]) for s in self.signatures
        ]
        self._fallback = {s.id for s in self.signatures if s.category is Category.fallback}
        self.prefilter = prefilter(self.signatures)

    def explain(self, lines: Iterable[bytes | str | tuple[int, bytes]]) -> ExplainResult:
        """Read a log: plain lines (numbered from 1) or (line number, record) pairs."""
        result = ExplainResult()
        compiled = self._compiled
        fallback = self._fallback
        tb = TracebackTracker()
        n = 0
        raw: bytes | str
        for item in lines:
            if isinstance(item, tuple):
                n, raw = item
            else:
                n, raw = n + 1, item
            result.lines = n
            text = clean_line(raw)
            if isinstance(raw, bytes) and raw and is_binary(raw, text):
                result.binary_lines += 1  # still read: a signature may match through junk
            tb.feed(text, n)
            found = parse_record(text, n)
            if self.messages is not None:
                self._message(found, text, n)
            claimed = False
            for f in found:
                claimed |= f.kind in CLAIMING
                self._finding(result, f, tb)
            for soc in products_in(text):
                result.products.setdefault(soc, n)
            if not found and looks_like_error(text):
                result.error_lines += 1
                if not result.first_error[0]:
                    result.first_error = (n, text.strip()[:300])
            fb = (FALLBACK.search(text)
                  if fallback and FALLBACK_NEEDLE in text.lower() else None)
            for sig, regexes in compiled:
                if fb is not None and sig.id in fallback:
                    self._record(result, sig, fb, n, text, claimed)
                    continue
                for rx, needle in regexes:
                    if needle and needle not in text:
                        continue
                    m = rx.search(text)
                    if m:
                        self._record(result, sig, m, n, text, claimed)
                        if claimed:
                            for f in found:
                                got = result.findings.get(f.key)
                                if got is not None and sig.id not in got.signatures:
                                    got.signatures.append(sig.id)
                        break
        result.calls = list(tb.closed)
        return result

    def _message(self, found: list[Finding], text: str, n: int) -> None:
        """The index's template of the line, as a ``message`` finding."""
        assert self.messages is not None
        # a line torch_npu relays a failed call on is read by the parser; its own check
        # is printed on the lines around it
        said = next((f.message for f in found if f.kind == "cann_error" and f.message), "")
        # the macros the index holds print errors and warnings: a line that reads as
        # neither (steps, losses, INFO records: most of a big log) is not searched
        if said or (not any(f.kind in _RELAYS for f in found)
                    and (found or looks_like_error(text) or "warn" in text.lower())):
            mm = self.messages.match(said or text, text)
            if mm is not None:
                hint = ":".join(x for x in (mm.func, mm.file, str(mm.line or "")) if x)
                found.append(Finding("message", n, text.strip()[:300], template=mm.template,
                                     hint=hint, also=mm.also))

    @staticmethod
    def _finding(result: ExplainResult, f: Finding, tb: TracebackTracker) -> None:
        got = result.findings.get(f.key)
        if got is None:
            if len(result.findings) >= MAX_FINDINGS:
                return
            if f.kind in ("aclnn_call", "ops_error", "acl_call", "exception"):
                f.where, f.call_line = tb.where, tb.code if tb.where else ""
            f.lines = [f.line]
            result.findings[f.key] = f
            return
        got.count += 1
        if len(got.lines) < MAX_LINES:
            got.lines.append(f.line)

    @staticmethod
    def _record(result: ExplainResult, sig: Signature, m: re.Match[str], n: int, text: str,
                claimed: bool = False) -> None:
        hit = result.hits.get(sig.id)
        if hit is None:
            hit = result.hits[sig.id] = SignatureHit(sig, first_line=n, first_text=text.strip()[:300])
        hit.count += 1
        if not claimed:
            hit.standalone += 1
        groups = m.groupdict()
        if groups.get("code"):
            hit.codes.add(groups["code"])
        if groups.get("symbol"):
            hit.symbols.add(groups["symbol"])
        if groups.get("op"):
            try:
                op = canonical(groups["op"], default_namespace="aten")
            except UsageError:
                return
            o = result.ops.get(op)
            if o is None:
                o = result.ops[op] = OpHit(op, first_line=n)
            o.count += 1
            o.signatures.add(sig.id)


def explain(lines: Iterable[bytes | str | tuple[int, bytes]],
            signatures: Iterable[Signature] | None = None,
            messages: MessageIndex | None = None) -> ExplainResult:
    """Match a log (any iterable of lines) against the signatures (default: shipped data) and,
    when given, the message index (each line's line of code)."""
    return Explainer(signatures if signatures is not None else load_dir(),
                     messages).explain(lines)



def explain_stream(stream: Readable, signatures: Iterable[Signature] | None = None,
                   messages: MessageIndex | None = None) -> ExplainResult:
    """Explain a log stream in any encoding :func:`decoded` knows, reading only the lines the
    explainer's prefilter matches (the others are counted)."""
    ex = Explainer(signatures if signatures is not None else load_dir(), messages)
    lines = Candidates(decoded(stream), *ex.prefilter)
    result = ex.explain(lines)
    result.lines = max(result.lines, lines.lines)
    return result


def explain_file(path: Path, signatures: Iterable[Signature] | None = None, *,
                 progress: Callable[[int], None] | None = None,
                 progress_step: int = 8 << 20,
                 messages: MessageIndex | None = None) -> ExplainResult:
    """Explain a log file (UTF-8, UTF-8 with BOM or UTF-16); ``progress`` gets the bytes read
    so far every ``progress_step`` bytes."""
    try:
        with path.open("rb") as f:
            stream: Readable = Counting(f, progress, progress_step) if progress else f
            return explain_stream(stream, signatures, messages)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
