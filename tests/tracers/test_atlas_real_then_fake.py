"""A fake-tensor trace after a real-data recording in the same process (the atlas's text-path
retry after its real-data fallback): the real-data device's kernels are gone, so fake ``npu``
tensors no longer loop through them until the recursion limit (issue 36, session 11)."""

from __future__ import annotations

import pytest

from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")

from opcheck.tracers import atlas_trace, runtime  # noqa: E402


def test_a_fake_trace_runs_after_a_real_data_recording() -> None:
    lin = torch.nn.Linear(4, 4)
    for _ in range(2):  # installed again after each recording's uninstall
        real = atlas_trace.record_real(lin, (torch.randn(2, 4),), {}, train=False, label="r")
        assert "aten::addmm" in {u.op for u in real.ops}
    with torch.device("meta"):
        model, x = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.ReLU()), torch.randn(2, 4)
    fake = runtime.trace_module(model, InputSpec(), example_args=(x,), label="f")
    assert {"aten::addmm", "aten::relu"} <= {u.op for u in fake.ops}
