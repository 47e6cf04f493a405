"""Authoring workaround entries: lint against the catalog's op histories, the scaffold
``workaround new`` writes, the JSON schema, and entries generated from op-plugin's
``deprecated.yaml``. The entry schema and loading live in :mod:`opcheck.contrib.workarounds`."""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import yaml

from opcheck.contrib.workarounds import (
    Kind,
    LintProblem,
    Workaround,
    YamlError,
    default_workarounds_dir,
    entry_files,
    node_line,
    read_yaml,
    schema_problems,
)
from opcheck.core.errors import CatalogError
from opcheck.core.opname import canonical

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
                data, node = read_yaml(f)
            except YamlError as e:
                problems.append(LintProblem(str(f), "", "yaml", e.detail, e.line))
                continue
            except CatalogError as e:
                problems.append(LintProblem(str(f), "", "yaml", str(e)))
                continue
            schema = schema_problems(f, data, node)
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
            line = node_line(nodes.get(where), loc)
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
            data, _node = read_yaml(p)
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


