"""op-plugin's per-call fallbacks in its foreach kernels: after the SoC check, a call whose
tensor lists cannot take the fused route (``can_use_fast_route``) or hold integer tensors
(``has_integral_tensor``) runs PyTorch's per-tensor path. Parsed into ``call:`` conditions."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.scrapers import kernel_path as kp
from opcheck.scrapers.rows import Origin

# Hand-written in the shape of op-plugin's foreach kernels (a SoC check, a CANN probe, then the
# per-call checks); a jit-setting condition is not about the call and is not kept.
KERNEL = """
namespace op_api {
void _foreach_foo_(at::TensorList self, at::TensorList other, const at::Scalar& alpha)
{
    static const bool ok = c10_npu::GetSocVersion() >= c10_npu::SocVersion::Ascend910B1;
    if (!ok) {
        return at::native::foreach_tensor_foo_slow_(self, other, alpha);
    }
    if (!at_npu::native::env::CheckJitDisable() || !at::native::can_use_fast_route({self, other}, alpha)) {
        return at::native::foreach_tensor_foo_slow_(self, other, alpha);
    }
    if (!at::native::can_use_fast_route({self, other}, alpha) ||
        at::native::has_integral_tensor(other, true)) {
        return at::native::foreach_tensor_foo_slow_(self, other, alpha);
    }
    EXEC_NPU_CMD(aclnnForeachFoo, self, other, alpha, self);
}
}
"""


def test_call_conditions_name_the_list_they_read() -> None:
    checks = kp.parse_call_checks(KERNEL, origin=Origin("ForeachFoo.cpp"))
    assert [(c.function, c.when, c.fallback) for c in checks] == [
        ("_foreach_foo_", "call:!fast_route||integral_or_bool@1",
         "at::native::foreach_tensor_foo_slow_")]
    assert KERNEL.splitlines()[checks[0].line - 1].strip().startswith("if (!at::native::can_use")
    # the SoC check is still read as one, and is not mistaken for a per-call condition
    socs = kp.parse_soc_checks(KERNEL, origin=Origin("ForeachFoo.cpp"))
    assert [c.when for c in socs] == ["!(soc>=Ascend910B1)"]


@pytest.mark.upstream
def test_real_foreach_kernels_at_a_pin(upstream: Path) -> None:
    ops = upstream / "github/Ascend/op-plugin/8b9c8534fa41eff367a41c155843daa530ab3a08/op_plugin/ops/opapi"
    text = (ops / "ForeachAddcdivScalarKernelNpuOpApi.cpp").read_text(encoding="utf-8")
    checks = kp.parse_call_checks(text, origin=Origin("ForeachAddcdivScalarKernelNpuOpApi.cpp"))
    # the v1 fallbacks test jit compile too (not about the call): only the two kernels' checks
    assert {c.function for c in checks} == {"_foreach_addcdiv", "_foreach_addcdiv_"}
    lines = text.splitlines()
    for c in checks:
        window = " ".join(lines[c.line - 1:c.line + 1])
        assert "can_use_fast_route" in window and "has_integral_tensor(" in window
        assert c.when == "call:!fast_route||integral_or_bool@0"
        assert c.fallback.startswith("at::native::foreach_tensor_addcdiv_scalar_slow")
    # the ScalarList kernel has no fused route at all: no per-call condition, one SoC-free
    # fallback (kept by parse_soc_checks with when "")
    text = (ops / "ForeachAddcdivScalarListKernelNpuOpApi.cpp").read_text(encoding="utf-8")
    assert kp.parse_call_checks(text, origin=Origin("x")) == ()
    assert {c.when for c in kp.parse_soc_checks(text, origin=Origin("x"))} == {""}
    assert "EXEC_NPU_CMD" not in text
