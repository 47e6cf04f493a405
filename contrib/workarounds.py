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
import hashlib
import json
import re
from collections.abc import Callable, Iterable, Sequence
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
from opcheck.db.data import CatalogData, WorkaroundRec

if TYPE_CHECKING:
    from opcheck.checker.check import WorkaroundLookup
    from opcheck.db.catalog import Catalog, ReleaseInfo

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


def _node_line(node: yaml.Node | None, loc: Sequence[int | str]) -> int | None:
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


class _YamlError(CatalogError):
    def __init__(self, path: Path, line: int | None, detail: str) -> None:
        self.line, self.detail = line, f"YAML error: {detail}"
        super().__init__(f"{path}{f':{line}' if line else ''}: {self.detail}")


def _read_yaml(path: Path) -> tuple[Any, yaml.Node | None]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise CatalogError(f"{path}: cannot read: {e}") from None
    try:
        return yaml.safe_load(text), yaml.compose(text)
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        raise _YamlError(path, mark.line + 1 if mark else None, str(e.problem or e.context)) from None
    except yaml.YAMLError as e:
        raise _YamlError(path, None, str(e).replace("\n", " ")) from None


def _schema_problems(path: Path, data: Any, node: yaml.Node | None) -> list[LintProblem]:
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
            out.append(LintProblem(str(path), str(entry), "schema", f"{field}: {msg}", _node_line(node, loc)))
        return out
    return []


def load_file(path: Path) -> Workaround:
    """One entry; bad YAML or schema raise CatalogError naming the file and line."""
    data, node = _read_yaml(path)
    problems = _schema_problems(path, data, node)
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


# ---------------------------------------------------------------------------- lint


OpHistory = Callable[[str], Sequence[tuple[str, str]]]

# What `workaround new` writes for the contributor to replace; an entry still holding one of
# these passes the schema (the scaffold must load) but not lint.
SCAFFOLD_AUTHOR = "your-github-handle"
_TODO = re.compile(r"\bTODO\b")


def placeholders(w: Workaround) -> list[tuple[str, str]]:
    """(field, what is left) for every scaffold placeholder still in the entry."""
    out: list[tuple[str, str]] = []
    for name in ("title", "problem", "fix"):
        if _TODO.search(getattr(w, name)):
            out.append((name, "still says TODO"))
    if w.author.strip() == SCAFFOLD_AUTHOR:
        out.append(("author", f"is the scaffold's {SCAFFOLD_AUTHOR}; give your handle"))
    for i, src in enumerate(w.sources):
        if _TODO.search(src):
            out.append((f"sources.{i}", f"{src} is the scaffold's placeholder link"))
    for i, r in enumerate(w.applies_to.releases):
        if r.min is None and r.max is None:
            out.append((f"applies_to.releases.{i}",
                        "is open at both ends; name the releases (or drop applies_to for all)"))
    if w.rewrite is not None:
        if _TODO.search(w.rewrite.api):
            out.append(("rewrite.api", "still says TODO"))
        if _TODO.search(w.rewrite.code):
            out.append(("rewrite.code", "still has a TODO"))
    return out


def _spans(releases: Sequence[str], all_releases: Sequence[str]) -> str:
    """``2.1.0.post6, 2.2.0–2.2.0.post2``: runs of consecutive catalog releases."""
    index = {r: i for i, r in enumerate(all_releases)}
    runs: list[list[str]] = []
    for r in releases:
        if runs and index.get(r, -2) == index.get(runs[-1][-1], -5) + 1:
            runs[-1].append(r)
        else:
            runs.append([r])
    return ", ".join(run[0] if len(run) == 1 else f"{run[0]}–{run[-1]}" for run in runs)


def _history_problems(where: str, w: Workaround, history: OpHistory,
                      namespaces: set[str]) -> list[LintProblem]:
    """Release ranges and ``fixed_in`` against what the catalog says of the entry's ops."""
    problems: list[LintProblem] = []
    uncovered: dict[str, list[str]] = {}
    for op in w.ops:
        if op.split("::", 1)[0] not in namespaces:
            continue
        rows = list(history(op))
        order = [rel for rel, _ in rows]
        if w.applies_to.releases and not w.uncovered_reason:
            missing = [rel for rel, st in rows if st == "cpu_fallback" and not w.applies(rel)]
            if missing:
                uncovered[op] = missing
                problems.append(LintProblem(
                    where, w.id, "uncovered-fallback",
                    f"the catalog says {op} falls back to the CPU on {_spans(missing, order)}, "
                    "which applies_to.releases leaves out: widen the ranges or say why in "
                    "uncovered_reason"))
        if w.fixed_in:
            first = next((rel for rel, st in rows if st == "npu"), "")
            if not first:
                problems.append(LintProblem(
                    where, w.id, "fixed-in",
                    f"fixed_in is {w.fixed_in} but the catalog has no release where {op} runs "
                    "on the NPU"))
            elif first != w.fixed_in:
                problems.append(LintProblem(
                    where, w.id, "fixed-in",
                    f"fixed_in is {w.fixed_in} but the catalog's first NPU release of {op} is "
                    f"{first}"))
    return problems


def lint(
    entries: Path | Iterable[Workaround],
    known_ops: set[str] | None = None,
    known_releases: list[str] | None = None,
    op_history: OpHistory | None = None,
) -> list[LintProblem]:
    """Problems in a directory of entry files (YAML + schema + cross checks) or in loaded entries.

    ``known_ops`` / ``known_releases`` come from the catalog; ``None`` skips that check. Ops
    are only checked in namespaces ``known_ops`` covers (aten, npu), not third-party ones.
    ``op_history`` (op → ``[(release, status)]``, oldest first, from the catalog's resolver)
    checks that an entry covers every release where one of its ops falls back to the CPU (or
    says why not, ``uncovered_reason``) and that ``fixed_in`` is the op's first NPU release.
    """
    loaded: list[tuple[str, Workaround]] = []
    nodes: dict[str, yaml.Node | None] = {}
    problems: list[LintProblem] = []
    if isinstance(entries, Path):
        for f in entry_files(entries):
            try:
                data, node = _read_yaml(f)
            except _YamlError as e:
                problems.append(LintProblem(str(f), "", "yaml", e.detail, e.line))
                continue
            except CatalogError as e:
                problems.append(LintProblem(str(f), "", "yaml", str(e)))
                continue
            schema = _schema_problems(f, data, node)
            problems += schema
            if schema:
                continue
            w = Workaround.model_validate(data)
            if f.stem != w.id:
                problems.append(LintProblem(str(f), w.id, "file-name", f"file must be named {w.id}.yaml"))
            loaded.append((str(f), w))
            nodes[str(f)] = node
    else:
        loaded = [(w.id, w) for w in entries]

    seen: dict[str, str] = {}
    releases = set(known_releases or [])
    namespaces = {op.split("::", 1)[0] for op in known_ops or ()}
    for where, w in loaded:
        if w.id in seen:
            problems.append(LintProblem(where, w.id, "duplicate-id", f"id {w.id} also used by {seen[w.id]}"))
        seen.setdefault(w.id, where)
        for field_name, what in placeholders(w):
            loc = [int(p) if p.isdigit() else p for p in field_name.split(".")]
            line = _node_line(nodes.get(where), loc)
            problems.append(LintProblem(where, w.id, "placeholder", f"{field_name} {what}", line))
        if known_ops is not None:
            for op in w.ops:
                # Third-party namespaces (torchvision::, sglang::) are outside any catalog.
                if op.split("::", 1)[0] in namespaces and op not in known_ops:
                    problems.append(LintProblem(where, w.id, "unknown-op", f"{op} is not in the catalog"))
        if known_releases is not None:
            named = [v for r in w.applies_to.releases for v in (r.min, r.max) if v]
            if w.fixed_in:
                named.append(w.fixed_in)
            for v in named:
                if v not in releases:
                    problems.append(
                        LintProblem(where, w.id, "unknown-release", f"{v} is not a torch_npu release")
                    )
            if w.applies_to.releases and not any(w.applies(r) for r in known_releases):
                problems.append(LintProblem(where, w.id, "unknown-release", "range matches no release"))
        if op_history is not None:
            known = [op for op in w.ops if known_ops is None or op in known_ops]
            problems += _history_problems(where, w.model_copy(update={"ops": known}), op_history,
                                          namespaces or {"aten", "npu"})
    return problems


# ---------------------------------------------------------------------------- authoring


def existing_ids(folder: Path) -> set[str]:
    """The ids entries in ``folder`` use (their file names: lint holds them equal), and the
    ids in files that name another id."""
    ids = {p.stem for p in entry_files(folder)}
    for p in entry_files(folder):
        try:
            data, _node = _read_yaml(p)
        except CatalogError:
            continue
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            ids.add(data["id"])
    return ids


def scaffold(op: str, *, author: str = SCAFFOLD_AUTHOR, today: _dt.date | None = None,
             taken: Iterable[str] = ()) -> str:
    """A YAML entry for ``op`` that validates as is, with every field to fill in marked (lint
    rejects it until they are filled in), and an id none of ``taken`` is."""
    op_c = canonical(op)
    slug = re.sub(r"[^a-z0-9]+", "-", op_c.split("::", 1)[1].lower()).strip("-")
    used = set(taken)
    wid = f"{slug}-rewrite"
    n = 2
    while wid in used:
        wid = f"{slug}-rewrite-{n}"
        n += 1
    data: dict[str, Any] = {
        "id": wid,
        "title": f"TODO: one line, e.g. '{op_c} falls back to the CPU'",
        "ops": [op_c],
        "applies_to": {"releases": [{"min": None, "max": None}], "hardware": ["all"]},
        "kind": Kind.rewrite.value,
        "problem": "TODO: what users see (log line, slowdown, error) and on which releases.",
        "fix": "TODO: Markdown. What to change, and why it is safe.",
        "rewrite": {
            "api": "torch.TODO",
            "rtol": 1e-5,
            "atol": 1e-6,
            "code": (
                "import torch\n\n"
                "def replacement(*args, **kwargs):\n"
                "    # TODO: same call signature as the API, built from ops the NPU supports\n"
                "    raise NotImplementedError\n\n"
                "def inputs():\n"
                "    # TODO: yield (args, kwargs) cases, edge cases included\n"
                "    yield (torch.randn(4),), {}\n"
            ),
        },
        "sources": ["https://gitcode.com/Ascend/pytorch/issues/TODO"],
        "author": author,
        "last_verified": (today or _dt.date.today()).isoformat(),
    }
    body = yaml.dump(data, sort_keys=False, allow_unicode=True, width=100, Dumper=_BlockDumper)
    return "# yaml-language-server: $schema=schema.json\n" + body


class _BlockDumper(yaml.SafeDumper):
    pass


def _str_repr(dumper: yaml.SafeDumper, s: str) -> yaml.ScalarNode:
    style = "|" if "\n" in s else None
    return dumper.represent_scalar("tag:yaml.org,2002:str", s, style=style)


_BlockDumper.add_representer(str, _str_repr)


def json_schema() -> dict[str, Any]:
    schema = Workaround.model_json_schema()
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["title"] = "opcheck workaround entry"
    return schema


def write_schema(path: Path | None = None) -> Path:
    """Write the JSON Schema editors use (``# yaml-language-server: $schema=schema.json``)."""
    target = path or default_workarounds_dir() / "schema.json"
    target.write_text(json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return target


# ---------------------------------------------------------------------------- deprecated.yaml


def entries_from_deprecated(
    rows: Iterable[tuple[str, str]],
    *,
    source: str = "https://gitcode.com/Ascend/op-plugin/blob/master/op_plugin/config/deprecated.yaml",
    today: _dt.date | None = None,
) -> list[Workaround]:
    """op-plugin's ``deprecated.yaml`` rows (op, replacement) as configuration entries.

    Ops are torch_npu customs, so a bare name gets the ``npu`` namespace; rows with no
    replacement still become entries (the op goes away with nothing to switch to).
    """
    out: dict[str, Workaround] = {}
    for op, replacement in rows:
        op_c = canonical(op, default_namespace="npu")
        base = op_c.split("::", 1)[1]
        wid = "deprecated-" + re.sub(r"[^a-z0-9]+", "-", base.lower()).strip("-")
        if wid in out:
            continue
        repl = (replacement or "").strip()
        fix = (
            f"Switch to {' or '.join(f'`{r.strip()}`' for r in repl.split(' or '))}."
            if repl
            else "No replacement is named upstream; keep to a release that still has it or drop the call."
        )
        out[wid] = Workaround(
            id=wid,
            title=f"{op_c} is deprecated",
            ops=[op_c],
            kind=Kind.configuration,
            problem=f"op-plugin lists {op_c} as deprecated; later releases may remove it.",
            fix=fix,
            sources=[source],
            author="op-plugin deprecated.yaml",
            last_verified=today or _dt.date.today(),
        )
    return list(out.values())


# ---------------------------------------------------------------------------- catalog rows


def catalog_records(entries: Iterable[Workaround], paths: dict[str, str] | None = None) -> list[WorkaroundRec]:
    """Entries as catalog rows (``paths``: entry id → where the entry lives)."""
    out = []
    for w in sorted(entries, key=lambda e: e.id):
        out.append(WorkaroundRec(
            id=w.id, title=w.title, kind=w.kind.value, problem=w.problem, fix=w.fix,
            releases=json.dumps([r.model_dump(exclude_none=True) for r in w.applies_to.releases]),
            hardware=",".join(str(h) for h in w.applies_to.hardware),
            fixed_in=w.fixed_in or "", cann_min=w.cann_min or "", env=json.dumps(w.env),
            rewrite_api=w.rewrite.api if w.rewrite else "",
            sources="\n".join(str(s) for s in w.sources), author=w.author,
            last_verified=w.last_verified.isoformat(),
            path=(paths or {}).get(w.id, ""), ops=tuple(w.ops),
        ))
    return out


def attach(data: CatalogData, folder: Path | None = None) -> None:
    """Add the contributed entries in ``folder`` and op-plugin's deprecations to ``data``.

    A contributed entry wins over a generated one with the same id.
    """
    folder = folder or default_workarounds_dir()
    entries = load_dir(folder)
    paths = {e.id: f"data/workarounds/{e.id}.yaml" for e in entries}
    generated = [
        g for g in entries_from_deprecated([(d.op, d.replacement) for d in data.deprecations])
        if g.id not in paths
    ]
    for g in generated:
        paths[g.id] = "op-plugin deprecated.yaml"
    data.workarounds = catalog_records([*entries, *generated], paths)


def folder_digest(folder: Path | None = None) -> str:
    """Changes whenever an entry file changes (the cached catalog must follow)."""
    h = hashlib.sha256()
    for p in entry_files(folder or default_workarounds_dir()):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()


# ---------------------------------------------------------------------------- checker lookup


def workaround_lookup(cat: Catalog, hardware: str | None = None) -> WorkaroundLookup:
    """The one workaround lookup: the catalog's entries filed for exactly ``op`` whose release
    ranges hold the release (:meth:`AppliesTo.contains`, the rule ``lint`` and ``verify`` use)
    and, when a ``--hardware`` product is named, whose hardware covers it
    (:func:`opcheck.core.products.hardware_matches`: ``all``, or a slug of that product).

    ``opcheck check``, ``opcheck explain``, the web check page and the op pages all call it;
    callers that want an op's packet or overloads ask for each name (the checker also asks
    for the op at the end of a fallback chain).
    """
    from collections import defaultdict

    from opcheck.checker.check import WorkaroundRef
    from opcheck.core.products import hardware_matches
    from opcheck.db import reads

    by_op: dict[str, list[tuple[WorkaroundRef, AppliesTo]]] = defaultdict(list)
    for w in reads.workaround_ops(cat.engine):
        if not hardware_matches(w.hardware.split(","), hardware):
            continue
        applies = AppliesTo(releases=[ReleaseRange(**r) for r in json.loads(w.releases or "[]")])
        by_op[w.op].append((WorkaroundRef(w.id, w.title, w.kind, w.path, w.fix), applies))

    def lookup(op: str, release: ReleaseInfo) -> list[WorkaroundRef]:
        return [ref for ref, applies in by_op.get(op, []) if applies.contains(release.torch_npu)]

    return lookup


# ---------------------------------------------------------------------------- one entry, whole


@dataclass(frozen=True)
class EntryDetail:
    """What ``opcheck workaround show`` and ``opcheck fix`` print: one entry whole, as the
    catalog holds it, plus its rewrite code when the entry's file is at hand."""

    id: str
    title: str
    kind: str
    problem: str
    fix: str
    ops: list[str]
    releases: list[dict[str, str]]  # the applies_to ranges (min / max); empty: every release
    hardware: list[str]
    fixed_in: str
    cann_min: str
    env: dict[str, str]
    rewrite_api: str
    rewrite_code: str
    sources: list[str]
    author: str
    last_verified: str
    path: str

    @property
    def verification(self) -> str:
        """How the entry was checked, in one sentence."""
        who = f"last verified {self.last_verified or '?'} by {self.author or '?'}"
        if self.rewrite_api:
            return (f"{who}; the rewrite of {self.rewrite_api} is run against the original on "
                    f"the CPU with edge cases, and its ops are checked to run on the NPU on every "
                    f"release it applies to (rerun: opcheck workaround verify {self.id})")
        if self.path == "op-plugin deprecated.yaml":
            return f"{who} (generated from op-plugin's deprecated.yaml, not hand-verified)"
        return f"{who}; no executable rewrite: checked against its sources by a reviewer"

    def as_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {**asdict(self), "verification": self.verification}


def entry_ids_for(cat: Catalog, op: str) -> list[str]:
    """The entries filed for exactly ``op`` on any release and product."""
    from opcheck.db import reads

    return sorted({w.id for w in reads.workaround_ops(cat.engine) if w.op == op})


def entry_detail(cat: Catalog, entry_id: str, folder: Path | None = None) -> EntryDetail:
    """The catalog's entry ``entry_id`` (``UsageError`` naming close ids when there is none)."""
    import difflib

    from opcheck.db import reads

    rows = {w.id: w for w in reads.workarounds(cat.engine)}
    w = rows.get(entry_id.strip())
    if w is None:
        close = difflib.get_close_matches(entry_id, list(rows), n=5, cutoff=0.5)
        hint = (f"; did you mean {', '.join(close)}?" if close
                else " (`opcheck op OP` lists an op's entries)")
        raise UsageError(f"no workaround entry {entry_id!r}{hint}")
    ops = sorted({r.op for r in reads.workaround_ops(cat.engine) if r.id == w.id})
    code = ""
    if w.rewrite_api:
        path = (folder or default_workarounds_dir()) / f"{w.id}.yaml"
        try:
            entry = load_file(path)
            code = entry.rewrite.code if entry.rewrite else ""
        except (OSError, CatalogError):
            code = ""  # the catalog came from elsewhere: its facts still stand
    return EntryDetail(
        id=w.id, title=w.title, kind=w.kind, problem=w.problem, fix=w.fix, ops=ops,
        releases=json.loads(w.releases or "[]"),
        hardware=[h for h in w.hardware.split(",") if h],
        fixed_in=w.fixed_in, cann_min=w.cann_min, env=json.loads(w.env or "{}"),
        rewrite_api=w.rewrite_api, rewrite_code=code,
        sources=[s for s in w.sources.split("\n") if s], author=w.author,
        last_verified=w.last_verified, path=w.path)
