"""What each catalog table is filled from, and the snapshot's plain files.

The tables themselves are the SQLModel classes of ``opcheck.db.tables`` (columns, types, keys,
indexes, references), and the records a sync collects (``opcheck.db.data``) are derived from
them. A :class:`Table` ties one class to its records: which list of ``CatalogData`` fills it
and, for a record that groups its facts in a nested object (``KernelRec.facts``), where a
column's value is found. The DDL (:func:`create_statements`) and the insert statement and rows
the builder runs (:func:`insert_statement`, :func:`insert_rows`) follow from the classes. A
snapshot's plain file (:data:`FILES`) has a column per field of its record. So a new column is
a field of the table class, and a new table is one class, its record line in ``db/data.py``,
its list in ``CatalogData`` and one entry in ``TABLES`` (and in ``FILES`` for its snapshot
file).
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass, fields
from functools import cache
from operator import attrgetter
from typing import Any, Union, get_args, get_origin, get_type_hints

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from opcheck.db import tables as t
from opcheck.db.data import (
    AclnnCodeRec,
    AclnnConstraintRec,
    AclnnExceptionRec,
    AclnnFunctionRec,
    AclnnParamRec,
    AdvisorRuleRec,
    ApiFacts,
    ApiOpRec,
    CaptureRuleRec,
    CatalogData,
    CoverageRec,
    DeprecationRec,
    EngineSiteRec,
    GraphConverterRec,
    GraphConverterRow,
    GraphPinRec,
    HcclFactRec,
    InductorRuleRec,
    KernelFacts,
    KernelPathRuleRec,
    KernelSocCheckRec,
    MessageTemplateRec,
    OpAclnnRec,
    OpAclTypeRec,
    OpBinaryRec,
    OperatorRec,
    PythonRec,
    ReleaseRec,
    SourceRec,
    ZooRec,
    column_type,
)
from opcheck.db.layout import LAYOUT_VERSION, SCHEMA_VERSION
from opcheck.db.tables import METADATA, CatalogTable

__all__ = ["FILES", "LAYOUT_VERSION", "SCHEMA_VERSION", "TABLES", "File", "Table"]

_SCALARS = (str, int, bool)


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # str, int or bool (a vocabulary word is its str)
    nullable: bool
    path: str  # attribute path in the record: "op", "facts.status"


def _scalar(hint: Any) -> tuple[type, bool]:
    """A record field's annotation as (scalar type, nullable)."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and args[0] in _SCALARS:
            return args[0], True
    if hint in _SCALARS:
        return hint, False
    raise TypeError(f"no column type for {hint!r}")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def column_of(record: type, path: str) -> Column:
    """The column for one attribute path of a record (``facts.status`` follows ``facts``);
    its name is the table's (``schema`` for ``OperatorRec.schema_``)."""
    cls: Any = record
    *outer, attr = path.split(".")
    for part in outer:
        cls = _hints(cls)[part]
    kind, nullable = _scalar(_hints(cls)[attr])
    return Column(getattr(cls, "column_names", {}).get(attr, attr), kind, nullable, path)


def record_fields(record: type, skip: Iterable[str] = ()) -> tuple[str, ...]:
    left_out = set(skip)
    return tuple(f.name for f in fields(record) if f.name not in left_out)


@dataclass(frozen=True)
class Table:
    model: type[CatalogTable]  # the SQLModel class: the table
    records: Callable[[CatalogData], Iterable[Any]]  # its records in the facts
    # A record that groups facts in a nested object: its attribute and the object's type; the
    # columns that are fields of that type are read through it (``facts.status``).
    nested: tuple[str, type] | None = None

    @property
    def sql(self) -> sa.Table:
        table: sa.Table = self.model.__table__  # type: ignore[attr-defined]
        return table

    @property
    def name(self) -> str:
        return self.sql.name

    @property
    def key(self) -> str:
        """The primary key column."""
        return str(self.sql.primary_key.columns.values()[0].name)

    @property
    def surrogate(self) -> bool:
        """The key is an INTEGER SQLite assigns (``id: int | None = None``), no record field."""
        field = self.model.model_fields.get(self.key)
        return field is not None and not field.is_required() and field.default is None

    @property
    def columns(self) -> tuple[Column, ...]:
        """The columns filled from the records, in table order (a surrogate key excluded);
        ``path`` is the attribute (``schema_`` for the column ``schema``)."""
        attrs = {p.columns[0].name: p.key for p in sa.inspect(self.model).column_attrs}
        out = []
        for col in self.sql.columns:
            if self.surrogate and col.name == self.key:
                continue
            path = attrs[col.name]
            if self.nested is not None and col.name in record_fields(self.nested[1]):
                path = f"{self.nested[0]}.{col.name}"
            out.append(Column(col.name, column_type(col), bool(col.nullable), path))
        return tuple(out)


def _meta_rows(d: CatalogData) -> list[t.Meta]:
    return [t.Meta(key=k, value=v)
            for k, v in {"schema_version": str(SCHEMA_VERSION), **d.meta}.items()]


def _workaround_ops(d: CatalogData) -> list[t.WorkaroundOp]:
    return [t.WorkaroundOp(workaround_id=w.id, op=op) for w in d.workarounds for op in w.ops]


def _graph_converters(d: CatalogData) -> list[GraphConverterRow]:
    return [r for g in d.graph_converters for r in g.rows()]


# One entry per table: its class and the facts that fill it (tables are created in dependency
# order whatever the order here).
TABLES: tuple[Table, ...] = (
    Table(t.Source, lambda d: d.sources),
    Table(t.Release, lambda d: d.releases),
    Table(t.Operator, lambda d: d.operators),
    Table(t.NpuKernel, lambda d: d.kernels, nested=("facts", KernelFacts)),
    Table(t.Deprecation, lambda d: d.deprecations),
    Table(t.PythonSupport, lambda d: d.pythons),
    Table(t.Meta, _meta_rows),
    Table(t.Workaround, lambda d: d.workarounds),
    Table(t.WorkaroundOp, _workaround_ops),
    Table(t.ApiSupport, lambda d: d.api_support, nested=("facts", ApiFacts)),
    Table(t.ApiOp, lambda d: d.api_ops),
    Table(t.ZooResult, lambda d: d.zoo),
    Table(t.ModelCoverage, lambda d: d.coverage),
    Table(t.AclnnCode, lambda d: d.aclnn_codes),
    Table(t.AclnnFunction, lambda d: d.aclnn_functions),
    Table(t.AclnnParam, lambda d: d.aclnn_params),
    Table(t.AclnnException, lambda d: d.aclnn_exceptions),
    Table(t.AclnnConstraint, lambda d: d.aclnn_constraints),
    Table(t.OpAclnn, lambda d: d.op_aclnn),
    Table(t.GraphPin, lambda d: d.graph_pins),
    Table(t.GraphConverter, _graph_converters),
    # no reference to release: rules of a tag kept when the catalog has a subset of releases
    Table(t.KernelPathRule, lambda d: d.kernel_path_rules),
    Table(t.KernelSocCheck, lambda d: d.kernel_soc_checks),
    Table(t.EngineSite, lambda d: d.engine_sites),
    Table(t.OpBinary, lambda d: d.op_binaries),
    Table(t.CaptureRule, lambda d: d.capture_rules),
    Table(t.InductorRule, lambda d: d.inductor_rules),
    Table(t.OpAclType, lambda d: d.op_acl_types),
    Table(t.AdvisorRule, lambda d: d.advisor_rules),
    Table(t.MessageTemplate, lambda d: d.message_templates),
    Table(t.HcclFact, lambda d: d.hccl_facts),
)


def create_statements() -> tuple[list[str], list[str]]:
    """The DDL: (CREATE TABLE statements in dependency order, CREATE INDEX statements)."""
    dialect = sqlite.dialect()
    sql_tables = METADATA.sorted_tables
    creates = [str(CreateTable(s).compile(dialect=dialect)) for s in sql_tables]
    indexes = [
        str(CreateIndex(i).compile(dialect=dialect))
        for s in sql_tables for i in sorted(s.indexes, key=lambda i: str(i.name))
    ]
    return creates, indexes


def insert_statement(table: Table) -> str:
    """The Core ``insert()`` of ``table``'s record columns, compiled for SQLite (positional
    parameters, run with ``executemany`` on the builder's connection: no per-row binding in
    Python, so first use stays fast)."""
    cols = [table.sql.c[c.name] for c in table.columns]
    stmt = sa.insert(table.sql).values({c: sa.bindparam(c.key) for c in cols})
    return str(stmt.compile(dialect=sqlite.dialect(paramstyle="qmark")))


def insert_rows(table: Table, data: CatalogData) -> tuple[list[str], list[tuple[Any, ...]]]:
    """The column names and value tuples ``table`` gets from ``data``.

    ``attrgetter`` over dotted paths, not ``dataclasses.asdict`` (a deep copy): the kernel
    table has 100k+ rows and first use must stay fast."""
    cols = table.columns
    get = attrgetter(*(c.path for c in cols))
    if len(cols) == 1:
        return [cols[0].name], [(get(r),) for r in table.records(data)]
    return [c.name for c in cols], [get(r) for r in table.records(data)]


@dataclass(frozen=True)
class File:
    """A plain snapshot file: one row per record, one column per field (minus ``skip``)."""

    name: str
    record: type
    attr: str  # the list of ``CatalogData`` it holds
    skip: tuple[str, ...] = ()
    # zoo.tsv comes from tracing models (``opcheck zoo``), not from a sync: written only when
    # there are rows, and an existing one is kept when there are none.
    optional: bool = False
    # rows that go into the file (default: all); the others are kept only in a catalog built
    # from the mirror (constraint lines that are prose and nothing else)
    keep: Callable[[Any], bool] | None = None

    @property
    def header(self) -> list[str]:
        return [c.name for c in self.columns]

    @property
    def columns(self) -> tuple[Column, ...]:
        return tuple(column_of(self.record, n) for n in record_fields(self.record, self.skip))


# The grouped files (kernels.tsv, api_support.tsv) and meta.tsv are in ``opcheck.db.snapshot``:
# their columns are the fields of ``KernelFacts`` and ``ApiFacts``.
SOURCES_FILE = File("sources.tsv", SourceRec, "sources", skip=("fetched_at",))
RELEASES_FILE = File("releases.tsv", ReleaseRec, "releases")
ZOO_FILE = File("zoo.tsv", ZooRec, "zoo", optional=True)
ATLAS_FILE = File("atlas.tsv", CoverageRec, "coverage", optional=True)
FILES: tuple[File, ...] = (
    SOURCES_FILE,
    RELEASES_FILE,
    File("operators.tsv", OperatorRec, "operators"),
    File("api_ops.tsv", ApiOpRec, "api_ops"),
    File("deprecations.tsv", DeprecationRec, "deprecations"),
    File("pythons.tsv", PythonRec, "pythons"),
    ZOO_FILE,
    ATLAS_FILE,
    File("aclnn_codes.tsv", AclnnCodeRec, "aclnn_codes", skip=("description",)),
    # The snapshot keeps no upstream prose: exception and constraint texts stay upstream (the
    # parsed kinds, dtypes, products and lines are kept), and a constraint line that is only
    # prose is not kept at all; its page and line are in the function's source.
    File("aclnn_functions.tsv", AclnnFunctionRec, "aclnn_functions"),
    File("aclnn_params.tsv", AclnnParamRec, "aclnn_params"),
    File("aclnn_exceptions.tsv", AclnnExceptionRec, "aclnn_exceptions", skip=("text",)),
    File("aclnn_constraints.tsv", AclnnConstraintRec, "aclnn_constraints", skip=("text",),
         keep=lambda r: r.kind != "text"),
    File("op_aclnn.tsv", OpAclnnRec, "op_aclnn"),
    # optional: a snapshot written before graph mode still reads (graph status unknown)
    File("graph_pins.tsv", GraphPinRec, "graph_pins", optional=True),
    File("graph_converters.tsv", GraphConverterRec, "graph_converters", optional=True),
    # optional: a snapshot written before the kernel-path facts still reads (path unknown)
    File("kernel_path_rules.tsv", KernelPathRuleRec, "kernel_path_rules", optional=True),
    File("kernel_soc_checks.tsv", KernelSocCheckRec, "kernel_soc_checks", optional=True),
    # optional: a snapshot written before the engine facts still reads (engine unknown)
    File("engine_sites.tsv", EngineSiteRec, "engine_sites", optional=True),
    File("op_binaries.tsv", OpBinaryRec, "op_binaries", optional=True),
    # optional: a snapshot written before the capture rules still reads (capture unknown)
    File("capture_rules.tsv", CaptureRuleRec, "capture_rules", optional=True),
    File("inductor_rules.tsv", InductorRuleRec, "inductor_rules", optional=True),
    File("advisor_rules.tsv", AdvisorRuleRec, "advisor_rules", optional=True),
    # optional: a snapshot written before the message index still reads (explain unindexed)
    File("message_templates.tsv", MessageTemplateRec, "message_templates", optional=True),
    # optional: a snapshot written before the acl_op op types still reads (op types unknown)
    File("op_acl_types.tsv", OpAclTypeRec, "op_acl_types", optional=True),
    # optional: a snapshot written before the HCCL facts still reads (collectives unknown)
    File("hccl_facts.tsv", HcclFactRec, "hccl_facts", optional=True),
)
