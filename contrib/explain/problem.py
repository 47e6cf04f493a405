"""A failure as explain tells it (:class:`Problem`): the finding that anchors it, the lines that
belong to it, and what the code tables, rules, message index and engine facts say about it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from opcheck.contrib.explain.codes import Rule
from opcheck.contrib.explain.facts import DocCode, OpTypeFacts
from opcheck.contrib.explain.records import Finding, UserCall
from opcheck.contrib.explain.signatures import Signature

if TYPE_CHECKING:
    from opcheck.checker.contract import DtypeSupport
    from opcheck.db.messages import MessageRow

ANCHORS = ("aclnn_call", "ops_error", "acl_call", "device_exception", "missing_symbol", "compile",
           "no_kernel", "message")
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
    call: UserCall | None = None  # the user's frame of its Python traceback ("your call")
    call_ops: list[str] = field(default_factory=list)  # its ATen ops the call's line names

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
            **({"call": {**self.call.as_dict(), "ops": self.call_ops}} if self.call else {}),
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
