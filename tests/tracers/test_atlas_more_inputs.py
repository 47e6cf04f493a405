"""Inputs the atlas makes by the library's conventions beyond plain images and text (tracers/
atlas_hf_inputs.py make_inputs, tracers/atlas_inputs.py), on tiny configs built here (no network):
video clips sized from the config's frame count, image pairs for keypoint matching."""

from __future__ import annotations

from typing import Any

import pytest

from opcheck.tracers import atlas_hf, atlas_hf_inputs, atlas_inputs, atlas_layouts

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _inputs(model: Any) -> dict[str, Any]:
    return atlas_hf_inputs.make_inputs(model.eval(), model.config, real=True)[1]


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
    # TimmWrapper's config names the timm architecture only: the size is in the built timm
    # model's pretrained_cfg (a stand-in here: transformers may have been imported before the
    # atlas put timm on the path)
    base: Any = transformers.PreTrainedModel

    class TimmLike(base):  # type: ignore[misc]
        config_class = transformers.PretrainedConfig
        main_input_name = "pixel_values"

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.timm_model = torch.nn.Conv2d(3, 4, 1)
            self.timm_model.pretrained_cfg = {"input_size": (3, 96, 128)}

        def forward(self, pixel_values: Any) -> Any:
            return self.timm_model(pixel_values)

    model = TimmLike(transformers.PretrainedConfig())
    assert tuple(_inputs(model)["pixel_values"].shape) == (1, 3, 96, 128)


def test_region_features_take_the_documented_shape_sized_by_the_config() -> None:
    cfg = transformers.LxmertConfig(
        vocab_size=99, hidden_size=32, num_attention_heads=2, intermediate_size=37, l_layers=1,
        x_layers=1, r_layers=1, visual_feat_dim=16, visual_pos_dim=4,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.LxmertModel(cfg)
    made = _inputs(model)
    # (batch_size, num_visual_features, visual_feat_dim): the config's width, the text length
    assert tuple(made["visual_feats"].shape) == (1, atlas_hf_inputs.SEQ, 16)
    assert tuple(made["visual_pos"].shape) == (1, atlas_hf_inputs.SEQ, 4)
    with torch.no_grad():
        model(**made)


def test_token_boxes_are_well_formed_in_the_documented_dtype() -> None:
    cfg = transformers.BrosConfig(vocab_size=99, num_hidden_layers=1)
    torch.manual_seed(0)
    model = transformers.BrosModel(cfg)
    box = _inputs(model)["bbox"]
    assert tuple(box.shape) == (1, atlas_hf_inputs.SEQ, 4)
    assert box.is_floating_point() and float(box.min()) >= 0 and float(box.max()) <= 1
    assert bool((box[..., 0] <= box[..., 2]).all() and (box[..., 1] <= box[..., 3]).all())
    with torch.no_grad():
        model(**_inputs(model))
    # LayoutLM documents LongTensor boxes in its 0-1000 embedding range
    with torch.device("meta"):
        layout = transformers.LayoutLMModel(transformers.LayoutLMConfig(num_hidden_layers=1))
    long_box = atlas_hf_inputs.make_inputs(layout, layout.config, real=True)[1]["bbox"]
    assert long_box.dtype == torch.long and int(long_box.max()) <= 1000


def test_an_unset_default_choice_is_the_first_the_config_lists() -> None:
    cfg = transformers.XmodConfig(vocab_size=99, hidden_size=32, num_hidden_layers=1,
                                  num_attention_heads=2, intermediate_size=37,
                                  languages=["de_DE", "en_XX"])  # fmt: skip
    assert cfg.default_language is None
    atlas_layouts.fit_default_choices([cfg])
    assert cfg.default_language == "de_DE"
    torch.manual_seed(0)
    model = transformers.XmodModel(cfg)
    with torch.no_grad():  # without a default language the forward refuses to run
        model(**_inputs(model))


def test_a_model_without_a_forward_is_skipped_with_a_reason_about_it() -> None:
    from opcheck.tracers.atlas_build import ModelSkip

    cfg = transformers.BarkConfig()
    with torch.device("meta"):
        model = transformers.BarkModel(cfg)
    with pytest.raises(ModelSkip, match=r"BarkModel: no forward of its own.*semantic"):
        _inputs(model)


def test_an_unset_sliding_window_is_set_only_where_the_config_has_sliding_layers() -> None:
    cfg = transformers.Step3p7Config()
    assert cfg.text_config.sliding_window is None
    atlas_hf._fill_unset_sizes(cfg)
    assert cfg.text_config.sliding_window == atlas_hf.SLIDING_WINDOW
    # a flag turning sliding attention off is no sliding layer
    qwen = transformers.Qwen2Config(use_sliding_window=False)
    atlas_hf._fill_unset_sizes(qwen)
    assert qwen.sliding_window is None


def test_a_pixel_model_gets_its_optional_patch_conventions() -> None:
    vision = transformers.Siglip2VisionConfig(hidden_size=32, intermediate_size=37,
                                              num_hidden_layers=1, num_attention_heads=2,
                                              patch_size=4, num_patches=16)  # fmt: skip
    cfg = transformers.Siglip2Config(vision_config=vision.to_dict(),
                                     text_config={"hidden_size": 32, "intermediate_size": 37,
                                                  "num_hidden_layers": 1,
                                                  "num_attention_heads": 2})  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Siglip2ForImageClassification(cfg)
    made = _inputs(model)
    # flattened patches (channels x patch x patch wide) with their grid and mask
    assert made["pixel_values"].shape[-1] == 3 * 4 * 4
    assert made["spatial_shapes"].tolist() == [[2, 2]]
    with torch.no_grad():
        model(**made)


def test_a_navit_packer_tower_gets_the_patch_grid_of_its_image() -> None:
    cfg = transformers.MiniCPMOcrVisionConfig(hidden_size=32, intermediate_size=37,
                                              num_hidden_layers=1, num_attention_heads=2,
                                              image_size=56, patch_size=14)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.MiniCPMOcrVisionModel(cfg)
    made = _inputs(model)
    assert tuple(made["pixel_values"].shape) == (1, 3, 56, 56)
    assert made["target_sizes"].tolist() == [[4, 4]]  # 56 / 14 patches per side
    with torch.no_grad():  # without the grid the position ids cannot be bucketed
        model(**made)


def test_image_positions_marked_by_a_mask_hold_the_configs_token_count() -> None:
    cfg = transformers.Kosmos2Config(
        text_config={"vocab_size": 99, "embed_dim": 32, "layers": 1, "attention_heads": 2,
                     "ffn_dim": 37},
        vision_config={"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "image_size": 32, "patch_size": 8},
        latent_query_num=4,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Kosmos2ForConditionalGeneration(cfg)
    made = _inputs(model)
    mask = made["image_embeds_position_mask"]
    assert mask.shape == made["input_ids"].shape == (1, atlas_hf_inputs.SEQ + 4)
    assert int(mask.sum()) == 4 and mask[0, 2:6].tolist() == [1, 1, 1, 1]
    with torch.no_grad():  # without the mask the image features have nowhere to go
        model(**made)


def test_a_model_whose_only_placeholder_is_a_videos_gets_a_clip_and_its_tokens() -> None:
    cfg = transformers.InstructBlipVideoConfig(
        vision_config={"hidden_size": 32, "intermediate_size": 37, "num_hidden_layers": 1,
                       "num_attention_heads": 2, "image_size": 28, "patch_size": 14},
        qformer_config={"hidden_size": 32, "num_hidden_layers": 1, "num_attention_heads": 2,
                        "intermediate_size": 37, "encoder_hidden_size": 32, "vocab_size": 99},
        text_config={"model_type": "opt", "vocab_size": 99, "hidden_size": 32,
                     "num_hidden_layers": 1, "ffn_dim": 37, "num_attention_heads": 2,
                     "word_embed_proj_dim": 32},
        num_query_tokens=2,
    )  # fmt: skip
    cfgs = atlas_hf_inputs.subconfigs(cfg)
    atlas_inputs.fit_placeholder_ids(cfgs)  # the default config leaves the video token unset
    atlas_inputs.fit_vocab(cfgs)
    torch.manual_seed(0)
    model = transformers.InstructBlipVideoForConditionalGeneration(cfg)
    made = _inputs(model)
    frames = made["pixel_values"].shape[1]
    assert made["pixel_values"].dim() == 5 and frames == 8
    # the query tokens of every frame
    assert int((made["input_ids"] == cfg.video_token_index).sum()) == 2 * frames
    with torch.no_grad():
        model(**made)


def test_an_encoder_of_audio_and_video_without_text_is_fed_both() -> None:
    base: Any = transformers.PreTrainedModel

    class AudioVideo(base):  # type: ignore[misc]
        # PE audio-video's shape: both optional, its embedder aligns the two
        config_class = transformers.PretrainedConfig
        main_input_name = "input_values"

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.proj = torch.nn.Linear(1, 1)

        def forward(self, input_values: Any = None, pixel_values_videos: Any = None) -> Any:
            return self.proj(input_values.mean().view(1, 1) + pixel_values_videos.mean())

    cfg = transformers.PretrainedConfig()
    cfg.num_frames = 4
    made = _inputs(AudioVideo(cfg))
    assert "input_values" in made
    assert tuple(made["pixel_values_videos"].shape)[:3] == (1, 4, 3)


def test_an_in_context_prompt_and_its_image_each_take_half_the_canvas() -> None:
    cfg = transformers.SegGptConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, mlp_dim=37,
        image_size=[64, 32], patch_size=8, pretrain_image_size=32, decoder_hidden_size=16,
        intermediate_hidden_state_indices=[0, 1], merge_index=0,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.SegGptModel(cfg)
    made = _inputs(model)
    # the forward stacks prompt over image (64 x 32): each is 32 x 32
    for key in ("pixel_values", "prompt_pixel_values", "prompt_masks"):
        assert tuple(made[key].shape[-2:]) == (32, 32)
    with torch.no_grad():
        model(**made)
