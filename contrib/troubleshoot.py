"""``explain`` over a log: structured findings first, signatures second.

Structured parsing (:func:`opcheck.contrib.logs.parse_record`) pulls the fields out of the
shapes torch_npu and CANN logs take (``call aclnnXxx failed, error code is N``, EZ9999 lines,
ERR00100, aicore exceptions ...). :func:`diagnose` groups them into failures, looks each code up
(``data/troubleshooting/codes/*.yaml`` in opcheck's words, and the catalog's ``aclnn_code`` rows
synced from the CANN docs), links a failing aclnn function to the ATen ops that call it
(``npukernel.aclnn``) and applies the first rule (``data/troubleshooting/rules/*.yaml``) whose
every trigger (function, code, message, rejected dtype, product) holds. A code no table knows is
reported as unknown with what was parsed.

Troubleshooting signatures (``data/troubleshooting/*.yaml``) still match single lines for the
problems that have no code (imports, memory, HCCL ...). A signature is a set of regexes over single log lines plus cause, fix and links to workaround
entries. ``explain`` streams the log once through the line reader of
:mod:`opcheck.contrib.logs` (the one ``trace --log`` uses): memory stays bounded whatever the
file size, long or binary "lines" are cut, and lines no signature knows are skipped after a
substring prefilter per pattern (most lines of a real log). CPU-fallback warnings are
recognised by that module's one pattern.

Patterns may use named groups: ``op`` (an operator name; collected as canonical ops),
``code`` (an error code) and ``symbol`` (an aclnn or library symbol); others are ignored.
"""

from __future__ import annotations

import fnmatch
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from opcheck.contrib.logs import (
    FALLBACK,
    FALLBACK_NEEDLE,
    Finding,
    MessageIndex,
    Readable,
    TracebackTracker,
    clean_line,
    decoded,
    is_binary,
    iter_records,
    looks_like_error,
    parse_record,
    products_in,
)
from opcheck.contrib.logs import iter_lines as iter_lines  # re-exported: the line reader
from opcheck.contrib.workarounds import ID_PATTERN, Link, OpStr, default_data_dir
from opcheck.core.errors import CatalogError, UsageError
from opcheck.core.opname import canonical

if TYPE_CHECKING:
    from opcheck.checker.contract import DtypeSupport
    from opcheck.db.catalog import Catalog
    from opcheck.db.messages import MessageRow

M = TypeVar("M", bound=BaseModel)


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
    # A signature that only restates a code (ERR00100, "a CANN error code"): on a line the
    # structured parser read, the code tables say more, so it is not shown there.
    generic: bool = False

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


def _read_yaml(f: Path) -> Any:
    try:
        return yaml.safe_load(f.read_text(encoding="utf-8"))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise CatalogError(f"{f}{line}: YAML error: {e.problem or e.context}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as e:
        raise CatalogError(f"{f}: cannot read: {e}") from None


def _validated(model: type[M], data: Any, f: Path) -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        err = e.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "entry"
        raise CatalogError(f"{f}: {loc}: {err['msg'].removeprefix('Value error, ')}") from None


def _load_folder(model: type[M], folder: Path) -> list[tuple[M, Path]]:
    if not folder.is_dir():
        raise UsageError(f"not a directory: {folder}")
    return [(_validated(model, _read_yaml(f), f), f) for f in sorted(folder.glob("*.yaml"))]


def load_dir(path: Path | None = None) -> list[Signature]:
    """All signatures in ``path`` (default: shipped data); errors name the file and line."""
    out: list[Signature] = []
    seen: dict[str, Path] = {}
    for sig, f in _load_folder(Signature, path or default_signatures_dir()):
        if sig.id in seen:
            raise CatalogError(f"{f}: id {sig.id} also used by {seen[sig.id]}")
        seen[sig.id] = f
        out.append(sig)
    return out


# ---------------------------------------------------------------------------- codes and rules

_CODE_PATTERN = r"^(?:[0-9]{1,3}x{0,6}|[0-9]{6}|E[0-9A-Z]{1,5}x{0,4}|ERR[0-9]{2,5}x{0,3})$"


class CodeEntry(BaseModel):
    """One code or code family (``561xxx``, ``EZxxxx``: each ``x`` any digit), in our words."""

    model_config = ConfigDict(extra="forbid")

    code: str = Field(pattern=_CODE_PATTERN)
    name: str = ""
    meaning: str = Field(min_length=10)
    fix: str = ""

    @property
    def wildcards(self) -> int:
        return self.code.count("x")

    def matches(self, code: str) -> bool:
        return len(code) == len(self.code) and all(
            a == b or (a == "x" and b.isdigit()) for a, b in zip(self.code, code, strict=True))


class CodeFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: Link
    codes: list[CodeEntry] = Field(min_length=1)


@dataclass(frozen=True)
class CodeBook:
    """The code tables of ``data/troubleshooting/codes``: the most specific entry wins."""

    entries: tuple[tuple[CodeEntry, str], ...]  # (entry, source URL)

    def lookup(self, code: str) -> tuple[CodeEntry, str] | None:
        hits = [(e, src) for e, src in self.entries if e.matches(code)]
        return min(hits, key=lambda h: h[0].wildcards) if hits else None


def load_codes(path: Path | None = None) -> CodeBook:
    folder = path or default_signatures_dir() / "codes"
    entries: list[tuple[CodeEntry, str]] = []
    seen: dict[str, Path] = {}
    for doc, f in _load_folder(CodeFile, folder):
        for e in doc.codes:
            if e.code in seen:
                raise CatalogError(f"{f}: code {e.code} also in {seen[e.code]}")
            seen[e.code] = f
            entries.append((e, str(doc.source)))
    return CodeBook(tuple(entries))


class When(BaseModel):
    """A rule's triggers; every one given must hold for the failure."""

    model_config = ConfigDict(extra="forbid")

    functions: list[str] = Field(default_factory=list)  # aclnn functions, * wildcards
    codes: list[str] = Field(default_factory=list)
    message: str | None = None  # regex over the failure's CANN messages; named groups fill the rule
    dtypes: list[str] = Field(default_factory=list)  # a dtype the log says was rejected
    products: list[str] = Field(default_factory=list)  # SoC names in the log, * wildcards
    silent: bool = False  # no CANN message beyond "Inner Error!" explains the failure

    @field_validator("message")
    @classmethod
    def _compiles(cls, message: str | None) -> str | None:
        if message is not None:
            try:
                re.compile(message)
            except re.error as e:
                raise ValueError(f"bad regex {message!r}: {e}") from None
        return message

    @property
    def size(self) -> int:
        return (bool(self.functions) + bool(self.codes) + (self.message is not None)
                + bool(self.dtypes) + bool(self.products) + self.silent)


class Rule(BaseModel):
    """What a failure means when its triggers hold: the contract rule broken, cause and fix."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=ID_PATTERN)
    title: str
    when: When
    rule: str = Field(min_length=10, description="{name} fills from the message's named groups, "
                      "{function}, {code}, {dtype}, {product}")
    doc: Link | None = None  # the contract's line upstream
    cause: str = Field(min_length=10)
    fix: str = Field(min_length=10)
    workarounds: list[str] = Field(default_factory=list)
    sources: list[Link] = Field(default_factory=list)

    @field_validator("when")
    @classmethod
    def _triggers(cls, when: When) -> When:
        if when.size == 0:
            raise ValueError("a rule needs at least one trigger")
        return when


def load_rules(path: Path | None = None) -> list[Rule]:
    """The rules, most specific (most triggers) first: the first that holds is applied."""
    rules: list[Rule] = []
    seen: dict[str, Path] = {}
    for rule, f in _load_folder(Rule, path or default_signatures_dir() / "rules"):
        if rule.id in seen:
            raise CatalogError(f"{f}: id {rule.id} also used by {seen[rule.id]}")
        seen[rule.id] = f
        rules.append(rule)
    return sorted(rules, key=lambda r: -r.when.size)


# ---------------------------------------------------------------------------- catalog facts


@dataclass(frozen=True)
class DocCode:
    """A return-code row of the CANN docs (the catalog's ``aclnn_code``)."""

    function: str
    code: str
    name: str
    triggers: str
    params: str
    line: int
    url: str


class CatalogFacts(Protocol):
    def aclnn_ops(self, function: str) -> list[str]: ...

    def aclnn_codes(self, function: str, code: str) -> list[DocCode]: ...


@dataclass
class _SqlFacts:
    cat: Catalog

    def aclnn_ops(self, function: str) -> list[str]:
        from opcheck.db import messages

        return messages.ops_reaching(self.cat.engine, function)

    def aclnn_codes(self, function: str, code: str) -> list[DocCode]:
        """The function's own rows for ``code`` and the shared table's row for it (or its
        family): newest source first, one row per distinct trigger."""
        from opcheck.db import reads

        family = code[:3] + "xxx" if len(code) == 6 else code
        out: dict[tuple[str, str, str, str], DocCode] = {}
        for r in reads.aclnn_code_rows(self.cat.engine, function, code, family):
            d = DocCode(r.function, r.code, r.name, r.triggers, r.params, r.line, r.url)
            out.setdefault((d.function, d.code, d.triggers, d.params), d)
        return list(out.values())


    def message_sites(self, template: str) -> list[MessageRow]:
        from opcheck.db import messages

        return messages.same_template(self.cat.engine, template)

    def ops_reaching(self, function: str) -> list[str]:
        from opcheck.db import messages

        return messages.ops_reaching(self.cat.engine, function)

    def op_type(self, op_type: str) -> OpTypeFacts:
        from opcheck.db import cann_engine, messages

        launches = messages.launches_of(self.cat.engine, op_type)
        bins = cann_engine.binary_rows(self.cat.engine, [op_type]).get(op_type, [])
        engines: dict[str, set[str]] = {}
        for la in launches:
            engines.setdefault(la.engine, set()).add(la.aclnn)
        fns = sorted({la.aclnn for la in launches})
        ops = sorted({op for fn in fns for op in self.ops_reaching(fn)})
        socs: dict[str, set[str]] = {}
        for b in bins:
            if b.binaries or b.configured:
                socs.setdefault(b.soc, set()).add(b.cann)
        url = next((f"{b.base_url}{b.path}" for b in bins if b.base_url and b.path), "")
        return OpTypeFacts(op_type, {e: sorted(f) for e, f in engines.items()},
                           {s: sorted(v) for s, v in socs.items()}, ops,
                           sorted({b.cann for b in bins}), url)


def catalog_facts(cat: Catalog) -> _SqlFacts:
    return _SqlFacts(cat)


def message_index(cat: Catalog) -> MessageIndex | None:
    """The catalog's message index for :func:`explain` (None when the catalog has none)."""
    from opcheck.db import messages

    if not messages.has_messages(cat.engine):
        return None
    return MessageIndex(messages.templates(cat.engine))


class MessageFacts(Protocol):
    """What the message index and the engine facts say (the catalog's ``message_template``,
    ``engine_site`` and ``op_binary``)."""

    def message_sites(self, template: str) -> list[MessageRow]: ...

    def op_type(self, op_type: str) -> OpTypeFacts: ...

    def ops_reaching(self, function: str) -> list[str]: ...


@dataclass
class OpTypeFacts:
    """A CANN op type a log names (a kernel, a missing binary, a rejected opType)."""

    op_type: str
    engines: dict[str, list[str]]  # engine → aclnn functions launching it there
    socs: dict[str, list[str]]  # SoC → CANN versions with a binary or an AI Core config
    ops: list[str]  # ATen ops reaching it (through those aclnn functions)
    canns: list[str]  # CANN versions whose open libraries list binaries for it
    url: str = ""

    @property
    def known(self) -> bool:
        return bool(self.engines or self.socs or self.canns)

    def as_dict(self) -> dict[str, Any]:
        return {"op_type": self.op_type, "engines": self.engines, "socs": self.socs,
                "ops": self.ops, "canns": self.canns, "url": self.url}


# ---------------------------------------------------------------------------- explain


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
            (s, [(re.compile(p), _needle(p)) for p in s.patterns]) for s in self.signatures
        ]
        self._fallback = {s.id for s in self.signatures if s.category is Category.fallback}

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
            tb.feed(text)
            found = parse_record(text, n)
            # a line torch_npu relays a failed call on is read by the parser; its own check
            # is printed on the lines around it
            said = next((f.message for f in found if f.kind == "cann_error" and f.message), "")
            # the macros the index holds print errors and warnings: a line that reads as
            # neither (steps, losses, INFO records: most of a big log) is not searched
            if self.messages is not None and (said or (
                    not any(f.kind in _RELAYS for f in found)
                    and (found or looks_like_error(text) or "warn" in text.lower()))):
                mm = self.messages.match(said or text, text)
                if mm is not None:
                    hint = ":".join(x for x in (mm.func, mm.file, str(mm.line or "")) if x)
                    found.append(Finding("message", n, text.strip()[:300], template=mm.template,
                                         hint=hint))
            claimed = False
            for f in found:
                claimed |= f.kind in CLAIMING
                self._finding(result, f, tb.where)
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
        return result

    @staticmethod
    def _finding(result: ExplainResult, f: Finding, where: str) -> None:
        got = result.findings.get(f.key)
        if got is None:
            if len(result.findings) >= MAX_FINDINGS:
                return
            f.where = where if f.kind in ("aclnn_call", "ops_error", "acl_call", "exception") else ""
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


class _Counting:
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


def explain_file(path: Path, signatures: Iterable[Signature] | None = None, *,
                 progress: Callable[[int], None] | None = None,
                 progress_step: int = 8 << 20,
                 messages: MessageIndex | None = None) -> ExplainResult:
    """Explain a log file (UTF-8, UTF-8 with BOM or UTF-16); ``progress`` gets the bytes read
    so far every ``progress_step`` bytes."""
    try:
        with path.open("rb") as f:
            stream: Readable = _Counting(f, progress, progress_step) if progress else f
            return explain(log_records(stream), signatures, messages)
    except OSError as e:
        raise UsageError(f"cannot read {path}: {e.strerror}") from None


# ---------------------------------------------------------------------------- diagnose

ANCHORS = ("aclnn_call", "ops_error", "acl_call", "device_exception", "missing_symbol", "compile",
           "no_kernel", "message")
BEFORE, AFTER = 3, 40  # lines around a failure whose CANN lines belong to it
_EMPTY_MESSAGES = {"", "inner error", "inner error!"}


@dataclass
class CodeInfo:
    code: str
    known: bool  # in our tables or in the CANN docs for this code exactly
    name: str = ""
    meaning: str = ""
    fix: str = ""
    source: str = ""
    family: str = ""  # the family entry used when the exact code is not known
    documented: list[DocCode] = field(default_factory=list)  # the function's own doc rows

    def as_dict(self) -> dict[str, Any]:
        return {"code": self.code, "known": self.known, "name": self.name,
                "meaning": self.meaning, "fix": self.fix, "source": self.source,
                "family": self.family,
                "documented": [{"function": d.function, "triggers": d.triggers,
                                "params": d.params, "line": d.line, "url": d.url}
                               for d in self.documented]}


@dataclass
class Problem:
    """One failure: the finding that anchors it, the lines that belong to it, what they mean."""

    anchor: Finding
    parts: list[Finding] = field(default_factory=list)
    code: CodeInfo | None = None
    ops: list[str] = field(default_factory=list)  # ATen ops the catalog links to its aclnn functions
    rule: Rule | None = None
    rule_text: str = ""
    workarounds: list[str] = field(default_factory=list)
    signatures: list[Signature] = field(default_factory=list)  # specific signatures of its lines
    other_codes: list[CodeInfo] = field(default_factory=list)  # the other codes of its lines
    # per aclnn function and rejected dtype: the products its documented contract takes it on
    contract: list[DtypeSupport] = field(default_factory=list)
    # the lines of code that printed its messages (message index), the op types it names
    sites: list[SiteExplanation] = field(default_factory=list)
    op_types: list[OpTypeFacts] = field(default_factory=list)
    changes: list[str] = field(default_factory=list)  # what the user can change, from the above
    notes: list[str] = field(default_factory=list)  # unindexed messages, docs that disagree

    @property
    def findings(self) -> list[Finding]:
        return [self.anchor, *self.parts]

    @property
    def functions(self) -> list[str]:
        return list(dict.fromkeys(f.function for f in self.findings
                                  if f.function.startswith("aclnn")))

    @property
    def codes(self) -> list[str]:
        return list(dict.fromkeys(f.code for f in self.findings if f.code))

    @property
    def messages(self) -> list[str]:
        return [f.message for f in self.findings
                if f.kind == "cann_error" and f.message.strip().lower() not in _EMPTY_MESSAGES]

    @property
    def dtypes(self) -> list[str]:
        return list(dict.fromkeys(f.dtype for f in self.findings if f.dtype))

    @property
    def kernels(self) -> list[str]:
        return list(dict.fromkeys(f.kernel for f in self.findings if f.kernel))

    @property
    def where(self) -> str:
        return next((f.where for f in self.findings if f.where), "")

    def as_dict(self) -> dict[str, Any]:
        return {
            "line": self.anchor.line, "kind": self.anchor.kind,
            "functions": self.functions, "codes": self.codes, "dtypes": self.dtypes,
            "kernels": self.kernels, "messages": self.messages, "where": self.where,
            "findings": [f.as_dict() for f in self.findings],
            "code": self.code.as_dict() if self.code else None,
            "other_codes": [c.as_dict() for c in self.other_codes],
            "ops": self.ops,
            "rule": None if self.rule is None else {
                "id": self.rule.id, "title": self.rule.title, "rule": self.rule_text,
                "doc": str(self.rule.doc) if self.rule.doc else "", "cause": self.rule.cause,
                "fix": self.rule.fix},
            "workarounds": self.workarounds,
            "signatures": [s.id for s in self.signatures],
            "contract": [c.as_dict() for c in self.contract],
            "sites": [x.as_dict() for x in self.sites],
            "op_types": [o.as_dict() for o in self.op_types],
            "changes": self.changes, "notes": self.notes,
        }


def _near(f: Finding, line: int) -> bool:
    return any(line - BEFORE <= n <= line + AFTER for n in f.lines)


def _group(findings: list[Finding]) -> list[Problem]:
    """Failures in order of first line: each anchor with the nearby lines that belong to it;
    the rest, each its own problem."""
    ordered = sorted(findings, key=lambda f: f.line)
    problems: list[Problem] = []
    claimed: set[int] = set()
    for i, f in enumerate(ordered):
        if f.kind not in ANCHORS or i in claimed:
            continue
        # a device exception or ACL call right after an aclnn failure is the same failure
        owner = next((p for p in reversed(problems) if f.kind != "aclnn_call"
                      and _near(f, p.anchor.line)), None)
        if owner is not None:
            owner.parts.append(f)
            claimed.add(i)
            continue
        p = Problem(f)
        claimed.add(i)
        # One failure rejects one dtype: a second rejected-dtype line nearby is another
        # failure (its own problem), with everything else on its line.
        dtype_lines = {g.line for g in ordered if g.kind == "dtype"}
        taken_dtype = next((g.line for g in ordered if g.kind == "dtype" and g.line == f.line), 0)
        for j, g in enumerate(ordered):
            if j in claimed or g.kind in ANCHORS or g.kind not in CLAIMING or not _near(g, f.line):
                continue
            if g.line in dtype_lines:
                if taken_dtype and g.line != taken_dtype:
                    continue
                taken_dtype = g.line
            p.parts.append(g)
            claimed.add(j)
        problems.append(p)
    for j, g in enumerate(ordered):
        if j not in claimed and g.kind in CLAIMING:
            # the findings of one line (a CANN code and the dtype it rejected) are one problem
            owner = next((p for p in reversed(problems) if p.anchor.line == g.line
                          and p.anchor.kind not in ANCHORS), None)
            if owner is not None:
                owner.parts.append(g)
            else:
                problems.append(Problem(g))
    return sorted(problems, key=lambda p: p.anchor.line)


def _main_code(p: Problem) -> str:
    numeric = [c for c in p.codes if c.isdigit()]
    return (numeric or p.codes or [""])[0]


def _code_info(p: Problem, codes: CodeBook, facts: CatalogFacts | None,
               code: str = "") -> CodeInfo | None:
    code = code or _main_code(p)
    if not code:
        return None
    fn = next(iter(p.functions), "")
    documented = facts.aclnn_codes(fn, code) if facts and code.isdigit() else []
    own = [d for d in documented if d.function and d.code == code]
    shared = next((d for d in documented if not d.function and d.code == code), None)
    entry = codes.lookup(code)
    exact = entry is not None and entry[0].code == code
    info = CodeInfo(code, known=exact or bool(own) or shared is not None, documented=own)
    if shared is not None:
        info.name, info.source = shared.name, shared.url
    elif own:
        info.name = own[0].name
    if entry is not None:
        e, src = entry
        info.meaning, info.fix = e.meaning, e.fix
        info.source = info.source or src
        if exact:
            info.name = info.name or e.name
        else:
            info.family = f"{e.code} ({e.name})" if e.name else e.code
    return info


class _Fill(dict[str, str]):
    def __missing__(self, key: str) -> str:
        return "?"


def _apply(rule: Rule, p: Problem, products: dict[str, int]) -> str | None:
    """The rule's text filled in when every trigger holds for ``p``, else None."""
    w = rule.when
    fill = _Fill()
    if w.functions:
        fn = next((f for f in p.functions if any(fnmatch.fnmatchcase(f, pat) for pat in w.functions)), None)
        if fn is None:
            return None
    if w.codes and not set(w.codes) & set(p.codes):
        return None
    if w.silent and p.messages:
        return None
    if w.message is not None:
        rx = re.compile(w.message)
        m = next((m for m in map(rx.search, p.messages + [f.text for f in p.findings]) if m), None)
        if m is None:
            return None
        fill.update({k: v for k, v in m.groupdict().items() if v is not None})
    if w.dtypes:
        if not p.dtypes or p.dtypes[0] not in w.dtypes:
            return None
        fill["dtype"] = p.dtypes[0]
    if w.products:
        soc = next((s for s in products if any(fnmatch.fnmatchcase(s, pat) for pat in w.products)), None)
        if soc is None:
            return None
        fill["product"] = soc
    fill.setdefault("function", next(iter(p.functions), "the kernel"))
    fill.setdefault("code", next(iter(p.codes), ""))
    fill.setdefault("dtype", next(iter(p.dtypes), ""))
    return rule.rule.format_map(fill)


def diagnose(result: ExplainResult, *, facts: CatalogFacts | None = None,
             codes: CodeBook | None = None, rules: Iterable[Rule] | None = None,
             workaround_ops: dict[str, set[str]] | None = None,
             messages: MessageFacts | None = None) -> list[Problem]:
    """Group the findings of ``result`` into failures and explain each one.

    Ops named come only from the log (fallback and dtype lines) or from the catalog's link of
    an aclnn function the log names. A rule's workarounds are attached only when the rule
    holds and either names the failing function or shares an op with the failure
    (``workaround_ops``: workaround id → its ops)."""
    codes = codes if codes is not None else load_codes()
    rule_list = list(rules) if rules is not None else load_rules()
    sigs = {h.signature.id: h.signature for h in result.hits.values()}
    log_ops = set(result.ops)
    problems = _group(list(result.findings.values()))
    for p in problems:
        p.code = _code_info(p, codes, facts)
        p.other_codes = [info for c in p.codes if p.code is not None and c != p.code.code
                         for info in [_code_info(p, codes, None, c)] if info is not None]
        if facts is not None:
            p.ops = sorted({op for fn in p.functions for op in facts.aclnn_ops(fn)})
        for rule in rule_list:
            text = _apply(rule, p, result.products)
            if text is None:
                continue
            p.rule, p.rule_text = rule, text
            ops = set(p.ops) | log_ops
            p.workarounds = [w for w in rule.workarounds if rule.when.functions
                             or (workaround_ops is not None and workaround_ops.get(w, set()) & ops)]
            break
        if messages is not None:
            explain_sites(p, messages)
        ids = dict.fromkeys(s for f in p.findings for s in f.signatures)
        p.signatures = [sigs[i] for i in ids if i in sigs and not sigs[i].generic]
    return problems


def signature_workarounds(sig: Signature, ops: set[str],
                          workaround_ops: dict[str, set[str]]) -> list[str]:
    """The signature's workarounds for ops the log names (a workaround for no op: always)."""
    return [w for w in sig.workarounds
            if not workaround_ops.get(w) or workaround_ops[w] & ops]


# ---------------------------------------------------------------------------- the report


@dataclass
class OpStatus:
    op: str
    status: str
    kernel: str
    first_npu_release: str  # on the target's torch line
    workarounds: list[str]
    via: str = ""  # the aclnn function that links it, when the log does not name it
    first_npu_release_any: str = ""  # on any torch line


@dataclass
class LogReport:
    """What ``opcheck explain`` shows: the failures, the signatures no failure explains, and
    the status of every op the log names (or the catalog links to an aclnn function it names)."""

    result: ExplainResult
    problems: list[Problem]
    signatures: list[tuple[SignatureHit, list[str]]]  # shown on their own, with their workarounds
    ops: list[OpStatus]
    target: dict[str, str]
    release: str = ""
    cann: str = ""

    @property
    def named_ops(self) -> set[str]:
        return set(self.result.ops) | {op for p in self.problems for op in p.ops}

    def as_dict(self) -> dict[str, Any]:
        doc = self.result.as_dict()
        named = self.named_ops
        for s in doc["signatures"]:  # a signature's own op list names ops the log may not
            s["ops"] = [op for op in s["ops"] if op in named]
        doc["problems"] = [p.as_dict() for p in self.problems]
        doc["target"] = self.target
        doc["op_status"] = [{"op": o.op, "status": o.status, "kernel": o.kernel,
                             "first_npu_release": o.first_npu_release,
                             "workarounds": o.workarounds, **({"via": o.via} if o.via else {})}
                            for o in self.ops]
        return doc


def report_log(result: ExplainResult, cat: Catalog, *, torch_npu: str | None = None,
               installed_torch: str | None = None) -> LogReport:
    """Explain ``result`` against the catalog: failures diagnosed, ops checked on the target."""
    from opcheck.checker.check import check
    from opcheck.checker.contract import dtype_support
    from opcheck.checker.queries import select_target
    from opcheck.contrib import workarounds as wa
    from opcheck.core.oplist import OpList, OpUse

    target = select_target(cat, torch_npu=torch_npu, installed_torch=installed_torch)
    workaround_ops = {w.id: set(w.ops) for w in wa.load_dir()}
    facts = catalog_facts(cat)
    from opcheck.db.messages import has_messages

    problems = diagnose(result, facts=facts, workaround_ops=workaround_ops,
                        messages=facts if has_messages(cat.engine) else None)
    uses = [OpUse(o.op, o.count, locations=[f"line {o.first_line}"]) for o in result.ops.values()]
    via: dict[str, str] = {}
    for p in problems:
        for op in p.ops:
            if op not in result.ops and op not in via:
                via[op] = ", ".join(p.functions)
                uses.append(OpUse(op, 1, locations=[f"line {p.anchor.line}"]))
    for p in problems:  # the documented contract says where the rejected dtype is taken
        p.contract = [s for fn in p.functions for d in p.dtypes
                      for s in [dtype_support(cat, fn, d, target.cann)] if s is not None]
        for cs in p.contract:  # the installed CANN's own check outranks any documentation
            if cs.accepts:
                installed = f"CANN {target.cann}" if target.cann else "the installed CANN"
                p.notes.append(
                    f"this log shows the installed CANN rejecting {cs.dtype} in {cs.function}; "
                    f"the catalog's docs ({cs.basis}) list {cs.dtype} for it on "
                    f"{', '.join(cs.accepts)}: the log line wins, those docs describe another "
                    f"CANN version or product (the report's target is {installed}, a guess "
                    "when the log names no version); a CANN whose docs list it may accept it")
    report = check(cat, OpList(model="log", method="log", ir="log", ops=uses), target,
                   workarounds=wa.workaround_lookup(cat))
    ops = [OpStatus(f.op, str(f.status), f.kernel, f.first_npu_release,
                    [w.id for w in f.workarounds], via.get(f.op, ""), f.first_npu_release_any)
           for f in report.ops]
    named = set(result.ops) | set(via)
    shown = [(h, signature_workarounds(h.signature, named, workaround_ops))
             for h in result.hits.values() if h.standalone]
    return LogReport(result, problems, shown, ops, report.target, target.torch_npu,
                     target.cann or "")


# ---------------------------------------------------------------------------- message sites

MAX_SITES = 3  # sites shown per template (the others are counted)
_SUPPORT_LIST = re.compile(r"support list\s*\[(?P<list>[^\]]{0,600})\]")
_RANK_LIMIT = re.compile(r"rank of (?P<param>\w+) (?P<op>[<>]|!=) \S+ \((?P<n>\d+)\)"
                         r"|larger than (?P<n2>\d+) dimensions|at least (?P<n3>\d+) dimensions")
_PARAM = re.compile(r"(?:dtype|rank|shape) of (?P<param>\w+)")
_WORDS = (
    (re.compile(r"->GetViewShape\(\)\.GetDimNum\(\)|\.GetDimNum\(\)|\.dim\(\)"), "'s rank"),
    (re.compile(r"->GetDataType\(\)|\.scalar_type\(\)|\.dtype\(\)"), "'s dtype"),
    (re.compile(r"->GetStorageFormat\(\)"), "'s storage format"),
    (re.compile(r"->GetViewShape\(\)|\.sizes\(\)"), "'s shape"),
    (re.compile(r"(?:GetCurrentPlatformInfo\(\)\.)?GetSocVersion\(\)"), "the SoC"),
    (re.compile(r"(?:op::)?SocVersion::"), ""),
    (re.compile(r"(?:op::)?(?:DataType|Format)::"), ""),
    (re.compile(r"\s*&&\s*"), " and "),
    (re.compile(r"\s*\|\|\s*"), " or "),
    (re.compile(r"!(?!=)"), "not "),
)


# a guard about the call's arguments (not an internal status): the user can act on it
_INPUT_WORDS = re.compile(r"'s (?:rank|dtype|shape|storage format)|\bdim\b|size|Size|dtype|format",
                          re.IGNORECASE)


def condition_words(cond: str) -> str:
    """A C++ guarding condition read aloud (accessors named, operators spelled out)."""
    for rx, words in _WORDS:
        cond = rx.sub(words, cond)
    return re.sub(r"\s{2,}", " ", cond).strip()


def op_type_of(kernel: str) -> str:
    """``IndexPutV2_7a1b…`` / ``Maximum_ee98…_high_performance_2230`` → the op type."""
    m = re.match(r"[A-Z][A-Za-z0-9]*", kernel)
    return m.group(0) if m else ""


@dataclass
class SiteExplanation:
    """The lines of code that print one message of a failure."""

    template: str
    text: str  # the log line
    rows: list[MessageRow]  # the sites shown (narrowed by the failure's function, if it names one)
    total: int  # sites printing this text in the index
    narrowed_by: str = ""  # what chose ``rows`` among ``total``
    why: str = ""  # the guarding condition of the first row, in words

    def as_dict(self) -> dict[str, Any]:
        return {"template": self.template, "total": self.total, "narrowed_by": self.narrowed_by,
                "why": self.why,
                "sites": [{"kind": r.kind, "library": r.library, "path": r.path, "line": r.line,
                           "function": r.function, "entry": r.entries, "condition": r.condition,
                           "lists": r.lists, "versions": r.versions, "url": r.url}
                          for r in self.rows]}


def _narrow(rows: list[MessageRow], p: Problem, hint: str) -> tuple[list[MessageRow], str]:
    """The rows the failure's own context points at: the [FILE:…] the line names, else the
    aclnn function of the failure; else all of them."""
    file = next((h for h in hint.split(":") if "." in h), "")
    if file:
        got = [r for r in rows if r.path.endswith("/" + file) or r.path == file]
        if got:
            return got, f"the file the log line names ({file})"
    fns = set(p.functions)
    if fns:
        got = [r for r in rows if fns & set(r.entries)]
        if got:
            return got, f"the failing function ({', '.join(sorted(fns))})"
    return rows, ""


def _shown(rows: list[MessageRow]) -> list[MessageRow]:
    """One row per (library, path, function), newest version first, at most MAX_SITES."""
    seen: set[tuple[str, str, str]] = set()
    out: list[MessageRow] = []
    for r in sorted(rows, key=lambda r: (r.kind != "cann", r.library, r.path, r.line)):
        key = (r.library, r.path, r.function)
        if key not in seen:
            seen.add(key)
            out.append(r)
    return out[:MAX_SITES]


def _site_changes(site: SiteExplanation, p: Problem) -> list[str]:
    """What the user can change, as far as the message and its guard say."""
    out: list[str] = []
    r = site.rows[0] if site.rows else None
    cond = r.condition if r else ""
    low = site.template.lower()
    rank = _RANK_LIMIT.search(cond) or _RANK_LIMIT.search(site.text)
    if rank:
        n = rank["n"] or rank["n2"] or rank["n3"]
        pm0 = _PARAM.search(cond)
        param = rank["param"] or (pm0["param"] if pm0 else "the input")
        op = rank["op"] or (">" if rank["n2"] else "<")
        limit = f"at most {n}" if op == ">" else (f"at least {n}" if op == "<" else f"exactly {n}")
        out.append(f"reshape {param} to {limit} dimensions before the call (e.g. flatten leading "
                   "dimensions and restore them after)")
    listed = _SUPPORT_LIST.search(site.text)
    if listed is not None:
        names = [x.strip() for x in listed["list"].split(",") if x.strip()]
        pm = _PARAM.search(cond)
        param = pm["param"] if pm else "the input"
        if not names:
            socs = [n.split(":")[0] for n in (r.lists.split(";") if r else [])
                    if n.split(":", 1)[-1].strip()]
            out.append(f"none: the support list this SoC selected is empty, so {r.entries[0] if r and r.entries else 'the function'} "
                       "accepts no dtype here and no cast helps; run the op on another device "
                       "(CPU) or a SoC whose list is not empty"
                       + (f" (the file's non-empty lists: {', '.join(socs[:6])})" if socs else ""))
        else:
            out.append(f"cast {param} to one of {', '.join(names)} (the list the installed "
                       "CANN printed) around the call")
    if "internal format" in low:
        out.append("keep this op's inputs in ND format: torch.npu.config.allow_internal_format "
                   "= False, and no torch_npu.npu_format_cast to a private format before it")
    elif "format" in low and not out:
        out.append("pass the input in the format the message names (ND: .contiguous() and no "
                   "npu_format_cast before the call)")
    if not out and r is not None and site.why and r.kind in ("cann", "op_plugin") \
            and _INPUT_WORDS.search(site.why):
        out.append(f"change the call so that this no longer holds: {site.why}")
    return out


def explain_sites(p: Problem, facts: MessageFacts) -> None:
    """Fill ``p.sites``, ``p.op_types``, ``p.changes`` and ``p.notes`` from the message index
    and the engine facts."""
    for f in p.findings:
        if f.kind != "message" or any(s.template == f.template for s in p.sites):
            continue
        rows = facts.message_sites(f.template)
        if not rows:
            continue
        chosen, why_chosen = _narrow(rows, p, f.hint)
        shown = _shown(chosen)
        site = SiteExplanation(f.template, f.text, shown, len(rows), why_chosen,
                               condition_words(shown[0].condition) if shown else "")
        p.sites.append(site)
        for c in _site_changes(site, p):
            if c not in p.changes:
                p.changes.append(c)
    # the check that rejected the call first, torch_npu's wrapper that relayed it last
    order = {"cann": 0, "codegen": 1, "op_plugin": 2, "torch_npu": 3}
    p.sites.sort(key=lambda x: min((order.get(r.kind, 4) for r in x.rows), default=4))
    fns = dict.fromkeys([*p.functions, *(e for s in p.sites for r in s.rows[:1]
                                         for e in r.entries[:2])])
    for fn in fns:  # the ATen ops that reach the function that printed it
        for op in facts.ops_reaching(fn):
            if op not in p.ops:
                p.ops.append(op)
    for kernel in dict.fromkeys(op_type_of(k) for k in p.kernels):
        if kernel and not any(o.op_type == kernel for o in p.op_types):
            p.op_types.append(facts.op_type(kernel))
    for f in p.findings:
        if f.kind == "compile" and f.op:
            op = op_type_of(f.op.removeprefix("trans_"))
            if op and not any(o.op_type == op for o in p.op_types):
                p.op_types.append(facts.op_type(op))
    for f in p.findings:
        if f.kind != "no_kernel":
            continue
        o = next((o for o in p.op_types if o.op_type == op_type_of(f.kernel)), None)
        where = (f"the catalog's CANN binary lists have {o.op_type} for {', '.join(sorted(o.socs))}"
                 if o is not None and o.socs else "")
        if f.message == "no binary":
            c = ("install (or repair) the CANN kernels package (opp_kernel) matching this SoC: "
                 f"the installed one has no binary for {f.kernel}" + (f"; {where}" if where else ""))
        else:
            soc = f.message.split()[1] if len(f.message.split()) > 1 else "this SoC"
            c = (f"{f.kernel} has no kernel for {soc} in the installed CANN: avoid the ATen ops "
                 "that reach it on this SoC, or run them on the CPU"
                 + (f"; {where}" if where else ""))
        if c not in p.changes:
            p.changes.append(c)
    has_message = any(f.kind == "message" for f in p.findings)
    texts = [m for m in p.messages] + [f.message for f in p.findings
                                       if f.kind == "exception" and f.message]
    if texts and not has_message and p.rule is None:
        p.notes.append(f"message not in the index (parsed: {texts[0][:160]!r}): no line of code "
                       "in CANN's op_api, op-plugin or torch_npu sources the catalog has prints "
                       "it, so nothing here says why")
