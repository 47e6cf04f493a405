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
    # no table names this release's CANN: it is that of the train it hotfixes (7.2.0.1 → 7.2.0)
    cann_inferred: bool = False
    # where kernel_source's facts come from and, when approximate or missing, why
    kernel_source_note: str = ""


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


# --- the CANN side: aclnn functions as the operator libraries document them ------------------
#
# Facts that several CANN versions document identically are one row: ``canns`` lists those
# versions and ``lines`` the row's line in each version's page, in the same order, so a
# finding can cite the exact line of the page of the version it is about.


@dataclass
class AclnnFunctionRec:
    """An aclnn function as one CANN version's docs describe it (products with √ / ×)."""

    function: str
    cann: str  # 8.5.0, 9.0.0, 9.1.0; "head" for a library documented only at a commit
    library: str  # ops-math, ops-nn, ops-cv, ops-transformer
    path: str  # the page, relative to the library's root
    line: int  # the first row of the function's parameter table
    supported: str = ""  # product aliases marked √, comma-separated
    unsupported: str = ""  # product aliases marked ×
    products_line: int = 0
    source_id: int | None = None  # the library at that version


@dataclass
class AclnnParamRec:
    """One parameter row of an aclnn function's table: dtypes are the union over products;
    the per-product exceptions are :class:`AclnnExceptionRec` rows."""

    function: str
    param: str
    direction: str = ""  # as the page writes it (输入 / 输出 / 属性 ...)
    dtypes: str = ""  # CANN dtype tokens (FLOAT16, BFLOAT16, DOUBLE ...), comma-separated
    formats: str = ""
    ranks: str = ""
    non_contiguous: bool | None = None
    canns: str = ""
    lines: str = ""


@dataclass
class AclnnExceptionRec:
    """A per-product dtype statement: ``not`` (excluded there), ``only`` (exhaustive there),
    ``supports`` (named for those products), ``note`` (no dtype named)."""

    function: str
    products: str
    kind: str
    dtypes: str = ""
    params: str = ""  # the parameters it names; empty: the whole function
    conditional: bool = False  # holds only in a case the text describes
    canns: str = ""
    lines: str = ""
    text: str = ""  # upstream prose: in a catalog built from the mirror, not in the snapshot


@dataclass
class AclnnConstraintRec:
    """A line of a page's 约束说明 (constraints), structured where it has a common form
    (``rank_max``, ``size_max``, ``range``, ``only``; else ``text``)."""

    library: str
    path: str
    kind: str
    subject: str = ""
    value: str = ""
    products: str = ""
    canns: str = ""
    lines: str = ""
    text: str = ""  # upstream prose: in a catalog built from the mirror, not in the snapshot


@dataclass
class OpAclnnRec:
    """An ATen overload's op_api kernel calls ``aclnn`` in these releases (op-plugin's C++
    sources at each release's pinned commit). ``kind``: ``exec`` (launches it), ``compat``
    (``DO_COMPATIBILITY``: falls back to ``fallback``, an acl_op kernel, when the installed
    CANN lacks the function), ``probe`` (branches on whether it exists)."""

    op: str
    aclnn: str
    kind: str
    fallback: str = ""
    via: str = ""  # helper chain or delegated kernel ("" when the kernel calls it itself)
    match: str = ""  # how the C++ function was matched to the overload (signature, arity, name)
    releases: str = ""  # torch_npu releases, comma-separated
    path: str = ""  # the source file at the newest of those releases' pins
    line: int = 0
    source_id: int | None = None


@dataclass
class KernelPathRuleRec:
    """How torch_npu picks an op's kernel path at one release (``opcheck.scrapers.kernel_path``):
    the jit-compile default (``EnvVariables.cpp``; ``jit_kind`` ``soc``: disabled by default
    where ``jit_condition`` holds, ``option``: the option's default ``jit_default``; empty: no
    jit option), whether torch_npu takes CANN's own ``ACL_OP_JIT_COMPILE`` default at init
    (``acl_default``: ``file:line`` where it does, ``none`` when the files read show it does
    not, empty when the file that would is not mirrored at the tag), the precision mode acl_op kernels compile with, the aclnn-only SoCs, the SoC
    enum (``Name=value,…``) and the op_api condition of op-plugin's generated wrapper at the
    pin. Lines are in the tag's files (``source_id``: its ``torch_npu/csrc``) and the pin's
    ``gen.py`` (``codegen_source_id``)."""

    torch_npu: str
    tag: str = ""
    jit_kind: str = ""
    jit_condition: str = ""
    jit_default: str = ""
    jit_line: int = 0
    acl_default: str = ""
    precision_condition: str = ""
    precision_true: str = ""
    precision_false: str = ""
    precision_line: int = 0
    aclnn_only: str = ""
    aclnn_only_line: int = 0
    socs: str = ""
    codegen_path: str = ""  # codegen/gen.py | torchnpugen/gen.py ("" when the pin is not mirrored)
    codegen_base_format: bool = False
    codegen_force_aclnn: bool = False
    codegen_aclnn_only_raises: bool = False
    codegen_internal_format_opapi: bool = False
    codegen_line: int = 0
    source_id: int | None = None
    codegen_source_id: int | None = None


@dataclass
class KernelSocCheckRec:
    """An op's op_api kernel hands the call to ``fallback`` (PyTorch's per-tensor
    ``at::native::foreach_tensor_*_slow`` path, or an ``acl_op::`` kernel) on the SoCs where
    ``when`` holds, in these releases (file and line at the newest one's pin). A ``when``
    starting ``call:`` is a per-call condition over the call's tensor lists (mixed dtypes,
    integer tensors: ``opcheck.scrapers.kernel_path.parse_call_checks``), not a SoC one."""

    op: str
    kernel: str
    when: str
    fallback: str
    releases: str = ""
    path: str = ""
    line: int = 0
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
class CoverageRec:
    """``opcheck atlas``: one architecture on a run of consecutive releases with the same
    result (``ERROR``/``SKIPPED``: no trace; ``first_release`` empty, ``error`` says why)."""

    library: str
    library_version: str
    architecture: str
    model_class: str = ""
    task: str = ""
    recorder: str = ""
    product: str = ""  # the --hardware the restrictions were judged on ("" none)
    train: bool = False  # traced forward and backward
    first_release: str = ""
    last_release: str = ""
    verdict: str = ""
    npu: int = 0
    composite: int = 0
    cpu_fallback: int = 0
    unsupported: int = 0
    unknown: int = 0
    round_trips: int = 0  # CPU fallback calls: each a device→host→device round trip
    problem_ops: str = ""  # "op=status" worst first, comma-separated
    speed_findings: int = 0
    trace_ms: int = 0
    error: str = ""
    traced_with: str = ""  # torch version of the trace


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
    aclnn_functions: list[AclnnFunctionRec] = field(default_factory=list)
    aclnn_params: list[AclnnParamRec] = field(default_factory=list)
    aclnn_exceptions: list[AclnnExceptionRec] = field(default_factory=list)
    aclnn_constraints: list[AclnnConstraintRec] = field(default_factory=list)
    op_aclnn: list[OpAclnnRec] = field(default_factory=list)
    # Contributed data, read from data/ at build time (not part of the upstream snapshot).
    workarounds: list[WorkaroundRec] = field(default_factory=list)
    # Coverage of well-known architectures (data/snapshot/zoo.tsv, written by `opcheck zoo`).
    zoo: list[ZooRec] = field(default_factory=list)
    # The model atlas (data/snapshot/atlas.tsv, written by `opcheck atlas --snapshot`).
    coverage: list[CoverageRec] = field(default_factory=list)
    meta: dict[str, str] = field(default_factory=dict)
    # Graph mode (torch.compile with torchair): converters per pinned torchair commit.
    graph_pins: list[GraphPinRec] = field(default_factory=list)
    graph_converters: list[GraphConverterRec] = field(default_factory=list)
    # Kernel path: torch_npu's rules per release and op-plugin's SoC fallbacks per op.
    kernel_path_rules: list[KernelPathRuleRec] = field(default_factory=list)
    kernel_soc_checks: list[KernelSocCheckRec] = field(default_factory=list)
    # How a call runs inside CANN (issue 27): launches per aclnn function, binaries per SoC.
    engine_sites: list[EngineSiteRec] = field(default_factory=list)
    op_binaries: list[OpBinaryRec] = field(default_factory=list)
    # ACL graph capture: torch_npu's own capture rules per tag (opcheck.scrapers.capture_rules)
    capture_rules: list[CaptureRuleRec] = field(default_factory=list)
    # torch.compile's default backend on the NPU: torch_npu's inductor lists per tag
    inductor_rules: list[InductorRuleRec] = field(default_factory=list)
    # The lines of code that print log messages (issue 28), for explain.
    message_templates: list[MessageTemplateRec] = field(default_factory=list)

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


# --- ACL graph capture: torch_npu's capture rules (opcheck.scrapers.capture_rules) -----------


@dataclass
class CaptureRuleRec:
    """One capture rule torch_npu's sources state (``kind``: aclop, generator, rng_graph_safe,
    capture_begin, sync_point, task_update), grouped across the tags that state it alike:
    ``tags``, ``lines`` and ``sources`` are comma lists in step (the line in ``path`` at each
    tag, and the source row of that tag's file)."""

    kind: str
    subject: str
    message: str = ""
    path: str = ""  # relative to the tag's root
    tags: str = ""
    lines: str = ""
    sources: str = ""


@dataclass
class InductorRuleRec:
    """One entry of torch_npu's inductor backend (``opcheck.scrapers.inductor``: ``kind``
    backend, generate, generate_prefix, fallback), grouped across the tags that list it
    alike (``tags``, ``lines``, ``sources`` in step, as :class:`CaptureRuleRec`)."""

    kind: str
    name: str
    path: str = ""  # relative to the tag's root
    tags: str = ""
    lines: str = ""
    sources: str = ""


# --- graph mode: torchair's converters (opcheck.scrapers.torchair) ----------------------------


@dataclass
class GraphPinRec:
    """The torchair commit a torch_npu release pins (its tag's submodule entry) and whether
    its converters were read: ``read``, ``not_mirrored`` (pin known, converters not
    available), ``failed`` (they did not parse) or ``no_pin`` (the release has no known pin);
    all but ``read`` mean graph status unknown."""

    torch_npu: str
    tag: str = ""
    torchair: str = ""  # the pinned commit
    state: str = "no_pin"
    converters_source_id: int | None = None  # the commit's ge_converter folder, when read
    source_id: int | None = None  # the pins file


@dataclass(frozen=True)
class GraphConverterRow:
    """One overload's converter at one torchair commit (a catalog row; see
    :class:`GraphConverterRec` for the snapshot's grouped form)."""

    op: str
    status: str  # converted | raises | conditional
    message: str = ""
    condition: str = ""
    dtypes: str = ""
    min_torch: str = ""
    path: str = ""
    line: int = 0
    source_id: int | None = None  # the commit's ge_converter folder
    rebound: str = ""  # arguments the condition reads that the converter reassigns first


@dataclass
class GraphConverterRec:
    """How torchair converts one overload to GE nodes, for every torchair commit that has
    exactly these facts: ``sources`` lists the commits' converter-folder source ids and
    ``lines`` the line in each (same order). ``path`` is relative to ``ge_converter/``;
    ``line`` points at the raise (raises / conditional) or at the ``def``."""

    op: str
    status: str
    message: str = ""
    condition: str = ""
    dtypes: str = ""  # dtypes the @declare_supported samples name
    min_torch: str = ""  # registered only on torch >= this
    path: str = ""
    sources: str = ""
    lines: str = ""
    rebound: str = ""  # conditional: arguments the condition reads that are reassigned first

    def rows(self) -> list[GraphConverterRow]:
        return [GraphConverterRow(self.op, self.status, self.message, self.condition,
                                  self.dtypes, self.min_torch, self.path, int(line), int(sid),
                                  self.rebound)
                for sid, line in zip(self.sources.split(","), self.lines.split(","),
                                     strict=True) if sid]


# --- how a call runs inside CANN: engines and binaries (opcheck.scrapers.cann_engine, cann_binaries)


@dataclass
class EngineSiteRec:
    """An aclnn function of one CANN version reaches a launch of ``op_type`` on ``engine``
    (``aicore`` / ``aicpu`` / ``dsa``) when ``condition`` holds: a routing formula as JSON
    (:mod:`opcheck.scrapers.cann_engine`) over the SoC, argument dtypes and the conditions
    kept as text, each with its file:line. Paths are relative to the library at that tag."""

    aclnn: str
    cann: str
    library: str
    op_type: str
    engine: str
    condition: str = "{\"p\":[],\"t\":[],\"f\":true}"  # always
    launch: str = ""  # path:line of the ADD_TO_LAUNCHER_LIST_* call
    entry: str = ""  # path:line of the aclnn entry
    source_id: int | None = None  # the library at that version


@dataclass
class OpBinaryRec:
    """What one CANN version's open operator library ships for an op type on one SoC:
    ``binaries`` compiled kernels (``op_host/config/<soc>/*_binary.json``, first-input dtypes
    in ``dtypes``) and whether its OpDef configures an AI Core kernel there (``configured``)."""

    op_type: str
    cann: str
    library: str
    soc: str
    binaries: int = 0
    dtypes: str = ""
    configured: bool = False
    path: str = ""  # the binary list, else the OpDef file (library-relative)
    source_id: int | None = None


@dataclass
class MessageTemplateRec:
    """A message site (:mod:`opcheck.scrapers.messages`) of CANN's op_api sources
    (``kind`` ``cann``), op-plugin's kernels and utils (``op_plugin``) and codegen
    (``codegen``), or torch_npu's csrc (``torch_npu``): the template, what guards it, the
    dtype lists it refers to; one row per distinct template, path and function across versions
    (``versions``: the versions it appears in, ``newest``: the one ``path``/``line`` and the
    source are read at). ``anchor``: the literal word an index keys it on (its rarest);
    ``literal``: how many literal characters it has (a match's specificity)."""

    template: str
    kind: str
    library: str
    macro: str
    level: str
    function: str = ""
    entry: str = ""  # aclnn functions the file defines
    condition: str = ""
    lists: str = ""
    code: str = ""
    anchor: str = ""
    literal: int = 0
    path: str = ""  # relative to the library at ``newest``
    line: int = 0
    versions: str = ""
    newest: str = ""
    source_id: int | None = None
