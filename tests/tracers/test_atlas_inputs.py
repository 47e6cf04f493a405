"""The atlas's input conventions (tracers/atlas_inputs.py) on tiny configs built here (no
network): pixel inputs and grids sized from the vision config, placeholder tokens counted by
the model's own tower, audio and time-series inputs, the default-config fixes, and which towers
a forward ran; and one multimodal architecture traced through its vision tower."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from opcheck.core.oplist import RECORDER_FAKE
from opcheck.tracers import atlas_hf_inputs, atlas_inputs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _ids() -> Any:
    return torch.arange(5, 13).unsqueeze(0)


def _tiny_llava() -> Any:
    vision = transformers.CLIPVisionConfig(
        hidden_size=32, intermediate_size=37, num_hidden_layers=2, num_attention_heads=4,
        image_size=32, patch_size=8, projection_dim=32,
    )  # fmt: skip
    text = transformers.LlamaConfig(
        vocab_size=99, hidden_size=32, intermediate_size=37, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4,
    )  # fmt: skip
    cfg = transformers.LlavaConfig(vision_config=vision, text_config=text, image_token_index=98,
                                   image_seq_length=16)  # fmt: skip
    torch.manual_seed(0)
    return transformers.LlavaForConditionalGeneration(cfg).eval()


def _params(model: Any) -> list[str]:
    return list(inspect.signature(model.forward).parameters)


def test_qwen_vl_grid_convention_follows_the_vision_config() -> None:
    cfg = transformers.Qwen2VLConfig(vision_config={"patch_size": 4, "temporal_patch_size": 2,
                                                    "spatial_merge_size": 2, "in_channels": 3})
    made, tokens = atlas_inputs.image_inputs(["pixel_values", "image_grid_thw"], cfg)
    assert made["image_grid_thw"].tolist() == [[1, 4, 4]]
    # one row per patch: channels x temporal patch x patch x patch
    assert tuple(made["pixel_values"].shape) == (16, 3 * 2 * 4 * 4)
    assert tokens == 16 // (2 * 2)


def test_placeholders_are_as_many_as_the_tower_makes_and_every_tower_runs() -> None:
    model = _tiny_llava()
    atlas_inputs.watch_towers(model)
    made = atlas_inputs.modal_inputs(model, model.config, _params(model), _ids)
    assert tuple(made["pixel_values"].shape) == (1, 3, 32, 32)
    # (32 / 8)^2 patches, the CLS feature dropped by the "default" strategy
    assert int((made["input_ids"] == 98).sum()) == 16
    assert made["input_ids"].shape[1] == 8 + 16
    with torch.no_grad():
        model(**made)
    assert atlas_inputs.forward_path(model) == atlas_inputs.FULL


def test_a_text_only_forward_is_labelled_with_the_idle_tower() -> None:
    model = _tiny_llava()
    assert atlas_inputs.watch_towers(model) == ["model.vision_tower"]
    with torch.no_grad():
        model(input_ids=_ids())
    assert atlas_inputs.forward_path(model) == "text only: model.vision_tower did not run"
    assert atlas_inputs.forward_path(torch.nn.Linear(2, 2)) == ""  # not watched: not known


def test_audio_features_follow_mel_bins_and_source_positions() -> None:
    cfg = transformers.Qwen2AudioConfig(audio_config={"num_mel_bins": 16,
                                                      "max_source_positions": 50})
    made, _ = atlas_inputs.audio_inputs(["input_features", "feature_attention_mask"], cfg)
    assert tuple(made["input_features"].shape) == (1, 16, 100)
    assert tuple(made["feature_attention_mask"].shape) == (1, 100)


def test_time_series_inputs_cover_the_context_and_the_largest_lag() -> None:
    cfg = transformers.TimeSeriesTransformerConfig(context_length=10, lags_sequence=[1, 2, 7],
                                                   num_time_features=3, prediction_length=4)
    past = atlas_inputs.series_maker("past_values", [cfg])
    feats = atlas_inputs.series_maker("past_time_features", [cfg])
    future = atlas_inputs.series_maker("future_time_features", [cfg])
    assert past is not None and feats is not None and future is not None
    assert tuple(past().shape) == (1, 17)
    assert tuple(feats().shape) == (1, 17, 3) and tuple(future().shape) == (1, 4, 3)
    assert atlas_inputs.series_maker("input_ids", [cfg]) is None


def test_default_configs_are_fitted_to_their_special_tokens_and_towers() -> None:
    text = transformers.LlamaConfig(vocab_size=100, hidden_size=64)
    outer = transformers.LlavaConfig(text_config=text, image_token_index=120)
    atlas_inputs.fit_vocab([outer, text])
    assert text.vocab_size == 121
    qwen = transformers.Qwen2VLConfig(vision_config={"embed_dim": 64, "hidden_size": 96},
                                      text_config={"hidden_size": 48})
    atlas_inputs.fit_tower_widths(qwen)
    assert qwen.vision_config.hidden_size == 48 and qwen.vision_config.embed_dim == 64


@pytest.mark.slow  # a sandboxed trace of a default-width LLaVA: ~70 s on the loaded machine
def test_a_multimodal_architecture_is_traced_through_its_vision_tower() -> None:
    from opcheck.tracers import api

    ol = api.trace(None, model_spec="atlas:transformers/llava", timeout=240)
    assert ol.complete and ol.recorder == RECORDER_FAKE
    assert ol.forward == atlas_inputs.FULL
    conv = ol.by_op().get("aten::convolution")
    assert conv is not None  # the CLIP patch embedding ran


# ---- session 11: towers fed flattened patches, dual encoders, the real-data build's vocabulary


def _tiny_qwen2_vl() -> Any:
    vision = {"depth": 1, "embed_dim": 32, "hidden_size": 32, "num_heads": 2, "mlp_ratio": 1,
              "patch_size": 4, "temporal_patch_size": 2, "spatial_merge_size": 2,
              "in_channels": 3}  # fmt: skip
    text = {"vocab_size": 64, "hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
            "num_attention_heads": 2, "num_key_value_heads": 1,
            "rope_parameters": {"rope_type": "default", "mrope_section": [2, 3, 3]}}  # fmt: skip
    cfg = transformers.Qwen2VLConfig(vision_config=vision, text_config=text, image_token_id=60,
                                     video_token_id=61, vision_start_token_id=62,
                                     vision_end_token_id=63)  # fmt: skip
    torch.manual_seed(0)
    return transformers.Qwen2VLForConditionalGeneration(cfg).eval()


def test_a_grid_tower_gets_flattened_patches_and_its_grid() -> None:
    vision = transformers.Qwen2VLConfig(vision_config={"patch_size": 4, "temporal_patch_size": 2,
                                                       "spatial_merge_size": 2}).vision_config
    made = atlas_inputs.patch_inputs(["hidden_states", "grid_thw"], [vision])
    # two merges per side; a row per patch: channels x temporal patch x patch x patch
    assert made["grid_thw"].tolist() == [[1, 4, 4]]
    assert tuple(made["hidden_states"].shape) == (16, 3 * 2 * 4 * 4)
    merge = atlas_inputs.patch_inputs(["pixel_values", "grid_thw", "merge_sizes"], [vision])
    assert merge["merge_sizes"].tolist() == [2] and "hidden_states" not in merge
    assert atlas_inputs.patch_inputs(["pixel_values"], [vision]) == {}


def test_a_patch_sequence_tower_gets_its_shapes_mask_and_positions() -> None:
    cfg = transformers.Siglip2VisionConfig(patch_size=4, num_channels=3)
    made = atlas_inputs.patch_inputs(["pixel_values", "pixel_attention_mask", "spatial_shapes"],
                                     [cfg])  # fmt: skip
    assert made["spatial_shapes"].tolist() == [[2, 2]]  # no merge: two patches per side
    assert tuple(made["pixel_values"].shape) == (1, 4, 3 * 4 * 4)
    assert made["pixel_attention_mask"].tolist() == [[1, 1, 1, 1]]
    pooled = atlas_inputs.patch_inputs(["pixel_values", "pixel_position_ids"],
                                       [transformers.Gemma4VisionConfig(pooling_kernel_size=3)])
    # a side the pooling kernel divides twice; (x, y) of each patch, row by row
    assert tuple(pooled["pixel_values"].shape)[:2] == (1, 36)
    assert pooled["pixel_position_ids"][0, :7].tolist() == [[0, 0], [1, 0], [2, 0], [3, 0],
                                                            [4, 0], [5, 0], [0, 1]]


def test_first_value_skips_unset_values_and_flags() -> None:
    from opcheck.tracers.atlas_hf_config import first_value

    outer = transformers.PretrainedConfig(patch_size=None, use_flag=True)
    inner = transformers.PretrainedConfig(patch_size=16, use_flag=False, depth=3)
    assert first_value([outer, inner], "patch_size") == 16
    assert first_value([outer, inner], "use_flag", default=7) == 7
    assert first_value([inner], "missing", "depth") == 3


def test_the_real_build_vocabulary_keeps_the_outer_configs_token_ids() -> None:
    from opcheck.tracers.atlas_hf_config import shrink_vocab

    cfg = transformers.Qwen2VLConfig(image_token_id=151655, video_token_id=100,
                                     text_config={"vocab_size": 151936, "eos_token_id": 151645})
    shrink_vocab([cfg, cfg.vision_config, cfg.text_config], keep=1024)
    assert cfg.text_config.vocab_size == 151656


def test_a_dual_encoder_is_fed_every_modality_but_not_on_the_text_path() -> None:
    params = ["input_ids", "pixel_values", "attention_mask", "input_features", "input_values"]
    clip = transformers.CLIPConfig()
    atlas_inputs.FED.clear()
    assert atlas_inputs.paired_inputs(params, clip) == ["pixel_values", "input_features"]
    assert {"image", "audio"} == atlas_inputs.FED
    with atlas_inputs.text_only():
        assert atlas_inputs.paired_inputs(params, clip) == []
    # a placeholder token named: the pixels go with placeholders or not at all
    llava = transformers.LlavaConfig(image_token_index=7)
    assert atlas_inputs.paired_inputs(params, llava) == ["input_features"]


def test_qwen2_vl_inputs_run_its_conv3d_patch_embedding_on_the_real_data_device() -> None:
    from opcheck.tracers import atlas_trace

    model = _tiny_qwen2_vl()
    atlas_inputs.watch_towers(model)
    _, kwargs = atlas_hf_inputs.make_inputs(model, model.config, real=True)
    # one image of 4 x 4 patches: 4 placeholder tokens after the 2 x 2 merge
    assert int((kwargs["input_ids"] == 60).sum()) == 4
    ol = atlas_trace.record_real(model, (), kwargs, train=False, label="tiny-qwen2-vl")
    conv = ol.by_op()["aten::convolution"]
    assert conv.shapes[0][1:] == [3, 2, 4, 4]  # (patches, channels, frames, h, w): Conv3D
    assert atlas_inputs.forward_path(model) == atlas_inputs.FULL


@pytest.mark.slow  # a sandboxed fake trace that stops at the grid, then the real-data build: ~30 s
def test_qwen2_vl_is_traced_with_its_conv3d_patch_embedding() -> None:
    from opcheck.tracers import api

    ol = api.trace(None, model_spec="atlas:transformers/qwen2_vl", timeout=300)
    assert ol.complete and ol.forward == atlas_inputs.FULL
    conv = ol.by_op()["aten::convolution"]
    assert len(conv.shapes[0]) == 5  # Conv3D over (patches, channels, frames, h, w)


def test_an_unset_placeholder_id_gets_the_id_past_the_vocabulary() -> None:
    cfg = transformers.Blip2Config(text_config={"vocab_size": 120})
    assert cfg.image_token_index is None  # the processor adds the token
    atlas_inputs.fit_placeholder_ids([cfg, cfg.text_config])
    atlas_inputs.fit_vocab([cfg, cfg.text_config])
    assert cfg.image_token_index == 120 and cfg.text_config.vocab_size == 121
    llava = transformers.LlavaConfig(image_token_index=7)
    atlas_inputs.fit_placeholder_ids([llava])
    assert llava.image_token_index == 7  # a set id stays


def test_an_image_attention_mask_forward_gets_images_per_sample() -> None:
    made = {"pixel_values": torch.randn(1, 3, 8, 8), "input_ids": _ids()}
    atlas_inputs.fit_image_batch(["input_ids", "pixel_values", "image_attention_mask"], made)
    assert tuple(made["pixel_values"].shape) == (1, 1, 3, 8, 8)
    assert tuple(made["image_attention_mask"].shape) == (1, 8, 1)
    plain = {"pixel_values": torch.randn(1, 3, 8, 8), "input_ids": _ids()}
    atlas_inputs.fit_image_batch(["input_ids", "pixel_values"], plain)
    assert plain["pixel_values"].dim() == 4 and "image_attention_mask" not in plain
