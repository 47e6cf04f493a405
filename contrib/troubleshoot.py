"""Troubleshooting signatures (``data/troubleshooting/*.yaml``) and ``explain`` over a log.

A signature is a set of regexes over single log lines plus cause, fix and links to workaround
entries. ``explain`` streams the log once: memory stays bounded whatever the file size, long
or binary "lines" are cut, and lines no signature knows are skipped after one combined
prefilter regex (most lines of a real log).

Patterns may use named groups: ``op`` (an operator name; collected as canonical ops),
``code`` (an error code) and ``symbol`` (an aclnn or library symbol); others are ignored.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import IO, Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from opcheck.contrib.workarounds import ID_PATTERN, Link, OpStr, default_data_dir
from opcheck.core.errors import CatalogError, UsageError
from opcheck.core.opname import canonical

MAX_LINE = 4096  # characters kept per line: signatures match near the start of a message
_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")

def _needle(pattern: str) -> str:
    """Longest literal run at the top level of ``pattern`` ("" if none is safe to use).

    Every match contains it, so a plain substring test (fast, in C) rules most lines out
    before the regex runs; a regex alternation of all patterns was ~10x slower.
    """
    if sys.version_info >= (3, 11):
        import re._parser as sre_parse
    else:  # pragma: no cover
        import sre_parse
    parsed = sre_parse.parse(pattern)
    if parsed.state.flags & re.IGNORECASE:
        return ""
    best, run = "", ""
    for op, av in parsed:
        if op is sre_parse.LITERAL:
            run += chr(av)
            best = max(best, run, key=len)
        else:
            run = ""
    return best if len(best) >= 3 else ""


class Category(str, Enum):
    install = "install"
    version = "version-mismatch"
    aclnn = "aclnn-missing"
    fallback = "cpu-fallback"
    unsupported = "unsupported-op"
    dtype = "dtype"
    memory = "memory"
    precision = "precision"
    error_code = "error-code"
    distributed = "distributed"
    usage = "usage"


class Signature(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=ID_PATTERN)
    title: str
    category: Category
    patterns: list[str] = Field(min_length=1)
    cause: str = Field(min_length=10)
    fix: str = Field(min_length=10, description="Markdown")
    workarounds: list[str] = Field(default_factory=list)
    ops: list[OpStr] = Field(default_factory=list)
    sources: list[Link] = Field(default_factory=list)

    @field_validator("patterns")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for p in patterns:
            if "(?P=" in p:
                raise ValueError(f"backreferences are not allowed: {p!r}")
            try:
                re.compile(p)
            except re.error as e:
                raise ValueError(f"bad regex {p!r}: {e}") from None
        return patterns


def default_signatures_dir() -> Path:
    return default_data_dir() / "troubleshooting"


def load_dir(path: Path | None = None) -> list[Signature]:
    """All signatures in ``path`` (default: shipped data); errors name the file and line."""
    folder = path or default_signatures_dir()
    if not folder.is_dir():
        raise UsageError(f"not a directory: {folder}")
    out: list[Signature] = []
    seen: dict[str, Path] = {}
    for f in sorted(folder.glob("*.yaml")):
        try:
            data: Any = yaml.safe_load(f.read_text(encoding="utf-8"))
        except yaml.MarkedYAMLError as e:
            mark = e.problem_mark or e.context_mark
            line = f":{mark.line + 1}" if mark else ""
            raise CatalogError(f"{f}{line}: YAML error: {e.problem or e.context}") from None
        except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
            raise CatalogError(f"{f}: cannot read: {e}") from None
        try:
            sig = Signature.model_validate(data)
        except ValidationError as e:
            err = e.errors()[0]
            loc = ".".join(str(p) for p in err["loc"]) or "entry"
            raise CatalogError(f"{f}: {loc}: {err['msg'].removeprefix('Value error, ')}") from None
        if sig.id in seen:
            raise CatalogError(f"{f}: id {sig.id} also used by {seen[sig.id]}")
        seen[sig.id] = f
        out.append(sig)
    return out


# ---------------------------------------------------------------------------- explain


@dataclass
class SignatureHit:
    signature: Signature
    count: int = 0
    first_line: int = 0
    first_text: str = ""
    codes: set[str] = field(default_factory=set)
    symbols: set[str] = field(default_factory=set)


@dataclass
class OpHit:
    op: str
    count: int = 0
    first_line: int = 0
    signatures: set[str] = field(default_factory=set)


@dataclass
class ExplainResult:
    lines: int = 0
    hits: dict[str, SignatureHit] = field(default_factory=dict)  # in order of first appearance
    ops: dict[str, OpHit] = field(default_factory=dict)

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
        }

    @property
    def fallback_ops(self) -> set[str]:
        """Ops named by CPU-fallback warnings (the ones that still run, slowly)."""
        return {
            o.op
            for o in self.ops.values()
            if any(self.hits[s].signature.category is Category.fallback for s in o.signatures)
        }


class Explainer:
    """Compiled signatures; reusable across logs."""

    def __init__(self, signatures: Iterable[Signature]) -> None:
        self.signatures = list(signatures)
        self._compiled = [
            (s, [(re.compile(p), _needle(p)) for p in s.patterns]) for s in self.signatures
        ]

    def explain(self, lines: Iterable[bytes | str]) -> ExplainResult:
        result = ExplainResult()
        compiled = self._compiled
        for n, raw in enumerate(lines, start=1):
            result.lines = n
            text = _clean(raw)
            for sig, regexes in compiled:
                for rx, needle in regexes:
                    if needle and needle not in text:
                        continue
                    m = rx.search(text)
                    if m:
                        self._record(result, sig, m, n, text)
                        break
        return result

    @staticmethod
    def _record(result: ExplainResult, sig: Signature, m: re.Match[str], n: int, text: str) -> None:
        hit = result.hits.get(sig.id)
        if hit is None:
            hit = result.hits[sig.id] = SignatureHit(sig, first_line=n, first_text=text.strip()[:300])
        hit.count += 1
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


def _clean(raw: bytes | str) -> str:
    if isinstance(raw, bytes):
        raw = raw[: MAX_LINE * 4].decode("utf-8", errors="replace")
    text = raw[:MAX_LINE]
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    # Progress bars rewrite a line with \r; the last segment is what the terminal showed.
    if "\r" in text.rstrip("\r\n"):
        text = text.rstrip("\r\n").rsplit("\r", 1)[-1]
    return text


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


def explain(lines: Iterable[bytes | str], signatures: Iterable[Signature] | None = None) -> ExplainResult:
    """Match a log (any iterable of lines) against the signatures (default: shipped data)."""
    return Explainer(signatures if signatures is not None else load_dir()).explain(lines)


def explain_file(path: Path, signatures: Iterable[Signature] | None = None) -> ExplainResult:
    try:
        with path.open("rb") as f:
            return explain(iter_lines(f), signatures)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None
