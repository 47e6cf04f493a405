"""Backbones and necks of the atlas's shrunk configs (issue 36): a neck reading several of
the backbone's layers still gets as many hidden states once the stack is cut to a few layers
(the out indices remapped onto the layers kept), on small real transformers configs run on
real (tiny) tensors."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from opcheck.tracers import atlas_hf, atlas_hf_config, atlas_hf_inputs, atlas_tvops  # noqa: E402
from opcheck.tracers.atlas_layouts import fit_image_side  # noqa: E402


def _dinov2(**kw: Any) -> Any:
    return transformers.Dinov2Config(hidden_size=32, num_attention_heads=2, image_size=28,
                                     patch_size=14, num_hidden_layers=12, **kw)  # fmt: skip


def test_a_backbone_keeps_one_layer_per_output_its_neck_reads() -> None:
    cfg = transformers.DepthAnythingConfig(
        backbone_config=_dinov2(out_indices=[9, 10, 11, 12], reshape_hidden_states=False), reassemble_hidden_size=32,
        neck_hidden_sizes=[8, 8, 16, 16], fusion_hidden_size=8, head_hidden_size=8,
    )  # fmt: skip
    atlas_hf._shrink_layers(cfg)
    bb = cfg.backbone_config
    assert bb.num_hidden_layers == 4  # four reassemble stages: four hidden states
    assert bb.out_indices == [1, 2, 3, 4] and bb.out_features == ["stage1", "stage2",
                                                                   "stage3", "stage4"]
    assert bb.stage_names == ["stem", "stage1", "stage2", "stage3", "stage4"]
    model = transformers.DepthAnythingForDepthEstimation(cfg).eval()
    with torch.no_grad():
        depth = model(pixel_values=torch.randn(1, 3, 28, 28)).predicted_depth
    assert depth.shape[0] == 1 and depth.ndim == 3


def test_a_single_output_moves_to_the_last_layer_kept_and_the_stem_stays() -> None:
    bb = _dinov2(out_features=["stem", "stage12"])
    atlas_hf._shrink_layers(bb)
    assert bb.num_hidden_layers == 2  # one layer read besides the stem: two kept as usual
    assert bb.out_indices == [0, 2] and bb.out_features == ["stem", "stage2"]
    model = transformers.Dinov2Backbone(bb).eval()
    with torch.no_grad():
        maps = model(torch.randn(1, 3, 28, 28)).feature_maps
    assert len(maps) == 2


def test_layer_indices_without_a_stem_are_remapped_too() -> None:
    # DPT's own ViT: backbone_out_indices count layers (no stem), four of them read
    cfg = transformers.DPTConfig(hidden_size=32, num_attention_heads=2, intermediate_size=64,
                                 image_size=32, patch_size=16, neck_hidden_sizes=[8, 8, 16, 16],
                                 fusion_hidden_size=8)  # fmt: skip
    assert tuple(cfg.backbone_out_indices) == (2, 5, 8, 11)
    atlas_hf._shrink_layers(cfg)
    assert cfg.num_hidden_layers == 4 and tuple(cfg.backbone_out_indices) == (0, 1, 2, 3)
    model = transformers.DPTForDepthEstimation(cfg).eval()
    with torch.no_grad():
        depth = model(pixel_values=torch.randn(1, 3, 32, 32)).predicted_depth
    assert depth.shape[0] == 1


def test_a_stack_without_outputs_named_shrinks_to_two_layers() -> None:
    cfg = transformers.ViTConfig(num_hidden_layers=12)
    atlas_hf._shrink_layers(cfg)
    assert cfg.num_hidden_layers == 2


def test_a_misspelled_default_reaches_the_field_it_names() -> None:
    # EdgeTAM's default vision config passes its timm backbone as "archirecture": the field
    # keeps resnet50, whose 2048 channels its FPN (built for repvit_m1's) cannot take
    bb = transformers.EdgeTamVisionConfig().backbone_config
    assert bb.architecture == "resnet50"
    done = atlas_hf_config.fix_misspelled([bb])
    assert bb.architecture == "repvit_m1" and done
    # a derived attribute one letter from nothing, or several letters off a field: untouched
    ds = transformers.DeepseekV3Config()
    before = (ds.v_head_dim, ds.qk_head_dim)
    assert atlas_hf_config.fix_misspelled([ds]) == []
    assert (ds.v_head_dim, ds.qk_head_dim) == before


def test_a_holder_without_layers_names_which_layers_of_its_encoder_it_reads() -> None:
    # Depth Pro's hook ids (11, 5) live on the top config and count the patch encoder's
    # layers: hidden_states[hook + 1] of a two-layer encoder
    cfg = transformers.DepthProConfig()
    atlas_hf._shrink_layers(cfg)
    assert cfg.patch_model_config.num_hidden_layers == 2
    assert tuple(cfg.intermediate_hook_ids) == (1, 0)  # the order kept: the later layer first


def test_the_image_fits_the_scale_ratios_and_the_windows_of_its_config() -> None:
    depth = transformers.DepthProConfig()
    cfgs = atlas_hf_inputs.subconfigs(depth)
    # a 384 patch cut from a quarter-size copy: the image at least four patches wide
    assert fit_image_side(cfgs, 384, 384) == (1536, 1536)
    rf = transformers.RfDetrConfig().backbone_config
    assert (rf.patch_size, rf.num_windows) == (14, 4)
    # 518 pixels: 37 patches, not 4 whole windows of them; 504 is 4 windows of 9
    assert fit_image_side([rf], 518, 518) == (504, 504)
    plain = transformers.ViTConfig()
    assert fit_image_side([plain], 224, 224) == (224, 224)


TIMM_CHILD = r"""
import json
from opcheck.tracers import atlas_build
model, args, kwargs = atlas_build.build("transformers", "timm_backbone")
print(json.dumps({"backbone": model.config.backbone, "channels": list(model.channels),
                  "inputs": sorted(kwargs)}))
"""


def test_a_timm_backbone_left_unnamed_gets_the_timm_wrappers_default() -> None:
    # transformers decides at import whether timm is usable: a fresh process imports the atlas
    # (which puts its folder on the path) first, as the sandbox does
    if not atlas_tvops.installed("timm"):
        pytest.skip("timm is neither installed nor in the atlas's own folder (make install)")
    assert transformers.TimmBackboneConfig().backbone is None
    done = subprocess.run([sys.executable, "-c", TIMM_CHILD], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["backbone"] == "resnet50" and doc["channels"] == [2048]
    assert doc["inputs"] == ["pixel_values"]


def test_a_neck_takes_its_backbones_width() -> None:
    cfg = transformers.VitMatteConfig()
    assert (cfg.hidden_size, cfg.backbone_config.hidden_size) == (384, 768)
    assert atlas_hf_config.fit_neck_widths(atlas_hf_inputs.subconfigs(cfg))
    assert cfg.hidden_size == 768
    # small and real: the decoder now takes the backbone's features
    bb = cfg.backbone_config
    bb.hidden_size, bb.num_attention_heads, bb.num_hidden_layers = 32, 2, 2
    bb.image_size = bb.pretrain_image_size = 32
    bb.out_features = ["stage2"]
    cfg.hidden_size = 64  # a neck narrower than its backbone again: fitted once more
    atlas_hf_config.fit_neck_widths([cfg])
    cfg.fusion_hidden_sizes = list(cfg.fusion_hidden_sizes)  # as a checkpoint's JSON has it
    model = transformers.VitMatteForImageMatting(cfg).eval()
    with torch.no_grad():
        alphas = model(pixel_values=torch.randn(1, 3, 32, 32)).alphas
    assert alphas.shape == (1, 1, 32, 32)
    # a config without a backbone keeps its own width
    vit = transformers.ViTConfig(hidden_size=64)
    assert atlas_hf_config.fit_neck_widths([vit]) == [] and vit.hidden_size == 64


def test_a_detector_without_feature_levels_gets_one_at_scale_one() -> None:
    plain = transformers.LwDetrConfig()
    assert plain.num_feature_levels == 0 and plain.projector_in_channels == []
    assert atlas_hf_config.one_feature_level(plain) == {"projector_scale_factors": [1.0]}
    cfg = atlas_hf_config.default_config("lw_detr")
    # built again with the scale: the fields the config derives from it follow
    assert cfg.projector_scale_factors == [1.0] and cfg.num_feature_levels == 1
    assert cfg.projector_in_channels == [cfg.d_model]
    assert atlas_hf_config.one_feature_level(transformers.DeformableDetrConfig()) == {}


def test_the_narrowed_real_data_build_keeps_neck_and_backbone_equal() -> None:
    # level 3 narrows the backbone by dropping heads (768 -> 192) and the neck by a factor
    # (768 -> 96): fitted again after narrowing, the real-data fallback runs
    model, _args, kwargs = atlas_hf.build("transformers", "vitmatte", real=True)
    assert model.config.hidden_size == model.config.backbone_config.hidden_size
    with torch.no_grad():
        alphas = model(**kwargs).alphas
    assert alphas.shape[-2:] == kwargs["pixel_values"].shape[-2:]
