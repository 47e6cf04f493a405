"""The code tables (``data/troubleshooting/codes``: each code or family in opcheck's words) and
the rules (``data/troubleshooting/rules``: a parsed failure's triggers → the contract rule it
broke, cause and fix)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from opcheck.contrib.explain.signatures import default_signatures_dir, load_folder
from opcheck.contrib.workarounds import ID_PATTERN, Link
from opcheck.core.errors import CatalogError

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
    for doc, f in load_folder(CodeFile, folder):
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
    for rule, f in load_folder(Rule, path or default_signatures_dir() / "rules"):
        if rule.id in seen:
            raise CatalogError(f"{f}: id {rule.id} also used by {seen[rule.id]}")
        seen[rule.id] = f
        rules.append(rule)
    return sorted(rules, key=lambda r: -r.when.size)
