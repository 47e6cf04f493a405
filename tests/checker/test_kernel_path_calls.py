"""Per-call foreach fallbacks (op-plugin's ``can_use_fast_route`` / ``has_integral_tensor``
checks after its SoC check): decided on each recorded call's dtypes, on a small catalog."""

from __future__ import annotations

import pytest
from catalog_fixture import small_catalog

from opcheck.checker.kernel_path import (
    ACLNN,
    FOREACH_SLOW,
    Decision,
    KernelPaths,
    call_falls_back,
)
from opcheck.core.oplist import OpUse, Signature
from opcheck.core.vocab import Status
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import KernelPathRuleRec, KernelSocCheckRec
from opcheck.db.engine import make_engine

REL = "2.6.0.post5"
OP = "aten::_foreach_add_.Scalar"
WHEN = "call:!fast_route||integral_or_bool@0"


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> KernelPaths:
    d = small_catalog()
    d.kernel_path_rules = [KernelPathRuleRec(REL, tag="v7.3.0-pytorch2.6.0", jit_kind="soc",
                                             jit_condition="soc>=Ascend910B1",
                                             socs="Ascend910A=1,Ascend910B1=5")]
    d.kernel_soc_checks = [
        KernelSocCheckRec(OP, "_foreach_add_", "!(soc>=Ascend910B1)",
                          "at::native::foreach_tensor_add_scalar_kernel_slow_", releases=REL,
                          path="ForeachAddScalarKernelNpuOpApi.cpp", line=120),
        KernelSocCheckRec(OP, "_foreach_add_", WHEN,
                          "at::native::foreach_tensor_add_scalar_kernel_slow_", releases=REL,
                          path="ForeachAddScalarKernelNpuOpApi.cpp", line=126)]
    path = write_catalog(d, tmp_path_factory.mktemp("kcalls") / "c.sqlite")
    return KernelPaths(Catalog.load(make_engine(path)))


@pytest.mark.parametrize(("inputs", "slow"), [
    ({"self": "float32"}, ""),
    ({"self": "int64"}, "self holds int64"),
    ({"self": "bool"}, "self holds bool"),
    ({"self": "float32", "other": "float16"}, "mix dtypes"),
    ({"self": "float16,float32"}, "mix dtypes"),
])
def test_call_condition_on_recorded_dtypes(inputs: dict[str, str], slow: str) -> None:
    got = call_falls_back(WHEN, Signature(inputs))
    assert (slow in got) if slow else got == ""
    # bool counts only where the kernel passes include_bool=true
    assert call_falls_back("call:integral@0", Signature({"self": "bool"})) == ""


def _use(*dtypes: str) -> OpUse:
    return OpUse(OP, count=2 * len(dtypes),
                 signatures=[Signature({"self": d}, count=2) for d in dtypes])


def test_every_call_slow_moves_the_path(paths: KernelPaths) -> None:
    release = paths.cat.release(REL)
    base = Decision("910B", ACLNN, "only an op_api kernel")
    d, note = paths.per_call(_use("int64"), release, base)
    assert d.path == FOREACH_SLOW and note is None
    assert "ForeachAddScalarKernelNpuOpApi.cpp:126" in d.why and "has_integral_tensor" in d.why
    # float32 lists take the fused kernel: the decision is unchanged
    assert paths.per_call(_use("float32"), release, base) == (base, None)


def test_some_calls_slow_is_a_note(paths: KernelPaths) -> None:
    release = paths.cat.release(REL)
    base = Decision("910B", ACLNN, "only an op_api kernel")
    d, note = paths.per_call(_use("float32", "int32"), release, base)
    assert d == base and note is not None and note.slow and note.hardware == "910B"
    assert "2 of the calls" in note.text and "self=int32" in note.text
    # on a product where the SoC check already sends every call to the slow path, the per-call
    # check is not asked (its base decision is not aclnn)
    soc = paths.decide(OP, Status.NPU, "aclnn", release, "910A")
    assert soc.path == FOREACH_SLOW and "ForeachAddScalarKernelNpuOpApi.cpp:120" in soc.why
