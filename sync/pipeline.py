"""Collect the catalog's facts from a source (mirror directory or live HTTP) into CatalogData.

Every release gets its kernel list from the most exact place available:

1. ``wheel``: the published wheel's ``npu_native_functions_by_codegen.yaml`` (exact truth);
2. ``op_plugin``: op-plugin at the commit the release tag pins, plus the tag's
   ``npu_native_functions.yaml``;
3. ``op_plugin_branch``: releases known only from the compatibility tables, from the head of
   the op-plugin branch of their train (approximate: the branch moved after the release), with
   torch_npu's own registrations from the nearest tagged release of the same torch line;
4. ``none``: in the release matrix only.

A failing source is recorded and collection goes on; the caller decides (``opcheck sync``
refuses to replace the catalog when anything failed).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone

from opcheck.core.errors import OpcheckError, ScrapeError
from opcheck.core.opname import OpName
from opcheck.core.versions import has_cpu_fallback, minor_key, release_key, torch_minor
from opcheck.db.data import (
    ApiFacts,
    ApiOpRec,
    ApiSupportRec,
    CatalogData,
    DeprecationRec,
    KernelFacts,
    KernelRec,
    OperatorRec,
    PythonRec,
    ReleaseRec,
)
from opcheck.scrapers import apidocs, apimap, npu_native, opplugin, releases, wheel
from opcheck.scrapers.pytorch import parse_native_functions
from opcheck.scrapers.rows import KernelRow, OperatorRow, Origin
from opcheck.sync.sources import Fetched, Source

OP_PLUGIN = "github/Ascend/op-plugin"
PYTORCH = "github/Ascend/pytorch"
WHEELS = "pypi/torch-npu"
CODEGEN = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
NATIVE = "torch_npu/csrc/aten/npu_native_functions.yaml"
UNIVERSE_PATH = "torchgen/packaged/ATen/native/native_functions.yaml"

Progress = Callable[[str], None]


@dataclass
class SyncResult:
    data: CatalogData
    failures: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Universe:
    """The ATen op universe and which torch it came from."""

    operators: list[OperatorRow]
    torch_version: str
    origin: Origin


def installed_universe() -> Universe | None:
    """The installed torch's native_functions.yaml (read as a file; torch is not imported)."""
    from opcheck.scrapers.pytorch import installed_torch_files, installed_torch_version

    files = installed_torch_files()
    if files is None:
        return None
    nf, tags = files
    version = (installed_torch_version() or "").split("+", 1)[0]
    origin = Origin(path=UNIVERSE_PATH, ref=f"torch-{version}")
    rows = parse_native_functions(nf.read_text(encoding="utf-8"), origin=origin,
                                  tags_text=tags.read_text(encoding="utf-8"))
    return Universe(rows, version, origin)


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


class Collector:
    def __init__(self, source: Source, *, progress: Progress | None = None) -> None:
        self.source = source
        self.progress = progress or (lambda _msg: None)
        self.data = CatalogData()
        self.failures: list[str] = []
        self.notes: list[str] = []
        self._texts: dict[str, Fetched] = {}
        self._parsed: dict[tuple[str, str | None], list[KernelRow]] = {}
        self._row_counts: dict[int, int] = {}

    # -- fetching with provenance -------------------------------------------------------
    def fetch(self, path: str, scraper: str) -> tuple[Fetched, int]:
        if path not in self._texts:
            self._texts[path] = self.source.fetch(path)
        got = self._texts[path]
        o = got.origin
        sid = self.data.add_source(scraper, path, url=o.url or _canonical_url(path),
                                   ref=o.ref, commit=o.commit, sha256=o.sha256)
        return got, sid

    def _count(self, sid: int, n: int) -> None:
        self._row_counts[sid] = max(self._row_counts.get(sid, 0), n)

    def kernel_rows(self, path: str, scraper: str, torch: str | None) -> tuple[list[KernelRow], int]:
        got, sid = self.fetch(path, scraper)
        key = (path, torch)
        if key not in self._parsed:
            if scraper == "wheel":
                rows = wheel.parse_codegen(got.text, origin=got.origin)
            elif scraper == "npu_native":
                rows = npu_native.parse_native(got.text, origin=got.origin)
            else:
                rows = opplugin.parse_functions(got.text, origin=got.origin, torch=torch)
                rows = [r for r in rows if r.torch is None or r.torch == torch]
            self._parsed[key] = rows
            self._count(sid, len(rows))
        return self._parsed[key], sid

    def _ls(self, path: str) -> list[str]:
        try:
            return self.source.list_dir(path)
        except ScrapeError:
            return []

    def _config_files(self, ref: str) -> list[str]:
        base = f"{OP_PLUGIN}/{ref}/op_plugin/config"
        names = self._ls(base)
        paths = [f"{base}/{n}" for n in names if n.endswith(".yaml")]
        for sub in names:
            if sub.startswith("v") and "r" in sub:
                paths += [f"{base}/{sub}/{n}" for n in self._ls(f"{base}/{sub}") if n.endswith(".yaml")]
        if not paths:  # a source that cannot list (HTTP): probe the known layouts
            candidates = [f"{base}/op_plugin_functions.yaml"] + [
                f"{base}/v{major}r{minor}/op_plugin_functions.yaml"
                for major, minor in ((1, 11), (2, 0), (2, 1), (2, 2), (2, 3), (2, 4))
            ]
            paths = [p for p in candidates if self.source.exists(p)]
        return paths

    # -- the pieces ---------------------------------------------------------------------
    def op_plugin_kernels(self, ref: str, minor: str) -> tuple[dict[str, KernelFacts], int]:
        files = opplugin.functions_paths(self._config_files(ref), torch=minor)
        if not files:
            raise ScrapeError(f"no op_plugin_functions.yaml for torch {minor}",
                              source=f"{OP_PLUGIN}/{ref}")
        rows: list[KernelRow] = []
        sid = 0
        for path in files:
            got, sid = self.kernel_rows(path, "op_plugin", minor)
            rows += got
        return _facts(rows), sid

    def native_kernels(self, tag: str) -> tuple[dict[str, KernelFacts], int] | None:
        path = f"{PYTORCH}/{tag}/{NATIVE}"
        if not tag or not self.source.exists(path):
            return None
        rows, sid = self.kernel_rows(path, "npu_native", None)
        return _facts(rows), sid


def _canonical_url(path: str) -> str:
    """The public URL of a mirror-layout path (provenance, also for offline builds)."""
    if path.startswith("github/"):
        owner, repo, ref, rest = path.split("/", 4)[1:]
        return f"https://github.com/{owner}/{repo}/blob/{ref}/{rest}"
    # Wheels have no URL of our choosing: they come from whatever index the user's pip is
    # configured for (`pip download torch-npu==VERSION`); the path and sha256 identify them.
    return ""


def collect(
    source: Source,
    *,
    universe: Universe | None,
    progress: Progress | None = None,
    wheels: Iterable[str] | None = None,
) -> SyncResult:
    """Everything the catalog needs from ``source``; failures are collected, not raised,
    except when the release list itself cannot be read.

    ``wheels``: the torch-npu versions to read published wheels for; ``None`` lists what the
    source has (a mirror's ``pypi/torch-npu/``). A wheel that cannot be had (not on the
    user's index) is noted and the release falls back to op-plugin at its pinned commit.
    """
    col = Collector(source, progress=progress)
    data = col.data
    col.progress("release matrix")
    _got, tsv_sid = col.fetch("releases.tsv", "releases")
    matrix, tags, tables = releases.load_matrix(source)
    col._count(tsv_sid, len(tags))
    for t in tables:
        data.add_source("compat", t.origin.path, url=_canonical_url(t.origin.path),
                        ref=t.origin.ref, commit=t.origin.commit, sha256=t.origin.sha256,
                        rows=len(t.compat) + len(t.pythons))
    source_ids = {s.path: s.id for s in data.sources}

    wheel_versions = set(col._ls(WHEELS)) if wheels is None else set(wheels)
    rows = list(matrix.rows)
    known = {r.torch_npu_version for r in rows}
    extra_wheels: dict[str, str] = {}
    for v in sorted(wheel_versions - known, key=release_key):
        try:
            got, _ = col.fetch(f"{WHEELS}/{v}/WHEEL-FACTS.txt", "wheel")
            facts = wheel.parse_wheel_facts(got.text, origin=got.origin)
            if not facts.torch_version:  # e.g. "torch>=2.7": the release needs its torch line
                raise ScrapeError(
                    f"torch requirement {facts.torch_requirement!r} is not an == pin, so the "
                    "torch version of this release is unknown", source=got.origin.path)
            extra_wheels[v] = facts.torch_version
        except OpcheckError as exc:
            col.failures.append(str(exc))

    # torch_npu's own registrations, once per tag: for the tagged releases themselves and to
    # lend to table-only releases of the nearest torch line (see module docstring).
    release_recs: list[ReleaseRec] = []
    all_kernels: list[KernelRec] = []
    native_by_tag: dict[str, tuple[dict[str, KernelFacts], int]] = {}
    native_by_line: dict[str, tuple[dict[str, KernelFacts], int]] = {}
    ordered = sorted(rows, key=lambda r: release_key(r.torch_npu_version))
    for m in ordered:
        if m.tag and m.torch_version:
            try:
                got_native = col.native_kernels(m.tag)
            except OpcheckError as exc:
                col.failures.append(str(exc))
                continue
            if got_native:
                native_by_tag[m.tag] = got_native
                native_by_line[torch_minor(m.torch_version)] = got_native

    def release_from_matrix(m: releases.MatrixRow) -> ReleaseRec:
        src = next((source_ids[s] for s in m.sources if s in source_ids), tsv_sid)
        return ReleaseRec(
            torch_npu=m.torch_npu_version, torch=m.torch_version, train=m.train,
            cann=m.cann_version, pythons=",".join(m.pythons), tag=m.tag, branch=m.branch,
            op_plugin_commit=m.op_plugin_commit, op_plugin_branch=m.op_plugin_branch,
            date=m.date, has_cpu_fallback=bool(m.torch_version) and has_cpu_fallback(m.torch_version),
            source_id=src,
        )

    candidates = [release_from_matrix(m) for m in ordered if m.torch_version]
    for v, torch_version in extra_wheels.items():
        candidates.append(ReleaseRec(torch_npu=v, torch=torch_version,
                                     has_cpu_fallback=has_cpu_fallback(torch_version),
                                     source_id=source_ids.get(f"{WHEELS}/{v}/WHEEL-FACTS.txt")))
    candidates.sort(key=lambda r: release_key(r.torch_npu))
    refs = set(col._ls(OP_PLUGIN))
    for i, rel in enumerate(candidates):
        rel.sort_key = i
        minor = torch_minor(rel.torch)
        col.progress(f"kernels of torch_npu {rel.torch_npu}")
        try:
            kernels, ksid, nsid, kind = _release_kernels(col, rel, minor, wheel_versions, refs,
                                                         native_by_tag, native_by_line)
        except OpcheckError as exc:
            col.failures.append(str(exc))
            kernels, ksid, nsid, kind = {}, None, None, "none"
        rel.kernel_source, rel.kernel_source_id, rel.native_source_id = kind, ksid, nsid
        for op, f in kernels.items():
            sid = nsid if (f.native and not (f.op_api or f.acl_op) and nsid) else ksid
            all_kernels.append(KernelRec(op, rel.torch_npu, f, sid))
        release_recs.append(rel)
    data.releases = release_recs
    data.kernels = all_kernels

    # Deprecations: from the newest op-plugin ref used.
    newest = next((r for r in reversed(release_recs) if r.kernel_source.startswith("op_plugin")),
                  None)
    if newest is not None:
        ref = newest.op_plugin_commit if newest.kernel_source == "op_plugin" else _train_ref(newest, refs)
        path = f"{OP_PLUGIN}/{ref}/op_plugin/config/deprecated.yaml"
        if ref and source.exists(path):
            try:
                got, sid = col.fetch(path, "deprecated")
                deps = opplugin.parse_deprecated(got.text, origin=got.origin)
                data.deprecations = [DeprecationRec(d.op, d.replacement, sid) for d in deps]
                col._count(sid, len(deps))
            except OpcheckError as exc:
                col.failures.append(str(exc))

    for t in tables:
        sid = source_ids[t.origin.path]
        for p in t.pythons:
            for py in p.pythons:
                data.pythons.append(PythonRec(p.torch_version, py, sid))
    data.pythons = _dedupe_pythons(data.pythons)

    _add_api_docs(data, universe, col)
    _add_operators(data, universe, col)
    stamp = now()  # catalogs record when; the snapshot leaves it out to stay reproducible
    for s in data.sources:
        s.rows = max(s.rows, col._row_counts.get(s.id, 0))
        s.fetched_at = stamp
    data.meta.update({
        "torch_version": universe.torch_version if universe else "",
        # The kind of source, not its location: the snapshot must not depend on where the
        # mirror sits on the building machine.
        "built_from": str(getattr(source, "name", "source")).split(" ", 1)[0],
    })
    return SyncResult(data, col.failures, [str(c) for c in matrix.conflicts], col.notes)


def _train_ref(rel: ReleaseRec, refs: set[str]) -> str:
    train = rel.train or releases._train_from_branch(rel.branch)
    return train if train in refs else ""


def _release_kernels(
    col: Collector, rel: ReleaseRec, minor: str, wheel_versions: set[str], refs: set[str],
    native_by_tag: dict[str, tuple[dict[str, KernelFacts], int]],
    native_by_line: dict[str, tuple[dict[str, KernelFacts], int]],
) -> tuple[dict[str, KernelFacts], int | None, int | None, str]:
    if rel.torch_npu in wheel_versions:
        path = f"{WHEELS}/{rel.torch_npu}/{CODEGEN}"
        # A wheel the index does not have is normal (old or yanked releases); a wheel that is
        # there but does not parse is a failure like any other source.
        if col.source.exists(path):
            rows, sid = col.kernel_rows(path, "wheel", None)
            return _with_aclnn_names(col, rel, minor, refs, _facts(rows)), sid, sid, "wheel"
        col.notes.append(f"no published wheel for torch_npu {rel.torch_npu}; op-plugin instead")
    if rel.op_plugin_commit and (not refs or rel.op_plugin_commit in refs):
        kernels, ksid = col.op_plugin_kernels(rel.op_plugin_commit, minor)
        native, kind = native_by_tag.get(rel.tag), "op_plugin"
    else:
        ref = _train_ref(rel, refs)
        if not ref:
            return {}, None, None, "none"
        kernels, ksid = col.op_plugin_kernels(ref, minor)
        native, kind = _nearest_line(native_by_line, minor), "op_plugin_branch"
    if native is None:
        return kernels, ksid, None, kind
    return {**native[0], **kernels}, ksid, native[1], kind


def _nearest_line(
    by_line: dict[str, tuple[dict[str, KernelFacts], int]], minor: str
) -> tuple[dict[str, KernelFacts], int] | None:
    """torch_npu's own registrations of the closest tagged torch line (2.2 has no tag of its
    own; its table-only releases borrow from 2.1 or 2.3): view, copy_, empty... exist in every
    release, so a near line is a far better guess than none."""
    if not by_line:
        return None
    want = minor_key(minor)
    best = min(by_line, key=lambda m: (abs(minor_key(m)[1] - want[1]) + 100 * abs(minor_key(m)[0] - want[0]), -minor_key(m)[1]))
    return by_line[best]


def _with_aclnn_names(
    col: Collector, rel: ReleaseRec, minor: str, refs: set[str], kernels: dict[str, KernelFacts]
) -> dict[str, KernelFacts]:
    """The wheel's generated list drops ``gen_opapi``; take aclnn names from op-plugin at the
    pinned commit, for ops the wheel registers with op_api."""
    if not rel.op_plugin_commit or (refs and rel.op_plugin_commit not in refs):
        return kernels
    try:
        plugin, _sid = col.op_plugin_kernels(rel.op_plugin_commit, minor)
    except ScrapeError:
        return kernels  # names are a convenience; the wheel's list is the fact
    return {
        op: KernelFacts(f.status, f.op_api, f.acl_op, f.native, plugin[op].aclnn)
        if f.op_api and not f.aclnn and op in plugin and plugin[op].aclnn else f
        for op, f in kernels.items()
    }


def _dedupe_pythons(rows: list[PythonRec]) -> list[PythonRec]:
    seen: dict[tuple[str, str], PythonRec] = {}
    for r in rows:  # tables come newest first: the first mention keeps its source
        seen.setdefault((r.torch, r.python), r)
    return list(seen.values())


def _add_operators(data: CatalogData, universe: Universe | None, col: Collector) -> None:
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
    for rows in col._parsed.values():
        for row in rows:
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


def _walk(source: Source, path: str, depth: int = 0) -> list[str]:
    """Every file below ``path`` (sources that cannot list give nothing)."""
    try:
        names = source.list_dir(path)
    except ScrapeError:
        return []
    out: list[str] = []
    for name in names:
        child = f"{path}/{name}"
        if name.endswith((".md", ".html")):
            out.append(child)
        elif depth < 8:
            out += _walk(source, child, depth + 1)
    return out


def _arg_limits(limits: Iterable[apidocs.ArgLimit]) -> str:
    return ";".join(
        f"{a.arg}:{a.kind}:{'|'.join(v.replace(';', ',') for v in a.values)}" for a in limits
    )


def _add_api_docs(data: CatalogData, universe: Universe | None, col: Collector) -> None:
    """Per-API support docs of every Ascend/pytorch ref the source has, and the API → ATen link."""
    col.progress("API support docs")
    paths: list[str] = []
    for ref in col._ls(PYTORCH):
        paths += _walk(col.source, f"{PYTORCH}/{ref}/docs")
    for path in apidocs.api_doc_paths(paths):
        try:
            got, sid = col.fetch(path, "apidocs")
            rows = apidocs.parse_markdown(got.text, origin=got.origin)
        except OpcheckError as exc:
            col.failures.append(str(exc))
            continue
        col._count(sid, len(rows))
        for r in rows:
            facts = ApiFacts(
                api=r.api, feature=r.feature, hardware=r.hardware, supported=r.supported,
                only_dtypes=",".join(r.only_dtypes) if r.only_dtypes else "",
                unsupported_dtypes=",".join(r.unsupported_dtypes),
                arg_limits=_arg_limits(r.arg_limits), generation=r.generation,
            )
            data.api_support.append(ApiSupportRec(facts, r.doc_version, r.ref, r.restriction,
                                                  r.line, sid))
    if universe is None:
        return
    aten = {o.op for o in universe.operators}
    overrides = apimap.load_overrides()
    overridden = {apimap.normalize_api(k) for k in overrides}
    for api in sorted({a.facts.api for a in data.api_support}):
        via = "override" if apimap.normalize_api(api) in overridden else "rule"
        data.api_ops += [ApiOpRec(api, op, via) for op in apimap.link_api(api, aten, overrides)]


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")
