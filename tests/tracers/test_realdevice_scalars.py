"""The real-data ``npu`` device on the scalar paths vision towers take (qwen2_vl's
get_rope_index, Qwen3-VL's position interpolation): a tensor built from a list of device
scalars, and a device tensor modulo a Python number, run and are recorded."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")


def test_a_list_of_device_scalars_and_a_modulo_by_a_number_run_on_the_device() -> None:
    from opcheck.tracers import realdevice
    from opcheck.tracers.device import DEVICE
    from opcheck.tracers.recorder import Recorder

    realdevice.install()
    rec = Recorder()
    tensor_fn = torch.tensor
    with realdevice.Session(rec).active():
        x = torch.arange(8, device=DEVICE)
        top = x.max() + 1
        made = torch.tensor([top, top - 2], device=DEVICE)
        mod = x % 3
        floor = x.float() % 2.5
    assert made.device.type == DEVICE and made.cpu().tolist() == [8, 6]
    assert mod.cpu().tolist() == [0, 1, 2, 0, 1, 2, 0, 1]
    assert floor.cpu().tolist() == [0.0, 1.0, 2.0, 0.5, 1.5, 0.0, 1.0, 2.0]
    assert "aten::remainder.Scalar" in {u.op for u in rec.sorted_ops()}
    assert torch.tensor is tensor_fn  # the session gives torch.tensor back
