"""Static listings of .pt2 and TorchScript archives (no torch, nothing executed)."""

from __future__ import annotations

from pathlib import Path

from testpaths import TESTS

from opcheck.core.oplist import OpList
from opcheck.tracers import api, static

FIX = TESTS / "fixtures" / "tracers"


def test_pt2_listing_is_pre_dispatch_with_metadata() -> None:
    ol = static.list_pt2(FIX / "export_small.pt2")
    ops = ol.by_op()
    assert set(ops) == {"aten::linear", "aten::relu", "aten::softmax.int"}
    assert ol.ir == "pre-dispatch" and ol.method == "static-export"
    assert any("pre-dispatch" in n for n in ol.notes)
    lin = ops["aten::linear"]
    assert lin.dtypes == ["float32"] and lin.shapes == [[2, 4]] and lin.modules == ["fc"]
    assert lin.locations[0].endswith("make_fixtures.py:23")
    # round-trips through the shared document format
    assert OpList.from_json(ol.to_json()).by_op().keys() == ops.keys()


def test_pt2_subgraphs_are_listed_and_bookkeeping_dropped() -> None:
    ol = static.list_pt2(FIX / "export_cond.pt2")
    ops = set(ol.by_op())
    assert {"aten::sin", "aten::cos", "aten::linear", "aten::sum", "aten::gt.Scalar"} <= ops
    assert not any("sym_size" in o or "assert" in o for o in ops)
    assert any("cond" in n for n in ol.notes)


def test_pt2_100_nodes() -> None:
    ol = static.list_pt2(FIX / "export_100.pt2")
    assert sum(u.count for u in ol.ops) == 100


def test_torchscript_listing() -> None:
    ol = static.list_torchscript(FIX / "torchscript_small.pt")
    # torch.softmax(x, -1): aten::softmax has no default overload; the int dim picks .int
    assert set(ol.by_op()) == {"aten::linear", "aten::relu", "aten::softmax.int"}
    assert ol.ir == "torchscript"


def test_api_uses_static_listing_without_trust() -> None:
    ol = api.trace(FIX / "export_named.pt")
    assert ol.method == "static-export"
    assert any("--trust" in n for n in ol.notes)
    assert api.trace(FIX / "torchscript_small.pt").method == "static-torchscript"


TS_CODE = """
class M(Module):
  def forward(self: __torch__.M,
    input_ids: Tensor,
    stops: Tensor,
    k: int) -> Tensor:
    a = torch.isin(input_ids, stops)
    b = torch.isin(input_ids, 3)
    c = torch.isin(input_ids, stops, invert=True)
    d = torch.add(torch.relu(input_ids), k)
    e = torch.sum(input_ids, [1], True)
    f = ops.aten.max(input_ids, -1)
    return torch.softmax(a, k)
"""


def _ts_archive(tmp_path: Path, code: str) -> Path:
    import zipfile

    p = tmp_path / "m.pt"
    with zipfile.ZipFile(p, "w") as zf:
        zf.writestr("m/code/__torch__.py", code)
        zf.writestr("m/data.pkl", b"not read")
    return p


def test_torchscript_names_without_a_default_overload_get_the_one_the_call_fits(
        tmp_path: Path) -> None:
    ol = static.list_torchscript(_ts_archive(tmp_path, TS_CODE))
    ops = ol.by_op()
    assert ops["aten::isin.Tensor_Tensor"].count == 2  # tensors, with and without keywords
    assert "aten::isin.Tensor_Scalar" in ops  # a literal second argument
    assert "aten::add.Scalar" in ops  # k is annotated int
    assert {"aten::relu", "aten::sum.dim_IntList", "aten::max.dim", "aten::softmax.int"} <= set(ops)
    assert not any(op in ops for op in ("aten::isin", "aten::add", "aten::softmax"))


def test_pick_overload_keeps_the_default_when_it_fits() -> None:
    assert static.pick_overload("aten::relu", ["unknown"], []) == "aten::relu"
    assert static.pick_overload("aten::sum", ["unknown"], []) == "aten::sum"
    assert static.pick_overload("aten::isin", ["unknown", "unknown"], ["out"]) == (
        "aten::isin.Tensor_Tensor_out")
    # nothing fits, or no schema known: the name stays as written
    assert static.pick_overload("aten::no_such_op", ["unknown"], []) == "aten::no_such_op"
    assert static.pick_overload("aten::isin", [], [], schemas={}) == "aten::isin"


def test_torchscript_isin_resolves_in_the_catalog(tmp_path: Path, small_catalog_path: Path) -> None:
    from opcheck.checker.resolve import Resolver
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    ol = static.list_torchscript(_ts_archive(tmp_path, TS_CODE))
    cat = Catalog.load(open_catalog(small_catalog_path))
    r = Resolver(cat, "2.1.0.post17")
    assert r.resolve("aten::isin.Tensor_Tensor").status == "cpu_fallback"
    assert "aten::isin.Tensor_Tensor" in ol.by_op()
    assert r.resolve("aten::isin").status == "unknown"  # what the bare name used to give
