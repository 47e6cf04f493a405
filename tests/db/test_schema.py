"""The table spec: one description of the catalog gives the DDL, the rows and the snapshot."""

from __future__ import annotations

import sqlite3
from dataclasses import fields, is_dataclass
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from sqlalchemy import select
from testpaths import ROOT

from opcheck.core.vocab import KernelSource, Registration
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.data import (
    AclnnCodeRec,
    AclnnConstraintRec,
    AclnnExceptionRec,
    AclnnFunctionRec,
    AclnnParamRec,
    AdvisorRuleRec,
    ApiFacts,
    ApiOpRec,
    ApiSupportRec,
    CaptureRuleRec,
    CatalogData,
    CoverageRec,
    EngineSiteRec,
    GraphConverterRec,
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
    WorkaroundRec,
    ZooRec,
)
from opcheck.db.engine import Contributions, make_engine, open_catalog, resolve_catalog_path
from opcheck.db.schema import FILES, TABLES, column_of, record_fields
from opcheck.db.snapshot import read_snapshot, write_snapshot
from opcheck.db.tables import NpuKernel

SNAPSHOT = ROOT / "data" / "snapshot"


def test_bundled_snapshot_round_trip_is_byte_identical(tmp_path: Path) -> None:
    write_snapshot(read_snapshot(SNAPSHOT), tmp_path)
    names = sorted(p.name for p in SNAPSHOT.glob("*.tsv"))
    assert "zoo.tsv" in names
    assert sorted(p.name for p in tmp_path.glob("*.tsv")) == names
    changed = [n for n in names if (tmp_path / n).read_bytes() != (SNAPSHOT / n).read_bytes()]
    assert changed == []


def test_built_tables_have_the_spec_columns(small_catalog_path: Path) -> None:
    conn = sqlite3.connect(small_catalog_path)
    for t in TABLES:
        built = [r[1] for r in conn.execute(f"PRAGMA table_info({t.name})")]
        spec = [c.name for c in t.columns]
        surrogate = [] if t.key in spec else [t.key]
        assert built == surrogate + spec, t.name


def test_every_fact_list_is_stored() -> None:
    """A record list added to CatalogData without a table (or snapshot file) would be dropped."""
    def rows(data: CatalogData) -> int:
        return sum(len(list(t.records(data))) for t in TABLES)

    empty = rows(CatalogData())  # the meta table always has the schema version
    stored = {name for name in (f.name for f in fields(CatalogData)) if rows(_only(name)) > empty}
    assert stored == {f.name for f in fields(CatalogData)}
    assert {f.attr for f in FILES} <= stored


def _only(name: str) -> CatalogData:
    """The small catalog with every fact list but ``name`` emptied."""
    full = _full()
    data = CatalogData()
    if name:
        setattr(data, name, getattr(full, name))
    return data


def _full() -> CatalogData:
    full = small_catalog()
    full.workarounds = [WorkaroundRec("w", "a workaround", "rewrite", ops=("aten::relu",))]
    full.meta = {"built_by": "test"}
    full.api_support = [ApiSupportRec(ApiFacts("torch.isin", supported=True))]
    full.api_ops = [ApiOpRec("torch.isin", "aten::isin.Tensor_Tensor")]
    full.zoo = [ZooRec("resnet18", "2.1.0.post17", "YES")]
    full.coverage = [CoverageRec("zoo", "zoo-1", "lstm", first_release="2.1.0.post17",
                                 last_release="2.1.0.post17", verdict="YES")]
    full.aclnn_codes = [AclnnCodeRec("aclnnIsin", "161002", "ACLNN_ERR_PARAM_INVALID")]
    full.aclnn_functions = [AclnnFunctionRec("aclnnIsin", "9.1.0", "ops-math", "docs/a.md", 9)]
    full.aclnn_params = [AclnnParamRec("aclnnIsin", "self", dtypes="FLOAT", canns="9.1.0",
                                       lines="9")]
    full.aclnn_exceptions = [AclnnExceptionRec("aclnnIsin", "910A", "not", "BFLOAT16",
                                               canns="9.1.0", lines="12")]
    full.aclnn_constraints = [AclnnConstraintRec("ops-math", "docs/a.md", "rank_max", "self",
                                                 "8", canns="9.1.0", lines="30")]
    full.op_aclnn = [OpAclnnRec("aten::isin.Tensor_Tensor", "aclnnIsin", "exec",
                                releases="2.1.0.post17")]
    full.graph_pins = [GraphPinRec("2.1.0.post17", "v7.2.0-pytorch2.1.0", "a" * 40, "read", 1)]
    full.graph_converters = [GraphConverterRec("aten::relu", "converted", path="aten/relu.py",
                                               sources="1", lines="9")]
    full.kernel_path_rules = [KernelPathRuleRec("2.1.0.post17", jit_kind="soc",
                                                jit_condition="soc>=Ascend910B1", jit_line=60)]
    full.kernel_soc_checks = [KernelSocCheckRec("aten::_foreach_sqrt", "_foreach_sqrt", "",
                                                "at::native::foreach_tensor_sqrt_slow")]
    full.engine_sites = [EngineSiteRec("aclnnIsin", "9.1.0", "ops-math", "IsIn", "aicore")]
    full.op_binaries = [OpBinaryRec("IsIn", "9.1.0", "ops-math", "ascend910b", 1)]
    full.capture_rules = [CaptureRuleRec("aclop", "OpCommand::Run", tags="v7.3.1-pytorch2.6.0",
                                         lines="136", sources="1")]
    full.inductor_rules = [InductorRuleRec("generate", "aten::mul", tags="v7.3.1-pytorch2.6.0",
                                           lines="16", sources="1")]
    full.hccl_facts = [HcclFactRec(kind="refused", subject="gather", message="ProcessGroupHCCL does not "
                                   "support gather", tags="v7.3.1-pytorch2.6.0", lines="1",
                                   sources="1")]
    full.advisor_rules = [AdvisorRuleRec(kind="optimizer", api="torch_npu.optim.NpuFusedSGD", pattern="SGD.step",
                                         cann="6.3.RC2", torch="1.11.0", line=15)]
    full.message_templates = [MessageTemplateRec("self not implemented for %s", "cann",
                                                 "ops-math", "OP_CHECK_DTYPE_NOT_SUPPORT",
                                                 "error", anchor="implemented")]
    full.op_acl_types = [OpAclTypeRec(op="aten::fill_.Scalar", op_type="Fill", via="fill_out_nocheck",
                                      releases="2.1.0.post17", path="ops/aclops/Fill.cpp",
                                      line=26)]
    return full


# Record fields that are deliberately no column of the record's table.
_NOT_COLUMNS = {
    "release": {"kernel_source_id", "native_source_id"},  # per kernel row (npukernel.source_id)
    "workaround": {"ops"},  # the workaround_op table
    "npukernel": {"facts"}, "api_support": {"facts"},  # nested: their fields are the columns
}


def test_records_carry_the_columns_of_their_tables() -> None:
    """The SQLModel class is the table; the record a sync collects must have each column,
    with the same type and nullability, and no field that silently goes nowhere."""
    full = _full()  # every fact list filled
    for t in TABLES:
        records = list(t.records(full))
        assert records, t.name
        record = type(records[0])
        for c in t.columns:
            got = column_of(record, c.path)
            assert (got.type, got.nullable, got.name) == (c.type, c.nullable, c.name), (
                t.name, c.name)
        if is_dataclass(record):
            cols = {c.path.split(".")[0] for c in t.columns}
            extra = set(record_fields(record)) - cols - _NOT_COLUMNS.get(t.name, set())
            assert not extra, (t.name, extra)


def test_a_column_added_to_a_table_class_reaches_its_record_and_snapshot_file() -> None:
    """One definition: a record is derived from its table class, so a new column is a new
    record field (with the class's default) and a new snapshot column, in table order."""
    from sqlmodel import Field

    from opcheck.db import tables as tbl
    from opcheck.db.data import record_of

    class Probe(tbl.CatalogTable, table=True):
        __tablename__ = "probe_not_in_catalog"
        id: int | None = Field(default=None, primary_key=True)
        op: str = Field(index=True)
        schema_: str = Field(default="", sa_column_kwargs={"name": "schema"})
        count: int = 3
        source_id: int | None = None

    try:
        rec = record_of(Probe)
        assert rec.__name__ == "ProbeRec"
        assert record_fields(rec) == ("op", "schema_", "count", "source_id")
        assert rec("relu") == rec(op="relu", schema_="", count=3, source_id=None)
        assert [column_of(rec, f).name for f in record_fields(rec)] == [
            "op", "schema", "count", "source_id"]
        assert column_of(rec, "source_id").nullable and not column_of(rec, "count").nullable
    finally:
        tbl.METADATA.remove(Probe.__table__)  # type: ignore[attr-defined]
    operators = next(f for f in FILES if f.name == "operators.tsv")
    assert "schema" in operators.header and "schema_" not in operators.header


def test_vocabulary_columns_store_the_words_value(small_catalog_path: Path) -> None:
    conn = sqlite3.connect(small_catalog_path)
    stored = {r[0] for r in conn.execute("SELECT DISTINCT kernel_source FROM release")}
    assert stored <= {k.value for k in KernelSource} and "none" in stored
    with make_engine(small_catalog_path).connect() as sa_conn:
        rows = sa_conn.execute(select(NpuKernel.status).distinct()).scalars().all()
    assert rows and all(isinstance(r, Registration) for r in rows)


def test_read_models_are_columns_of_their_tables() -> None:
    columns = {t.name: {c.name for c in t.columns} for t in TABLES}
    assert {f.name for f in fields(ReleaseInfo)} <= columns["release"]
    assert {f.name for f in fields(KernelFacts)} <= columns["npukernel"]


def test_catalog_reads_back_what_was_built(small_catalog_path: Path) -> None:
    data = small_catalog()
    cat = Catalog.load(make_engine(small_catalog_path))
    assert [r.torch_npu for r in cat.releases] == [
        r.torch_npu for r in sorted(data.releases, key=lambda r: r.sort_key)]
    rel = data.releases[-1]
    got = cat.release(rel.torch_npu)
    assert (got.has_cpu_fallback, got.kernel_source, got.sort_key) == (
        rel.has_cpu_fallback, rel.kernel_source, rel.sort_key)
    assert isinstance(got.has_cpu_fallback, bool)
    want = {k.op: k.facts for k in data.kernels if k.release == rel.torch_npu}
    assert cat.kernels(rel.torch_npu) == want


def _add_workaround(data: CatalogData) -> None:
    data.workarounds = [WorkaroundRec("from-caller", "added by the caller", "rewrite",
                                      ops=("aten::relu",))]


def test_first_use_build_takes_the_callers_contributions(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPCHECK_CACHE_DIR", str(tmp_path))
    monkeypatch.delenv("OPCHECK_CATALOG", raising=False)
    extra = Contributions(digest=lambda: "one", attach=_add_workaround)
    path = resolve_catalog_path(contributions=extra)
    assert path.parent == tmp_path and path.is_file()
    with open_catalog(contributions=extra).connect() as conn:
        rows = conn.exec_driver_sql("SELECT workaround_id, op FROM workaround_op").all()
    assert rows == [("from-caller", "aten::relu")]
    # Other contributions (or none) key another file: never a stale catalog.
    other = resolve_catalog_path(contributions=Contributions(lambda: "two", _add_workaround))
    assert other != path
    plain = resolve_catalog_path()
    assert plain not in (path, other)
    with sqlite3.connect(plain) as conn:
        assert conn.execute("SELECT count(*) FROM workaround").fetchone() == (0,)


def test_an_explicit_catalog_needs_no_contributions(tmp_path: Path) -> None:
    def fail() -> str:
        raise AssertionError("digest computed for an explicit catalog")

    path = write_catalog(small_catalog(), tmp_path / "c.sqlite")
    assert resolve_catalog_path(path, contributions=Contributions(fail, _add_workaround)) == path


def test_the_check_reads_kernel_path_rows_with_the_tables_columns(tmp_path: Path) -> None:
    from opcheck.db import kernel_path as kp

    for row, rec in ((kp.PathRuleRow, KernelPathRuleRec), (kp.SocCheckRow, KernelSocCheckRec)):
        assert row._fields == record_fields(rec)
    data = small_catalog()
    data.kernel_path_rules = [KernelPathRuleRec("2.1.0.post17", tag="v2.1.0-6.0.0",
                                                jit_kind="soc", jit_line=7, socs="A=1")]
    data.kernel_soc_checks = [KernelSocCheckRec("aten::relu", "relu", "soc<A", "acl_op::relu",
                                                line=3)]
    engine = make_engine(write_catalog(data, tmp_path / "c.sqlite"))
    rule = kp.rules(engine)["2.1.0.post17"]
    assert (rule.tag, rule.jit_kind, rule.jit_line, rule.socs) == ("v2.1.0-6.0.0", "soc", 7, "A=1")
    assert [c.fallback for c in kp.soc_checks(engine, ["aten::relu"])["aten::relu"]] == [
        "acl_op::relu"]


def test_a_check_does_not_import_the_table_classes(tmp_path: Path) -> None:
    """The table classes (SQLModel, the ORM) cost ~0.25 s per command: only a build needs them."""
    import subprocess
    import sys

    path = write_catalog(small_catalog(), tmp_path / "c.sqlite")
    code = (
        "import sys\n"
        "from opcheck.checker.usecase import CheckUseCase\n"
        "from opcheck.checker.check import check\n"
        "from opcheck.checker.engine import engine_lookup\n"
        "from opcheck.checker.kernel_path import KernelPaths\n"
        "from opcheck.contrib.workaround_catalog import workaround_lookup\n"
        "from opcheck.db.catalog import Catalog\n"
        "from opcheck.db.engine import open_catalog\n"
        f"cat = Catalog.load(open_catalog(__import__('pathlib').Path({str(path)!r})))\n"
        "KernelPaths(cat); workaround_lookup(cat, None)\n"
        "print(sorted(m for m in sys.modules if m in ('opcheck.db.tables', 'sqlmodel')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"
