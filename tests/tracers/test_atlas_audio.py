"""The atlas's audio conventions (tracers/atlas_audio.py) on tiny configs built here (no
network): sizes read from the config (feature sizes, codec hops, frames), the ladder of layouts
probed on the meta device (waveform channels, features before or after frames, codebook ids, a
length the model asks for), and a codec and a spectrogram model traced through the atlas."""

from __future__ import annotations

import inspect
from types import SimpleNamespace
from typing import Any

import pytest

from opcheck.core.oplist import RECORDER_FAKE
from opcheck.tracers import atlas_audio, atlas_hf_inputs

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")


def _meta(cls: Any, cfg: Any) -> Any:
    with torch.device("meta"):
        return cls(cfg).eval()


def _fit(model: Any, cfgs: list[Any], kwargs: dict[str, Any] | None = None,
         missing: list[str] | None = None) -> tuple[dict[str, Any], list[str]]:  # fmt: skip
    kwargs = dict(kwargs or {})
    params = inspect.signature(model.forward).parameters
    left = atlas_audio.fit_inputs(model, cfgs, params, kwargs, list(missing or []), real=False)
    return kwargs, left


def test_sizes_come_from_the_config() -> None:
    s2t = transformers.Speech2TextConfig(input_feat_per_channel=40, input_channels=2)
    assert atlas_audio.feature_sizes([s2t])[:2] == [80, 40]  # stacked channels first
    dac = transformers.DacConfig(downsampling_ratios=[2, 4, 5])
    assert atlas_audio.hop([dac]) == 40
    assert atlas_audio.wave_length([dac], multiple=96) % 480 == 0
    whisper = transformers.WhisperConfig(max_source_positions=1500)
    assert atlas_audio.frames([whisper]) == 3000
    odd = SimpleNamespace(subsampling_factor=8)
    assert atlas_audio.frames([odd]) % 8 == 0 and atlas_audio.frames([]) == atlas_audio.FRAMES
    first, *_ = atlas_audio.wave_candidates([transformers.EncodecConfig(audio_channels=2)])
    assert first[1]["x"].shape[:2] == (1, 2)


def _tiny_s2t() -> Any:
    return transformers.Speech2TextConfig(
        vocab_size=50, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16,
        input_feat_per_channel=24, input_channels=1, max_source_positions=64,
        conv_channels=16, max_target_positions=32,
    )  # fmt: skip


def test_features_after_frames_are_found_by_the_ladder() -> None:
    cfg = _tiny_s2t()
    model = _meta(transformers.Speech2TextForConditionalGeneration, cfg)
    ids = torch.arange(4).unsqueeze(0)
    kwargs, left = _fit(model, [cfg], {"decoder_input_ids": ids})
    feats = kwargs["input_features"]
    assert not left and feats.shape[-1] == 24
    assert feats.shape[1] == atlas_audio.frames([cfg], positions=False)
    assert "frames, 24 features" in atlas_audio.notes(model)[0]


def test_whisper_keeps_features_before_frames() -> None:
    cfg = transformers.WhisperConfig(
        vocab_size=60, d_model=16, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=16, decoder_ffn_dim=16, num_mel_bins=20,
        max_source_positions=30, max_target_positions=16, pad_token_id=0, bos_token_id=1,
        eos_token_id=2, decoder_start_token_id=1,
    )  # fmt: skip
    model = _meta(transformers.WhisperForConditionalGeneration, cfg)
    kwargs, _ = _fit(model, [cfg], {"decoder_input_ids": torch.arange(4).unsqueeze(0)})
    assert tuple(kwargs["input_features"].shape) == (1, 20, 60)


def test_a_codec_gets_a_channel_dimension_and_a_whole_number_of_frames() -> None:
    cfg = transformers.DacConfig(encoder_hidden_size=8, decoder_hidden_size=16, hidden_size=16,
                                 downsampling_ratios=[2, 4], upsampling_ratios=[4, 2],
                                 n_codebooks=2, codebook_size=16, codebook_dim=4)  # fmt: skip
    model = _meta(transformers.DacModel, cfg)
    kwargs, _ = _fit(model, [cfg], missing=["input_values"])
    wave = kwargs["input_values"]
    assert wave.dim() == 3 and wave.shape[1] == 1 and wave.shape[-1] % 8 == 0


def test_codebook_ids_take_one_row_per_codebook() -> None:
    cfg = transformers.MusicgenDecoderConfig(vocab_size=40, hidden_size=16, num_hidden_layers=1,
                                             num_attention_heads=2, ffn_dim=16,
                                             num_codebooks=3)  # fmt: skip
    model = _meta(transformers.MusicgenForCausalLM, cfg)
    kwargs, _ = _fit(model, [cfg], {"input_ids": torch.arange(5, 13).unsqueeze(0)})
    assert tuple(kwargs["input_ids"].shape) == (3, 8)


class _Picky(torch.nn.Module):  # type: ignore[misc,name-defined]
    """Wants a mono (B, 1, T) waveform of a length that divides by 96, as codecs check."""

    main_input_name = "input_values"

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1, device="meta"))

    def forward(self, input_values: Any, input_features_mask: Any = None) -> Any:
        _batch, _chans, length = input_values.shape  # a 2-D waveform fails to unpack
        if length % 96:
            raise ValueError(f"`input_values` length {length} is not a multiple of 96")
        return input_values * self.w


def test_a_length_the_model_names_is_used_and_unknown_names_stay_missing() -> None:
    model = _Picky()
    kwargs, left = _fit(model, [SimpleNamespace(hop_length=10)], missing=["input_values"])
    wave = kwargs["input_values"]
    assert wave.dim() == 3 and wave.shape[-1] % 96 == 0 and wave.shape[-1] % 10 == 0
    assert "input_features_mask" not in kwargs and not left  # no features, no frame mask
    text = torch.nn.Linear(2, 2)
    assert _fit(text, [], missing=["other"])[1] == ["other"]  # no audio input: untouched


def test_frame_masks_follow_the_features_frames() -> None:
    made = {"input_features": {"x": torch.zeros(1, 16, 40), "frames": 40}}
    params = {"input_features": None, "input_features_mask": None, "audio_mel_mask": None}
    side = atlas_audio._side_inputs(params, made)
    assert tuple(side["input_features_mask"].shape) == (1, 40)
    assert side["audio_mel_mask"].dtype == torch.bool and not side["audio_mel_mask"].any()


# the default-width DAC: ~35 s on the loaded machine
@pytest.mark.parametrize("name", ["univnet", pytest.param("dac", marks=pytest.mark.slow)])
def test_a_codec_and_a_spectrogram_model_trace_on_fake_tensors(name: str) -> None:
    from opcheck.tracers import api

    ol = api.trace(None, model_spec=f"atlas:transformers/{name}", timeout=240)
    assert ol.complete and ol.recorder == RECORDER_FAKE
    assert any(n.startswith("audio inputs: ") for n in ol.notes)
    assert "aten::convolution" in ol.by_op()


def test_an_optional_audio_input_is_fed_only_to_a_model_with_an_audio_tower() -> None:
    text_model = SimpleNamespace(main_input_name="input_ids")
    params = {"input_ids": None, "input_features": None}
    kwargs = {"input_ids": torch.ones(1, 4, dtype=torch.long)}
    tower = SimpleNamespace(audio_config=SimpleNamespace(), num_mel_bins=64)
    hints = atlas_audio.Hints()
    slots = atlas_audio._slots(text_model, [tower], params, kwargs, [], hints)
    assert list(slots) == ["input_features"]
    assert slots["input_features"][0][1]["x"].shape[1] == 64
    # features that stand for embeddings (no audio tower): left to the model's defaults
    assert not atlas_audio._slots(text_model, [SimpleNamespace(d_model=8)], params, kwargs, [],
                                  hints)  # fmt: skip


def test_features_beside_a_waveform_have_one_frame_per_codec_frame() -> None:
    codec = SimpleNamespace(main_input_name="input_values")
    params = {"input_values": None, "input_features": None}
    cfg = SimpleNamespace(hop_length=320, feature_projection_input_dim=160)
    slots = atlas_audio._slots(codec, [cfg], params, {}, ["input_values", "input_features"],
                               atlas_audio.Hints())  # fmt: skip
    frames_first = [v["x"] for desc, v in slots["input_features"] if "frames, 160" in desc]
    assert frames_first and frames_first[0].shape[1] == atlas_audio.wave_length([cfg]) // 320


class _PatchTower(torch.nn.Module):
    main_input_name = "hidden_states"

    def forward(self, hidden_states: Any, grid_thw: Any) -> Any:
        return hidden_states


def test_hidden_states_made_by_another_convention_are_left_alone() -> None:
    # a Qwen-VL style tower's flattened patches share the name of a codec decoder's latents:
    # made by the patch convention, they are not audio; missing, they are a codec's latents
    patches = torch.randn(16, 1176)
    made = {"hidden_states": patches, "grid_thw": torch.tensor([[1, 4, 4]])}
    kwargs, left = _fit(_PatchTower(), [SimpleNamespace(patch_size=14)], made)
    assert kwargs["hidden_states"] is patches and left == []
    codec = [SimpleNamespace(hidden_size=8, hop_length=320)]
    kwargs, left = _fit(_PatchTower(), codec, {"grid_thw": made["grid_thw"]}, ["hidden_states"])
    assert left == [] and kwargs["hidden_states"].shape != patches.shape


def test_a_streaming_model_gets_its_frames_per_text_token() -> None:
    # Voxtral Realtime adds one audio embedding to each text token's: the config names the
    # feature frames per token (audio_length_per_tok), 200 frames against 8 ids would not add
    cfg = transformers.VoxtralRealtimeConfig(
        audio_config={"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 1,
                      "num_attention_heads": 2, "head_dim": 16, "num_mel_bins": 16},
        text_config={"vocab_size": 100, "hidden_size": 32, "intermediate_size": 64,
                     "num_hidden_layers": 1, "num_attention_heads": 2,
                     "num_key_value_heads": 1, "head_dim": 16},
        hidden_size=32,
    )  # fmt: skip
    torch.manual_seed(0)
    model = transformers.VoxtralRealtimeForConditionalGeneration(cfg).eval()
    made = atlas_hf_inputs.make_inputs(model, cfg, real=True)[1]
    ids = made["input_ids"].shape[-1]
    assert tuple(made["input_features"].shape) == (1, 16, ids * cfg.audio_length_per_tok)
    with torch.no_grad():
        out = model(**made)
    assert tuple(out.logits.shape) == (1, ids, 100)
