"""Default configs that do not build as they are (issue 36, session 11): the field a failed
build names is set from the config's other fields, unset sizes are filled, and multimodal
rotary sections sum to the rotary width of the head actually built. Each on a tiny synthetic
config; a few of transformers' own default configs built on the meta device at the end."""

from __future__ import annotations

from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from transformers import PretrainedConfig  # noqa: E402

from opcheck.tracers import atlas_hf, atlas_hf_config  # noqa: E402


class TinyAttnConfig(PretrainedConfig):  # type: ignore[misc]
    model_type = "tiny_attn"


class TinyConfig(PretrainedConfig):  # type: ignore[misc]
    model_type = "tiny"


def _raised(fn: Any) -> BaseException:
    try:
        fn()
    except Exception as exc:
        return exc
    raise AssertionError("no exception")


def test_a_missing_field_comes_from_another_config_or_its_convention() -> None:
    attn = TinyAttnConfig(num_attention_heads=6)
    root = TinyConfig(rope_parameters={"rope_type": "default", "rope_theta": 5e5},
                      shared_expert_intermediate_size=96, attn_config=attn)
    cfgs = [root, attn]
    for name, want in (("rope_theta", 5e5), ("num_key_value_heads", 6), ("dropout_rate", 0.0),
                       ("shared_expert_intermediate_size", 96)):
        exc = _raised(lambda name=name: getattr(attn, name))
        assert atlas_hf_config.repair(cfgs, exc), name
        assert getattr(attn, name) == want
    # a field no convention derives: nothing set, the build's failure stands
    assert atlas_hf_config.repair(cfgs, _raised(lambda: attn.conv_kernel_sizes)) == ""


def test_fields_the_message_names() -> None:
    ts = TinyConfig(prediction_length=None, context_length=None, is_decoder=False)
    need = ValueError("The `prediction_length` config needs to be specified.")
    assert atlas_hf_config.repair([ts], need) == "prediction_length = 8"
    assert (ts.prediction_length, ts.context_length) == (8, 8)  # context defaults to it
    head = AssertionError("make sure that `is_decoder=True`.")
    assert atlas_hf_config.repair([ts], head) and ts.is_decoder is True
    assert atlas_hf_config.repair([ts], ValueError("bad input")) == ""
    refused = ValueError("hidden_size_per_layer_input must be 0, got 256")
    assert atlas_hf_config.config_kwargs(refused) == {"hidden_size_per_layer_input": 0}


def test_a_per_layer_list_left_unset_gets_the_kind_the_line_tests() -> None:
    cfg = TinyConfig(num_hidden_layers=2, mlp_layer_types=None, layer_types=None)

    def mlp(config: Any, i: int) -> bool:
        return bool(config.mlp_layer_types[i] == "sparse")

    def attn(config: Any, i: int) -> bool:
        return bool(config.layer_types[i] != "conv")

    assert atlas_hf_config.repair([cfg], _raised(lambda: mlp(cfg, 0)))
    assert cfg.mlp_layer_types == ["sparse", "sparse"]
    assert atlas_hf_config.repair([cfg], _raised(lambda: attn(cfg, 0)))
    assert cfg.layer_types == ["conv", "full_attention"]  # a hybrid keeps both kinds
    assert [attn(cfg, i) for i in range(2)] == [False, True]


def test_rope_parameters_per_layer_kind_gain_a_missing_kind() -> None:
    cfg = TinyConfig(layer_types=["full_attention"], rope_parameters={}, rope_theta=1e4)
    exc = _raised(lambda: cfg.rope_parameters["full_attention"])
    assert atlas_hf_config.repair([cfg], exc)
    assert cfg.rope_parameters["full_attention"]["rope_theta"] == 1e4


def test_unset_sizes_are_filled() -> None:
    cfg = TinyConfig(vocab_size=None, pad_token_id=None, num_experts=None, num_experts_per_tok=2,
                     n_shared_experts=None, moe_intermediate_size=None, intermediate_size=64)
    atlas_hf_config.fill_unset([cfg])
    assert (cfg.vocab_size, cfg.pad_token_id) == (atlas_hf_config.UNSET_VOCAB, 0)
    assert (cfg.num_experts, cfg.n_shared_experts, cfg.moe_intermediate_size) == (4, 1, 64)
    dense = TinyConfig(num_experts=None)  # no router: an unset expert count stays unset
    atlas_hf_config.fill_unset([dense])
    assert dense.num_experts is None


def test_tuples_become_lists_only_where_a_constructor_wants_lists() -> None:
    cfg = TinyConfig(fusion_hidden_sizes=(8, 4), axial_pos_shape=(2, 4))
    atlas_hf_config.fill_unset([cfg])
    assert cfg.axial_pos_shape == (2, 4)  # Reformer adds tuples to it: left a tuple
    exc = _raised(lambda: [32].__add__(cfg.fusion_hidden_sizes))  # VitMatte's list + sizes
    assert atlas_hf_config.repair([cfg], exc)
    assert [32].__add__(cfg.fusion_hidden_sizes) == [32, 8, 4]


def _rotary_width(cfg: Any) -> int:
    """What transformers' default rope init builds: arange(0, dim, 2) frequencies."""
    head = cfg.head_dim or cfg.hidden_size // cfg.num_attention_heads
    dim = int(head * cfg.rope_parameters.get("partial_rotary_factor", 1.0))
    return len(torch.arange(0, dim, 2))


@pytest.mark.parametrize("head_dim,factor", [(42, 0.5), (128, 1.0), (16, 0.5)])
def test_rope_sections_sum_to_the_rotary_width(head_dim: int, factor: float) -> None:
    text = TinyConfig(vocab_size=100, hidden_size=head_dim * 2, num_attention_heads=2,
                      head_dim=head_dim, rope_parameters={"rope_type": "default",
                                                          "partial_rotary_factor": factor})
    # the code's own fallback (GLM-4V's [8, 12, 12]) written into the config, rescaled
    atlas_hf_config.fit_rope_sections([text], transformers.Glm4vForConditionalGeneration)
    sections = text.rope_parameters["mrope_section"]
    assert sum(sections) == _rotary_width(text) and len(sections) == 3
    assert sections == sorted(sections, key=lambda s: -s) or sections[1] == sections[2]


def test_no_sections_where_the_code_names_none() -> None:
    text = TinyConfig(vocab_size=100, hidden_size=64, num_attention_heads=2,
                      rope_parameters={"rope_type": "default"})
    atlas_hf_config.fit_rope_sections([text], transformers.LlamaForCausalLM)
    assert "mrope_section" not in text.rope_parameters


@pytest.mark.parametrize("name", ["informer", "reformer", "dbrx", "esm", "lfm2_moe",
                                  "cohere_compass_text", "wav2vec2-conformer", "vitmatte",
                                  "gemma4_assistant"])
def test_default_configs_that_did_not_build_now_build(name: str) -> None:
    model, _args, kwargs = atlas_hf.build("transformers", name)
    assert kwargs and sum(p.numel() for p in model.parameters()) > 0


def test_narrowed_mlp_widths_keep_16_byte_strides_in_bf16() -> None:
    cfg = TinyConfig(moe_intermediate_size=1407, intermediate_size=64, hidden_size=1407)
    atlas_hf_config.align_mlp_widths([cfg])
    assert (cfg.moe_intermediate_size, cfg.intermediate_size) == (1400, 64)
    assert cfg.hidden_size == 1407  # an attention width: its heads decide it
    # the real-data build of a type whose default width is odd: every expert width aligned
    small = atlas_hf.make_config("deepseek_v2", 3)
    for w in (small.moe_intermediate_size, small.intermediate_size):
        assert w % 8 == 0 and w < 1407
    w = torch.randn(2, 64, small.moe_intermediate_size, dtype=torch.bfloat16)
    assert (w.stride(1) * w.element_size()) % 16 == 0


def test_a_real_data_build_is_never_larger_than_the_device_holds(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opcheck.core.errors import TraceError

    monkeypatch.setattr(atlas_hf, "REAL_PARAMS", 1_000_000)
    # default widths (level 2, what the fake trace builds): counted on meta, refused in a line
    with pytest.raises(TraceError, match=r"default widths has \d+ M parameters"):
        atlas_hf.build("transformers", "llama", real=True, shrink=2)
    # narrowed (level 3) it is not counted: the narrowing is the real-data build's own size
    model, _args, _kwargs = atlas_hf.build("transformers", "llama", real=True)
    assert next(model.parameters()).device.type == "cpu"


def test_expert_pools_and_other_vocabularies_are_cut() -> None:
    cfg = TinyConfig(zero_expert_num=256, n_routed_experts=4, num_experts_per_tok=6,
                     expert_ffn_hidden_size=2048, encoder_hash_byte_group_vocab=500002)
    atlas_hf_config.shrink_expert_pools([cfg])
    assert (cfg.zero_expert_num, cfg.n_routed_experts) == (4, 4)
    assert (cfg.num_experts_per_tok, cfg.expert_ffn_hidden_size) == (6, 2048)  # not counts
    atlas_hf_config.shrink_other_vocabs([cfg])
    assert cfg.encoder_hash_byte_group_vocab == atlas_hf_config.SMALL_VOCAB


def test_a_hierarchical_encoders_hidden_size_follows_its_stages_cut() -> None:
    import transformers

    # CLAP's audio tower: Swin stages doubling a 32-wide patch embedding, the projection sized
    # by hidden_size = 32 * 2**3; two stages kept leave a 64-wide output
    cfg = transformers.ClapAudioConfig(patch_embeds_hidden_size=32, hidden_size=256,
                                       depths=[1, 1, 1, 1], num_attention_heads=[2, 2, 2, 2],
                                       num_hidden_layers=4, spec_size=64, num_mel_bins=16,
                                       window_size=4, projection_dim=16)  # fmt: skip
    atlas_hf._shrink_layers(cfg)
    assert list(cfg.depths) == [1, 1] and cfg.hidden_size == 64
    torch.manual_seed(0)
    model: Any = transformers.ClapAudioModelWithProjection(cfg)
    model.eval()
    with torch.no_grad():
        out = model(input_features=torch.randn(1, 1, 64, 16))
    assert tuple(out.audio_embeds.shape) == (1, 16)
    # per-layer lists of another kind (layer types) leave a width that only looks doubled
    plain: Any = PretrainedConfig
    other = plain(num_hidden_layers=4, embed_dim=32, hidden_size=256,
                  layer_types=["full_attention"] * 4)  # fmt: skip
    atlas_hf._shrink_layers(other)
    assert other.num_hidden_layers == 2 and other.hidden_size == 256
