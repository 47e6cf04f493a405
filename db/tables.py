"""The catalog's tables: one SQLModel class per table is the spec of that table.

A class gives the table's name, its columns (name, order, type, NOT NULL unless ``X | None``),
its primary key, indexes and references; a column whose values are a word of
``opcheck.core.vocab`` is typed with that enum (stored as its string value, read back as the
member). ``opcheck.db.schema`` derives the DDL, the insert statements and the snapshot's column
types from these classes, and reads that return rows of a table return these models.

The classes live on a registry of their own (:data:`METADATA`), not on ``SQLModel.metadata``:
nothing else that declares SQLModel tables in the same process (a test, a plugin) changes the
catalog's DDL.

Each class is the one definition of its table: a column is added here and nowhere else. A
sync does not build instances of these classes: it collects plain records that
``opcheck.db.data`` derives from them at import (cheaper by an order of magnitude for the 100k+
kernel rows), and the builder inserts their values with the statement
:func:`opcheck.db.schema.insert_statement` compiles from the table.
"""

from __future__ import annotations

import sqlalchemy as sa
from sqlmodel import Field

from opcheck.core.vocab import KernelSource, Registration
from opcheck.db.table_base import (
    _SOURCE,
    METADATA,
    CatalogTable,
    KernelSourceType,
    RegistrationType,
    WordType,
)
from opcheck.db.tables_cann import (
    AclnnCode,
    AclnnConstraint,
    AclnnException,
    AclnnFunction,
    AclnnParam,
    CaptureRule,
    EngineSite,
    GraphConverter,
    GraphPin,
    InductorRule,
    KernelPathRule,
    KernelSocCheck,
    MessageTemplate,
    OpAclnn,
    OpAclType,
    OpBinary,
)

__all__ = [
    "METADATA",
    "AclnnCode",
    "AclnnConstraint",
    "AclnnException",
    "AclnnFunction",
    "AclnnParam",
    "CaptureRule",
    "CatalogTable",
    "EngineSite",
    "GraphConverter",
    "GraphPin",
    "InductorRule",
    "KernelPathRule",
    "KernelSocCheck",
    "KernelSourceType",
    "MessageTemplate",
    "OpAclType",
    "OpAclnn",
    "OpBinary",
    "RegistrationType",
    "WordType",
]

class Source(CatalogTable, table=True):
    __tablename__ = "source"
    id: int = Field(primary_key=True)
    scraper: str = Field(index=True)
    path: str
    url: str = ""
    ref: str = ""
    commit: str = ""
    sha256: str = ""
    fetched_at: str = ""  # not in the snapshot: a sync's time would make every file differ
    rows: int = 0


class Release(CatalogTable, table=True):
    __tablename__ = "release"
    torch_npu: str = Field(primary_key=True)
    torch: str = Field(index=True)
    train: str = ""
    cann: str = ""
    pythons: str = ""
    tag: str = ""
    branch: str = ""
    op_plugin_commit: str = ""
    op_plugin_branch: str = ""
    date: str = ""
    sort_key: int = Field(default=0, index=True)
    has_cpu_fallback: bool = False
    kernel_source: KernelSource = Field(default=KernelSource.NONE, sa_type=KernelSourceType)
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)
    cann_inferred: bool = False
    kernel_source_note: str = ""  # where kernel_source's facts come from; why when approximate


class Operator(CatalogTable, table=True):
    __tablename__ = "operator"
    op: str = Field(primary_key=True)
    namespace: str = Field(index=True)
    name: str = Field(index=True)
    overload: str = ""
    schema_: str = Field(default="", sa_column_kwargs={"name": "schema"})
    tags: str = ""
    dispatch: str = ""
    kernel_kind: str = ""
    structured_delegate: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class NpuKernel(CatalogTable, table=True):
    __tablename__ = "npukernel"
    # Covering indexes for the browser's facets (status, op_api, acl_op): counted per release
    # and over the whole table, they are read from an index instead of 105k rows.
    __table_args__ = (
        sa.Index("ix_npukernel_release_facets", "release", "status", "op_api", "acl_op"),
        sa.Index("ix_npukernel_status", "status"),
        sa.Index("ix_npukernel_op_api", "op_api"),
        sa.Index("ix_npukernel_acl_op", "acl_op"),
    )
    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True, foreign_key="operator.op")
    release: str = Field(foreign_key="release.torch_npu")
    op_api: bool = False
    acl_op: bool = False
    native: bool = False
    aclnn: str = ""
    status: Registration = Field(default=Registration.KERNEL, sa_type=RegistrationType)
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class Deprecation(CatalogTable, table=True):
    __tablename__ = "deprecation"
    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True)
    replacement: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class PythonSupport(CatalogTable, table=True):
    __tablename__ = "pythonsupport"
    id: int | None = Field(default=None, primary_key=True)
    torch: str = Field(index=True)
    python: str
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class Meta(CatalogTable, table=True):
    __tablename__ = "meta"
    key: str = Field(primary_key=True)
    value: str = ""


class Workaround(CatalogTable, table=True):
    __tablename__ = "workaround"
    id: str = Field(primary_key=True)
    title: str
    kind: str = Field(index=True)
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


class WorkaroundOp(CatalogTable, table=True):
    """An op a workaround names (``WorkaroundRec.ops`` as rows)."""

    __tablename__ = "workaround_op"
    id: int | None = Field(default=None, primary_key=True)
    workaround_id: str = Field(index=True, foreign_key="workaround.id")
    op: str = Field(index=True)


class ApiSupport(CatalogTable, table=True):
    __tablename__ = "api_support"
    id: int | None = Field(default=None, primary_key=True)
    api: str = Field(index=True)
    doc_version: str = Field(default="", index=True)
    ref: str = ""
    generation: str = ""
    feature: str = ""
    hardware: str = Field(default="", index=True)
    supported: bool | None = None
    only_dtypes: str = ""
    unsupported_dtypes: str = ""
    arg_limits: str = ""
    restriction: str = ""
    line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class ApiOp(CatalogTable, table=True):
    __tablename__ = "api_op"
    id: int | None = Field(default=None, primary_key=True)
    api: str = Field(index=True)
    op: str = Field(index=True)
    via: str = "rule"


class ZooResult(CatalogTable, table=True):
    """``opcheck zoo``: one well-known architecture on one release (``ERROR``: the trace failed,
    ``torch_npu`` empty and ``error`` says why)."""

    __tablename__ = "zoo_result"
    id: int | None = Field(default=None, primary_key=True)
    model: str = Field(index=True)
    torch_npu: str = Field(index=True)
    verdict: str  # a Verdict, or ERROR when the trace failed
    npu: int = 0
    composite: int = 0
    cpu_fallback: int = 0
    unsupported: int = 0
    unknown: int = 0
    fallback_calls: int = 0
    problem_ops: str = ""  # "op=status" worst first, comma-separated
    error: str = ""
    traced_with: str = ""  # torch version of the trace: op names follow it


class HcclFact(CatalogTable, table=True):
    """A fact of torch_npu's HCCL process group at the tags listed (``HcclFactRec``)."""

    # no reference to release or source: one row stands for several tags (``tags``/``sources``)
    __tablename__ = "hccl_fact"
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)
    subject: str
    value: str = ""
    message: str = ""
    path: str = ""
    tags: str = ""
    lines: str = ""
    sources: str = ""


class AdvisorRule(CatalogTable, table=True):
    """A rule of the vendor's profiling advisor that a trace can decide (``AdvisorRuleRec``)."""

    __tablename__ = "advisor_rule"
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)
    api: str
    pattern: str
    cann: str = ""
    torch: str = ""
    path: str = ""
    line: int = 0
    url: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class ModelCoverage(CatalogTable, table=True):
    """``opcheck atlas``: one architecture of a model library on a run of consecutive releases
    with the same result (``ERROR``/``SKIPPED``: no trace, ``first_release`` empty and
    ``error`` says why)."""

    __tablename__ = "model_coverage"
    id: int | None = Field(default=None, primary_key=True)
    library: str = Field(index=True)
    library_version: str
    architecture: str = Field(index=True)
    model_class: str = ""
    task: str = Field(default="", index=True)
    recorder: str = ""
    product: str = ""
    train: bool = False
    first_release: str = ""
    last_release: str = ""
    verdict: str = Field(default="", index=True)  # a Verdict, or ERROR / SKIPPED
    npu: int = 0
    composite: int = 0
    cpu_fallback: int = 0
    unsupported: int = 0
    unknown: int = 0
    round_trips: int = 0
    problem_ops: str = ""
    speed_findings: int = 0
    trace_ms: int = 0
    error: str = ""
    traced_with: str = ""
    # what ran: "forward only" or "forward+backward" (--train), and how it was made to run
    # (torchvision's operators as schemas with CPU reference kernels, say)
    traced: str = ""
    # multimodal models: "full" (every tower ran) or "text only: <towers that did not run>"
    forward: str = ""
