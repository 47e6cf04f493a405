"""The catalog's facts in memory: what a sync collects and what the snapshot stores.

One shape feeds both writers (SQLite and the diffable snapshot), so a catalog built from the
mirror and one built from the bundled snapshot hold the same facts.

The records are not written here: each is derived at import from its table's SQLModel class in
``opcheck.db.tables`` (:func:`record_of`), a plain dataclass with one field per column (the
table's attribute names and defaults, in column order, without a surrogate ``id``). A sync
builds 100k+ of them and a table instance costs ~40x a dataclass, so the records stay plain;
but a column is added in one place, the table class. The few fields a sync keeps that are no
column (a release's kernel provenance, a workaround's ops, the snapshot's grouped lines) are
declared on a subclass of the table (``_ReleaseRec`` ...) next to its record; the type checker
reads each record as that class. Two grouping shapes are not tables: :class:`KernelFacts` and
:class:`ApiFacts`, the facts a release or a doc states (their names are columns of the tables,
checked by tests/db/test_schema.py), defined in :mod:`opcheck.db.facts` so that a check reads
them without importing the table classes.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa
from pydantic_core import PydanticUndefined

from opcheck.db import tables as t
from opcheck.db.facts import ApiFacts as ApiFacts  # re-exported: the builders import them here
from opcheck.db.facts import KernelFacts as KernelFacts
from opcheck.db.tables import CatalogTable

_SCALARS = (str, int, bool)


def column_type(col: sa.Column[Any]) -> type:
    """str, int or bool (a vocabulary word is stored as its str)."""
    sql_type = col.type
    if isinstance(sql_type, sa.types.TypeDecorator):  # SQLModel's AutoString, a WordType
        sql_type = sql_type.impl_instance
    kind: type = sql_type.python_type
    if kind not in _SCALARS:
        raise TypeError(f"no scalar type for column {col.name} ({col.type!r})")
    return kind


def _default(value: Any) -> Any:
    # a vocabulary word's default is kept as its string, as the records always held it
    return value.value if isinstance(value, enum.Enum) else value


def record_of(model: type[CatalogTable], *, name: str = "", drop: tuple[str, ...] = (),
              after: str = "") -> Any:
    """A plain dataclass for ``model``'s rows, named as the record (``Source`` → ``SourceRec``).

    Its fields are the table's columns in order (attribute names, column types as ``str``,
    ``int`` or ``bool``, ``X | None`` where nullable, the class's defaults), without a
    surrogate key and the ``drop``ped ones. When ``model`` is a subclass of a table, the fields
    it adds (no columns) follow ``after`` (default: at the end) and its methods are kept."""
    table: type[CatalogTable] = next(c for c in model.__mro__ if "__table__" in vars(c))
    sql: sa.Table = table.__table__  # type: ignore[attr-defined]
    key = sql.primary_key.columns.values()[0].name
    mapper: Any = sa.inspect(table)
    columns = {p.key: p.columns[0] for p in mapper.column_attrs}
    own = [n for n in model.model_fields if n not in table.model_fields]
    specs: list[tuple[str, Any, Any]] = []
    for attr, info in table.model_fields.items():
        col = columns[attr]
        if attr in drop or (col.name == key and not info.is_required() and info.default is None):
            continue
        kind: Any = column_type(col)
        specs.append((attr, kind | None if col.nullable else kind, info.default))
    added = [(n, model.model_fields[n].annotation, model.model_fields[n].default) for n in own]
    at = next(i for i, s in enumerate(specs) if s[0] == after) + 1 if after else len(specs)
    specs[at:at] = added
    methods = {k: v for k, v in vars(model).items()
               if callable(v) and not k.startswith("_") and k not in model.model_fields}
    cls: Any = dataclasses.make_dataclass(
        name or f"{table.__name__}Rec",
        [(n, hint) if d is PydanticUndefined else (n, hint, field(default=_default(d)))
         for n, hint, d in specs],
        namespace=methods)
    cls.__module__ = __name__  # the parse cache rebuilds records by module and name
    # a column named unlike its attribute (``schema_``: pydantic's BaseModel has ``schema``)
    cls.column_names = {a: columns[a].name for a, _, _ in specs
                        if a in columns and columns[a].name != a}
    cls.__doc__ = f"A row of ``{sql.name}`` as a sync collects it (``{table.__qualname__}``)."
    return cls

# The record-only subclasses below are no tables (their fields would otherwise become columns).
_NOT_A_TABLE: Any = {"defer_build": True, "table": False}


class _ReleaseRec(t.Release):
    model_config = _NOT_A_TABLE
    # Provenance of the kernel facts of this release: no columns of the release table (every
    # npukernel row names its own source) but in the snapshot's releases.tsv, which the
    # kernels.tsv rows refer to.
    kernel_source_id: int | None = None
    native_source_id: int | None = None


class _WorkaroundRec(t.Workaround):
    model_config = _NOT_A_TABLE
    ops: tuple[str, ...] = ()  # the workaround_op table


class _GraphConverterGroup(t.GraphConverter):
    """How torchair converts one overload, for every torchair commit that has exactly these
    facts: ``sources`` lists the commits' converter-folder source ids and ``lines`` the line
    in each (same order); the snapshot's form of graph_converter."""

    model_config = _NOT_A_TABLE

    sources: str = ""
    lines: str = ""

    def rows(self) -> list[GraphConverterRow]:
        return [GraphConverterRow(op=self.op, status=self.status, message=self.message,
                                  condition=self.condition, dtypes=self.dtypes,
                                  min_torch=self.min_torch, path=self.path, line=int(line),
                                  source_id=int(sid), rebound=self.rebound)
                for sid, line in zip(self.sources.split(","), self.lines.split(","),
                                     strict=True) if sid]


if TYPE_CHECKING:
    # The type checker reads each record as its table class (same names, types and defaults).
    SourceRec = t.Source
    ReleaseRec = _ReleaseRec
    OperatorRec = t.Operator
    DeprecationRec = t.Deprecation
    PythonRec = t.PythonSupport
    ApiOpRec = t.ApiOp
    AclnnCodeRec = t.AclnnCode
    AclnnFunctionRec = t.AclnnFunction
    AclnnParamRec = t.AclnnParam
    AclnnExceptionRec = t.AclnnException
    AclnnConstraintRec = t.AclnnConstraint
    OpAclnnRec = t.OpAclnn
    KernelPathRuleRec = t.KernelPathRule
    KernelSocCheckRec = t.KernelSocCheck
    WorkaroundRec = _WorkaroundRec
    ZooRec = t.ZooResult
    CaptureRuleRec = t.CaptureRule
    InductorRuleRec = t.InductorRule
    GraphPinRec = t.GraphPin
    GraphConverterRow = t.GraphConverter
    GraphConverterRec = _GraphConverterGroup
    EngineSiteRec = t.EngineSite
    OpBinaryRec = t.OpBinary
    MessageTemplateRec = t.MessageTemplate
    OpAclTypeRec = t.OpAclType
    HcclFactRec = t.HcclFact
    AdvisorRuleRec = t.AdvisorRule
    CoverageRec = t.ModelCoverage
else:
    SourceRec = record_of(t.Source)
    ReleaseRec = record_of(_ReleaseRec, after="source_id")
    OperatorRec = record_of(t.Operator)
    DeprecationRec = record_of(t.Deprecation)
    PythonRec = record_of(t.PythonSupport, name="PythonRec")
    ApiOpRec = record_of(t.ApiOp)
    AclnnCodeRec = record_of(t.AclnnCode)
    AclnnFunctionRec = record_of(t.AclnnFunction)
    AclnnParamRec = record_of(t.AclnnParam)
    AclnnExceptionRec = record_of(t.AclnnException)
    AclnnConstraintRec = record_of(t.AclnnConstraint)
    OpAclnnRec = record_of(t.OpAclnn)
    KernelPathRuleRec = record_of(t.KernelPathRule)
    KernelSocCheckRec = record_of(t.KernelSocCheck)
    WorkaroundRec = record_of(_WorkaroundRec)
    ZooRec = record_of(t.ZooResult, name="ZooRec")
    CaptureRuleRec = record_of(t.CaptureRule)
    InductorRuleRec = record_of(t.InductorRule)
    GraphPinRec = record_of(t.GraphPin)
    # frozen in spirit: one converter row of one commit
    GraphConverterRow = record_of(t.GraphConverter, name="GraphConverterRow")
    GraphConverterRec = record_of(_GraphConverterGroup, drop=("line", "source_id"), after="path")
    EngineSiteRec = record_of(t.EngineSite)
    OpBinaryRec = record_of(t.OpBinary)
    MessageTemplateRec = record_of(t.MessageTemplate)
    OpAclTypeRec = record_of(t.OpAclType)
    HcclFactRec = record_of(t.HcclFact)
    AdvisorRuleRec = record_of(t.AdvisorRule)
    CoverageRec = record_of(t.ModelCoverage, name="CoverageRec")


@dataclass
class KernelRec:
    op: str
    release: str
    facts: KernelFacts
    source_id: int | None = None


@dataclass
class ApiSupportRec:
    facts: ApiFacts
    doc_version: str = ""
    ref: str = ""
    restriction: str = ""
    line: int = 0
    source_id: int | None = None


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
    # The CANN op types each ATen overload's acl_op kernel runs (issue 38).
    op_acl_types: list[OpAclTypeRec] = field(default_factory=list)
    # Distributed on HCCL (issue 41): torch_npu's process-group facts per tag
    hccl_facts: list[HcclFactRec] = field(default_factory=list)
    # The vendor's profiling advisor: its affinity-API rules (opcheck.scrapers.advisor)
    advisor_rules: list[AdvisorRuleRec] = field(default_factory=list)
    # The model atlas (data/snapshot/atlas.tsv, written by `opcheck atlas --snapshot`).
    coverage: list[CoverageRec] = field(default_factory=list)

    def add_source(self, scraper: str, path: str, *, url: str = "", ref: str = "",
                   commit: str = "", sha256: str = "", rows: int = 0) -> int:
        """Register a source once per (scraper, path); returns its id."""
        for s in self.sources:
            if s.scraper == scraper and s.path == path:
                return s.id
        sid = len(self.sources) + 1
        self.sources.append(SourceRec(id=sid, scraper=scraper, path=path, url=url, ref=ref,
                                      commit=commit, sha256=sha256, rows=rows))
        return sid
