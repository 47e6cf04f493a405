"""Multimodal position conventions the atlas meets (issue 36): token ids a model's position
code reads that its config does not declare, spans closed where the config names no end
token, head widths a default config leaves unsplittable, rotary sections read with no
fallback, and a tower's copy of the text width. Tiny synthetic models and configs, and a few
of transformers' own default configs (no build)."""

from __future__ import annotations

from typing import ClassVar

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import PretrainedConfig, PreTrainedModel  # noqa: E402

from opcheck.tracers import atlas_hf, atlas_hf_code, atlas_hf_config, atlas_inputs  # noqa: E402


class TinyTextConfig(PretrainedConfig):  # type: ignore[misc]
    model_type = "tiny_mm_text"


class TinyMMConfig(PretrainedConfig):  # type: ignore[misc]
    model_type = "tiny_mm"
    sub_configs: ClassVar[dict[str, type]] = {"text_config": TinyTextConfig}


class TinyMM(PreTrainedModel):  # type: ignore[misc]
    """Position code reading a start token its config may not declare (an omni thinker's)."""

    config_class = TinyMMConfig

    def __init__(self, config: TinyMMConfig) -> None:
        super().__init__(config)
        self.embed = torch.nn.Embedding(config.text_config.vocab_size, 4)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        start = self.config.vision_start_token_id
        first = self.config.text_config.boi_token_id
        return (input_ids == start) | (input_ids == first)


def _tiny(**top: int) -> TinyMM:
    text = TinyTextConfig(vocab_size=200, boi_token_id=190)
    return TinyMM(TinyMMConfig(text_config=text, image_token_id=199, **top))


def test_a_token_id_the_code_reads_and_the_config_lacks_gets_a_free_id() -> None:
    model = _tiny()
    done = atlas_hf_code.fill_read_token_ids(model)
    start = model.config.vision_start_token_id
    # the highest id no special token uses, inside the built embedding
    assert start == 198 and done == ["TinyMMConfig.vision_start_token_id = 198"]
    # the placeholders then get it as their start token, as the position code searches
    ids = atlas_inputs.with_placeholders(torch.arange(5, 13).unsqueeze(0), 199, 4,
                                         (atlas_inputs.token_id(model.config,
                                                                atlas_inputs.BOUNDS["image"][0]),
                                          None))  # fmt: skip
    assert ids[0, 2].item() == start and ids[0, 3:7].tolist() == [199] * 4


def test_a_token_id_the_config_declares_is_left_alone() -> None:
    model = _tiny(vision_start_token_id=150)
    assert atlas_hf_code.fill_read_token_ids(model) == []
    assert model.config.vision_start_token_id == 150
    assert model.config.text_config.boi_token_id == 190


def test_a_span_whose_start_is_named_without_its_end_is_closed() -> None:
    ids = torch.arange(5, 13).unsqueeze(0)
    opened = atlas_inputs.with_placeholders(ids, 99, 3, (90, None))
    # start, placeholders, then one text id closing the span (the position code steps over it)
    assert opened[0, 2:7].tolist() == [90, 99, 99, 99, int(ids[0, 2])]
    assert opened.shape[1] == ids.shape[1] + 5
    bounded = atlas_inputs.with_placeholders(ids, 99, 3, (90, 91))
    assert bounded[0, 2:7].tolist() == [90, 99, 99, 99, 91]
    bare = atlas_inputs.with_placeholders(ids, 99, 3)
    assert bare.shape[1] == ids.shape[1] + 3


def test_a_hidden_size_the_heads_do_not_split_gets_an_even_head_width() -> None:
    odd = TinyTextConfig(hidden_size=2048, num_attention_heads=28)
    even = TinyTextConfig(hidden_size=2048, num_attention_heads=16)
    uneven = TinyTextConfig(hidden_size=4096, num_attention_heads=96)
    for c in (odd, even, uneven):
        atlas_hf._fill_unset_sizes(c)
    assert odd.head_dim == 72  # 2048 // 28 = 73: rotary tables 74 wide against 73-wide heads
    assert "head_dim" not in vars(even)  # the model's own quotient is right: nothing set
    assert "head_dim" not in vars(uneven)  # 42, even: the model's own quotient is kept
    # transformers' own default: Qwen3-Omni's thinker pairs 2048 with 28 heads
    text = atlas_hf.make_config("qwen3_omni_moe_thinker", 2).text_config
    assert text.head_dim % 4 == 0 and text.head_dim <= text.hidden_size // 28


def test_sections_read_with_no_fallback_get_three_even_axes() -> None:
    cls = transformers.HunYuanVLTextModel
    assert atlas_hf_config.code_sections(cls) == atlas_hf_config.EVEN_SECTIONS
    cfg = atlas_hf_config.for_class(atlas_hf.make_config("hunyuan_vl_text", 2), cls)
    assert "mrope_section" not in cfg.rope_parameters
    atlas_hf_config.fit_rope_sections([cfg], cls)
    sections = cfg.rope_parameters["mrope_section"]
    head = cfg.head_dim or cfg.hidden_size // cfg.num_attention_heads
    assert len(sections) == 3 and sum(sections) == head // 2
    assert max(sections) - min(sections) <= 1
    # the model's rotary embedding now runs (it took len(None) before)
    from transformers.models.hunyuan_vl import modeling_hunyuan_vl as mod

    rotary = mod.HunYuanVLRotaryEmbedding(cfg)
    cos, _sin = rotary(torch.zeros(1, 4, head), torch.arange(4).unsqueeze(0))
    assert cos.shape[-1] == head


def test_a_towers_text_width_follows_the_narrowed_text_model() -> None:
    cfg = atlas_hf.make_config("hunyuan_vl", 3)
    released = type(cfg.vision_config)().text_hidden_size
    assert cfg.text_config.hidden_size != released  # narrowed: the test can fail
    assert cfg.vision_config.text_hidden_size == cfg.text_config.hidden_size
