"""The catalog's tables: one SQLModel class per table is the spec of that table.

A class gives the table's name, its columns (name, order, type, NOT NULL unless ``X | None``),
its primary key, indexes and references; a column whose values are a word of
``opcheck.core.vocab`` is typed with that enum (stored as its string value, read back as the
member). ``opcheck.db.schema`` derives the DDL, the insert statements and the snapshot's column
types from these classes, and reads that return rows of a table return these models.

The classes live on a registry of their own (:data:`METADATA`), not on ``SQLModel.metadata``:
nothing else that declares SQLModel tables in the same process (a test, a plugin) changes the
catalog's DDL.

A sync does not build instances of these classes: it collects plain records
(``opcheck.db.data``), cheaper by an order of magnitude for the 100k+ kernel rows, and the
builder inserts their values with the statement :func:`opcheck.db.schema.insert_statement`
compiles from the table. tests/db checks that each record's fields are its table's columns.
"""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from pydantic import ConfigDict
from sqlalchemy.orm import registry
from sqlmodel import Field, SQLModel

from opcheck.core.vocab import KernelSource, Registration, Word

METADATA = sa.MetaData()


class CatalogTable(SQLModel, registry=registry(metadata=METADATA)):
    """The base of every catalog table (their own MetaData, see the module docstring)."""

    # Pydantic builds a class's validators when it is first validated, not at import: the
    # first-use build imports every table class and validates none (a third of its time).
    model_config = ConfigDict(defer_build=True)  # type: ignore[assignment]


class WordType(sa.types.TypeDecorator[Word]):
    """A vocabulary word stored as its string value (VARCHAR, as a plain ``str`` column)."""

    impl = sa.String
    cache_ok = True
    word: type[Word] = Word

    def process_bind_param(self, value: Any, dialect: sa.Dialect) -> str | None:
        return None if value is None else str(self.word(value).value)

    def process_result_value(self, value: Any, dialect: sa.Dialect) -> Word | None:
        return None if value is None else self.word(value)


class KernelSourceType(WordType):
    cache_ok = True  # SQLAlchemy reads it from each class's own namespace
    word = KernelSource


class RegistrationType(WordType):
    cache_ok = True
    word = Registration


_SOURCE = "source.id"


class Source(CatalogTable, table=True):
    __tablename__ = "source"
    id: int = Field(primary_key=True)
    scraper: str = Field(index=True)
    path: str
    url: str = ""
    ref: str = ""
    commit: str = ""
    sha256: str = ""
    fetched_at: str = ""
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
    problem_ops: str = ""
    error: str = ""
    traced_with: str = ""


class AclnnCode(CatalogTable, table=True):
    __tablename__ = "aclnn_code"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    code: str = Field(index=True)
    name: str = ""
    triggers: str = ""
    params: str = ""
    line: int = 0
    description: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class AclnnFunction(CatalogTable, table=True):
    __tablename__ = "aclnn_function"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    cann: str = Field(index=True)
    library: str
    path: str
    line: int
    supported: str = ""
    unsupported: str = ""
    products_line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class AclnnParam(CatalogTable, table=True):
    __tablename__ = "aclnn_param"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    param: str
    direction: str = ""
    dtypes: str = ""
    formats: str = ""
    ranks: str = ""
    non_contiguous: bool | None = None
    canns: str = ""
    lines: str = ""


class AclnnException(CatalogTable, table=True):
    __tablename__ = "aclnn_exception"
    id: int | None = Field(default=None, primary_key=True)
    function: str = Field(index=True)
    products: str
    kind: str
    dtypes: str = ""
    params: str = ""
    conditional: bool = False
    canns: str = ""
    lines: str = ""
    text: str = ""


class AclnnConstraint(CatalogTable, table=True):
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
    text: str = ""


class OpAclnn(CatalogTable, table=True):
    __tablename__ = "op_aclnn"
    id: int | None = Field(default=None, primary_key=True)
    op: str = Field(index=True)
    aclnn: str = Field(index=True)
    kind: str
    fallback: str = ""
    via: str = ""
    match: str = ""
    releases: str = ""
    path: str = ""
    line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class GraphPin(CatalogTable, table=True):
    # no reference to release: a catalog built from a subset of the releases keeps every pin
    __tablename__ = "graph_pin"
    torch_npu: str = Field(primary_key=True)
    tag: str = ""
    torchair: str = ""
    state: str = "no_pin"
    converters_source_id: int | None = Field(default=None, foreign_key=_SOURCE)
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class GraphConverter(CatalogTable, table=True):
    __tablename__ = "graph_converter"
    # one index for both reads: an op at one commit (a check), an op at every commit
    __table_args__ = (sa.Index("ix_graph_converter_op_source", "op", "source_id"),)
    id: int | None = Field(default=None, primary_key=True)
    op: str
    status: str
    message: str = ""
    condition: str = ""
    dtypes: str = ""
    min_torch: str = ""
    path: str = ""
    line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)
    rebound: str = ""


class CaptureRule(CatalogTable, table=True):
    """A torch_npu capture rule at the tags listed (``CaptureRuleRec``)."""

    # no reference to release or source: one row stands for several tags (``tags``/``sources``)
    __tablename__ = "capture_rule"
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)
    subject: str
    message: str = ""
    path: str = ""
    tags: str = ""
    lines: str = ""
    sources: str = ""


class InductorRule(CatalogTable, table=True):
    """An entry of torch_npu's inductor backend at the tags listed (``InductorRuleRec``)."""

    __tablename__ = "inductor_rule"
    id: int | None = Field(default=None, primary_key=True)
    kind: str = Field(index=True)
    name: str
    path: str = ""
    tags: str = ""
    lines: str = ""
    sources: str = ""


class KernelPathRule(CatalogTable, table=True):
    """How torch_npu picks an op's kernel path at one release (``KernelPathRuleRec``)."""

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
    codegen_path: str = ""
    codegen_base_format: bool = False
    codegen_force_aclnn: bool = False
    codegen_aclnn_only_raises: bool = False
    codegen_internal_format_opapi: bool = False
    codegen_line: int = 0
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)
    codegen_source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class KernelSocCheck(CatalogTable, table=True):
    """An op's op_api kernel handing the call to a fallback on some SoCs (``KernelSocCheckRec``)."""

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
    """An aclnn function reaching a launch of an op type on an engine (``EngineSiteRec``)."""

    __tablename__ = "engine_site"
    id: int | None = Field(default=None, primary_key=True)
    aclnn: str = Field(index=True)
    cann: str
    library: str
    op_type: str = Field(index=True)
    engine: str = Field(index=True)
    condition: str = "{\"p\":[],\"t\":[],\"f\":true}"
    launch: str = ""
    entry: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class OpBinary(CatalogTable, table=True):
    """The kernel binaries an op type ships for one SoC at one CANN version (``OpBinaryRec``)."""

    __tablename__ = "op_binary"
    id: int | None = Field(default=None, primary_key=True)
    op_type: str = Field(index=True)
    cann: str
    library: str
    soc: str = Field(index=True)
    binaries: int = 0
    dtypes: str = ""
    configured: bool = False
    path: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class MessageTemplate(CatalogTable, table=True):
    """A line of code that prints a log message, once per distinct template across the
    versions it appears in (``MessageTemplateRec``)."""

    __tablename__ = "message_template"
    id: int | None = Field(default=None, primary_key=True)
    template: str
    kind: str = Field(index=True)
    library: str
    macro: str
    level: str
    function: str = ""
    entry: str = ""
    condition: str = ""
    lists: str = ""
    code: str = ""
    anchor: str = Field(default="", index=True)
    literal: int = 0
    path: str = ""
    line: int = 0
    versions: str = ""
    newest: str = ""
    source_id: int | None = Field(default=None, foreign_key=_SOURCE)


class ModelCoverage(CatalogTable, table=True):
    """``opcheck atlas``: one architecture of a model library on a run of consecutive releases
    with the same result (``ERROR``/``SKIPPED``: no trace, ``first_release`` empty and
    ``error`` says why)."""

    __tablename__ = "model_coverage"
    id: int | None = Field(default=None, primary_key=True)
    library: str = Field(index=True)
    library_version: str = ""
    architecture: str = Field(index=True)
    model_class: str = ""
    task: str = Field(default="", index=True)
    recorder: str = ""
    product: str = ""
    train: bool = False
    first_release: str = ""
    last_release: str = ""
    verdict: str = Field(index=True)  # a Verdict, or ERROR / SKIPPED
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
