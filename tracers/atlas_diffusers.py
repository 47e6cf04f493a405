"""diffusers' model classes for the atlas (UNets, DiT and other transformers, VAEs, ControlNets):
each built from its registered default config (``cls()``; no weights) with inputs named and
sized the way diffusers' pipelines hand them over (latents from ``in_channels`` and
``sample_size``, a timestep, text embeddings of ``cross_attention_dim``). Generic rules only;
a model whose forward wants something else is skipped with the parameters it needs."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
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


def _unset_sizes(cls: Any) -> list[dict[str, Any]]:
    """Values for the sizes a class's ``__init__`` leaves None, which its pipelines' hub
    configs always give (``in_channels``, ``patch_size``, ...): first the channels and heads
    alone, then with the patch, sample and conditioning sizes too, since setting a patch size
    turns some classes onto another input path. Channels are a whole number of the class's
    norm groups."""
    params = inspect.signature(cls.__init__).parameters
    defaults = {k: p.default for k, p in params.items()}
    groups = defaults.get("norm_num_groups")
    chans = groups if isinstance(groups, int) and not isinstance(groups, bool) and groups > 0 else 4
    core: dict[str, Any] = {}
    more: dict[str, Any] = {}
    for key, p in params.items():
        if p.default is not None:
            continue
        if key == "in_channels":
            core[key] = chans
        elif key == "out_channels":
            core[key] = defaults.get("in_channels") or chans
        elif key in ("num_kv_heads", "kv_heads") and isinstance(defaults.get("num_attention_heads"), int):
            core[key] = defaults["num_attention_heads"]
        elif key == "patch_size":
            more[key] = 2
        elif key == "sample_size":
            more[key] = 2 * LATENT
        elif re.search(r"_(channels|dim)(_t5|_\d+)?$", key):
            more[key] = 64
    return [f for f in (core, {**core, **more}) if f]


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
    attempts: list[dict[str, Any]] = []
    for base in ([_shrunk(cls)] if level >= 1 else []) + [{}]:
        for fill in ({}, *_unset_sizes(cls)):
            if {**fill, **base} not in attempts:
                attempts.append({**fill, **base})
    for overrides in attempts:
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
    return _video_frames(model) if video else 0


def _video_frames(model: Any) -> int:
    return 5 if _task(type(model).__name__) == "vae" else 4


def _frames_first(model: Any) -> bool:
    """Video latents laid out ``(B, T, C, H, W)``: a video transformer whose patch embedding is
    a Conv2d applied frame by frame (CogVideoX-style), not a Conv3d over ``(B, C, T, H, W)``."""
    import torch

    if _task(type(model).__name__) != "diffusion-transformer":
        return False
    convs = [m for m in model.modules() if isinstance(m, (torch.nn.Conv2d, torch.nn.Conv3d))]
    return bool(convs) and isinstance(convs[0], torch.nn.Conv2d)


def _text_width(cfg: dict[str, Any], pname: str) -> int:
    """The last width of a conditioning input: the config key named like the parameter
    (``pooled_projections`` -> ``pooled_projection_dim``, ``encoder_hidden_states_t5`` ->
    ``*_dim_t5``), else the width the model projects text from (``caption_channels``,
    ``joint_attention_dim``, ...) before the width it attends with (``cross_attention_dim``)."""
    stem = pname.removesuffix("s")
    tail = pname.rsplit("_", 1)[-1] if pname.startswith("encoder_hidden_states_") else ""
    named = [f"{pname}_dim", f"{stem}_dim"] + [k for k in cfg if tail and "dim" in k
                                                and k.endswith(f"_{tail}")]
    for key in (*named, *TEXT_WIDTH_KEYS):
        v = cfg.get(key)
        if isinstance(v, (list, tuple)) and v:
            v = v[0]
        if isinstance(v, int) and not isinstance(v, bool) and v > 0:
            return v
    return 64


TEXT_WIDTH_KEYS = ("caption_channels", "joint_attention_dim", "text_embed_dim", "encoder_hid_dim",
                   "text_dim", "cross_attention_dim")
LATENT_NAMES = ("sample", "hidden_states", "x", "latents", "z")
TEXT_NAMES = re.compile(r"^(encoder_hidden_states(_t5|_2)?|pooled_projections|cap_feats)$")
MASK_NAMES = re.compile(r"^(encoder_attention_mask(_2)?|encoder_hidden_states_mask|"
                        r"text_embedding_mask(_t5)?)$")


CHANNEL_KEYS = ("in_channels", "input_channels", "in_chans", "audio_channels", "latent_channels")
SAMPLES = 4096  # a 1-D signal's length: a multiple of every hop (product of strides) in use
TEXT_LENGTH = re.compile(r"^max_text_seq_length$|^text_len$|^max_text_length$")


class Facts:
    """What the inputs learnt from the model's own modules (:func:`_fit`): widths of the
    conditioning inputs, latent channels and layout."""

    def __init__(self, model: Any, cfg: dict[str, Any]) -> None:
        size = cfg.get("sample_size") or LATENT
        self.size = min(int(size[0] if isinstance(size, (list, tuple)) else size), LATENT)
        self.chans = int(next((cfg[k] for k in CHANNEL_KEYS if cfg.get(k)), 4))
        self.samples = 0  # > 0: latents are 1-D signals (B, C, samples): the model reads Conv1d
        self.frames = _frames(model, cfg)
        self.frames_first = bool(self.frames) and _frames_first(model)
        # a model whose positional embeddings cover a fixed text length takes that many tokens
        sizes = {k: v for k, v in cfg.items()
                 if isinstance(v, int) and not isinstance(v, bool) and v > 0}
        lengths = [v for k, v in sizes.items() if TEXT_LENGTH.search(k)]
        self.tokens = lengths[0] if lengths else TOKENS
        # a second text encoder's own fixed length (``text_len_t5`` for the ``_t5`` inputs)
        self.tokens_of = {k.rsplit("_", 1)[1]: v for k, v in sizes.items()
                          if TEXT_LENGTH.search(k.rsplit("_", 1)[0])}
        self.packed = 0  # > 0: latents packed into tokens of this width (B, S, C)
        self.widths: dict[str, int] = {}
        self.documented: set[str] = set()  # required inputs made from the docstring's shape
        self._documented(model, cfg)

    def _documented(self, model: Any, cfg: dict[str, Any]) -> None:
        """A 3-D latent the forward's docstring lays out: ``(B, channels, samples)`` (the
        middle dimension channels) is a signal, ``(batch, frames, width)`` (the config sizes
        the last) tokens of that width."""
        params = inspect.signature(model.forward).parameters
        name = next((n for n in LATENT_NAMES if n in params), None)
        dims = _doc_shape(inspect.getdoc(model.forward) or "", name) if name else None
        if dims is None or len(dims) != 3:
            return
        chans, last = _doc_size(dims[1], cfg), _doc_size(dims[2], cfg)
        if chans is not None or "channel" in dims[1]:
            self.samples, self.frames = last or SAMPLES, 0
            self.chans = chans or self.chans
        elif last is not None:
            self.packed, self.frames = last, 0

    def tokens_for(self, pname: str) -> int:
        """The text length of a conditioning input or its mask (``encoder_hidden_states_t5``,
        ``text_embedding_mask_t5``: the config's ``text_len_t5``)."""
        return self.tokens_of.get(pname.rsplit("_", 1)[-1], self.tokens)

    def latent(self) -> tuple[int, ...]:
        if self.samples:
            return (1, self.chans, self.samples)
        if self.packed:
            return (1, (self.size // 2) ** 2, self.packed)
        if not self.frames:
            return (1, self.chans, self.size, self.size)
        if self.frames_first:
            return (1, self.frames, self.chans, self.size, self.size)
        return (1, self.chans, self.frames, self.size, self.size)


def _doc_shape(doc: str, name: str) -> list[str] | None:
    """The dimensions a forward's docstring gives parameter ``name`` (``(batch_size, 1,
    samples)``, ``[B, C, T]``, between backquotes or not), read in its own entry only."""
    entry = re.search(rf"^(\s*){re.escape(name)}\b[^\n]*:(.*?)(?=^\1\w+\b[^\n]*:|\Z)", doc,
                      re.M | re.S)
    if entry is None:
        return None
    shape = re.search(r"[(\[]\s*(\w[\w *]*(?:,\s*\w[\w *]*){1,5})\s*[)\]]", entry.group(0))
    return [d.strip() for d in shape.group(1).split(",")] if shape else None


BATCH = frozenset({"batch", "batch_size", "batch size", "B", "N"})


def _documented(model: Any, cfg: dict[str, Any], pname: str) -> Any:
    """A float input of the shape the forward's docstring gives it, where the config sizes
    at least one of its dimensions (``(batch_size, embedding_dim)``,
    ``(batch, steps, hidden_size)``): the batch 1, any other free dimension :data:`TOKENS`.
    None when undocumented or no dimension is the config's."""
    import torch

    dims = _doc_shape(inspect.getdoc(model.forward) or "", pname) or []
    sizes = [None if d in BATCH else _doc_size(d, cfg) for d in dims]
    if not any(sizes):
        return None
    return torch.randn(*[1 if d in BATCH else size or TOKENS
                         for d, size in zip(dims, sizes, strict=True)])


def _doc_size(dim: str, cfg: dict[str, Any]) -> int | None:
    """A documented dimension's size: a number, a config key or a product of them (``1``,
    ``audio_channels``, ``num_condition_layers * condition_hidden_dim``); None for a free
    one (``samples``, ``T``)."""
    size = 1
    for term in dim.split("*"):
        term = term.strip()
        value = int(term) if term.isdigit() else cfg.get(term)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            return None
        size *= value
    return size


def _makers(cfg: dict[str, Any], facts: Facts) -> dict[str, Any]:
    """Inputs by forward parameter name, the way diffusers' pipelines make them."""
    import torch

    latent = facts.latent
    tokens = latent()[1] if facts.packed else (facts.size // 2) ** 2
    rope_axes = len(cfg.get("axes_dims_rope") or (0, 0, 0))
    pixels = facts.size * 8  # the VAE's usual scale: a resolution condition in pixels
    ceoc = cfg.get("conditioning_embedding_out_channels")
    made: dict[str, Any] = {
        **{n: lambda: torch.randn(*latent()) for n in LATENT_NAMES},
        "timestep": lambda: torch.tensor([10]),
        "timesteps": lambda: torch.tensor([10]),
        "t": lambda: torch.tensor([10]),
        "class_labels": lambda: torch.tensor([1]),
        "conditioning_scale": lambda: 1.0,
        "original_size": lambda: torch.tensor([[pixels, pixels]], dtype=torch.float32),
        "target_size": lambda: torch.tensor([[pixels, pixels]], dtype=torch.float32),
        "crop_coords": lambda: torch.tensor([[0, 0]], dtype=torch.float32),
        # the six size ids in one (original h, w; target h, w; crop top, left) and a style id
        "image_meta_size": lambda: torch.tensor([[pixels, pixels, pixels, pixels, 0, 0]],
                                                dtype=torch.float32),
        "style": lambda: torch.tensor([0]),
        "img_ids": lambda: torch.zeros(tokens, rope_axes),
        "txt_ids": lambda: torch.zeros(facts.tokens, rope_axes),
    }
    if isinstance(ceoc, (list, tuple)) and cfg.get("conditioning_channels"):
        side = facts.size * 2 ** (len(ceoc) - 1)  # its conditioning embedding downsamples
        made["controlnet_cond"] = lambda: torch.randn(1, int(cfg["conditioning_channels"]),
                                                      side, side)
    else:  # a latent-space ControlNet: the condition is laid out as the latents
        made["controlnet_cond"] = lambda: torch.randn(*latent())
    if any(v is True for k, v in cfg.items() if "guidance" in k):
        made["guidance"] = lambda: torch.tensor([3.5])
    # micro-conditioning: the image's resolution and aspect ratio (PixArt-style); SDXL-style
    # UNets add pooled text embeddings and six size/crop ids
    extra: dict[str, Callable[[], Any]] = {
        "resolution": lambda: torch.tensor([[pixels, pixels]], dtype=torch.float32),
        "aspect_ratio": lambda: torch.tensor([[1.0]])}
    if cfg.get("addition_embed_type") == "text_time":
        per = int(cfg.get("addition_time_embed_dim") or 256)
        text = int(cfg.get("projection_class_embeddings_input_dim") or 6 * per) - 6 * per
        extra = {"text_embeds": lambda: torch.randn(1, max(text, 1)),
                 "time_ids": lambda: torch.randn(1, 6)}
    made["added_cond_kwargs"] = lambda: {k: f() for k, f in extra.items()}
    return made


def _inputs(model: Any, cfg: dict[str, Any], facts: Facts) -> dict[str, Any]:
    import torch

    params = inspect.signature(model.forward).parameters
    made = _makers(cfg, facts)
    kwargs: dict[str, Any] = {}
    missing = []
    for pname, p in params.items():
        if p.kind not in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY):
            continue
        required = p.default is inspect.Parameter.empty
        if pname == "class_labels" and not _class_conditioned(cfg):
            continue
        if TEXT_NAMES.match(pname):
            width = facts.widths.get(pname) or _text_width(cfg, pname)
            shape = ((1, width) if pname == "pooled_projections"
                     else (1, facts.tokens_for(pname), width))
            kwargs[pname] = torch.randn(*shape)
        elif MASK_NAMES.match(pname):
            kwargs[pname] = torch.ones(1, facts.tokens_for(pname), dtype=torch.long)
        elif pname in made and (required or pname not in ("controlnet_cond", "conditioning_scale")):
            kwargs[pname] = made[pname]()  # optional in the signature, yet pipelines pass them
        elif required and (doc := _documented(model, cfg, pname)) is not None:
            kwargs[pname] = doc
            facts.documented.add(pname)
        elif required:
            missing.append(pname)
    if missing:
        raise ModelSkip(f"{type(model).__name__}: needs inputs a pipeline makes "
                        f"({', '.join(missing)}), not made from the config alone")  # fmt: skip
    return kwargs


class _Misfit(Exception):
    def __init__(self, name: str, module: Any, got: Any) -> None:
        super().__init__(name)
        self.name, self.module, self.got = name, module, got


def _expects(module: Any) -> tuple[int, int] | None:
    """(dim, width) a module reads from its first input: a Linear or a norm its last dim, a
    convolution dim 1."""
    import torch

    if isinstance(module, torch.nn.Linear):
        return -1, int(module.in_features)
    if isinstance(module, (torch.nn.LayerNorm, torch.nn.RMSNorm)) and module.normalized_shape:
        return -1, int(module.normalized_shape[-1])
    if isinstance(module, (torch.nn.Conv1d, torch.nn.Conv2d, torch.nn.Conv3d)):
        return 1, int(module.in_channels)
    return None


def _misfit(model: Any, kwargs: dict[str, Any]) -> _Misfit | Exception | None:
    """Run the forward once and stop at the first module that receives one of ``kwargs``'
    tensors with another width than it reads (None: the forward ran; another exception: it
    failed elsewhere)."""
    import torch

    ids = {id(v): k for k, v in kwargs.items() if isinstance(v, torch.Tensor) and v.dim() >= 2
           and (k in LATENT_NAMES or TEXT_NAMES.match(k))}

    def hook(module: Any, args: tuple[Any, ...]) -> None:
        name = ids.get(id(args[0])) if args else None
        want = _expects(module) if name else None
        if name is None or want is None:
            return
        t = args[0]
        ndim = {torch.nn.Conv1d: 3, torch.nn.Conv2d: 4, torch.nn.Conv3d: 5}.get(type(module))
        # image-layout latents straight into a Linear: the model takes them packed as tokens
        packed = isinstance(module, torch.nn.Linear) and name in LATENT_NAMES and t.dim() >= 4
        if t.shape[want[0]] != want[1] or (ndim and t.dim() not in (ndim, ndim - 1)) or packed:
            raise _Misfit(name, module, t)
        del ids[id(t)]  # read as it is: the rest of the forward may reuse it anywhere

    handles = [m.register_forward_pre_hook(hook) for m in model.modules()]
    try:
        with torch.no_grad():
            model(**kwargs)
    except _Misfit as found:
        return found
    except Exception as exc:
        return exc
    finally:
        for h in handles:
            h.remove()
    return None


def _refit(facts: Facts, found: _Misfit) -> bool:
    """Learn from a misfit what the input should have been; False: nothing to learn."""
    import torch

    dim, width = _expects(found.module) or (0, 0)
    if TEXT_NAMES.match(found.name) and dim == -1 and facts.widths.get(found.name) != width:
        facts.widths[found.name] = width
        return True
    if found.name not in LATENT_NAMES:
        return False
    if isinstance(found.module, torch.nn.Linear) and not facts.packed:
        facts.packed = width  # latents packed into patch tokens before the first projection
        return True
    spatial = {torch.nn.Conv1d: 1, torch.nn.Conv2d: 2, torch.nn.Conv3d: 3}.get(type(found.module))
    if spatial == 1 and not facts.samples:
        facts.samples, facts.chans, facts.frames = SAMPLES, width, 0
        return True
    if spatial == 2 and facts.frames and found.got.dim() == 5:  # an image model after all
        facts.frames = 0
        facts.chans = width
        return True
    if dim == 1 and facts.frames and not facts.frames_first and found.got.shape[2] == width:
        facts.frames_first = True
        return True
    if dim == 1 and facts.chans != width:
        facts.chans = width
        return True
    return False


def make_inputs(model: Any, *, real: bool) -> dict[str, Any]:
    """The forward's inputs made from the config, then fitted to the modules that read them
    (up to :data:`FITS` meta forwards): the width a conditioning input is projected from, the
    latents' channels, layout and packing."""
    cfg = dict(model.config)
    facts = Facts(model, cfg)
    kwargs = _inputs(model, cfg, facts)
    tried_layouts = False
    found: _Misfit | Exception | None = None
    for _ in range(FITS):
        found = _misfit(model, _placed(kwargs, real))
        if found is None:
            break
        if isinstance(found, _Misfit):
            if not _refit(facts, found):
                break
        elif _relaid(model, facts, found):
            pass  # the other latent layout, made below
        elif facts.frames and not tried_layouts:
            tried_layouts = True
            other = _other_layout(model, cfg, facts, real)
            if other is not None:
                kwargs, found = other, None
            break
        else:
            break
        kwargs = _inputs(model, cfg, facts)
    if facts.documented and found is not None:
        # a guess from the docstring the forward does not take is no input of the model's
        raise ModelSkip(f"{type(model).__name__}: needs inputs a pipeline makes "
                        f"({', '.join(sorted(facts.documented))}), not made from the config alone")
    kwargs = _placed(kwargs, real)
    if "return_dict" in inspect.signature(model.forward).parameters:
        kwargs["return_dict"] = False
    return kwargs


FITS = 4


def _other_layout(model: Any, cfg: dict[str, Any], facts: Facts,
                  real: bool) -> dict[str, Any] | None:
    """Video inputs the forward runs with, once each: the other layout (frames first or
    channels first), then a single frame (an image specialization of a video model, which
    refuses a temporal cache); None, and the facts as they were, when neither runs."""
    frames, first = facts.frames, facts.frames_first
    for facts.frames, facts.frames_first in ((frames, not first), (1, first)):
        other = _inputs(model, cfg, facts)
        if _misfit(model, _placed(other, real)) is None:
            return other
    facts.frames, facts.frames_first = frames, first
    return None


# the forward unpacking its latents' shape into more (or fewer) names than the latents have
# dimensions: ``_, _, num_frames, height, width = x.shape`` on image latents
_UNPACK = re.compile(r"not enough values to unpack \(expected (\d+), got (\d+)\)"
                     r"|too many values to unpack \(expected (\d+)\)")


def _relaid(model: Any, facts: Facts, failed: Exception) -> bool:
    """Image latents a video model unpacks as ``(B, C, T, H, W)``, or video latents an image
    model unpacks as ``(B, C, H, W)``: the other layout (True), by the unpacking's error."""
    m = _UNPACK.search(str(failed)) if isinstance(failed, ValueError) else None
    if m is None or facts.samples or facts.packed:
        return False
    rank = len(facts.latent())
    if m.group(1) and int(m.group(2)) == rank == 4 and int(m.group(1)) == 5 and not facts.frames:
        facts.frames = _video_frames(model)
        return True
    if m.group(3) and int(m.group(3)) == 4 and rank == 5 and facts.frames:
        facts.frames = 0
        return True
    return False


def _placed(kwargs: dict[str, Any], real: bool) -> dict[str, Any]:
    """On the meta device for the fake-tensor trace (nested dicts too)."""
    if real:
        return kwargs
    return {k: _placed(v, real) if isinstance(v, dict)
            else v.to("meta") if hasattr(v, "to") else v for k, v in kwargs.items()}
