"""The real-data ``npu`` device on the scalar paths vision towers take (qwen2_vl's
get_rope_index, Qwen3-VL's position interpolation): a tensor built from a list of device
scalars, indices made of tuples of device scalars (``zip(*t)``), and a device tensor modulo a
Python number, run and are recorded.

One subprocess: the device takes PrivateUse1 for the process, and a fake-tensor trace run
earlier in the same pytest process leaves its own kernels on that key."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__)


def _main() -> None:
    import torch

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
        # indices from zip(*t): tuples of 0-dim device tensors, read on the host (udop)
        pts = torch.tensor([[1, 2], [0, 3]], device=DEVICE)
        rows, cols = zip(*pts, strict=True)
        grid = torch.ones(2, 4, device=DEVICE)
        grid[rows, cols] = 0.0
        as_t = torch.as_tensor(rows, device=DEVICE)
    print(json.dumps({
        "device": made.device.type == DEVICE, "made": made.cpu().tolist(),
        "mod": mod.cpu().tolist(), "floor": floor.cpu().tolist(),
        "grid": grid.cpu().tolist(), "as_t": as_t.cpu().tolist(),
        "ops": sorted({u.op for u in rec.sorted_ops()}),
        "tensor_back": torch.tensor is tensor_fn,  # the session gives torch.tensor back
    }))


def test_a_list_of_device_scalars_and_a_modulo_by_a_number_run_on_the_device() -> None:
    pytest.importorskip("torch")
    proc = subprocess.run([sys.executable, str(HERE)], capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert out["device"] and out["made"] == [8, 6]
    assert out["mod"] == [0, 1, 2, 0, 1, 2, 0, 1]
    assert out["floor"] == [0.0, 1.0, 2.0, 0.5, 1.5, 0.0, 1.0, 2.0]
    assert "aten::remainder.Scalar" in out["ops"]
    assert out["grid"] == [[1.0, 1.0, 1.0, 0.0], [1.0, 1.0, 0.0, 1.0]] and out["as_t"] == [1, 0]
    assert "aten::_local_scalar_dense" in out["ops"]  # the host reads, recorded
    assert out["tensor_back"]


if __name__ == "__main__":
    _main()
