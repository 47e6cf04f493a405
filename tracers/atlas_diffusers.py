"""diffusers' model classes for the atlas (UNets, DiT and other transformers, VAEs, ControlNets):
each built from its registered default config (``cls()``; no weights) with inputs named and
sized the way diffusers' pipelines hand them over (latents from ``in_channels`` and
``sample_size``, a timestep, text embeddings of ``cross_attention_dim``). Generic rules only;
a model whose forward wants something else is skipped with the parameters it needs."""

from __future__ import annotations

import inspect
import re
from typing import Any

from opcheck.tracers.atlas_build import Built, ModelSkip, missing_package, one_line

LATENT = 16  # latent height and width: small, divisible by every patch size in use
TOKENS = 8  # text tokens of the conditioning embeddings
_WRAPPERS = ("ModelMixin", "AutoModel", "Multi")


def _task(name: str) -> str:
    if "ControlNet" in name or "Adapter" in name:
        return "controlnet"
    if "UNet" in name:
        return "diffusion-unet"
    if re.search(r"Autoencoder|VAE|Vae|VQModel|Tokenizer|Vocoder", name):
        return "vae"
    if "Transformer" in name or "DiT" in name:
        return "diffusion-transformer"
    return "other"


def architectures(library: str) -> list[dict[str, Any]]:
    import diffusers.models as dm
    from diffusers import ModelMixin

    rows = []
    for name in sorted(n for n in dir(dm) if n[:1].isupper()):
        if name.startswith(_WRAPPERS):
            continue
        row: dict[str, Any] = {"name": name, "model_class": name, "task": _task(name),
                               "family": ""}  # fmt: skip
        try:
            cls = getattr(dm, name)
        except Exception as exc:
            pkg = missing_package(exc)
            row["skip"] = f"needs the {pkg} package, not installed" if pkg else one_line(exc)
            rows.append(row)
            continue
        if not (isinstance(cls, type) and issubclass(cls, ModelMixin)):
            continue
        row["family"] = cls.__module__.split(".")[-1]
        rows.append(row)
    return rows


def _shrunk(cls: Any) -> dict[str, Any]:
    """Config overrides: fewer layers and blocks where the config counts them."""
    params = inspect.signature(cls.__init__).parameters
    out: dict[str, Any] = {}
    for key in ("num_layers", "num_single_layers", "num_refiner_layers", "layers_per_block"):
        p = params.get(key)
        if p is not None and isinstance(p.default, int) and p.default > 1:
            out[key] = 1
    return out


def build(
    library: str, name: str, *, train: bool = False, real: bool = False, shrink: int | None = None
) -> Built:
    import diffusers.models as dm
    import torch

    cls = getattr(dm, name, None)
    if cls is None:
        raise ModelSkip(f"{name}: not a diffusers model class")
    level = 1 if shrink is None else shrink
    errors: list[str] = []
    for overrides in ([_shrunk(cls)] if level >= 1 else []) + [{}]:
        try:
            if real:
                torch.manual_seed(0)
                model = cls(**overrides)
            else:
                with torch.device("meta"):
                    model = cls(**overrides)
            break
        except MemoryError:
            raise
        except Exception as exc:
            pkg = missing_package(exc)
            if pkg:
                raise ModelSkip(f"{name}: needs the {pkg} package, not installed") from None
            errors.append(one_line(exc))
    else:
        raise ModelSkip(f"{name}: its default config does not build: {errors[-1]}")
    model.eval()
    return model, (), make_inputs(model, real=real)


def _class_conditioned(cfg: dict[str, Any]) -> bool:
    """Whether the config gives the model class embeddings (the pipeline passes labels)."""
    return any(v not in (None, False, "") for k, v in cfg.items()
               if "class" in k or "ada_norm" in k)  # fmt: skip


def _frames(model: Any, cfg: dict[str, Any]) -> int:
    """Latent frames for a video model (its latents are ``(B, C, T, H, W)``), 0 for an image
    model: one with 3-D convolutions, a 3D/Video class name or temporal config keys. Causal
    video VAEs take 1 + 4k frames; transformers' temporal patch sizes divide 4."""
    import torch

    temporal = ("num_frames", "patch_size_t", "temporal_compression_ratio", "sample_frames")
    video = (re.search(r"3D|Video", type(model).__name__) is not None
             or any(k in cfg for k in temporal)
             or any(isinstance(m, torch.nn.Conv3d) for m in model.modules()))
    if not video:
        return 0
    return 5 if _task(type(model).__name__) == "vae" else 4


def make_inputs(model: Any, *, real: bool) -> dict[str, Any]:
    import torch

    cfg = dict(model.config)
    params = inspect.signature(model.forward).parameters
    chans = int(cfg.get("in_channels") or cfg.get("latent_channels") or 4)
    size = cfg.get("sample_size") or LATENT
    size = min(int(size[0] if isinstance(size, (list, tuple)) else size), LATENT)
    frames = _frames(model, cfg)
    latent = (1, chans, frames, size, size) if frames else (1, chans, size, size)
    ctx = int(cfg.get("cross_attention_dim") or cfg.get("joint_attention_dim")
              or cfg.get("caption_channels") or cfg.get("text_embed_dim") or 64)  # fmt: skip
    if isinstance(cfg.get("cross_attention_dim"), (list, tuple)):
        ctx = int(cfg["cross_attention_dim"][0])
    makers = {
        "sample": lambda: torch.randn(*latent),
        "hidden_states": lambda: torch.randn(*latent),
        "x": lambda: torch.randn(*latent),
        "timestep": lambda: torch.tensor([10]),
        "timesteps": lambda: torch.tensor([10]),
        "encoder_hidden_states": lambda: torch.randn(1, TOKENS, ctx),
        "class_labels": lambda: torch.tensor([1]),
        "pooled_projections": lambda: torch.randn(1, int(cfg.get("pooled_projection_dim") or ctx)),
    }
    kwargs: dict[str, Any] = {}
    missing = []
    for pname, p in params.items():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        required = p.default is inspect.Parameter.empty
        if pname == "class_labels" and not _class_conditioned(cfg):
            continue
        if pname in makers:  # optional in the signature, yet every pipeline passes them
            kwargs[pname] = makers[pname]()
        elif required:
            missing.append(pname)
    if missing:
        raise ModelSkip(f"{type(model).__name__}: needs inputs a pipeline makes "
                        f"({', '.join(missing)}), not made from the config alone")  # fmt: skip
    if not real:
        kwargs = {k: v.to("meta") for k, v in kwargs.items()}
    if "return_dict" in params:
        kwargs["return_dict"] = False
    return kwargs
