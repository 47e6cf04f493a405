"""The upstream sources a sync reads, one class each, in the order :data:`UPSTREAMS` runs them.

Each class says what it fetches (``reads``, mirror-layout paths), which parser turns the text
into rows (``parser``) and what it adds to :class:`~opcheck.db.data.CatalogData` (``adds``);
every file it reads is registered as a source row, so each fact keeps its provenance.

Adding an upstream: a parser module in ``scrapers/`` (pure text → rows), a class here with a
``collect(ctx)`` that fetches through ``ctx.fetch`` and appends records to ``ctx.data``, and
one line in :data:`UPSTREAMS`.  Order matters only where an upstream reads what an earlier
one left in the context (the release matrix first) and for source ids, which follow the order
files are first fetched in.

Every release gets its kernel list from the most exact place available (:class:`ReleaseKernels`):

1. ``wheel``: the published wheel's ``npu_native_functions_by_codegen.yaml`` (exact truth);
2. ``op_plugin``: op-plugin at the commit the release tag pins, plus the tag's
   ``npu_native_functions.yaml``;
   ``npu_native``: a tag from before op-plugin (no pin): its ``npu_native_functions.yaml``
   registered every kernel torch_npu had (exact);
3. ``op_plugin_branch``: releases known only from the compatibility tables (or whose pinned
   commit the source lacks), from the head of the op-plugin branch their tag's .gitmodules
   names, else of their train (approximate: the branch moved after the release), with
   torch_npu's own registrations from the nearest tagged release of the same torch line;
4. ``none``: in the release matrix only.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

from opcheck.core.errors import OpcheckError, ScrapeError
from opcheck.core.opname import OpName
from opcheck.core.versions import has_cpu_fallback, minor_key, release_key, torch_minor
from opcheck.db.data import (
    AclnnCodeRec,
    ApiFacts,
    ApiOpRec,
    ApiSupportRec,
    DeprecationRec,
    KernelFacts,
    KernelRec,
    OperatorRec,
    PythonRec,
    ReleaseRec,
)
from opcheck.scrapers import aclnn_codes, apidocs, apimap, npu_native, opplugin, releases, wheel
from opcheck.scrapers.releases import CompatTable, MatrixResult, MatrixRow
from opcheck.scrapers.rows import KernelRow, ReleaseTagRow
from opcheck.sync.advisor import AdvisorRules
from opcheck.sync.capture_rules import CaptureRules
from opcheck.sync.context import Kernels, SyncContext, canonical_url
from opcheck.sync.contract import AclnnDocs, OpApiSources
from opcheck.sync.engine import CannBinaries, CannEngine
from opcheck.sync.inductor import InductorLowerings
from opcheck.sync.kernel_path import KernelPathRules
from opcheck.sync.messages import MessageSites
from opcheck.sync.sources import Fetched, Source
from opcheck.sync.sources import walk_files as _walk
from opcheck.sync.torchair import TorchairConverters

OP_PLUGIN = "github/Ascend/op-plugin"
PYTORCH = "github/Ascend/pytorch"
WHEELS = "pypi/torch-npu"
CODEGEN = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
NATIVE = "torch_npu/csrc/aten/npu_native_functions.yaml"
RELEASES_TSV = "releases.tsv"


@runtime_checkable
class Upstream(Protocol):
    """One upstream source of catalog facts."""

    name: str  # a short label; most use it as the ``scraper`` of the source rows they register
    reads: str  # what it fetches, as mirror-layout paths
    parser: str  # the scrapers module that turns the text into rows
    adds: str  # what it adds to CatalogData (or to the context, for later upstreams)

    def collect(self, ctx: SyncContext) -> None: ...


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
                data.pythons += [PythonRec(p.torch_version, py, sid) for py in p.pythons]
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


# --- kernel registries -----------------------------------------------------------------------


def _facts(rows: Iterable[KernelRow]) -> dict[str, KernelFacts]:
    """Merge the rows for one release into one KernelFacts per op.

    A dense kernel beats tocpu/unsupported lists; a sparse-only registration counts only when
    nothing else is known (it does not make dense tensors run on the NPU)."""
    rank = {"kernel": 3, "tocpu": 2, "unsupported": 1, "sparse": 0}
    out: dict[str, KernelFacts] = {}
    for r in rows:
        new = KernelFacts(r.status, r.op_api, r.acl_op, r.native, r.aclnn or "")
        old = out.get(r.op)
        if old is None or rank[new.status] > rank[old.status]:
            out[r.op] = new
        elif new.status == old.status == "kernel":
            out[r.op] = KernelFacts("kernel", old.op_api or new.op_api, old.acl_op or new.acl_op,
                                    old.native or new.native, old.aclnn or new.aclnn)
    return out


class NpuNative:
    name = "npu_native"
    reads = f"{PYTORCH}/<tag>/{NATIVE}"
    parser = "opcheck.scrapers.npu_native"
    adds = ("torch_npu's own registrations per tag and per torch line "
            "(ctx.native_by_tag/by_line, merged into kernels by ReleaseKernels)")

    def collect(self, ctx: SyncContext) -> None:
        # Once per tag: for the tagged releases themselves and to lend to table-only releases
        # of the nearest torch line (see the module docstring).
        for m in sorted(ctx.matrix.rows, key=lambda r: release_key(r.torch_npu_version)):
            if not (m.tag and m.torch_version):
                continue
            try:
                got = native_kernels(ctx, m.tag)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            if got:
                ctx.native_by_tag[m.tag] = got
                ctx.native_by_line[torch_minor(m.torch_version)] = got


def native_kernels(ctx: SyncContext, tag: str) -> Kernels | None:
    path = f"{PYTORCH}/{tag}/{NATIVE}"
    if not tag or not ctx.source.exists(path):
        return None
    rows, sid = ctx.kernel_rows(path, "npu_native", None, npu_native.parse_native)
    return _facts(rows), sid


def _config_files(ctx: SyncContext, ref: str) -> list[str]:
    base = f"{OP_PLUGIN}/{ref}/op_plugin/config"
    names = ctx.ls(base)
    paths = [f"{base}/{n}" for n in names if n.endswith(".yaml")]
    for sub in names:
        if sub.startswith("v") and "r" in sub:
            paths += [f"{base}/{sub}/{n}" for n in ctx.ls(f"{base}/{sub}") if n.endswith(".yaml")]
    if not paths:  # a source that cannot list (HTTP): probe the known layouts
        candidates = [f"{base}/op_plugin_functions.yaml"] + [
            f"{base}/v{major}r{minor}/op_plugin_functions.yaml"
            for major, minor in ((1, 11), (2, 0), (2, 1), (2, 2), (2, 3), (2, 4))
        ]
        paths = [p for p in candidates if ctx.source.exists(p)]
    return paths


def op_plugin_kernels(ctx: SyncContext, ref: str, minor: str) -> Kernels:
    files = opplugin.functions_paths(_config_files(ctx, ref), torch=minor)
    if not files:
        raise ScrapeError(f"no op_plugin_functions.yaml for torch {minor}",
                          source=f"{OP_PLUGIN}/{ref}")
    rows: list[KernelRow] = []
    sid = 0
    for path in files:
        # A combined file is parsed once for all torch versions (the same parse OpApiSources
        # reads) and filtered; a per-version file holds one version and says which.
        per_version = opplugin.detect_format(ctx.text(path).text) == "per_version"
        got, sid = ctx.kernel_rows(path, "op_plugin", minor, opplugin.parse_functions,
                                   {"torch": minor} if per_version else None)
        rows += got
    return _facts(rows), sid


def _train_ref(rel: ReleaseRec, refs: set[str]) -> str:
    """The op-plugin branch a release's pin was taken from: the one its tag's .gitmodules
    names (a hotfix train such as 5.0.rc3.3 has no branch of its own), else its train's."""
    for ref in (rel.op_plugin_branch, rel.train, releases.train_from_branch(rel.branch)):
        if ref and ref in refs:
            return ref
    return ""


def _nearest_line(by_line: dict[str, Kernels], minor: str) -> Kernels | None:
    """torch_npu's own registrations of the closest tagged torch line (2.2 has no tag of its
    own; its table-only releases borrow from 2.1 or 2.3): view, copy_, empty... exist in every
    release, so a near line is a far better guess than none."""
    if not by_line:
        return None
    want = minor_key(minor)
    best = min(by_line, key=lambda m: (abs(minor_key(m)[1] - want[1]) + 100 * abs(minor_key(m)[0] - want[0]), -minor_key(m)[1]))
    return by_line[best]


def _with_aclnn_names(
    ctx: SyncContext, rel: ReleaseRec, minor: str, kernels: dict[str, KernelFacts]
) -> dict[str, KernelFacts]:
    """The wheel's generated list drops ``gen_opapi``; take aclnn names from op-plugin at the
    pinned commit, for ops the wheel registers with op_api."""
    refs = ctx.op_plugin_refs
    if not rel.op_plugin_commit or (refs and rel.op_plugin_commit not in refs):
        return kernels
    try:
        plugin, _sid = op_plugin_kernels(ctx, rel.op_plugin_commit, minor)
    except ScrapeError:
        return kernels  # names are a convenience; the wheel's list is the fact
    return {
        op: KernelFacts(f.status, f.op_api, f.acl_op, f.native, plugin[op].aclnn)
        if f.op_api and not f.aclnn and op in plugin and plugin[op].aclnn else f
        for op, f in kernels.items()
    }


def _release_kernels(
    ctx: SyncContext, rel: ReleaseRec, minor: str
) -> tuple[dict[str, KernelFacts], int | None, int | None, str, str]:
    """Kernel facts, their source ids, the kernel source and what it is (or why it is
    approximate or missing), from the most exact source there is."""
    refs = ctx.op_plugin_refs
    if rel.torch_npu in ctx.wheel_versions:
        path = f"{WHEELS}/{rel.torch_npu}/{CODEGEN}"
        # A wheel the index does not have is normal (old or yanked releases); a wheel that is
        # there but does not parse is a failure like any other source.
        if ctx.source.exists(path):
            rows, sid = ctx.kernel_rows(path, "wheel", None, wheel.parse_codegen)
            return (_with_aclnn_names(ctx, rel, minor, _facts(rows)), sid, sid, "wheel",
                    f"exact: the published wheel's {CODEGEN.rsplit('/', 1)[-1]}")
        ctx.notes.append(f"no published wheel for torch_npu {rel.torch_npu}; op-plugin instead")
    pin = rel.op_plugin_commit
    if pin and (not refs or pin in refs):
        kernels, ksid = op_plugin_kernels(ctx, pin, minor)
        native = ctx.native_by_tag.get(rel.tag)
        note = f"exact: op-plugin at {pin[:12]}, the commit tag {rel.tag} pins" + (
            f", and {rel.tag}'s npu_native_functions.yaml" if native
            else f" ({rel.tag}'s npu_native_functions.yaml not in the source)")
        if native is None:
            return kernels, ksid, None, "op_plugin", note
        return {**native[0], **kernels}, ksid, native[1], "op_plugin", note
    if rel.tag and not pin and rel.tag in ctx.native_by_tag:
        # before op-plugin, torch_npu's own YAML registered every kernel it had
        native = ctx.native_by_tag[rel.tag]
        return (native[0], native[1], native[1], "npu_native",
                f"exact: {rel.tag}'s npu_native_functions.yaml (before op-plugin, torch_npu "
                "registered every kernel there)")
    why = (f"tag {rel.tag} pins op-plugin {pin[:12]}, which the source does not have" if pin
           else f"tag {rel.tag} pins no op-plugin commit and has no npu_native_functions.yaml"
           if rel.tag else "no release tag and no published wheel: known from the "
           "compatibility tables only")
    ref = _train_ref(rel, refs)
    if not ref:
        return {}, None, None, "none", f"no kernel list: {why}"
    kernels, ksid = op_plugin_kernels(ctx, ref, minor)
    native = _nearest_line(ctx.native_by_line, minor)
    note = (f"approximate: {why}; op-plugin branch {ref} head (it moved after the release)"
            + (", torch_npu's own registrations of the nearest tagged torch line"
               if native else ""))
    if native is None:
        return kernels, ksid, None, "op_plugin_branch", note
    return {**native[0], **kernels}, ksid, native[1], "op_plugin_branch", note


class ReleaseKernels:
    name = "op_plugin"
    reads = (f"{WHEELS}/<version>/{CODEGEN}; "
             f"{OP_PLUGIN}/<commit|train>/op_plugin/config/[vXrY/]op_plugin_functions.yaml")
    parser = "opcheck.scrapers.wheel (codegen), opcheck.scrapers.opplugin"
    adds = "releases (with kernel_source and its source ids), kernels"

    def collect(self, ctx: SyncContext) -> None:
        # The sources known when the matrix was made: a release known only from its wheel
        # gets no source_id (its WHEEL-FACTS.txt is registered later); the bundled snapshot
        # records exactly that.
        source_ids = ctx.matrix_source_ids
        ordered = sorted(ctx.matrix.rows, key=lambda r: release_key(r.torch_npu_version))
        candidates = [_release_from_matrix(m, source_ids, ctx.releases_tsv_id)
                      for m in ordered if m.torch_version]
        for v, torch_version in ctx.extra_wheels.items():
            candidates.append(ReleaseRec(torch_npu=v, torch=torch_version,
                                         has_cpu_fallback=has_cpu_fallback(torch_version),
                                         source_id=source_ids.get(f"{WHEELS}/{v}/WHEEL-FACTS.txt")))
        candidates.sort(key=lambda r: release_key(r.torch_npu))
        ctx.op_plugin_refs = set(ctx.ls(OP_PLUGIN))
        _prefetch_kernels(ctx, candidates)
        for i, rel in enumerate(candidates):
            rel.sort_key = i
            minor = torch_minor(rel.torch)
            ctx.progress(f"kernels of torch_npu {rel.torch_npu}")
            try:
                kernels, ksid, nsid, kind, note = _release_kernels(ctx, rel, minor)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                kernels, ksid, nsid, kind, note = {}, None, None, "none", f"failed: {exc}"
            rel.kernel_source, rel.kernel_source_id, rel.native_source_id = kind, ksid, nsid
            rel.kernel_source_note = note
            for op, f in kernels.items():
                sid = nsid if (f.native and not (f.op_api or f.acl_op) and nsid) else ksid
                ctx.data.kernels.append(KernelRec(op, rel.torch_npu, f, sid))
            ctx.data.releases.append(rel)


def _prefetch_kernels(ctx: SyncContext, candidates: list[ReleaseRec]) -> None:
    """Parse, in parallel up front (:meth:`SyncContext.prefetch`), the registry files
    :func:`_release_kernels` is going to read for ``candidates``: the same choice of files,
    made without parsing any."""
    refs = ctx.op_plugin_refs
    codegen: list[str] = []
    wanted: dict[tuple[str, str], None] = {}  # (op-plugin ref, torch minor), in order
    for rel in candidates:
        minor = torch_minor(rel.torch)
        pinned = bool(rel.op_plugin_commit) and (not refs or rel.op_plugin_commit in refs)
        path = f"{WHEELS}/{rel.torch_npu}/{CODEGEN}"
        if rel.torch_npu in ctx.wheel_versions and ctx.source.exists(path):
            codegen.append(path)
            if pinned:
                wanted[(rel.op_plugin_commit, minor)] = None
        elif pinned:
            wanted[(rel.op_plugin_commit, minor)] = None
        elif ref := _train_ref(rel, refs):
            wanted[(ref, minor)] = None
    combined: list[Fetched] = []
    per_version: dict[str, list[Fetched]] = {}
    for ref, minor in wanted:
        for path in opplugin.functions_paths(_config_files(ctx, ref), torch=minor):
            try:
                got = ctx.text(path)
            except OpcheckError:
                continue  # op_plugin_kernels fails on it, in its place
            if opplugin.detect_format(got.text) == "per_version":
                per_version.setdefault(minor, []).append(got)
            else:
                combined.append(got)
    ctx.prefetch_paths(codegen, wheel.parse_codegen, kept=True)
    ctx.prefetch(combined, opplugin.parse_functions)
    for minor, gots in per_version.items():
        ctx.prefetch(gots, opplugin.parse_functions, torch=minor)


def _release_from_matrix(m: MatrixRow, source_ids: dict[str, int], tsv_sid: int) -> ReleaseRec:
    src = next((source_ids[s] for s in m.sources if s in source_ids), tsv_sid)
    return ReleaseRec(
        torch_npu=m.torch_npu_version, torch=m.torch_version, train=m.train,
        cann=m.cann_version, pythons=",".join(m.pythons), tag=m.tag, branch=m.branch,
        op_plugin_commit=m.op_plugin_commit, op_plugin_branch=m.op_plugin_branch,
        date=m.date, has_cpu_fallback=bool(m.torch_version) and has_cpu_fallback(m.torch_version),
        source_id=src, cann_inferred=m.cann_inferred,
    )


class Deprecations:
    name = "deprecated"
    reads = f"{OP_PLUGIN}/<newest ref used>/op_plugin/config/deprecated.yaml"
    parser = "opcheck.scrapers.opplugin"
    adds = "deprecations"

    def collect(self, ctx: SyncContext) -> None:
        rels = ctx.data.releases
        newest = next((r for r in reversed(rels) if r.kernel_source.startswith("op_plugin")),
                      None)
        if newest is None:
            return
        ref = (newest.op_plugin_commit if newest.kernel_source == "op_plugin"
               else _train_ref(newest, ctx.op_plugin_refs))
        path = f"{OP_PLUGIN}/{ref}/op_plugin/config/deprecated.yaml"
        if not ref or not ctx.source.exists(path):
            return
        try:
            got, sid = ctx.fetch(path, "deprecated")
            deps = opplugin.parse_deprecated(got.text, origin=got.origin)
            ctx.data.deprecations = [DeprecationRec(d.op, d.replacement, sid) for d in deps]
            ctx.count(sid, len(deps))
        except OpcheckError as exc:
            ctx.failures.append(str(exc))


# --- API docs ----------------------------------------------------------------------------------




def _arg_limits(limits: Iterable[apidocs.ArgLimit]) -> str:
    return ";".join(
        f"{a.arg}:{a.kind}:{'|'.join(v.replace(';', ',') for v in a.values)}" for a in limits
    )


class ApiDocs:
    name = "apidocs"
    reads = f"{PYTORCH}/<every ref>/docs/**/*.md (the per-API support docs)"
    parser = "opcheck.scrapers.apidocs"
    adds = "api_support"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("API support docs")
        paths: list[str] = []
        for ref in ctx.ls(PYTORCH):
            paths += _walk(ctx.source, f"{PYTORCH}/{ref}/docs")
        docs = apidocs.api_doc_paths(paths)
        ctx.prefetch_paths(docs, apidocs.parse_markdown, by_origin=True, kept=True)
        for path in docs:
            try:
                got, sid = ctx.fetch(path, "apidocs")
                # rows carry the doc version and ref read off the path
                rows = ctx.parsed(got, apidocs.parse_markdown, by_origin=True)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            ctx.count(sid, len(rows))
            for r in rows:
                facts = ApiFacts(
                    api=r.api, feature=r.feature, hardware=r.hardware, supported=r.supported,
                    only_dtypes=",".join(r.only_dtypes) if r.only_dtypes else "",
                    unsupported_dtypes=",".join(r.unsupported_dtypes),
                    arg_limits=_arg_limits(r.arg_limits), generation=r.generation,
                )
                ctx.data.api_support.append(ApiSupportRec(facts, r.doc_version, r.ref,
                                                          r.restriction, r.line, sid))


class ApiMap:
    name = "apimap"
    reads = "nothing upstream: data/api_overrides.yaml (packaged) and the op universe"
    parser = "opcheck.scrapers.apimap"
    adds = "api_ops (documented Python API → ATen ops)"

    def collect(self, ctx: SyncContext) -> None:
        if ctx.universe is None:
            return
        aten = {o.op for o in ctx.universe.operators}
        overrides = apimap.load_overrides()
        overridden = {apimap.normalize_api(k) for k in overrides}
        for api in sorted({a.facts.api for a in ctx.data.api_support}):
            via = "override" if apimap.normalize_api(api) in overridden else "rule"
            ctx.data.api_ops += [ApiOpRec(api, op, via)
                                 for op in apimap.link_api(api, aten, overrides)]


# --- aclnn return codes ------------------------------------------------------------------------

HICANN = "github/hicann"


def _newest_ref(refs: list[str]) -> str:
    """The newest tag (``v9.1.0``) of a docs repository, else its one pinned commit."""
    tags = [r for r in refs if r.startswith("v") and r[1:].replace(".", "").isdigit()]
    if tags:
        return max(tags, key=lambda r: tuple(int(x) for x in r[1:].split(".") if x))
    return sorted(refs)[-1] if refs else ""


class AclnnCodes:
    name = "aclnn_codes"
    reads = f"{HICANN}/<ops-* repo>/<newest ref>/**/aclnn*.md, aclnn返回码.md (CANN operator docs)"
    parser = "opcheck.scrapers.aclnn_codes"
    adds = "aclnn_codes (the shared return-code table and each aclnn function's own rows)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("aclnn return codes")
        paths: list[str] = []
        for repo in ctx.ls(HICANN):
            ref = _newest_ref(ctx.ls(f"{HICANN}/{repo}"))
            if ref:
                paths += _walk(ctx.source, f"{HICANN}/{repo}/{ref}")
        pages = [p for p in sorted(paths)
                 if aclnn_codes.is_code_page(p) or aclnn_codes.is_function_page(p)]
        fetched = ctx.prefetch_paths(pages, aclnn_codes.parse_return_codes, by_origin=True)
        for path in pages:
            try:
                # Only pages with a return-code table become sources (most pages of a repo
                # are not about codes), so they are fetched past ctx.fetch.
                got = fetched.get(path) or ctx.source.fetch(path)
                # a function page's rows name the function its path says
                rows = ctx.parsed(got, aclnn_codes.parse_return_codes, by_origin=True)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            if not rows:
                continue
            o = got.origin
            sid = ctx.data.add_source(self.name, path, url=o.url or canonical_url(path),
                                      ref=o.ref, commit=o.commit, sha256=o.sha256, rows=len(rows))
            ctx.data.aclnn_codes += [
                AclnnCodeRec(r.function, r.code, r.name, ",".join(r.triggers), ",".join(r.params),
                             r.line, r.description, sid)
                for r in rows
            ]


# --- the op universe ---------------------------------------------------------------------------


class PytorchUniverse:
    name = "pytorch"
    reads = "the installed torch's torchgen/packaged/ATen/native/native_functions.yaml (ctx.universe)"
    parser = "opcheck.scrapers.pytorch"
    adds = "operators (also for ops only the registries or deprecations name)"

    def collect(self, ctx: SyncContext) -> None:
        data, universe = ctx.data, ctx.universe
        ops: dict[str, OperatorRec] = {}
        if universe is not None:
            sid = data.add_source("pytorch", universe.origin.path, ref=universe.origin.ref,
                                  url="https://github.com/pytorch/pytorch/blob/"
                                      f"v{universe.torch_version}/aten/src/ATen/native/native_functions.yaml",
                                  rows=len(universe.operators))
            for r in universe.operators:
                name = OpName.parse(r.op)
                ops[r.op] = OperatorRec(
                    r.op, name.namespace, name.name, name.overload, r.schema, ",".join(r.tags),
                    ",".join(r.dispatch), r.kernel_kind, r.structured_delegate or "", sid)
        # Ops the registries name that this torch does not know (custom npu:: ops, ATen ops of
        # other torch versions) still need a row: schema from the registry, kind unknown.
        schemas: dict[str, str] = {}
        for row in ctx.parsed_kernel_rows():
            schemas.setdefault(row.op, row.schema)
        for k in data.kernels:
            if k.op not in ops:
                name = OpName.parse(k.op)
                ops[k.op] = OperatorRec(k.op, name.namespace, name.name, name.overload,
                                        schemas.get(k.op, ""), source_id=k.source_id)
        for d in data.deprecations:
            if d.op not in ops:
                name = OpName.parse(d.op)
                ops[d.op] = OperatorRec(d.op, name.namespace, name.name, name.overload,
                                        source_id=d.source_id)
        data.operators = sorted(ops.values(), key=lambda o: o.op)


# The order collect() runs them in (see the module docstring).
UPSTREAMS: tuple[Upstream, ...] = (
    ReleaseMatrix(),
    PublishedWheels(),
    NpuNative(),
    ReleaseKernels(),
    Deprecations(),
    ApiDocs(),
    ApiMap(),
    PytorchUniverse(),
    AclnnCodes(),
    AclnnDocs(),
    OpApiSources(),
    TorchairConverters(),
    KernelPathRules(),
    CannEngine(),
    CannBinaries(),
    CaptureRules(),
    InductorLowerings(),
    AdvisorRules(),
    MessageSites(),
)
