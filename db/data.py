"""The catalog's facts in memory: what a sync collects and what the snapshot stores.

One shape feeds both writers (SQLite and the diffable snapshot), so a catalog built from the
mirror and one built from the bundled snapshot hold the same facts. These records are also the
column list of the tables and snapshot files: ``opcheck.db.schema`` derives both from their
fields (name, type, order), so a new field is a new column everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class SourceRec:
    id: int
    scraper: str
    path: str
    url: str = ""
    ref: str = ""
    commit: str = ""
    sha256: str = ""
    fetched_at: str = ""  # not in the snapshot: a sync's time would make every file differ
    rows: int = 0


@dataclass
class ReleaseRec:
    torch_npu: str
    torch: str
    train: str = ""
    cann: str = ""
    pythons: str = ""
    tag: str = ""
    branch: str = ""
    op_plugin_commit: str = ""
    op_plugin_branch: str = ""
    date: str = ""
    sort_key: int = 0
    has_cpu_fallback: bool = False
    kernel_source: str = "none"
    source_id: int | None = None
    # Provenance of the kernel facts of this release (not columns of their own in the
    # snapshot's kernel file: every kernel row of the release points to one of these).
    kernel_source_id: int | None = None
    native_source_id: int | None = None


@dataclass
class OperatorRec:
    op: str
    namespace: str
    name: str
    overload: str = ""
    schema: str = ""
    tags: str = ""
    dispatch: str = ""
    kernel_kind: str = ""
    structured_delegate: str = ""
    source_id: int | None = None


@dataclass(frozen=True)
class KernelFacts:
    """What a release registers for one op; releases with equal facts group in the snapshot."""

    status: str = "kernel"  # kernel | tocpu | unsupported
    op_api: bool = False
    acl_op: bool = False
    native: bool = False
    aclnn: str = ""


@dataclass
class KernelRec:
    op: str
    release: str
    facts: KernelFacts
    source_id: int | None = None


@dataclass
class DeprecationRec:
    op: str
    replacement: str = ""
    source_id: int | None = None


@dataclass
class PythonRec:
    torch: str
    python: str
    source_id: int | None = None


@dataclass(frozen=True)
class ApiFacts:
    """What one doc says of one API on one product; identical facts group in the snapshot."""

    api: str
    feature: str = ""
    hardware: str = ""
    supported: bool | None = None
    only_dtypes: str = ""
    unsupported_dtypes: str = ""
    arg_limits: str = ""
    generation: str = ""


@dataclass
class ApiSupportRec:
    facts: ApiFacts
    doc_version: str = ""
    ref: str = ""
    restriction: str = ""
    line: int = 0
    source_id: int | None = None


@dataclass
class ApiOpRec:
    api: str
    op: str
    via: str = "rule"


@dataclass
class AclnnCodeRec:
    """One return-code row of the CANN operator docs: a status an aclnn function returns and
    what triggers it. ``function`` is empty for the shared table every function refers to.

    ``triggers`` (dtype, format, shape, nullptr, product, value) and ``params`` are parsed
    from the row's description; the description itself stays upstream, like the API docs'
    prose (not in the snapshot: empty in a catalog built from it)."""

    function: str
    code: str  # "161002", or a family such as "561xxx"
    name: str = ""  # ACLNN_ERR_PARAM_INVALID
    triggers: str = ""
    params: str = ""
    line: int = 0
    description: str = ""
    source_id: int | None = None


@dataclass
class WorkaroundRec:
    id: str
    title: str
    kind: str
    problem: str = ""
    fix: str = ""
    releases: str = "[]"
    hardware: str = ""
    fixed_in: str = ""
    cann_min: str = ""
    env: str = "{}"
    rewrite_api: str = ""
    sources: str = ""
    author: str = ""
    last_verified: str = ""
    path: str = ""
    ops: tuple[str, ...] = ()


@dataclass
class ZooRec:
    """``opcheck zoo``: one well-known architecture on one release (``ERROR``: the trace failed,
    ``torch_npu`` empty and ``error`` says why)."""

    model: str
    torch_npu: str
    verdict: str
    npu: int = 0
    composite: int = 0
    cpu_fallback: int = 0
    unsupported: int = 0
    unknown: int = 0
    fallback_calls: int = 0
    problem_ops: str = ""  # "op=status" worst first, comma-separated
    error: str = ""
    traced_with: str = ""  # torch version of the trace: op names follow it


@dataclass
class CatalogData:
    sources: list[SourceRec] = field(default_factory=list)
    releases: list[ReleaseRec] = field(default_factory=list)
    operators: list[OperatorRec] = field(default_factory=list)
    kernels: list[KernelRec] = field(default_factory=list)
    deprecations: list[DeprecationRec] = field(default_factory=list)
    pythons: list[PythonRec] = field(default_factory=list)
    api_support: list[ApiSupportRec] = field(default_factory=list)
    api_ops: list[ApiOpRec] = field(default_factory=list)
    aclnn_codes: list[AclnnCodeRec] = field(default_factory=list)
    # Contributed data, read from data/ at build time (not part of the upstream snapshot).
    workarounds: list[WorkaroundRec] = field(default_factory=list)
    # Coverage of well-known architectures (data/snapshot/zoo.tsv, written by `opcheck zoo`).
    zoo: list[ZooRec] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)

    def add_source(self, scraper: str, path: str, *, url: str = "", ref: str = "",
                   commit: str = "", sha256: str = "", rows: int = 0) -> int:
        """Register a source once per (scraper, path); returns its id."""
        for s in self.sources:
            if s.scraper == scraper and s.path == path:
                return s.id
        sid = len(self.sources) + 1
        self.sources.append(SourceRec(sid, scraper, path, url=url, ref=ref, commit=commit,
                                      sha256=sha256, rows=rows))
        return sid
