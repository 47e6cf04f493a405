"""Trace fidelity end to end: traced on the fake NPU, checked against the bundled catalog, as
`opcheck --model` does (issue: restrictions keyed on the API called, composite levels, never
YES on an incomplete trace)."""

from __future__ import annotations

from pathlib import Path

import pytest
from testpaths import MODELS

from opcheck.checker.check import Report, check
from opcheck.checker.restrictions import restriction_lookup
from opcheck.core.oplist import OpList
from opcheck.core.vocab import Status, Verdict
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.tracers.api import trace
from opcheck.tracers.composites import composites_with_kernels

pytestmark = pytest.mark.torch
FILE = MODELS / "fidelity_models.py"


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


@pytest.fixture(scope="module")
def traced(cat: Catalog) -> dict[str, OpList]:
    pytest.importorskip("torch")
    from opcheck.tracers import sandbox

    watch = composites_with_kernels(cat)
    # five traces forked from one template that imported torch once (as `opcheck zoo` runs
    # several), not five fresh workers importing it each
    with sandbox.shared_imports():
        return {name: trace(None, model_spec=f"{FILE}:{name}", composites=watch, timeout=120)
                for name in ("pool3d", "embed", "cast_bf16", "lstsq", "linalg_mix")}


def _report(cat: Catalog, ol: OpList, release: str) -> Report:
    return check(cat, ol, cat.release(release), restrictions=restriction_lookup(cat, None))


def test_max_pool3d_in_float64_is_restricted_by_the_api_called(
        cat: Catalog, traced: dict[str, OpList]) -> None:
    rep = _report(cat, traced["pool3d"], "2.7.1.post2")
    pool = {f.op: f for f in rep.ops}["aten::max_pool3d_with_indices"]
    hits = [r for r in pool.restrictions if r.violated]
    assert pool.restricted and {r.api for r in hits} == {"torch.nn.functional.max_pool3d"}
    assert all(r.dtypes_seen_outside == ("fp64",) and not r.inferred for r in hits)


def test_an_embedding_with_float_weights_is_not_restricted(
        cat: Catalog, traced: dict[str, OpList]) -> None:
    rep = _report(cat, traced["embed"], "2.6.0.post5")
    assert not any(f.restricted for f in rep.ops), [
        (f.op, f.restrictions) for f in rep.ops if f.restricted]
    assert rep.verdict is Verdict.YES


def test_a_cast_to_bfloat16_is_checked_as_that_cast(
        cat: Catalog, traced: dict[str, OpList]) -> None:
    sigs = [s for u in traced["cast_bf16"].ops for s in u.signatures if "Tensor.to" in s.apis]
    assert sigs and all(s.dtype == "bfloat16" for s in sigs)
    # the torch_npu 2.6.0 docs list Tensor.to without bf16; 2.7.1 lists it
    assert any(f.restricted for f in _report(cat, traced["cast_bf16"], "2.6.0.post5").ops)
    assert not any(f.restricted for f in _report(cat, traced["cast_bf16"], "2.7.1.post2").ops)


def test_a_trace_stopped_by_lstsq_is_never_yes(cat: Catalog,
                                                traced: dict[str, OpList]) -> None:
    ol = traced["lstsq"]
    assert not ol.complete and "lstsq" in ol.stopped
    for release in ("2.1.0.post10", "2.7.1.post2", "2.13.0"):
        rep = _report(cat, ol, release)
        assert rep.verdict in (Verdict.INCOMPLETE, Verdict.NO), release
        assert "aten::linalg_lstsq" in {f.op for f in rep.ops}


def test_slogdet_inverse_repeat_interleave_reach_the_npu_whole(
        cat: Catalog, traced: dict[str, OpList]) -> None:
    rep = _report(cat, traced["linalg_mix"], "2.7.1.post2")
    ops = {f.op: f for f in rep.ops}
    assert {"aten::slogdet", "aten::inverse", "aten::repeat_interleave.self_int"} <= set(ops)
    assert not {"aten::_linalg_slogdet", "aten::linalg_inv_ex"} & set(ops)
    assert all(f.status is Status.NPU for f in rep.ops) and rep.verdict is Verdict.YES
