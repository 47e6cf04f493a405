"""Inputs the atlas makes by the library's conventions beyond plain images and text (tracers/
atlas_hf.py make_inputs, tracers/atlas_inputs.py), on tiny configs built here (no network):
video clips sized from the config's frame count, image pairs for keypoint matching."""

from __future__ import annotations

from typing import Any

import pytest

from opcheck.tracers import atlas_hf

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _inputs(model: Any) -> dict[str, Any]:
    return atlas_hf.make_inputs(model.eval(), model.config, real=True)[1]


def test_a_video_input_is_a_clip_of_the_configs_frames_whole_tubelets() -> None:
    cfg = transformers.VJEPA2Config(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, mlp_ratio=2.0,
        crop_size=32, patch_size=16, frames_per_clip=3, tubelet_size=2, pred_hidden_size=32,
        pred_num_hidden_layers=1, pred_num_attention_heads=2, pred_num_mask_tokens=2,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.VJEPA2Model(cfg)
    made = _inputs(model)
    # (batch, frames, channels, h, w): 3 frames rounded up to whole tubelets of 2
    assert tuple(made["pixel_values_videos"].shape) == (1, 4, 3, 32, 32)
    with torch.no_grad():
        out = model(**made)
    assert out.last_hidden_state.shape[1] == (4 // 2) * (32 // 16) ** 2


def test_a_keypoint_matching_model_gets_image_pairs() -> None:
    cfg = transformers.SuperGlueConfig()
    with torch.device("meta"):
        model = transformers.SuperGlueForKeypointMatching(cfg)
    made = _inputs(model)
    assert tuple(made["pixel_values"].shape)[:2] == (1, 2)
    assert made["pixel_values"].dim() == 5
    # an image model of no such task keeps (batch, channels, h, w)
    with torch.device("meta"):
        vit = transformers.ViTModel(transformers.ViTConfig(num_hidden_layers=1))
    assert _inputs(vit)["pixel_values"].dim() == 4


def test_a_timm_tower_is_fed_the_size_of_its_pretrained_cfg() -> None:
    # the config names the timm architecture only: the size is in the built model
    cfg = transformers.TimmWrapperConfig(architecture="vit_tiny_patch16_384")
    with torch.device("meta"):
        model = transformers.TimmWrapperModel(cfg)
    assert tuple(_inputs(model)["pixel_values"].shape) == (1, 3, 384, 384)
