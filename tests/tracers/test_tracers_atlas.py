"""The atlas's builders and trace (tracers/atlas_*.py): every transformers model type listed,
architectures of different kinds built from their configs and traced in the sandbox, the
real-data recorder taking over where fake tensors meet code that wants real values, and a
model that cannot be built saying why in one line."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from opcheck.core.errors import TraceError
from opcheck.core.oplist import RECORDER_FAKE, RECORDER_REAL, OpList
from opcheck.tracers import atlas_build

pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def test_listing_is_every_model_type_once_as_json() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "opcheck.tracers.atlas_build", "list", "transformers"],
        capture_output=True, text=True, check=True, timeout=300,
    )  # fmt: skip
    doc = json.loads(done.stdout)
    rows = doc["architectures"]
    names = [r["name"] for r in rows]
    from transformers.models.auto import modeling_auto as m

    expected = {t for a in dir(m) if a.startswith("MODEL_") and a.endswith("_MAPPING_NAMES")
                for t in getattr(m, a)}  # fmt: skip
    assert doc["version"] == transformers.__version__
    assert len(names) == len(set(names)) and set(names) == expected
    by_name = {r["name"]: r for r in rows}
    assert by_name["llama"]["model_class"] == "LlamaForCausalLM"
    assert by_name["llama"]["task"] == "causal-lm"
    assert by_name["t5"]["task"] == "seq2seq"
    assert by_name["vit"]["task"] == "vision"
    assert {"causal-lm", "seq2seq", "masked-lm", "vision", "audio", "multimodal"} <= {
        r["task"] for r in rows
    }


def test_listing_a_library_that_is_not_there_is_one_line() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "opcheck.tracers.atlas_build", "list", "nosuchlib"],
        capture_output=True, text=True, check=False, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert "Traceback" not in done.stderr and len(done.stderr.strip().splitlines()) == 1


def test_bad_specs_are_one_line_errors() -> None:
    with pytest.raises(TraceError, match="atlas:LIBRARY/NAME"):
        atlas_build.parse_spec("atlas:llama")
    with pytest.raises(atlas_build.ModelSkip, match="not a transformers model type"):
        atlas_build.build("transformers", "no_such_model_type")


def test_configs_are_small_and_inputs_follow_the_config() -> None:
    model, _args, kwargs = atlas_build.build("transformers", "qwen3")
    cfg = model.config
    assert cfg.num_hidden_layers == 2 and len(cfg.layer_types) == 2
    assert next(model.parameters()).device.type == "meta"
    assert kwargs["input_ids"].shape == (1, 8) and kwargs["use_cache"] is False
    vit, _, vkw = atlas_build.build("transformers", "vit", real=True)
    c = vit.config
    assert vkw["pixel_values"].shape == (1, c.num_channels, c.image_size, c.image_size)
    assert next(vit.parameters()).device.type == "cpu"
    _, _, wkw = atlas_build.build("transformers", "whisper")
    assert {"input_features", "decoder_input_ids"} <= set(wkw)


def _trace(name: str) -> OpList:
    from opcheck.tracers import api

    return api.trace(None, model_spec=f"atlas:transformers/{name}", timeout=240)


@pytest.mark.parametrize(
    ("name", "expected"),
    [("llama", "aten::embedding"), ("t5", "aten::embedding"), ("vit", "aten::convolution")],
)
def test_kinds_of_architecture_trace_on_fake_tensors(name: str, expected: str) -> None:
    ol = _trace(name)
    assert ol.complete and ol.recorder == RECORDER_FAKE
    assert expected in ol.by_op()


def test_moe_grouped_matmul_dtype_check_does_not_stop_the_fake_trace() -> None:
    # torch's fake grouped_mm insists on bfloat16 (CUDA's rule); the model sends float32
    ol = _trace("qwen3_moe")
    assert ol.complete and ol.recorder == RECORDER_FAKE
    grouped = [u for u in ol.leaves() if "grouped_mm" in u.op]
    assert grouped and all("float32" in u.dtypes for u in grouped)


# The real-data recorder takes over the device in the process that runs it: run it in a child
# of its own, as the sandbox does, so the fake traces of the tests after it keep their device.
_FALLBACK = """
import json
from opcheck.core.oplist import OpList
from opcheck.tracers import atlas_trace, runtime
from opcheck.tracers.inputs import InputSpec

def refuse(*_a, **_k):
    raise runtime.PartialTrace("tracing failed at x.py:1: Expected a real tensor",
                               OpList(model="gpt2", method="runtime", ir="runtime-dispatch"))

runtime.trace_module = refuse
ol = atlas_trace.trace_atlas("atlas:transformers/gpt2", InputSpec())
print(json.dumps(ol.to_json()))
"""


def test_code_wanting_real_values_falls_back_to_the_real_data_recorder() -> None:
    done = subprocess.run([sys.executable, "-c", _FALLBACK], capture_output=True, text=True,
                          timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    ol = OpList.from_json(json.loads(done.stdout.strip().splitlines()[-1]))
    assert ol.recorder == RECORDER_REAL and ol.complete
    assert "Expected a real tensor" in ol.notes[0]
    assert {"aten::addmm", "aten::native_layer_norm"} <= {u.op for u in ol.ops}
    assert OpList.from_json(ol.to_json()).recorder == RECORDER_REAL


def test_a_model_needing_a_missing_package_is_skipped_with_a_reason() -> None:
    rows = atlas_build.architectures("transformers")
    skipped = [r for r in rows if r.get("skip")]
    for r in skipped:
        assert "\n" not in r["skip"] and "Traceback" not in r["skip"]
    from opcheck.tracers.atlas_build import missing_package

    exc = ImportError("X requires the torchaudio library but it was not found")
    assert missing_package(exc) == "torchaudio"
    assert missing_package(ModuleNotFoundError("no", name="timm.layers")) == "timm"


def test_diffusers_listing_and_a_unet_and_a_vae_trace() -> None:
    pytest.importorskip("diffusers")
    rows = atlas_build.architectures("diffusers")
    tasks = {r["task"] for r in rows}
    assert {"diffusion-unet", "vae", "diffusion-transformer"} <= tasks
    names = {r["name"] for r in rows}
    assert {"UNet2DConditionModel", "AutoencoderKL"} <= names
    from opcheck.tracers import api

    unet = api.trace(None, model_spec="atlas:diffusers/UNet2DConditionModel", timeout=240)
    assert unet.complete and unet.recorder == RECORDER_FAKE
    assert {"aten::convolution", "aten::group_norm"} & {u.op for u in unet.ops}
    _, _, kwargs = atlas_build.build("diffusers", "UNet2DConditionModel")
    assert {"sample", "timestep", "encoder_hidden_states"} <= set(kwargs)


def test_a_library_that_is_not_installed_lists_in_one_line() -> None:
    import importlib.util
    import os

    from opcheck.tracers.atlas_tvops import site_dir

    spec = importlib.util.find_spec("torchvision")  # the atlas's folder may be on the path
    if spec is not None and not str(spec.origin).startswith(str(site_dir())):
        pytest.skip("torchvision is installed here")
    # the atlas's own folder of torchvision and timm moved somewhere empty: not installed
    env = {**os.environ, "OPCHECK_ATLAS_SITE": os.devnull + ".nothing"}
    done = subprocess.run(
        [sys.executable, "-m", "opcheck.tracers.atlas_build", "list", "torchvision"],
        capture_output=True, text=True, check=False, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 2 and "torchvision" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1
