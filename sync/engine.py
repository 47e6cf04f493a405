"""How a call runs inside CANN: :class:`CannEngine` reads CANN's operator API sources
(``github/hicann/<ops-*>/<tag>/**/op_api/*.cpp``) with :mod:`opcheck.scrapers.cann_engine` and
records every launch each aclnn function reaches, with its engine and routing condition;
:class:`CannBinaries` reads the binary lists and OpDef registrations
(``**/op_host/config/<soc>/*_binary.json``, ``**/op_host/*_def.cpp``) with
:mod:`opcheck.scrapers.cann_binaries`: which SoCs each op type has a kernel for.

Both per CANN version, with the version handling of the aclnn docs (:func:`cann_of_ref`: a tag
``v9.1.0`` is ``9.1.0``, a library known only at a commit is ``head``); one source row per
library version, each fact citing its path inside it.
"""

from __future__ import annotations

from collections import defaultdict

from opcheck.core.errors import OpcheckError
from opcheck.db.data import EngineSiteRec, OpBinaryRec
from opcheck.scrapers import cann_binaries, cann_engine, cann_formula
from opcheck.scrapers.cann_engine import EngineSite, SourceFile
from opcheck.sync.context import SyncContext
from opcheck.sync.contract import HICANN, cann_of_ref
from opcheck.sync.sources import Fetched, walk_files

_SUFFIXES = (".cpp", ".json")


_TREES: dict[int, list[tuple[str, str, str, list[str]]]] = {}


def library_trees(ctx: SyncContext) -> list[tuple[str, str, str, list[str]]]:
    """(repo, ref, root, every C++/JSON file below root) per library version, listed once per
    sync (both upstreams read them)."""
    key = id(ctx)
    if key not in _TREES:
        _TREES.clear()
        _TREES[key] = [(repo, ref, f"{HICANN}/{repo}/{ref}",
                        walk_files(ctx.source, f"{HICANN}/{repo}/{ref}", _SUFFIXES, max_depth=12,
                                   descend_dotted=False))
                       for repo in ctx.ls(HICANN) for ref in ctx.ls(f"{HICANN}/{repo}")]
    return _TREES[key]


def _source(ctx: SyncContext, scraper: str, repo: str, ref: str, root: str, rows: int) -> int:
    version = cann_of_ref(ref)
    return ctx.data.add_source(scraper, root, url=f"https://github.com/hicann/{repo}/blob/{ref}/",
                               ref=ref, commit=ref if version == "head" else "", rows=rows)


class CannEngine:
    name = "cann_engine"
    reads = f"{HICANN}/<ops-* repo>/<every CANN tag>/**/op_api/*.cpp"
    parser = "opcheck.scrapers.cann_engine"
    adds = ("engine_site (per aclnn function and CANN version: each launch it reaches, AI Core "
            "or AI CPU, and the routing condition with file:line)")

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("CANN op_api sources (engines)")
        trees = [(repo, ref, root, [p for p in files if "/op_api/" in p and p.endswith(".cpp")
                                    and "/experimental/" not in p])
                 for repo, ref, root, files in library_trees(ctx)]
        fetched = ctx.prefetch_paths((p for *_, paths in trees for p in paths),
                                     cann_engine.parse_source)
        rows: list[EngineSiteRec] = []
        for repo, ref, root, paths in trees:
            if not paths:
                continue
            version = cann_of_ref(ref)
            try:
                gots = [fetched.get(p) or ctx.source.fetch(p) for p in paths]

                def compute(gots: list[Fetched] = gots, root: str = root) -> list[EngineSite]:
                    pairs: list[tuple[str, SourceFile] | SourceFile] = [
                        (g.origin.path[len(root) + 1:], ctx.parsed(g, cann_engine.parse_source))
                        for g in gots]
                    return cann_engine.analyze(pairs)

                # the analysis of a version depends on its files only: a later sync reads it back
                sites = ctx.combined(gots, cann_engine.analyze, compute)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            sid = _source(ctx, self.name, repo, ref, root, len(sites))
            rows += [EngineSiteRec(aclnn=s.aclnn, cann=version, library=repo, op_type=s.op_type,
                                   engine=s.engine,
                                   condition=cann_formula.formula_dumps(s.condition),
                                   launch=s.launch, entry=s.entry, source_id=sid)
                     for s in sites]
        ctx.data.engine_sites = sorted(rows, key=lambda r: (r.aclnn, r.cann, r.launch,
                                                            r.condition))
        ctx.notes.append(f"CANN engines: {len(rows)} launch sites of "
                         f"{len({r.aclnn for r in rows})} aclnn functions")


class CannBinaries:
    name = "cann_binaries"
    reads = f"{HICANN}/<ops-* repo>/<every CANN tag>/**/op_host/config/<soc>/*_binary.json, *_def.cpp"
    parser = "opcheck.scrapers.cann_binaries"
    adds = "op_binary (per op type, CANN version and SoC: kernel binaries shipped, OpDef configs)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("CANN binary lists")
        rows: list[OpBinaryRec] = []
        for repo, ref, root, files in library_trees(ctx):
            version = cann_of_ref(ref)
            # experimental/ holds samples that are not shipped: their OpDefs configure SoCs
            # (Cast for ascend910b) that the released package serves with built-in kernels
            lists = [p for p in files if p.endswith("_binary.json") and "/op_host/config/" in p
                     and "/experimental/" not in p]
            defs = [p for p in files if p.endswith("_def.cpp") and "/op_host/" in p
                    and "/experimental/" not in p]
            if not lists and not defs:
                continue
            # (op_type, soc) → record; AddConfig SoCs and binaries merge into one row
            got: dict[tuple[str, str], OpBinaryRec] = {}
            sid = _source(ctx, self.name, repo, ref, root, 0)
            try:
                for path in lists:
                    b = ctx.parsed(ctx.text(path), cann_binaries.parse_binary_list)
                    rec = got.setdefault((b.op_type, b.soc), OpBinaryRec(
                        op_type=b.op_type, cann=version, library=repo, soc=b.soc, path=path[len(root) + 1:],
                        source_id=sid))
                    rec.binaries += b.binaries
                    rec.dtypes = ",".join(dict.fromkeys([*filter(None, rec.dtypes.split(",")),
                                                         *b.dtypes]))
                for path in defs:
                    for d in ctx.parsed(ctx.text(path), cann_binaries.parse_opdef):
                        for soc in d.socs:
                            rec = got.setdefault((d.op_type, soc), OpBinaryRec(
                                op_type=d.op_type, cann=version, library=repo, soc=soc,
                                path=f"{path[len(root) + 1:]}:{d.line}", source_id=sid))
                            rec.configured = True
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            by_type: dict[str, int] = defaultdict(int)
            for rec in got.values():
                by_type[rec.op_type] += 1
            ctx.count(sid, len(got))
            rows += got.values()
        ctx.data.op_binaries = sorted(rows, key=lambda r: (r.op_type, r.cann, r.soc, r.library))
        ctx.notes.append(f"CANN binaries: {len({r.op_type for r in rows})} op types, "
                         f"{sum(r.binaries for r in rows)} binaries")
