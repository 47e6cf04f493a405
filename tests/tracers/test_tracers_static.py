"""Static listings of .pt2 and TorchScript archives (no torch, nothing executed)."""

from __future__ import annotations

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
    assert set(ol.by_op()) == {"aten::linear", "aten::relu", "aten::softmax"}
    assert ol.ir == "torchscript"


def test_api_uses_static_listing_without_trust() -> None:
    ol = api.trace(FIX / "export_named.pt")
    assert ol.method == "static-export"
    assert any("--trust" in n for n in ol.notes)
    assert api.trace(FIX / "torchscript_small.pt").method == "static-torchscript"
