"""Workaround entries in the catalog: their rows, the one lookup the checker uses, and one
entry whole for `opcheck workaround show` and the web. The entry schema and loading live in
:mod:`opcheck.contrib.workarounds`."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opcheck.contrib.workaround_lint import entries_from_deprecated
from opcheck.contrib.workarounds import (
    AppliesTo,
    ReleaseRange,
    Workaround,
    default_workarounds_dir,
    entry_files,
    load_dir,
    load_file,
)
from opcheck.core.errors import CatalogError, UsageError

if TYPE_CHECKING:
    from opcheck.checker.check import WorkaroundLookup
    from opcheck.db.catalog import Catalog, ReleaseInfo
    from opcheck.db.data import CatalogData, WorkaroundRec


# ---------------------------------------------------------------------------- catalog rows


def catalog_records(entries: Iterable[Workaround], paths: dict[str, str] | None = None) -> list[WorkaroundRec]:
    """Entries as catalog rows (``paths``: entry id → where the entry lives)."""
    from opcheck.db.data import WorkaroundRec  # the table classes: a build's, not a check's

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
