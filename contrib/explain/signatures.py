"""Troubleshooting signatures (``data/troubleshooting/*.yaml``): regexes over single log lines
for the problems that carry no code (imports, memory, HCCL ...), with cause, fix and links to
workaround entries, and the strict YAML reading every explain table shares (errors name the
file and line).

Patterns may use named groups: ``op`` (an operator name; collected as canonical ops), ``code``
(an error code) and ``symbol`` (an aclnn or library symbol); others are ignored.
"""

from __future__ import annotations

import re
import sys
from enum import Enum
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from opcheck.contrib.workarounds import ID_PATTERN, Link, OpStr, default_data_dir
from opcheck.core.errors import CatalogError, UsageError

M = TypeVar("M", bound=BaseModel)


def pattern_needle(pattern: str) -> str:
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


def read_yaml(f: Path) -> Any:
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


def load_folder(model: type[M], folder: Path) -> list[tuple[M, Path]]:
    if not folder.is_dir():
        raise UsageError(f"not a directory: {folder}")
    return [(_validated(model, read_yaml(f), f), f) for f in sorted(folder.glob("*.yaml"))]


def load_dir(path: Path | None = None) -> list[Signature]:
    """All signatures in ``path`` (default: shipped data); errors name the file and line."""
    out: list[Signature] = []
    seen: dict[str, Path] = {}
    for sig, f in load_folder(Signature, path or default_signatures_dir()):
        if sig.id in seen:
            raise CatalogError(f"{f}: id {sig.id} also used by {seen[sig.id]}")
        seen[sig.id] = f
        out.append(sig)
    return out
