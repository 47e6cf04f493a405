from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from catalog_fixture import small_catalog

from opcheck.checker.queries import missing_in_release, op_history, release_diff, select_target
from opcheck.checker.resolve import Resolver
from opcheck.core.errors import CatalogError, UsageError
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import KernelRec
from opcheck.db.engine import open_catalog
from opcheck.db.snapshot import read_snapshot, snapshot_equal, write_snapshot


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    path = write_catalog(small_catalog(), tmp_path / "c.sqlite")
    return Catalog.load(open_catalog(path))


def test_snapshot_round_trip_is_byte_identical(tmp_path: Path) -> None:
    write_snapshot(small_catalog(), tmp_path / "a")
    again = read_snapshot(tmp_path / "a")
    write_snapshot(again, tmp_path / "b")
    assert snapshot_equal(tmp_path / "a", tmp_path / "b") == []
    # Kernel provenance survives the grouping: native-only rows point at the native source.
    orig = {(k.op, k.release): k.source_id for k in small_catalog().kernels}
    assert {(k.op, k.release): k.source_id for k in again.kernels} == orig


def test_snapshot_rejects_changed_header(tmp_path: Path) -> None:
    write_snapshot(small_catalog(), tmp_path / "s")
    p = tmp_path / "s" / "kernels.tsv"
    p.write_text(p.read_text().replace("aclnn\treleases", "aclnn_fn\treleases"))
    with pytest.raises(CatalogError, match=r"kernels.tsv:1: unexpected header"):
        read_snapshot(tmp_path / "s")


def test_failed_rebuild_keeps_previous_catalog(tmp_path: Path) -> None:
    path = write_catalog(small_catalog(), tmp_path / "c.sqlite")
    before = path.read_bytes()
    bad = small_catalog()
    bad.kernels.append(KernelRec("aten::nope", "9.9.9", bad.kernels[0].facts, None))  # FK breaks
    with pytest.raises(CatalogError, match="reference missing rows"):
        write_catalog(bad, path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["c.sqlite"]


def test_not_a_catalog_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"not sqlite at all" * 100)
    with pytest.raises(CatalogError, match="is not an opcheck catalog"):
        open_catalog(junk)
    empty = tmp_path / "empty.sqlite"
    sqlite3.connect(empty).execute("CREATE TABLE meta (key TEXT, value TEXT)")
    with pytest.raises(CatalogError, match="schema none"):
        open_catalog(empty)


def test_statuses(catalog: Catalog) -> None:
    r = Resolver(catalog, "2.1.0.post17")
    assert r.resolve("aten::relu").status == "npu"
    assert r.resolve("aten::relu").kernel == "aclnn+acl_op"
    add = r.resolve("aten::add.Tensor")
    assert (add.status, add.via) == ("composite", ("aten::add.Tensor", "aten::add.out"))
    assert r.resolve("aten::linear").status == "composite"
    assert r.resolve("aten::expand").status == "composite"
    isin = r.resolve("aten::isin.Tensor_Tensor")
    assert isin.status == "cpu_fallback"
    assert isin.via == ("aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out")
    assert r.resolve("aten::_sparse_sum_backward").status == "unsupported"
    assert r.resolve("aten::empty_strided").kernel == "torch_npu"
    unk = r.resolve("mylib::fancy")
    assert unk.status == "unknown" and "mylib" in unk.reason
    # No fallback before torch 2.1; explicit tocpu registrations still run on the CPU.
    old = Resolver(catalog, "1.11.0.post8")
    assert old.resolve("aten::isin.Tensor_Tensor").status == "cpu_fallback"
    assert old.resolve("aten::_sparse_sum_backward").status == "unsupported"
    assert Resolver(catalog, "2.1.0.post10", cpu_fallback=False).resolve(
        "aten::isin.Tensor_Tensor_out").status == "unsupported"


def test_kernel_added_in_newer_release(catalog: Catalog) -> None:
    ops = ["aten::isin.Tensor_Tensor_out", "aten::relu"]
    old = {r.op: r for r in Resolver(catalog, "2.1.0.post17").resolve_many(ops)}
    new = {r.op: r for r in Resolver(catalog, "2.6.0.post5").resolve_many(ops)}
    assert old["aten::isin.Tensor_Tensor_out"].status == "cpu_fallback"
    assert old["aten::isin.Tensor_Tensor_out"].first_npu_any == "2.6.0.post5"
    assert old["aten::isin.Tensor_Tensor_out"].first_npu == ""  # not on the 2.1 line
    assert new["aten::isin.Tensor_Tensor_out"].status == "npu"
    assert new["aten::isin.Tensor_Tensor_out"].aclnn == "aclnnIsIn"


def test_select_target(catalog: Catalog) -> None:
    assert select_target(catalog).torch_npu == "2.6.0.post5"
    assert select_target(catalog, installed_torch="2.1.2").torch_npu == "2.1.0.post17"
    assert select_target(catalog, installed_torch="2.13.0").torch_npu == "2.6.0.post5"
    assert select_target(catalog, cann="CANN 8.0.0").torch_npu == "2.1.0.post10"
    assert select_target(catalog, torch_npu="2.1.0.post10").cann == "8.0.0"
    with pytest.raises(CatalogError, match="matrix-only"):
        select_target(catalog, torch_npu="2.4.0")
    with pytest.raises(UsageError, match=r"no torch_npu release for torch 2\.9"):
        select_target(catalog, torch="2.9")
    with pytest.raises(UsageError, match="unknown torch_npu release"):
        select_target(catalog, torch_npu="9.9.9")


def test_history_and_diffs(catalog: Catalog) -> None:
    hist = op_history(catalog, "aten::isin.Tensor_Tensor_out")
    statuses = [(h.release.torch_npu, h.resolution.status if h.resolution else None) for h in hist]
    assert statuses == [
        ("1.11.0.post8", "cpu_fallback"), ("2.1.0.post10", "cpu_fallback"),
        ("2.1.0.post17", "cpu_fallback"), ("2.4.0", None), ("2.6.0.post5", "npu"),
    ]
    with pytest.raises(UsageError):
        op_history(catalog, "aten::no_such_op")
    diff = release_diff(catalog, "2.1.0.post17", "2.6.0.post5")
    assert diff.added == ["aten::isin.Tensor_Tensor_out"]
    assert diff.removed == []
    assert release_diff(catalog, "1.11.0.post8", "2.1.0.post10").family_changed == [
        ("aten::add.out", "acl_op", "aclnn+acl_op"), ("aten::relu", "acl_op", "aclnn+acl_op")]
    assert missing_in_release(catalog, "2.1.0.post17") == ["aten::_sparse_sum_backward",
                                                           "aten::isin.Tensor_Tensor",
                                                           "aten::isin.Tensor_Tensor_out"]



@pytest.mark.parametrize("source", [None, "wheel", "op_plugin", "none"])
def test_registered_ops_leaves_out_the_releases_of_a_source(tmp_path: Path,
                                                             source: str | None) -> None:
    data = small_catalog()
    # isin only in an op_plugin release: leaving out op_plugin releases must drop it
    isin = "aten::isin.Tensor_Tensor_out"
    data.kernels = [k for k in data.kernels if not (k.op == isin and k.release == "2.6.0.post5")]
    catalog = Catalog.load(open_catalog(write_catalog(data, tmp_path / "c.sqlite")))
    kept = [r.torch_npu for r in catalog.releases if source is None or r.kernel_source != source]
    expected = {op for rel in kept for op in catalog.kernels(rel)}
    assert catalog.registered_ops(except_source=source) == expected
    assert (isin in expected) is (source != "op_plugin")
