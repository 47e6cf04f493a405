"""The release matrix and the published wheels: which torch_npu releases exist, with which
torch, CANN and Python, and which wheels are published (the first upstreams a sync runs)."""

from __future__ import annotations

from collections.abc import Sequence

from opcheck.core.errors import OpcheckError, ScrapeError
from opcheck.core.versions import release_key
from opcheck.db.data import (
    PythonRec,
)
from opcheck.scrapers import releases, wheel
from opcheck.scrapers.releases import CompatTable, MatrixResult
from opcheck.scrapers.rows import ReleaseTagRow
from opcheck.sync.context import SyncContext, canonical_url
from opcheck.sync.sources import Source

OP_PLUGIN = "github/Ascend/op-plugin"
PYTORCH = "github/Ascend/pytorch"
WHEELS = "pypi/torch-npu"
CODEGEN = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
NATIVE = "torch_npu/csrc/aten/npu_native_functions.yaml"
RELEASES_TSV = "releases.tsv"

# --- release matrix --------------------------------------------------------------------------


def compat_tables(source: Source, tags: Sequence[ReleaseTagRow]) -> list[CompatTable]:
    """Parse every compat table ``source`` has, newest first (the order merge_matrix wants)."""
    try:
        refs = source.list_dir(releases.PYTORCH_REPO)
    except ScrapeError:
        refs = []  # HTTP sources cannot list; the tag list still names every release ref
    tables: list[CompatTable] = []
    for path in releases.compat_paths(tags, refs):
        if not source.exists(path):
            continue
        got = source.fetch(path)
        compat, pythons = releases.parse_compat(got.text, origin=got.origin)
        if compat or pythons:
            tables.append(CompatTable(got.origin, tuple(compat), tuple(pythons)))
    return tables


def load_matrix(source: Source) -> tuple[MatrixResult, list[ReleaseTagRow], list[CompatTable]]:
    """releases.tsv + every compat table of ``source`` → the merged matrix."""
    got = source.fetch(RELEASES_TSV)
    tags = releases.parse_releases_tsv(got.text, origin=got.origin)
    tables = compat_tables(source, tags)
    return releases.merge_matrix(tags, tables), tags, tables


def _dedupe_pythons(rows: list[PythonRec]) -> list[PythonRec]:
    seen: dict[tuple[str, str], PythonRec] = {}
    for r in rows:  # tables come newest first: the first mention keeps its source
        seen.setdefault((r.torch, r.python), r)
    return list(seen.values())


class ReleaseMatrix:
    name = "releases"
    reads = f"{RELEASES_TSV}; {PYTORCH}/<master|tag|branch>/COMPATIBILITY*.md, README*.md"
    parser = "opcheck.scrapers.releases"
    adds = "pythons; the merged release matrix (ctx.matrix) the other upstreams build on"

    def collect(self, ctx: SyncContext) -> None:
        """Fails the whole sync when the release list cannot be read: nothing works without it."""
        ctx.progress("release matrix")
        got, tsv_sid = ctx.fetch(RELEASES_TSV, "releases")
        tags = releases.parse_releases_tsv(got.text, origin=got.origin)
        # Only files that hold a table become sources, so they are fetched past ctx.fetch.
        tables = compat_tables(ctx.source, tags)
        ctx.matrix = releases.merge_matrix(tags, tables)
        ctx.releases_tsv_id = tsv_sid
        ctx.count(tsv_sid, len(tags))
        data = ctx.data
        for t in tables:
            sid = data.add_source("compat", t.origin.path, url=canonical_url(t.origin.path),
                                  ref=t.origin.ref, commit=t.origin.commit,
                                  sha256=t.origin.sha256, rows=len(t.compat) + len(t.pythons))
            for p in t.pythons:
                data.pythons += [PythonRec(torch=p.torch_version, python=py, source_id=sid)
                             for py in p.pythons]
        data.pythons = _dedupe_pythons(data.pythons)
        ctx.matrix_source_ids = {s.path: s.id for s in data.sources}


# --- published wheels ------------------------------------------------------------------------


class PublishedWheels:
    name = "wheel"
    reads = f"{WHEELS}/<version>/WHEEL-FACTS.txt (versions the matrix does not know)"
    parser = "opcheck.scrapers.wheel"
    adds = "ctx.wheel_versions; releases known only from a wheel (ctx.extra_wheels)"

    def collect(self, ctx: SyncContext) -> None:
        wanted = ctx.wanted_wheels
        ctx.wheel_versions = set(ctx.ls(WHEELS)) if wanted is None else set(wanted)
        known = {r.torch_npu_version for r in ctx.matrix.rows}
        for v in sorted(ctx.wheel_versions - known, key=release_key):
            try:
                got, _ = ctx.fetch(f"{WHEELS}/{v}/WHEEL-FACTS.txt", "wheel")
                facts = wheel.parse_wheel_facts(got.text, origin=got.origin)
                if not facts.torch_version:  # e.g. "torch>=2.7": the release needs its torch line
                    raise ScrapeError(
                        f"torch requirement {facts.torch_requirement!r} is not an == pin, so the "
                        "torch version of this release is unknown", source=got.origin.path)
                ctx.extra_wheels[v] = facts.torch_version
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
