"""The fake-PrivateUse1 runtime trace, in process (fast) and through the sandbox (api)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.core.errors import TraceError
from opcheck.core.oplist import OpList
from opcheck.tracers import api
from opcheck.tracers.inputs import InputSpec, TensorSpec, parse_input_spec

torch = pytest.importorskip("torch")

from opcheck.tracers import runtime  # noqa: E402

TESTS = TESTS
ZOO = TESTS / "models" / "zoo.py"
FIX = TESTS / "fixtures" / "tracers"
sys.path.insert(0, str(TESTS))

from models import zoo  # noqa: E402


def _trace(name: str, train: bool = False, inputs: InputSpec | None = None) -> OpList:
    factory = getattr(zoo, name)
    with torch.device("meta"):
        model, args = factory()
    return runtime.trace_module(
        model, inputs or InputSpec(), example_args=args, train=train, label=name
    )


def test_conv_net_inference_ops_modules_locations() -> None:
    ol = _trace("conv_net")
    ops = ol.by_op()
    assert ol.ir == "runtime-dispatch" and ol.mode == "inference"
    assert ol.torch_version == torch.__version__.split("+")[0]
    # CompositeImplicit ops (conv2d, linear, batch_norm) arrive decomposed
    assert {"aten::convolution", "aten::native_batch_norm", "aten::addmm"} <= set(ops)
    assert "aten::conv2d" not in ops and "aten::linear" not in ops
    assert ops["aten::convolution"].count == 2
    assert set(ops["aten::convolution"].modules) == {"conv1", "conv2"}
    assert ops["aten::convolution"].shapes[0] == [2, 3, 16, 16]
    assert ops["aten::convolution"].dtypes == ["float32"]
    assert any(loc.endswith("zoo.py:24") for loc in ops["aten::convolution"].locations)
    assert not any(o.startswith("prim::") for o in ops)


def test_train_adds_backward_and_optimizer_ops() -> None:
    inf = set(_trace("dropout").by_op())
    tr = _trace("dropout", train=True)
    ops = set(tr.by_op())
    assert "aten::native_dropout" in ops and "aten::native_dropout" not in inf
    assert {"aten::native_dropout_backward", "aten::tanh_backward"} <= ops
    assert any(o.startswith("aten::_foreach_") for o in ops)  # AdamW step on a foreach device
    assert tr.mode == "train"
    assert "backward" in tr.by_op()["aten::tanh_backward"].modules


def test_device_dependent_decompositions() -> None:
    # PrivateUse1 takes the fused LSTM cell, a CPU trace would not
    assert "aten::_thnn_fused_lstm_cell" in _trace("lstm").by_op()
    # the TransformerEncoderLayer fast path must survive the tracer's module tracking
    assert "aten::_transformer_encoder_layer_fwd" in _trace("transformer").by_op()


def test_input_spec_overrides_examples() -> None:
    ol = _trace("conv_net", inputs=parse_input_spec("1,3,32,32:float32"))
    conv = ol.by_op()["aten::convolution"]
    assert conv.shapes[0] == [1, 3, 32, 32] and conv.dtypes == ["float32"]


def test_boolean_masking_is_symbolic_with_a_note() -> None:
    ol = _trace("masking")
    assert "aten::index.Tensor" in ol.by_op()
    assert any("data-dependent output shapes" in n for n in ol.notes)


def test_data_dependent_branch_names_the_line() -> None:
    with pytest.raises(runtime.PartialTrace) as err:
        _trace("branch")
    assert "zoo.py:99" in str(err.value) and "data-dependent" in str(err.value)
    assert "aten::addmm" in err.value.partial.by_op()


def test_no_inputs_is_an_error() -> None:
    with torch.device("meta"):
        model = torch.nn.Linear(2, 2)
    with pytest.raises(TraceError, match="input-shape"):
        runtime.trace_module(model, InputSpec())


# ------------------------------------------------------------------ through api + sandbox


def test_api_model_code_in_sandbox_matches_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    ol = api.trace(None, model_spec=f"{ZOO}:conv_net", timeout=120)
    assert set(ol.by_op()) == set(_trace("conv_net").by_op())
    assert ol.method == "runtime"
    # a module path resolves against the caller's directory; input shapes from the CLI option
    monkeypatch.chdir(TESTS)
    ol2 = api.trace(
        None,
        model_spec="models.zoo:ConvNet",
        inputs=InputSpec((TensorSpec((1, 3, 8, 8)),)),
        timeout=120,
    )
    assert ol2.by_op()["aten::convolution"].shapes[0] == [1, 3, 8, 8]
    assert "models/zoo.py:24" in ol2.by_op()["aten::convolution"].locations


def test_api_branch_is_marked_incomplete_where_it_stopped() -> None:
    ol = api.trace(None, model_spec=f"{ZOO}:branch", timeout=120)
    assert not ol.complete
    assert ol.stopped.startswith("data-dependent control flow at")
    assert "zoo.py:99" in ol.stopped


def test_api_pickled_module_with_trust_and_pt2_runtime() -> None:
    ol = api.trace(FIX / "module_pickled.pt", trust=True, inputs=InputSpec((TensorSpec((3, 4)),)))
    assert {"aten::addmm", "aten::relu"} <= set(ol.by_op())
    rt = api.trace(FIX / "export_small.pt2", trust=True, timeout=120)
    assert rt.method == "runtime" and rt.ir == "runtime-dispatch"
    # the runtime list has the decomposition the static (pre-dispatch) one does not
    assert "aten::addmm" in rt.by_op() and "aten::linear" not in rt.by_op()


def _write(tmp_path: Path, body: str) -> str:
    f = tmp_path / "m.py"
    f.write_text(body)
    return f"{f}:make"


def test_sandbox_timeout_oom_crash(tmp_path: Path) -> None:
    spec = _write(tmp_path, "import time\ndef make():\n    time.sleep(60)\n")
    with pytest.raises(TraceError, match="timed out"):
        api.trace(None, model_spec=spec, timeout=8)
    spec = _write(tmp_path, "def make():\n    return bytearray(8 * 1024**3)\n")
    with pytest.raises(TraceError, match="out of memory"):
        api.trace(None, model_spec=spec, timeout=120, memory_mb=3000)
    spec = _write(tmp_path, "import os\ndef make():\n    os.abort()\n")
    with pytest.raises(TraceError, match="crashed"):
        api.trace(None, model_spec=spec, timeout=120)


def test_bad_model_specs() -> None:
    with pytest.raises(TraceError, match=r"expected pkg\.module"):
        api.trace(None, model_spec="nocolon", timeout=60)
    with pytest.raises(TraceError, match="has no attribute"):
        api.trace(None, model_spec=f"{ZOO}:missing", timeout=60)


def test_api_pt2_control_flow_falls_back_to_static_listing() -> None:
    ol = api.trace(FIX / "export_cond.pt2", trust=True, timeout=120)
    assert ol.method == "static-export"
    assert ol.notes[0].startswith("runtime trace incomplete: data-dependent control flow")
    assert "cond" in ol.notes[0]
    assert {"aten::sin", "aten::cos"} <= set(ol.by_op())


def test_model_file_with_a_module_instance_and_a_main_block(tmp_path: Path) -> None:
    marker = tmp_path / "main-ran"
    f = tmp_path / "script.py"
    f.write_text(
        "import torch\n"
        "model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.ReLU())\n"
        "def make():\n"
        "    return model, (torch.empty(2, 4),)\n"
        "if __name__ == '__main__':\n"
        f"    open({str(marker)!r}, 'w').write('trained')\n"
    )
    inputs = InputSpec((TensorSpec((2, 4)),))
    ol = api.trace(None, model_spec=f"{f}:model", inputs=inputs, timeout=120)
    assert {"aten::addmm", "aten::relu"} <= set(ol.by_op())
    assert ol.by_op()["aten::addmm"].shapes[0] == [3]  # bias first: addmm(bias, x, w.t())
    assert ol.by_op()["aten::relu"].shapes[0] == [2, 3]
    # the same file through its factory; the __main__ block never ran
    assert set(api.trace(None, model_spec=f"{f}:make", timeout=120).by_op()) == set(ol.by_op())
    assert not marker.exists()
    # an instance needs inputs like a class does
    with pytest.raises(TraceError, match="input-shape"):
        api.trace(None, model_spec=f"{f}:model", timeout=120)
