"""Per-API restrictions from the real docs applied to traced ops (bundled catalog)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.checker.check import check
from opcheck.checker.restrictions import restriction_lookup
from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.catalog import Catalog
from opcheck.db.engine import open_catalog


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(open_catalog(bundled_catalog))


def _report(cat: Catalog, ops: list[OpUse], hardware: str | None = None) -> dict[str, object]:
    target = cat.release("2.13.0")
    oplist = OpList(model="m", method="runtime", ir="runtime-dispatch", ops=ops)
    rep = check(cat, oplist, target, restrictions=restriction_lookup(cat, hardware))
    return {"verdict": rep.verdict, **{f.op: f for f in rep.ops}}


def test_float64_cholesky_is_restricted_with_the_doc_link(cat: Catalog) -> None:
    # master docs for torch 2.13: torch.linalg.cholesky supports fp32 only, on every product.
    rep = _report(cat, [OpUse("aten::linalg_cholesky", 1, ["float64"])])
    f = rep["aten::linalg_cholesky"]
    assert rep["verdict"] == "MAYBE"
    assert f.restricted  # type: ignore[attr-defined]
    r = next(r for r in f.restrictions if r.violated)  # type: ignore[attr-defined]
    assert r.api == "torch.linalg.cholesky" and r.dtypes_seen_outside == ("fp64",)
    assert r.link.startswith("https://github.com/Ascend/pytorch/blob/master/docs/") and "#L" in r.link


def test_float32_cholesky_is_within_the_documented_dtypes(cat: Catalog) -> None:
    ok = _report(cat, [OpUse("aten::linalg_cholesky", 1, ["float32"])])
    assert ok["verdict"] == "YES" and not ok["aten::linalg_cholesky"].restricted  # type: ignore[attr-defined]


AMINMAX = [OpUse("aten::aminmax", 1, ["float32"])]
# The 2.13 docs mark torch.aminmax and Tensor.aminmax ✘ on Ascend 950DT, ✔ on Atlas A2/A3.


def test_hardware_without_support_restricts_the_op(cat: Catalog) -> None:
    dt = _report(cat, AMINMAX, hardware="950DT")
    f = dt["aten::aminmax"]
    assert dt["verdict"] == "MAYBE" and f.restricted  # type: ignore[attr-defined]
    assert {r.api for r in f.restrictions if r.unsupported} == {"torch.aminmax", "Tensor.aminmax"}  # type: ignore[attr-defined]


def test_hardware_with_support_does_not(cat: Catalog) -> None:
    a2 = _report(cat, AMINMAX, hardware="A2")
    assert a2["verdict"] == "YES" and not a2["aten::aminmax"].restricted  # type: ignore[attr-defined]


def test_without_hardware_a_product_specific_gap_is_no_finding(cat: Catalog) -> None:
    # A2 and A3 run it.
    assert not _report(cat, AMINMAX)["aten::aminmax"].restricted  # type: ignore[attr-defined]


def test_unknown_hardware_is_a_usage_error(cat: Catalog) -> None:
    with pytest.raises(UsageError, match="no hardware product matches"):
        restriction_lookup(cat, "H100")
