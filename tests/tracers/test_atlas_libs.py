"""The atlas's library conventions on tiny configs (issue 36, session 11): diffusers inputs
fitted to the modules that read them, pipeline-made inputs from parameter names and config, and
the real-data recorder on an op a composite kernel hands a wrapped scalar."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import pytest

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")
diffusers = pytest.importorskip("diffusers")

from opcheck.tracers import atlas_diffusers  # noqa: E402


def _runs(model: Any, kwargs: dict[str, Any]) -> None:
    with torch.no_grad():
        model(**kwargs)


class TextFrom24(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    """Projects text from a width its config names in no key the atlas knows, latents packed
    into tokens before the first projection."""

    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, in_channels: int = 4, cross_attention_dim: int = 16,
                 context_width: int = 24) -> None:
        super().__init__()
        self.context = torch.nn.Linear(context_width, cross_attention_dim)
        self.x_embedder = torch.nn.Linear(in_channels * 4, cross_attention_dim)

    def forward(self, hidden_states: Any, encoder_hidden_states: Any, timestep: Any,
                return_dict: bool = True) -> Any:
        ctx = self.context(encoder_hidden_states)
        x = self.x_embedder(hidden_states)
        return (x @ ctx.transpose(1, 2)).sum() + timestep


@pytest.mark.parametrize("real", [False, True])
def test_text_width_and_packed_latents_come_from_the_modules_that_read_them(real: bool) -> None:
    model = TextFrom24() if real else TextFrom24().to("meta")
    kwargs = atlas_diffusers.make_inputs(model, real=real)
    assert kwargs["encoder_hidden_states"].shape[-1] == 24  # not cross_attention_dim's 16
    assert kwargs["hidden_states"].dim() == 3 and kwargs["hidden_states"].shape[-1] == 16
    assert kwargs["hidden_states"].is_meta is not real
    if real:
        _runs(model, kwargs)


class Waveform(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    """An audio autoencoder: its first module is a Conv1d over (B, channels, samples)."""

    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, audio_channels: int = 2, latent_channels: int = 8) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(audio_channels, latent_channels, 4, stride=4)

    def forward(self, sample: Any, return_dict: bool = True) -> Any:
        return self.conv(sample)


def test_a_model_reading_its_latents_with_a_conv1d_gets_a_signal() -> None:
    model = Waveform()
    kwargs = atlas_diffusers.make_inputs(model, real=True)
    assert tuple(kwargs["sample"].shape) == (1, 2, atlas_diffusers.SAMPLES)
    _runs(model, kwargs)


def test_frame_by_frame_video_latents_are_frames_first_and_text_as_long_as_its_positions(
        ) -> None:
    from diffusers import CogVideoXTransformer3DModel

    model = CogVideoXTransformer3DModel(
        num_attention_heads=2, attention_head_dim=8, in_channels=4, out_channels=4, num_layers=1,
        sample_width=8, sample_height=8, sample_frames=5, text_embed_dim=12, time_embed_dim=8,
        max_text_seq_length=6, patch_size=2, temporal_compression_ratio=4)
    kwargs = atlas_diffusers.make_inputs(model, real=True)
    frames, chans = kwargs["hidden_states"].shape[1:3]
    assert chans == 4 and frames > 1  # (B, T, C, H, W): its patch embedding is a Conv2d
    assert tuple(kwargs["encoder_hidden_states"].shape) == (1, 6, 12)
    _runs(model, kwargs)


def test_an_sdxl_style_unet_gets_its_micro_conditioning() -> None:
    from diffusers import UNet2DConditionModel

    model = UNet2DConditionModel(
        sample_size=8, block_out_channels=(8, 16), layers_per_block=1, norm_num_groups=4,
        down_block_types=("CrossAttnDownBlock2D", "DownBlock2D"),
        up_block_types=("UpBlock2D", "CrossAttnUpBlock2D"), cross_attention_dim=16,
        attention_head_dim=2, addition_embed_type="text_time", addition_time_embed_dim=4,
        projection_class_embeddings_input_dim=6 * 4 + 12)
    kwargs = atlas_diffusers.make_inputs(model, real=True)
    cond = kwargs["added_cond_kwargs"]
    assert tuple(cond["text_embeds"].shape) == (1, 12) and tuple(cond["time_ids"].shape) == (1, 6)
    _runs(model, kwargs)


REMAINDER = r"""
import json, torch
from opcheck.tracers import atlas_trace

class M(torch.nn.Module):
    def forward(self, x):
        idx = x.flatten().topk(3).indices
        return idx % 5, idx // 5

ol = atlas_trace.record_real(M(), (torch.arange(12.0).reshape(3, 4),), {}, train=False,
                             label="m")
print(json.dumps(sorted(u.op for u in ol.ops)))
"""


def test_the_real_data_recorder_takes_a_wrapped_scalar_handed_over_as_a_number() -> None:
    done = subprocess.run([sys.executable, "-c", REMAINDER], capture_output=True, text=True,
                          timeout=240, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    ops = json.loads(done.stdout.strip().splitlines()[-1])
    assert "aten::remainder.Scalar" in ops and "aten::topk" in ops


class UnsetSizes(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    """A class whose pipelines always give its channels and patch size: None by default, and
    the channels go through a GroupNorm."""

    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, in_channels: int | None = None, patch_size: int | None = None,
                 norm_num_groups: int = 8, encoder_hid_dim_type: str | None = None) -> None:
        super().__init__()
        self.norm = torch.nn.GroupNorm(norm_num_groups, in_channels)  # type: ignore[arg-type]
        self.proj = torch.nn.Conv2d(in_channels, 4, patch_size, stride=patch_size)  # type: ignore[arg-type]


def test_sizes_a_default_config_leaves_unset_are_filled_channels_first() -> None:
    with pytest.raises(TypeError):
        UnsetSizes()
    fills = atlas_diffusers._unset_sizes(UnsetSizes)
    assert fills[0] == {"in_channels": 8}  # a whole number of its norm groups
    assert fills[1] == {"in_channels": 8, "patch_size": 2}  # a `_type` is no size
    model = UnsetSizes(**fills[1])
    assert model.norm.num_channels == 8 and model.proj.stride == (2, 2)


class MonoWaveform(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    """An audio VAE that checks its input before any module reads it, so only its docstring
    says what it takes."""

    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, latent_channels: int = 8, sample_size: int = 32) -> None:
        super().__init__()
        self.conv = torch.nn.Conv1d(1, latent_channels, 4, stride=4)

    def forward(self, sample: Any, return_dict: bool = True) -> Any:
        """Encode then decode a waveform.

        Args:
            sample (`torch.Tensor`):
                Mono waveform of shape `[batch_size, 1, samples]`.
            return_dict (`bool`): unused (batch, 7, 7).
        """
        if sample.dim() != 3 or sample.shape[1] != 1:
            raise ValueError(f"`sample` must have shape [batch_size, 1, samples], got {sample.shape}")
        return self.conv(sample)


class Tokens(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, layers: int = 3, hidden_dim: int = 4) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(layers * hidden_dim, 2)

    def forward(self, hidden_states: Any) -> Any:
        """Args:
            hidden_states (`torch.Tensor` of shape `(batch, frames, layers * hidden_dim)`):
                Per-frame states.
        """
        if hidden_states.dim() != 3:
            raise ValueError("too many values to unpack (expected 3)")
        return self.proj(hidden_states)


def test_a_latent_the_docstring_lays_out_in_three_dimensions() -> None:
    mono = MonoWaveform()
    kwargs = atlas_diffusers.make_inputs(mono, real=True)
    assert tuple(kwargs["sample"].shape) == (1, 1, atlas_diffusers.SAMPLES)  # not latent_channels
    _runs(mono, kwargs)
    tokens = Tokens()
    kwargs = atlas_diffusers.make_inputs(tokens, real=True)
    assert kwargs["hidden_states"].dim() == 3 and kwargs["hidden_states"].shape[-1] == 12
    _runs(tokens, kwargs)


class Prior(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    """Takes a required embedding only a pipeline makes, whose shape its docstring gives."""

    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, embedding_dim: int = 6, width: int = 6) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(width, 2)

    def forward(self, hidden_states: Any, proj_embedding: Any) -> Any:
        """Args:
            hidden_states (`torch.Tensor` of shape `(batch_size, channels, height, width)`):
                The latents.
            proj_embedding (`torch.Tensor` of shape `(batch_size, embedding_dim)`):
                Projected embedding vector the denoising process is conditioned on.
        """
        return self.proj(proj_embedding)


def test_a_required_input_the_docstring_shapes_is_made_only_when_the_forward_takes_it() -> None:
    kwargs = atlas_diffusers.make_inputs(Prior(), real=True)
    assert tuple(kwargs["proj_embedding"].shape) == (1, 6)  # embedding_dim from the config
    with pytest.raises(atlas_diffusers.ModelSkip, match=r"needs inputs a pipeline makes \(proj_embedding\)"):
        atlas_diffusers.make_inputs(Prior(embedding_dim=4), real=True)  # the forward wants 6


class OneFrameAutoencoderKL(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    """An image specialization of a video autoencoder: no 3D in its name, no temporal config
    key, no Conv3d; its forward unpacks (B, C, T, H, W) and refuses more than one frame."""

    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, in_channels: int = 3) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(in_channels, 4, 3, padding=1)

    def forward(self, sample: Any, return_dict: bool = True) -> Any:
        _, _, frames, _, _ = sample.shape
        if frames != 1:
            raise ValueError("this convolution folds the single frame away: no temporal cache")
        return self.conv(sample[:, :, 0])


class FrameUnpacker(OneFrameAutoencoderKL):
    def forward(self, sample: Any, return_dict: bool = True) -> Any:
        b, c, t, h, w = sample.shape  # any number of frames
        return self.conv(sample.permute(0, 2, 1, 3, 4).reshape(b * t, c, h, w))


def test_image_latents_a_forward_unpacks_as_video_are_given_frames() -> None:
    model = FrameUnpacker()
    kwargs = atlas_diffusers.make_inputs(model, real=True)
    assert kwargs["sample"].dim() == 5 and kwargs["sample"].shape[2] > 1
    _runs(model, kwargs)


def test_a_video_model_refusing_several_frames_gets_one() -> None:
    model = OneFrameAutoencoderKL()
    kwargs = atlas_diffusers.make_inputs(model, real=True)
    assert tuple(kwargs["sample"].shape[:3]) == (1, 3, 1)
    _runs(model, kwargs)
    fake = atlas_diffusers.make_inputs(model, real=False)
    assert fake["sample"].device.type == "meta" and fake["sample"].shape[2] == 1


class TwoTextEncoders(diffusers.ModelMixin, diffusers.ConfigMixin):  # type: ignore[misc]
    """Two text encoders of their own fixed lengths (the config's text_len and text_len_t5),
    their masks, and a pipeline's six size ids and style id (optional in the signature)."""

    @diffusers.configuration_utils.register_to_config  # type: ignore[untyped-decorator]
    def __init__(self, in_channels: int = 4, cross_attention_dim: int = 8,
                 cross_attention_dim_t5: int = 12, text_len: int = 5,
                 text_len_t5: int = 7) -> None:
        super().__init__()
        self.pos = torch.nn.Parameter(torch.zeros(text_len + text_len_t5, 1))
        self.t5 = torch.nn.Linear(cross_attention_dim_t5, cross_attention_dim)
        self.size_proj = torch.nn.Linear(6, 1)
        self.style = torch.nn.Embedding(2, 1)

    def forward(self, hidden_states: Any, timestep: Any, encoder_hidden_states: Any = None,
                text_embedding_mask: Any = None, encoder_hidden_states_t5: Any = None,
                text_embedding_mask_t5: Any = None, image_meta_size: Any = None,
                style: Any = None, return_dict: bool = True) -> Any:
        text = torch.cat([encoder_hidden_states, self.t5(encoder_hidden_states_t5)], dim=1)
        mask = torch.cat([text_embedding_mask, text_embedding_mask_t5], dim=-1)
        text = text + self.pos * mask[..., None]  # the lengths the positions cover
        extra = self.size_proj(image_meta_size) + self.style(style)
        return hidden_states.mean() + text.mean() + extra.mean() + timestep


def test_each_text_encoder_gets_its_own_length_and_the_size_and_style_ids() -> None:
    model = TwoTextEncoders()
    kwargs = atlas_diffusers.make_inputs(model, real=True)
    assert tuple(kwargs["encoder_hidden_states"].shape) == (1, 5, 8)
    assert tuple(kwargs["encoder_hidden_states_t5"].shape) == (1, 7, 12)
    assert tuple(kwargs["text_embedding_mask_t5"].shape) == (1, 7)
    assert tuple(kwargs["image_meta_size"].shape) == (1, 6)
    _runs(model, kwargs)
