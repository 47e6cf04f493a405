"""Crash-proof recording: the worker streams records, so a dead trace still lists its ops.

Also: an incomplete trace says so in the document (``complete: false`` and ``stopped``), and the
parent passes the catalog's CIA ops to the worker (two-level records through the sandbox).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from opcheck.core.oplist import OpList
from opcheck.tracers import api, sandbox

pytest.importorskip("torch")

HEAD = """
import os, time
import torch

class M(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = torch.inverse(self.proj(x)).relu()
        {stop}
        return y

def make():
    return M(), (torch.empty(4, 4),)
"""


def _model(tmp_path: Path, stop: str, name: str = "m.py") -> str:
    f = tmp_path / name
    f.write_text(HEAD.replace("{stop}", stop))
    return f"{f}:make"


def test_crash_keeps_the_ops_seen_so_far(tmp_path: Path) -> None:
    ol = api.trace(None, model_spec=_model(tmp_path, "os.abort()"), timeout=120)
    assert not ol.complete
    # where it died (faulthandler's stack) and the last op recorded before (the stream)
    assert ol.stopped.startswith("tracer worker crashed (SIGABRT) in m.py:12 (forward); "
                                 "stopped during forward after aten::relu (M, ")  # fmt: skip
    assert ol.stopped.endswith("m.py:11)")
    assert "counts are not final" in ol.notes[0]
    assert {"aten::addmm", "aten::relu", "aten::linalg_inv_ex"} <= set(ol.by_op())
    # the two levels survive the crash too
    assert [u.op for u in ol.composites()] == ["aten::inverse"]
    # the partial list is a valid document, marked incomplete
    again = OpList.from_json(json.loads(ol.dumps()))
    assert not again.complete and again.stopped == ol.stopped


def test_timeout_keeps_the_ops_seen_so_far(tmp_path: Path) -> None:
    ol = api.trace(None, model_spec=_model(tmp_path, "time.sleep(120)"), timeout=15)
    assert not ol.complete and ol.stopped.startswith("tracing timed out after 15 s")
    assert "aten::relu" in ol.by_op()


def test_nothing_recorded_is_still_an_error(tmp_path: Path) -> None:
    from opcheck.core.errors import TraceError

    f = tmp_path / "early.py"
    f.write_text("import os\ndef make():\n    os.abort()\n")
    with pytest.raises(TraceError, match="crashed"):
        api.trace(None, model_spec=f"{f}:make", timeout=120)


def test_read_stream_skips_a_cut_line(tmp_path: Path) -> None:
    f = tmp_path / "records.jsonl"
    lines = [
        {"op": "aten::addmm", "via": [], "composite": False, "modules": ["proj"],
         "locations": ["m.py:3"], "dtypes": ["float32"], "shapes": [[4, 4]]},
        {"phase": "backward"},
        {"op": "aten::mm", "via": [], "composite": False, "modules": ["backward"],
         "locations": [], "dtypes": ["float32"], "shapes": [[4, 4]]},
    ]  # fmt: skip
    f.write_text("".join(json.dumps(x) + "\n" for x in lines) + '{"op": "aten::t", "vi')
    doc = sandbox.read_stream(f, label="m")
    assert doc is not None
    ol = OpList.from_json(doc)
    assert [u.op for u in ol.ops] == ["aten::addmm", "aten::mm"]
    assert not ol.complete and ol.stopped == "stopped during backward after aten::mm (backward)"
    assert sandbox.read_stream(tmp_path / "missing.jsonl") is None


def test_data_dependent_stop_is_incomplete_and_names_the_op(tmp_path: Path) -> None:
    f = tmp_path / "lstsq.py"
    f.write_text(
        "import torch\n"
        "class L(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        y = self.proj(x)\n"
        "        return torch.linalg.lstsq(y, y).solution.relu()\n"
        "def make():\n"
        "    return L(), (torch.empty(4, 4),)\n"
    )
    ol = api.trace(None, model_spec=f"{f}:make", timeout=120)
    assert not ol.complete
    assert ol.stopped.startswith("data-dependent control flow at")
    assert "lstsq.py:8" in ol.stopped and "linalg_lstsq" in ol.stopped
    assert "aten::linalg_lstsq" in ol.by_op()  # the op it stopped at is listed
    assert "aten::relu" not in ol.by_op()


def test_train_through_the_sandbox_finishes_cleanly(tmp_path: Path) -> None:
    # interpreter teardown after a backward used to abort the worker at random
    spec = _model(tmp_path, "")
    for _ in range(2):
        ol = api.trace(None, model_spec=spec, train=True, timeout=120)
        assert ol.complete and "aten::linalg_inv_ex" in ol.by_op()
        assert any(o.startswith("aten::_foreach_") for o in ol.by_op())


def test_abort_in_backward_keeps_forward_and_says_backward(tmp_path: Path) -> None:
    f = tmp_path / "bw.py"
    f.write_text(
        "import os\n"
        "import torch\n"
        "class Die(torch.autograd.Function):\n"
        "    @staticmethod\n"
        "    def forward(ctx, x):\n"
        "        return x * 2\n"
        "    @staticmethod\n"
        "    def backward(ctx, g):\n"
        "        os.abort()  # what std::terminate on the engine's device thread does\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.proj = torch.nn.Linear(4, 4)\n"
        "    def forward(self, x):\n"
        "        return Die.apply(self.proj(x).tanh())\n"
        "def make():\n"
        "    return M(), (torch.empty(2, 4),)\n"
    )
    ol = api.trace(None, model_spec=f"{f}:make", train=True, timeout=120)
    assert not ol.complete and ol.mode == "train"
    assert ol.stopped.startswith("tracer worker crashed (SIGABRT)")
    assert "stopped during backward" in ol.stopped
    assert {"aten::addmm", "aten::tanh", "aten::mul.Tensor"} <= set(ol.by_op())
    # faulthandler's dump of the crashing thread names the user's line
    assert ol.stopped.startswith("tracer worker crashed (SIGABRT) in bw.py:9 (backward)")
