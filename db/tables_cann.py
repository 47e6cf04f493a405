"""The catalog's tables of CANN and graph-mode facts: aclnn return codes, the documented contract
of each aclnn function (products, parameters, exceptions, constraints), op → aclnn links,
graph-mode pins and converters, capture and inductor rules, kernel-path rules and SoC checks,
engine sites and binaries, message templates and acl_op op types. Part of
``opcheck.db.tables``, which names them all and states the rules."""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Field

from opcheck.db.table_base import _SOURCE, CatalogTable


class AclnnCode(CatalogTable, table=True):
    """One return-code row of the CANN operator docs: a status an aclnn function returns and
    what triggers it. ``function`` is empty for the shared table every function refers to.

    ``triggers`` (dtype, format, shape, nullptr, product, value) and ``params`` are parsed
    from the row's description; the description itself stays upstream, like the API docs'
    prose (not in the snapshot: empty in a catalog built from it)."""

    __tablename__ = "aclnn_code"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    code: str = Field(index=True)  # "161002", or a family such as "561xxx"
    name: str = ""  # ACLNN_ERR_PARAM_INVALID
    triggers: str = ""
    params: str = ""
    line: int = 0
    description: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class AclnnFunction(CatalogTable, table=True):
    """An aclnn function as one CANN version's docs describe it (products with √ / ×)."""

    __tablename__ = "aclnn_function"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    # 8.5.0, 9.0.0, 9.1.0; "head" for a library documented only at a commit
    cann: str = Field(index=True)
    library: str  # ops-math, ops-nn, ops-cv, ops-transformer
    path: str  # the page, relative to the library's root
    line: int  # the first row of the function's parameter table
    supported: str = ""  # product aliases marked √, comma-separated
    unsupported: str = ""  # product aliases marked ×
    products_line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)  # the library at that version


class AclnnParam(CatalogTable, table=True):
    """One parameter row of an aclnn function's table: dtypes are the union over products;
    the per-product exceptions are ``aclnn_exception`` rows."""

    __tablename__ = "aclnn_param"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    param: str
    direction: str = ""  # as the page writes it (输入 / 输出 / 属性 ...)
    dtypes: str = ""  # CANN dtype tokens (FLOAT16, BFLOAT16, DOUBLE ...), comma-separated
    formats: str = ""
    ranks: str = ""
    non_contiguous: bool | None = None
    canns: str = ""
    lines: str = ""


class AclnnException(CatalogTable, table=True):
    """A per-product dtype statement: ``not`` (excluded there), ``only`` (exhaustive there),
    ``supports`` (named for those products), ``note`` (no dtype named)."""

    __tablename__ = "aclnn_exception"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    products: str
    kind: str
    dtypes: str = ""
    params: str = ""  # the parameters it names; empty: the whole function
    conditional: bool = False  # holds only in a case the text describes
    canns: str = ""
    lines: str = ""
    text: str = ""  # upstream prose: in a catalog built from the mirror, not in the snapshot


class AclnnConstraint(CatalogTable, table=True):
    """A line of a page's 约束说明 (constraints), structured where it has a common form
    (``rank_max``, ``size_max``, ``range``, ``only``, ``dims``/``dims_dtype`` for convolution
    dimensionality; else ``text``)."""

    __tablename__ = "aclnn_constraint"
    id: int | None = Field(default=None, primary_key=True)
    library: str
    path: str = Field(index=True)
    kind: str
    subject: str = ""
    value: str = ""
    products: str = ""
    canns: str = ""
    lines: str = ""
    text: str = ""  # upstream prose: in a catalog built from the mirror, not in the snapshot


class OpAclnn(CatalogTable, table=True):
    """An ATen overload's op_api kernel calls ``aclnn`` in these releases (op-plugin's C++
    sources at each release's pinned commit). ``kind``: ``exec`` (launches it), ``compat``
    (``DO_COMPATIBILITY``: falls back to ``fallback``, an acl_op kernel, when the installed
    CANN lacks the function), ``probe`` (branches on whether it exists)."""

    __tablename__ = "op_aclnn"
    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True)
    aclnn: str = Field(index=True)
    kind: str
    fallback: str = ""
    via: str = ""  # helper chain or delegated kernel ("" when the kernel calls it itself)
    match: str = ""  # how the C++ function was matched to the overload (signature, arity, name)
    releases: str = ""  # torch_npu releases, comma-separated
    path: str = ""  # the source file at the newest of those releases' pins
    line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class GraphPin(CatalogTable, table=True):
    """The torchair commit a torch_npu release pins (its tag's submodule entry) and whether
    its converters were read: ``read``, ``not_mirrored`` (pin known, converters not
    available), ``failed`` (they did not parse) or ``no_pin`` (the release has no known pin);
    all but ``read`` mean graph status unknown."""

    # no reference to release: a catalog built from a subset of the releases keeps every pin
    __tablename__ = "graph_pin"
    torch_npu: str = Field(primary_key=True)
    tag: str = ""
    torchair: str = ""  # the pinned commit
    state: str = "no_pin"
    # the commit's ge_converter folder, when read
    converters_source_id: int | None = Field(default=None, foreign_key=_SOURCE)
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)  # the pins file


class GraphConverter(CatalogTable, table=True):
    """One overload's converter at one torchair commit (a catalog row; see
    ``GraphConverterRec`` for the snapshot's grouped form)."""

    __tablename__ = "graph_converter"
    # one index for both reads: an op at one commit (a check), an op at every commit
    __table_args__ = (sa.Index("ix_graph_converter_op_source", "op", "source_id"),)
    id: int | None = Field(default=None, primary_key=True)
    op: str
    status: str  # converted | raises | conditional
    message: str = ""
    condition: str = ""
    dtypes: str = ""
    min_torch: str = ""
    path: str = ""
    line: int = 0
    # the commit's ge_converter folder
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)
    rebound: str = ""  # arguments the condition reads that the converter reassigns first


class CaptureRule(CatalogTable, table=True):
    """One capture rule torch_npu's sources state (``kind``: aclop, generator, rng_graph_safe,
    capture_begin, sync_point, task_update), grouped across the tags that state it alike:
    ``tags``, ``lines`` and ``sources`` are comma lists in step (the line in ``path`` at each
    tag, and the source row of that tag's file)."""

    # no reference to release or source: one row stands for several tags (``tags``/``sources``)
    __tablename__ = "capture_rule"
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)
    subject: str
    message: str = ""
    path: str = ""  # relative to the tag's root
    tags: str = ""
    lines: str = ""
    sources: str = ""


class InductorRule(CatalogTable, table=True):
    """One entry of torch_npu's inductor backend (``opcheck.scrapers.inductor``: ``kind``
    backend, generate, generate_prefix, fallback), grouped across the tags that list it
    alike (``tags``, ``lines``, ``sources`` in step, as ``capture_rule``)."""

    __tablename__ = "inductor_rule"
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)
    name: str
    path: str = ""  # relative to the tag's root
    tags: str = ""
    lines: str = ""
    sources: str = ""


class KernelPathRule(CatalogTable, table=True):
    """How torch_npu picks an op's kernel path at one release (``opcheck.scrapers.kernel_path``):
    the jit-compile default (``EnvVariables.cpp``; ``jit_kind`` ``soc``: disabled by default
    where ``jit_condition`` holds, ``option``: the option's default ``jit_default``; empty: no
    jit option), whether torch_npu takes CANN's own ``ACL_OP_JIT_COMPILE`` default at init
    (``acl_default``: ``file:line`` where it does, ``none`` when the files read show it does
    not, empty when the file that would is not mirrored at the tag), the precision mode acl_op kernels compile with, the aclnn-only SoCs, the SoC
    enum (``Name=value,…``) and the op_api condition of op-plugin's generated wrapper at the
    pin. Lines are in the tag's files (``source_id``: its ``torch_npu/csrc``) and the pin's
    ``gen.py`` (``codegen_source_id``)."""

    # no reference to release: rules of a tag kept when the catalog has a subset of releases
    __tablename__ = "kernel_path_rule"
    torch_npu: str = Field(primary_key=True)
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
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)
    codegen_source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class KernelSocCheck(CatalogTable, table=True):
    """An op's op_api kernel hands the call to ``fallback`` (PyTorch's per-tensor
    ``at::native::foreach_tensor_*_slow`` path, or an ``acl_op::`` kernel) on the SoCs where
    ``when`` holds, in these releases (file and line at the newest one's pin). A ``when``
    starting ``call:`` is a per-call condition over the call's tensor lists (mixed dtypes,
    integer tensors: ``opcheck.scrapers.kernel_path.parse_call_checks``), not a SoC one."""

    __tablename__ = "kernel_soc_check"
    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True)
    kernel: str
    when: str
    fallback: str
    releases: str = ""
    path: str = ""
    line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class EngineSite(CatalogTable, table=True):
    """An aclnn function of one CANN version reaches a launch of ``op_type`` on ``engine``
    (``aicore`` / ``aicpu`` / ``dsa``) when ``condition`` holds: a routing formula as JSON
    (:mod:`opcheck.scrapers.cann_engine`) over the SoC, argument dtypes and the conditions
    kept as text, each with its file:line. Paths are relative to the library at that tag."""

    __tablename__ = "engine_site"
    id: int | None = Field(default=None, primary_key=True)
    aclnn: str = Field(index=True)
    cann: str
    library: str
    op_type: str = Field(index=True)
    engine: str = Field(index=True)
    condition: str = "{\"p\":[],\"t\":[],\"f\":true}"  # always
    launch: str = ""  # path:line of the ADD_TO_LAUNCHER_LIST_* call
    entry: str = ""  # path:line of the aclnn entry
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)  # the library at that version


class OpBinary(CatalogTable, table=True):
    """What one CANN version's open operator library ships for an op type on one SoC:
    ``binaries`` compiled kernels (``op_host/config/<soc>/*_binary.json``, first-input dtypes
    in ``dtypes``) and whether its OpDef configures an AI Core kernel there (``configured``)."""

    __tablename__ = "op_binary"
    id: int | None = Field(default=None, primary_key=True)
    op_type: str = Field(index=True)
    cann: str
    library: str
    soc: str = Field(index=True)
    binaries: int = 0
    dtypes: str = ""
    configured: bool = False
    path: str = ""  # the binary list, else the OpDef file (library-relative)
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class MessageTemplate(CatalogTable, table=True):
    """A message site (:mod:`opcheck.scrapers.messages`) of CANN's op_api sources
    (``kind`` ``cann``), op-plugin's kernels and utils (``op_plugin``) and codegen
    (``codegen``), or torch_npu's csrc (``torch_npu``): the template, what guards it, the
    dtype lists it refers to; one row per distinct template, path and function across versions
    (``versions``: the versions it appears in, ``newest``: the one ``path``/``line`` and the
    source are read at). ``anchor``: the literal word an index keys it on (its rarest);
    ``literal``: how many literal characters it has (a match's specificity)."""

    __tablename__ = "message_template"
    id: int | None = Field(default=None, primary_key=True)
    template: str
    kind: str = Field(index=True)
    library: str
    macro: str
    level: str
    function: str = ""
    entry: str = ""  # aclnn functions the file defines
    condition: str = ""
    lists: str = ""
    code: str = ""
    anchor: str = Field(default="", index=True)
    literal: int = 0
    path: str = ""  # relative to the library at ``newest``
    line: int = 0
    versions: str = ""
    newest: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class OpAclType(CatalogTable, table=True):
    """An ATen overload's acl_op kernel runs the CANN op type ``op_type`` in these releases
    (op-plugin's ``aclops`` sources at each release's pin)."""

    __tablename__ = "op_acl_type"
    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True)
    op_type: str = Field(index=True)
    engine: str = ""  # aicpu when the command excludes the AI Core engine, else "" (CANN picks)
    condition: str = ""  # the kernel's branches that lead to it ("" when it always runs)
    # the helper chain; acl_op:x for another kernel called by name, aten:x for an ATen call
    # dispatched to x's kernel
    via: str = ""
    match: str = ""  # how the C++ function was matched to the overload (signature, arity)
    releases: str = ""  # torch_npu releases, comma-separated
    path: str = ""  # the file at the newest of those releases' pins (under op_plugin/)
    line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)
