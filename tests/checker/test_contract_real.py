"""The aclnn contract on the bundled catalog, for the failures users report (issue 15):
traced on the fake NPU and checked as `opcheck --model ... --hardware P` does."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from testpaths import MODELS

from opcheck.checker.check import Finding, Report, Restriction, check
from opcheck.checker.restrictions import all_restrictions
from opcheck.core.oplist import OpList
from opcheck.core.vocab import Verdict
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.tracers.composites import composites_with_kernels

pytestmark = pytest.mark.torch
sys.path.insert(0, str(MODELS))


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


@pytest.fixture(scope="module")
def traced(cat: Catalog) -> dict[str, OpList]:
    pytest.importorskip("torch")
    import contract_models

    from opcheck.tracers.inputs import InputSpec
    from opcheck.tracers.runtime import trace_module

    watch = composites_with_kernels(cat)
    out = {}
    for name in ("cast_bf16", "repeat_double", "repeat_float", "index_complex"):
        model, args = getattr(contract_models, name)()  # in process: tiny models, no sandbox
        out[name] = trace_module(model, InputSpec(), example_args=args, composites=watch,
                                 label=name)
    return out


def _report(cat: Catalog, ol: OpList, release: str, hardware: str | None) -> Report:
    return check(cat, ol, cat.release(release), restrictions=all_restrictions(cat, hardware))


def _cann(f: Finding) -> list[Restriction]:
    return [r for r in f.restrictions if r.source == "cann" and r.violated]


@pytest.mark.parametrize(("release", "product"), [("2.1.0.post4", "910A"),
                                                  ("2.1.0.post6", "310P")])
def test_bf16_cast_fails_on_910a_and_310p(cat: Catalog, traced: dict[str, OpList],
                                          release: str, product: str) -> None:
    rep = _report(cat, traced["cast_bf16"], release, product)
    [f] = [f for f in rep.ops if _cann(f)]
    [r] = _cann(f)
    assert (r.api, r.products_failing, r.dtypes_seen_outside) == ("aclnnCast", (product,),
                                                                   ("BFLOAT16",))
    assert "/aclnnCast.md#L" in r.link and r.inferred  # CANN 8.0.x predates the open docs
    assert "inferred from CANN" in r.text and rep.verdict is Verdict.MAYBE


def test_bf16_cast_is_fine_on_a2(cat: Catalog, traced: dict[str, OpList]) -> None:
    rep = _report(cat, traced["cast_bf16"], "2.1.0.post4", "A2")
    assert not any(f.restricted for f in rep.ops)
    accepted = [r for f in rep.ops for r in f.restrictions if r.source == "cann"]
    assert accepted and accepted[0].products_fine == ("910B",)
    assert rep.verdict is Verdict.YES


def test_repeat_interleave_has_no_double(cat: Catalog, traced: dict[str, OpList]) -> None:
    rep = _report(cat, traced["repeat_double"], "2.7.1.post2", None)
    f = next(f for f in rep.ops if f.op == "aten::repeat_interleave.self_int")
    hits = _cann(f)
    assert hits and all(r.api.startswith("aclnnRepeatInterleave") for r in hits)
    assert {r.dtypes_seen_outside for r in hits} == {("DOUBLE",)}
    assert f.restricted and rep.verdict is Verdict.MAYBE
    # float32: accepted by the same functions
    ok = _report(cat, traced["repeat_float"], "2.7.1.post2", None)
    assert not any(_cann(f) for f in ok.ops)


def test_index_rejects_complex64_on_2_10_0(cat: Catalog, traced: dict[str, OpList]) -> None:
    rep = _report(cat, traced["index_complex"], "2.10.0", None)
    f = next(f for f in rep.ops if f.op == "aten::index.Tensor")
    [r] = _cann(f)
    assert (r.api, r.param, r.dtypes_seen_outside) == ("aclnnIndex", "self", ("COMPLEX64",))
    assert {"910B", "910C"} <= set(r.products_failing) and not r.inferred
