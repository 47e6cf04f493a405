"""The one table spec: every catalog table and plain snapshot file, derived from the records.

A column is a field of a record in ``opcheck.db.data``: its name, its order and its type
(``str`` → VARCHAR, ``int`` → INTEGER, ``bool`` → BOOLEAN; NOT NULL unless ``X | None``) come
from the dataclass. A :class:`Table` adds only what a field cannot say: the primary key,
indexes, references, fields that are not columns and, for a record that groups its facts in a
nested object, the column order. The DDL (:func:`create_statements`), the rows the builder
inserts (:func:`insert_rows`) and the snapshot's plain files (:data:`FILES`) all come from here,
so a new column is a new record field and a new table is one entry below.
"""

from __future__ import annotations

import types
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, fields
from functools import cache
from operator import attrgetter
from typing import Any, Union, get_args, get_origin, get_type_hints

import sqlalchemy as sa
from sqlalchemy.dialects import sqlite
from sqlalchemy.schema import CreateIndex, CreateTable

from opcheck.db.data import (
    AclnnCodeRec,
    AclnnConstraintRec,
    AclnnExceptionRec,
    AclnnFunctionRec,
    AclnnParamRec,
    ApiOpRec,
    ApiSupportRec,
    CatalogData,
    DeprecationRec,
    EngineSiteRec,
    GraphConverterRec,
    GraphConverterRow,
    GraphPinRec,
    KernelRec,
    OpAclnnRec,
    OpBinaryRec,
    OperatorRec,
    PythonRec,
    ReleaseRec,
    SourceRec,
    WorkaroundRec,
    ZooRec,
)

SCHEMA_VERSION = 3  # 2: the aclnn tables (CANN contract) and op_aclnn; 3: graph_converter.rebound
# What a built file holds beyond the rows (indexes, search tables). Part of the key of the
# catalog built in the user cache, so a new layout is rebuilt instead of reused.
LAYOUT_VERSION = 2

_SQL_TYPES: dict[type, type[sa.types.TypeEngine[Any]]] = {
    str: sa.String, int: sa.Integer, bool: sa.Boolean,
}


@dataclass(frozen=True)
class WorkaroundOpRow:
    """An op a workaround names (``WorkaroundRec.ops`` as rows)."""

    workaround_id: str
    op: str


@dataclass(frozen=True)
class MetaRow:
    key: str
    value: str = ""


@dataclass(frozen=True)
class Column:
    name: str
    type: type  # str, int or bool
    nullable: bool
    path: str  # attribute path in the record: "op", "facts.status"


def _scalar(hint: Any) -> tuple[type, bool]:
    """A field's annotation as (scalar type, nullable)."""
    if get_origin(hint) in (Union, types.UnionType):
        args = [a for a in get_args(hint) if a is not type(None)]
        if len(args) == 1 and args[0] in _SQL_TYPES:
            return args[0], True
    if hint in _SQL_TYPES:
        return hint, False
    raise TypeError(f"no column type for {hint!r}")


@cache
def _hints(cls: type) -> dict[str, Any]:
    return get_type_hints(cls)


def column_of(record: type, path: str) -> Column:
    """The column for one attribute path of a record (``facts.status`` follows ``facts``)."""
    cls: Any = record
    *outer, name = path.split(".")
    for part in outer:
        cls = _hints(cls)[part]
    kind, nullable = _scalar(_hints(cls)[name])
    return Column(name, kind, nullable, path)


def record_fields(record: type, skip: Iterable[str] = ()) -> tuple[str, ...]:
    left_out = set(skip)
    return tuple(f.name for f in fields(record) if f.name not in left_out)


@dataclass(frozen=True)
class Table:
    name: str
    record: type
    records: Callable[[CatalogData], Iterable[Any]]  # this table's records in the facts
    key: str = "id"  # primary key; "id" when it is no field: an INTEGER key SQLite assigns
    order: tuple[str, ...] = ()  # attribute paths in column order; default: the record's fields
    skip: tuple[str, ...] = ()  # record fields that are not columns of this table
    indexed: tuple[str, ...] = ()  # one index per column, named ix_<table>_<column>
    references: Mapping[str, str] = field(default_factory=dict)  # column → "table.column"
    indexes: tuple[tuple[str, tuple[str, ...]], ...] = ()  # named indexes over columns

    @property
    def columns(self) -> tuple[Column, ...]:
        """The columns filled from the record, in table order (the surrogate key excluded)."""
        paths = self.order or record_fields(self.record, self.skip)
        return tuple(column_of(self.record, p) for p in paths)


_FROM_SOURCE = {"source_id": "source.id"}

TABLES: tuple[Table, ...] = (
    Table("source", SourceRec, lambda d: d.sources, indexed=("scraper",)),
    Table("release", ReleaseRec, lambda d: d.releases, key="torch_npu",
          # the kernel provenance is stored per kernel row (npukernel.source_id)
          skip=("kernel_source_id", "native_source_id"), indexed=("torch", "sort_key"),
          references=_FROM_SOURCE),
    Table("operator", OperatorRec, lambda d: d.operators, key="op",
          indexed=("namespace", "name"), references=_FROM_SOURCE),
    Table("npukernel", KernelRec, lambda d: d.kernels,
          order=("op", "release", "facts.op_api", "facts.acl_op", "facts.native", "facts.aclnn",
                 "facts.status", "source_id"),
          indexed=("op",),
          references={"op": "operator.op", "release": "release.torch_npu", **_FROM_SOURCE},
          # Covering indexes for the browser's facets (status, op_api, acl_op): counted per
          # release and over the whole table, they are read from an index instead of 105k rows.
          indexes=(
              ("ix_npukernel_release_facets", ("release", "status", "op_api", "acl_op")),
              ("ix_npukernel_status", ("status",)),
              ("ix_npukernel_op_api", ("op_api",)),
              ("ix_npukernel_acl_op", ("acl_op",)),
          )),
    Table("deprecation", DeprecationRec, lambda d: d.deprecations, indexed=("op",),
          references=_FROM_SOURCE),
    Table("pythonsupport", PythonRec, lambda d: d.pythons, indexed=("torch",),
          references=_FROM_SOURCE),
    Table("meta", MetaRow, lambda d: [
        MetaRow(k, v) for k, v in {"schema_version": str(SCHEMA_VERSION), **d.meta}.items()
    ], key="key"),
    Table("workaround", WorkaroundRec, lambda d: d.workarounds, skip=("ops",),
          indexed=("kind",)),
    Table("workaround_op", WorkaroundOpRow, lambda d: [
        WorkaroundOpRow(w.id, op) for w in d.workarounds for op in w.ops
    ], indexed=("workaround_id", "op"), references={"workaround_id": "workaround.id"}),
    Table("api_support", ApiSupportRec, lambda d: d.api_support,
          order=("facts.api", "doc_version", "ref", "facts.generation", "facts.feature",
                 "facts.hardware", "facts.supported", "facts.only_dtypes",
                 "facts.unsupported_dtypes", "facts.arg_limits", "restriction", "line",
                 "source_id"),
          indexed=("api", "doc_version", "hardware"), references=_FROM_SOURCE),
    Table("api_op", ApiOpRec, lambda d: d.api_ops, indexed=("api", "op")),
    Table("zoo_result", ZooRec, lambda d: d.zoo, indexed=("model", "torch_npu")),
    Table("aclnn_code", AclnnCodeRec, lambda d: d.aclnn_codes, indexed=("function", "code"),
          references=_FROM_SOURCE),
    Table("aclnn_function", AclnnFunctionRec, lambda d: d.aclnn_functions,
          indexed=("function", "cann"), references=_FROM_SOURCE),
    Table("aclnn_param", AclnnParamRec, lambda d: d.aclnn_params, indexed=("function",)),
    Table("aclnn_exception", AclnnExceptionRec, lambda d: d.aclnn_exceptions,
          indexed=("function",)),
    Table("aclnn_constraint", AclnnConstraintRec, lambda d: d.aclnn_constraints,
          indexed=("path",)),
    Table("op_aclnn", OpAclnnRec, lambda d: d.op_aclnn, indexed=("op", "aclnn"),
          references=_FROM_SOURCE),
    # no reference to release: a catalog built from a subset of the releases keeps every pin
    Table("graph_pin", GraphPinRec, lambda d: d.graph_pins, key="torch_npu",
          references={"converters_source_id": "source.id", **_FROM_SOURCE}),
    Table("graph_converter", GraphConverterRow,
          lambda d: [r for g in d.graph_converters for r in g.rows()], references=_FROM_SOURCE,
          # one index for both reads: an op at one commit (a check), an op at every commit
          indexes=(("ix_graph_converter_op_source", ("op", "source_id")),)),
    Table("engine_site", EngineSiteRec, lambda d: d.engine_sites,
          indexed=("aclnn", "op_type", "engine"), references=_FROM_SOURCE),
    Table("op_binary", OpBinaryRec, lambda d: d.op_binaries, indexed=("op_type", "soc"),
          references=_FROM_SOURCE),
)


def _sql_table(table: Table, metadata: sa.MetaData) -> sa.Table:
    cols: list[sa.Column[Any]] = []
    if table.key not in {c.name for c in table.columns}:
        cols.append(sa.Column(table.key, sa.Integer, primary_key=True))
    for c in table.columns:
        ref = table.references.get(c.name)
        cols.append(sa.Column(
            c.name, _SQL_TYPES[c.type](), *([sa.ForeignKey(ref)] if ref else []),
            primary_key=c.name == table.key, nullable=c.nullable, index=c.name in table.indexed,
        ))
    return sa.Table(table.name, metadata, *cols,
                    *(sa.Index(name, *on) for name, on in table.indexes))


METADATA = sa.MetaData()
for _t in TABLES:
    _sql_table(_t, METADATA)


def create_statements() -> tuple[list[str], list[str]]:
    """The DDL: (CREATE TABLE statements in dependency order, CREATE INDEX statements)."""
    dialect = sqlite.dialect()
    tables = METADATA.sorted_tables
    creates = [str(CreateTable(t).compile(dialect=dialect)) for t in tables]
    indexes = [
        str(CreateIndex(i).compile(dialect=dialect))
        for t in tables for i in sorted(t.indexes, key=lambda i: str(i.name))
    ]
    return creates, indexes


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
        return list(record_fields(self.record, self.skip))

    @property
    def columns(self) -> tuple[Column, ...]:
        return tuple(column_of(self.record, n) for n in self.header)


# The grouped files (kernels.tsv, api_support.tsv) and meta.tsv are in ``opcheck.db.snapshot``:
# their columns are the fields of ``KernelFacts`` and ``ApiFacts``.
SOURCES_FILE = File("sources.tsv", SourceRec, "sources", skip=("fetched_at",))
RELEASES_FILE = File("releases.tsv", ReleaseRec, "releases")
ZOO_FILE = File("zoo.tsv", ZooRec, "zoo", optional=True)
FILES: tuple[File, ...] = (
    SOURCES_FILE,
    RELEASES_FILE,
    File("operators.tsv", OperatorRec, "operators"),
    File("api_ops.tsv", ApiOpRec, "api_ops"),
    File("deprecations.tsv", DeprecationRec, "deprecations"),
    File("pythons.tsv", PythonRec, "pythons"),
    ZOO_FILE,
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
    # optional: a snapshot written before the engine facts still reads (engine unknown)
    File("engine_sites.tsv", EngineSiteRec, "engine_sites", optional=True),
    File("op_binaries.tsv", OpBinaryRec, "op_binaries", optional=True),
)
