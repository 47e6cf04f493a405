"""Workaround entries: one YAML file per entry under ``data/workarounds/``.

An entry says, for some operators on some torch_npu releases and hardware, what goes wrong and
how to get around it. Entries of kind ``rewrite`` (and optionally others) carry executable
Python inline in the YAML (``rewrite.code``): a ``replacement`` with the call signature of the
API it replaces, an ``inputs`` generator, and optionally a ``reference`` implementation used
when the original API cannot be imported on a CPU box (e.g. ``torchvision.ops.nms``).
``opcheck.contrib.verify`` runs that code; this module never imports torch.

The code lives inline (not in ``rewrites/*.py``) so one file is one reviewable unit: a pull
request that adds an entry touches exactly one path, as in MDN's browser-compat-data.
"""

from __future__ import annotations

import ast
import datetime as _dt
import re
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)

from opcheck.core.errors import CatalogError, UsageError
from opcheck.core.opname import canonical
from opcheck.core.versions import release_key

if TYPE_CHECKING:
    pass

ID_PATTERN = r"^[a-z0-9][a-z0-9-]*[a-z0-9]$"

# Names used in the per-API docs' hardware tables, slugged; "all" means no hardware limit.
Hardware = Literal[
    "all",
    "atlas-a2-training",
    "atlas-a3-training",
    "atlas-a2-inference",
    "atlas-a3-inference",
    "atlas-training",  # Atlas 800 9000 / 910 (first generation)
    "atlas-inference",  # Atlas 300I / 310P
    "atlas-200i-a2",  # 310B developer kits
    "ascend-950",
]
HARDWARE: tuple[str, ...] = get_args(Hardware)

# Inputs a rewrite must also get right: floating arguments scaled up, made all negative, with an
# inf / -inf / nan in them; every tensor argument emptied, and made non-contiguous.
EdgeCase = Literal["large", "negative", "nonfinite", "empty", "noncontiguous"]
EDGE_CASES: tuple[EdgeCase, ...] = get_args(EdgeCase)


def default_data_dir() -> Path:
    """The repository's ``data/`` directory (the lead ships it with the package)."""
    return Path(__file__).resolve().parent.parent / "data"


def default_workarounds_dir() -> Path:
    return default_data_dir() / "workarounds"


class Kind(str, Enum):
    rewrite = "rewrite"  # same result with ops the NPU has kernels for
    dtype_cast = "dtype-cast"  # compute in a dtype the kernel supports
    env_var = "env-var"
    upgrade = "upgrade"  # a newer torch_npu / CANN has the kernel or the fix
    configuration = "configuration"  # a switch, an install step, a code path choice
    custom_kernel = "custom-kernel"  # a torch_npu.npu_* fused/custom operator


def _canonical_op(op: str) -> str:
    try:
        canon = canonical(op, default_namespace="aten")
    except UsageError:
        raise ValueError(f"not an operator name: {op!r} (write e.g. aten::isin.Tensor_Tensor)") from None
    if canon != op:
        raise ValueError(f"{op!r} is not canonical; write {canon!r}")
    return op


def _link(source: str) -> str:
    if not re.match(r"^https?://\S+$", source):
        raise ValueError(f"source is not a link: {source!r}")
    return source


OpStr = Annotated[str, AfterValidator(_canonical_op)]
Link = Annotated[str, AfterValidator(_link)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class ReleaseRange(_Strict):
    """Inclusive range of torch_npu releases; an open end is unbounded."""

    min: str | None = None
    max: str | None = None

    @model_validator(mode="after")
    def _ordered(self) -> ReleaseRange:
        if self.min and self.max and release_key(self.min) > release_key(self.max):
            raise ValueError(f"min {self.min} is after max {self.max}")
        return self

    def contains(self, release: str) -> bool:
        key = release_key(release)
        if self.min and key < release_key(self.min):
            return False
        return not (self.max and key > release_key(self.max))


class AppliesTo(_Strict):
    # No ranges = every release: what an environment or configuration entry usually means.
    releases: list[ReleaseRange] = Field(default_factory=list)
    hardware: list[Hardware] = Field(default_factory=lambda: list[Hardware](["all"]))

    def contains(self, release: str) -> bool:
        return not self.releases or any(r.contains(release) for r in self.releases)


class Rewrite(_Strict):
    """Executable replacement: Python source defining ``replacement`` and ``inputs``.

    ``inputs()`` returns or yields cases; a case is ``(args, kwargs)``. ``api`` is the dotted
    name of what ``replacement`` stands in for (``torch.isin``); ``verify`` calls it as the
    original unless the code defines ``reference``.
    """

    api: str = Field(pattern=r"^[A-Za-z_][\w.]*$")
    code: str
    rtol: float = Field(default=1e-5, ge=0)
    atol: float = Field(default=1e-6, ge=0)
    # dtype-cast rewrites return the narrower dtype on purpose.
    check_dtype: bool = True
    # Cases ``verify`` derives from every case of ``inputs()`` (``opcheck.contrib.verify``):
    # drop a kind only where it means nothing for the API, and say why in ``fix``.
    edge_cases: list[EdgeCase] = Field(default_factory=lambda: list[EdgeCase](EDGE_CASES))

    @field_validator("code")
    @classmethod
    def _defines_functions(cls, code: str) -> str:
        try:
            tree = ast.parse(code)
        except SyntaxError as e:
            raise ValueError(f"code does not parse: line {e.lineno}: {e.msg}") from None
        defined = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
        missing = {"replacement", "inputs"} - defined
        if missing:
            raise ValueError(f"code must define {' and '.join(sorted(missing))}()")
        return code


class Workaround(_Strict):
    id: str = Field(pattern=ID_PATTERN)
    title: str = Field(min_length=3)
    ops: list[OpStr] = Field(default_factory=list)
    applies_to: AppliesTo = Field(default_factory=AppliesTo)
    kind: Kind
    problem: str = Field(min_length=10)
    fix: str = Field(min_length=10, description="Markdown")
    # For kind upgrade: the first release where the problem is gone.
    fixed_in: str | None = None
    # For kind upgrade when the fix is in CANN rather than torch_npu (e.g. "8.0.RC3").
    cann_min: str | None = Field(default=None, pattern=r"^\d+\.\d+\.(RC\d+|\d+)(\.\w+)?$")
    # Why applies_to leaves out releases where the catalog says an op of the entry falls back
    # to the CPU (lint asks for it then, e.g. "upgrading is no fix on the torch 2.2 line").
    uncovered_reason: str | None = Field(default=None, min_length=10)
    env: dict[str, str] = Field(default_factory=dict)
    rewrite: Rewrite | None = None
    sources: list[Link] = Field(min_length=1)
    author: str = Field(min_length=1)
    last_verified: _dt.date

    @field_validator("ops")
    @classmethod
    def _unique_ops(cls, ops: list[str]) -> list[str]:
        if len(set(ops)) != len(ops):
            raise ValueError("an op is listed twice")
        return ops

    @model_validator(mode="after")
    def _kind_fields(self) -> Workaround:
        if self.kind is Kind.rewrite and self.rewrite is None:
            raise ValueError("kind rewrite needs a rewrite: block with code")
        if self.kind is Kind.env_var and not self.env:
            raise ValueError("kind env-var needs env: {NAME: value}")
        if self.kind is Kind.upgrade and not (self.fixed_in or self.cann_min):
            raise ValueError("kind upgrade needs fixed_in: <first good torch_npu> or cann_min: <CANN>")
        return self

    def applies(self, release: str) -> bool:
        return self.applies_to.contains(release)


@dataclass(frozen=True)
class LintProblem:
    file: str
    entry: str
    # yaml | schema | duplicate-id | file-name | unknown-op | unknown-release | placeholder |
    # uncovered-fallback | fixed-in
    code: str
    message: str
    line: int | None = None

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else self.file
        return f"{where}: [{self.code}] {self.message}"


# ---------------------------------------------------------------------------- loading


def node_line(node: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
    """1-based line of the YAML node at pydantic error location ``loc`` (best effort)."""
    if node is None:
        return None
    line = node.start_mark.line + 1
    for part in loc:
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if k.value == part:
                    node, line = v, k.start_mark.line + 1
                    break
            else:
                return line
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            node = node.value[part]
            line = node.start_mark.line + 1
        else:
            return line
    return line


class YamlError(CatalogError):
    def __init__(self, path: Path, line: int | None, detail: str) -> None:
        self.line, self.detail = line, f"YAML error: {detail}"
        super().__init__(f"{path}{f':{line}' if line else ''}: {self.detail}")


def read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(f"{path}: cannot read: {e}") from None
    try:
        return yaml.safe_load(text), yaml.compose(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise YamlError(path, mark.line + 1 if mark else None, str(e.problem or e.context)) from None
    except yaml.YAMLError as e:
        raise YamlError(path, None, str(e).replace("\n", " ")) from None


def schema_problems(path: Path, data: Any, node: yaml.Node | None) -> list[LintProblem]:
    entry = data.get("id", "") if isinstance(data, dict) else ""
    if not isinstance(data, dict):
        return [LintProblem(str(path), "", "schema", "top level must be a mapping", 1)]
    try:
        Workaround.model_validate(data)
    except ValidationError as e:
        out = []
        for err in e.errors():
            loc = [p for p in err["loc"] if isinstance(p, (int, str))]
            field = ".".join(str(p) for p in loc) or "entry"
            msg = err["msg"].removeprefix("Value error, ")
            out.append(LintProblem(str(path), str(entry), "schema", f"{field}: {msg}", node_line(node, loc)))
        return out
    return []


def load_file(path: Path) -> Workaround:
    """One entry; bad YAML or schema raise CatalogError naming the file and line."""
    data, node = read_yaml(path)
    problems = schema_problems(path, data, node)
    if problems:
        raise CatalogError(str(problems[0]))
    return Workaround.model_validate(data)


def entry_files(path: Path) -> list[Path]:
    if not path.is_dir():
        raise UsageError(f"not a directory: {path}")
    return sorted(p for p in path.glob("*.yaml") if p.is_file())


def load_dir(path: Path | None = None) -> list[Workaround]:
    """Every entry in ``path`` (default: the shipped data), sorted by file name."""
    return [load_file(p) for p in entry_files(path or default_workarounds_dir())]
