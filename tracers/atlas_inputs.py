"""The non-text inputs of transformers' models for the atlas: images, videos, audio and time
series made from the config by the library's naming conventions, and the placeholder tokens a
multimodal model expects in ``input_ids`` for them; and which of a model's towers (vision,
audio, ...) a trace ran (:func:`watch_towers`, :func:`forward_path`).

Conventions are keyed by the forward's parameter names and config attributes, never by model
type: the next release's multimodal models reuse them. torch is imported lazily.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any

from opcheck.tracers.atlas_hf_config import first_value
from opcheck.tracers.atlas_layouts import IMAGE_SIZE_KEYS, _int, video_frames

# a sub-module whose name holds one of these is a tower fed by a non-text input
TOWER_WORDS = ("vision", "visual", "audio", "speech", "video", "image_encoder", "vqmodel")
TOWERS_ATTR = "_opcheck_towers"  # {tower path: ran} on the model instance
FULL = "full"
# config attributes naming the placeholder token of each modality, in order of preference
TOKEN_KEYS = {
    "image": ("image_token_id", "image_token_index"),
    "audio": ("audio_token_id", "audio_token_index"),
    "video": ("video_token_id", "video_token_index"),
}
# the main input of each modality's tower, by the forward's parameter name
MEDIA = {"pixel_values": "image", "pixel_values_videos": "video", "input_features": "audio",
         "input_values": "audio"}  # fmt: skip
FEATURE_FNS = {"image": "get_image_features", "audio": "get_audio_features",
               "video": "get_video_features"}  # fmt: skip
# the tokens a processor puts around a modality's placeholders (position ids count from them)
BOUNDS = {
    "image": (("vision_start_token_id", "boi_token_id", "boi_token_index", "image_start_token_id"),
              ("vision_end_token_id", "eoi_token_id", "eoi_token_index", "image_end_token_id")),
    "audio": (("audio_start_token_id", "audio_bos_token_id"),
              ("audio_end_token_id", "audio_eos_token_id")),
}  # fmt: skip


# the modalities whose towers the last inputs made fed (read by the atlas trace: a failed whole
# forward is retried on the text path), and the switch making inputs for the text path only
FED: set[str] = set()
_TEXT_ONLY: list[bool] = []


@contextmanager
def text_only() -> Iterator[None]:
    """Inputs made inside leave every tower idle (the text path of a multimodal model)."""
    _TEXT_ONLY.append(True)
    try:
        yield
    finally:
        _TEXT_ONLY.pop()


def _side(v: Any, default: int = 224) -> int:
    if isinstance(v, dict):
        v = v.get("height") or v.get("shortest_edge")
    return _int(v, default)


def fit_vocab(cfgs: Iterable[Any]) -> None:
    """A vocabulary holding the config's special token ids: default configs name placeholder
    tokens (``image_token_id`` ...) past their own ``vocab_size`` (the released tokenizer adds
    them), and the embedding would be indexed out of range."""
    cfgs = list(cfgs)
    ids = [v for c in cfgs for k, v in vars(c).items()
           if k.endswith(("token_id", "token_index")) and isinstance(v, int)
           and not isinstance(v, bool)]  # fmt: skip
    top = max(ids, default=-1)
    for c in cfgs:
        v = vars(c).get("vocab_size")
        if isinstance(v, int) and 0 < v <= top:
            c.vocab_size = top + 1


def fit_placeholder_ids(cfgs: Iterable[Any]) -> None:
    """A placeholder token id where a default config names the attribute but leaves it unset
    (BLIP-2, InstructBLIP: the processor adds the token): the id just past the text
    vocabulary, which :func:`fit_vocab` then makes room for."""
    for c in cfgs:
        d = vars(c)
        vocab = first_value([*sub_configs(c, "text")[:-1], c], "vocab_size")
        if not isinstance(vocab, int):
            continue
        for keys in TOKEN_KEYS.values():
            unset = [k for k in keys if k in d and d[k] is None]
            if unset and not any(isinstance(d.get(k), int) for k in keys):
                setattr(c, unset[0], vocab)


def fit_image_tokens(cfgs: Iterable[Any]) -> None:
    """``mm_tokens_per_image`` no larger than the patches the default vision config makes: a
    square of more tokens per side than patches per side pools with a zero-size kernel."""
    for c in cfgs:
        n = vars(c).get("mm_tokens_per_image")
        vision = vars(c).get("vision_config")
        if not isinstance(n, int) or vision is None:
            continue
        per_side = _side(first_value([vision], "image_size")) // _int(first_value([vision], "patch_size"), 14)
        if per_side and round(n**0.5) > per_side:
            c.mm_tokens_per_image = per_side * per_side
    for c in cfgs:  # a pixel shuffle by scale_factor needs patches per side it divides
        scale = vars(c).get("scale_factor")
        vision = vars(c).get("vision_config")
        if isinstance(scale, int) and scale > 1 and vision is not None:
            per_side = _side(first_value([vision], "image_size")) // _int(
                first_value([vision], "patch_size"), 14)
            if per_side % scale:
                c.scale_factor = 1


def fit_tower_widths(cfg: Any) -> None:
    """A tower's output width equal to the text model's hidden size it feeds: some default
    configs pair a tower and a text model of different released sizes (``out_hidden_size``,
    or ``hidden_size`` where the tower's own width is ``embed_dim``)."""
    text = vars(cfg).get("text_config")
    width = vars(text).get("hidden_size") if text is not None else None
    if not isinstance(width, int):
        return
    for key, sub in vars(cfg).items():
        if sub is text or not key.endswith("_config") or not hasattr(sub, "to_dict"):
            continue
        d = vars(sub)
        if isinstance(d.get("text_hidden_size"), int):
            # the tower's own copy of the text width (its merger projects to it), which the
            # composite config's constructor tied to the text config before the atlas narrowed it
            sub.text_hidden_size = width
        if isinstance(d.get("out_hidden_size"), int):
            sub.out_hidden_size = width
        elif isinstance(d.get("embed_dim"), int) and isinstance(d.get("hidden_size"), int):
            sub.hidden_size = width


def sub_configs(cfg: Any, word: str) -> list[Any]:
    """The sub-configs named after a modality (``vision_config``, ``audio_config``...) first,
    then the config itself: a tower's sizes live in its own config."""
    own = [v for k, v in vars(cfg).items() if word in k and hasattr(v, "to_dict")]
    return [*own, cfg]


# the parameters of a vision tower fed flattened patches, each a processor's output, named by
# the convention the tower follows (a (t, h, w) grid per image, spatial shapes, patch positions)
PATCH_PARAMS = ("grid_thw", "image_grid_thw", "spatial_shapes", "pixel_attention_mask",
                "pixel_position_ids", "merge_sizes")  # fmt: skip


def patch_geometry(cfgs: list[Any]) -> tuple[int, int, int]:
    """(patches per side, patch width, merge) of a small square image for a tower of flattened
    patches: a side every merge (``spatial_merge_size``) and pooling kernel divides twice over;
    the width ``in_channels * temporal_patch_size * patch_size**2`` its patch embedding views
    back into pixels."""
    chans = _int(first_value(cfgs, "num_channels", "in_channels", "in_chans"), 3)
    patch = _int(first_value(cfgs, "patch_size", "spatial_patch_size"), 14)
    tpatch = _int(first_value(cfgs, "temporal_patch_size", "patch_temporal"), 1)
    merge = _int(first_value(cfgs, "spatial_merge_size", "merge_size"), 1)
    pool = _int(first_value(cfgs, "pooling_kernel_size"), 1)
    return 2 * max(merge, pool, 1), chans * tpatch * patch * patch, merge


def patch_inputs(params: Iterable[str], cfgs: list[Any]) -> dict[str, Any]:
    """The inputs of a vision tower fed flattened patches, for the forward's parameters
    ``params`` (in order, the first the patches): Qwen-VL style ``(t*h*w, width)`` patches with
    their ``grid_thw`` ``[[1, h, w]]`` (and ``merge_sizes``); SigLIP2/Gemma style ``(1, h*w,
    width)`` with ``spatial_shapes`` ``[[h, w]]``, ``pixel_attention_mask`` or
    ``pixel_position_ids`` (x, y per patch). {} when the forward follows none of them."""
    import torch

    params = list(params)
    conventions = [p for p in params if p in PATCH_PARAMS]
    if not conventions or not params:
        return {}
    side, width, merge = patch_geometry(cfgs)
    n = side * side
    main = params[0]
    out: dict[str, Any] = {}
    grid = next((p for p in conventions if p.endswith("grid_thw")), None)
    if grid is not None:
        out[main] = torch.randn(n, width)
        out[grid] = torch.tensor([[1, side, side]], dtype=torch.long)
        if "merge_sizes" in params:
            out["merge_sizes"] = torch.tensor([merge], dtype=torch.long)
        return out
    out[main] = torch.randn(1, n, width)
    if "spatial_shapes" in params:
        out["spatial_shapes"] = torch.tensor([[side, side]], dtype=torch.long)
    if "pixel_attention_mask" in params:
        out["pixel_attention_mask"] = torch.ones(1, n, dtype=torch.long)
    if "pixel_position_ids" in params:
        xs = torch.arange(n, dtype=torch.long)
        out["pixel_position_ids"] = torch.stack([xs % side, xs // side], dim=-1).unsqueeze(0)
    return out


def image_inputs(params: Iterable[str], cfg: Any) -> tuple[dict[str, Any], int | None]:
    """Pixel inputs for the forward's parameters ``params`` and the number of image tokens the
    conventions predict (None: not known without running the vision tower)."""
    import torch

    params = set(params)
    vcfgs = sub_configs(cfg, "vision")
    chans = _int(first_value(vcfgs, "num_channels", "in_channels", "in_chans"), 3)
    patch = _int(first_value(vcfgs, "patch_size", "spatial_patch_size"), 14)
    out: dict[str, Any] = {}
    if "image_grid_thw" in params:
        # Qwen-VL convention: flattened patches, a (t, h, w) grid per image; spatial_merge_size
        # patches per side become one token
        merge = _int(first_value(vcfgs, "spatial_merge_size", "merge_size"), 2)
        tpatch = _int(first_value(vcfgs, "temporal_patch_size"), 1)
        side = 2 * merge
        out["image_grid_thw"] = torch.tensor([[1, side, side]], dtype=torch.long)
        out["pixel_values"] = torch.randn(side * side, chans * tpatch * patch * patch)
        return out, (side * side) // (merge * merge)
    side = _side(first_value(vcfgs, "image_size", "img_size", "input_size"))
    tokens = _predicted_tokens(cfg, vcfgs, side, patch)
    if "pixel_attention_mask" in params:  # Idefics convention: images per sample
        out["pixel_values"] = torch.randn(1, 1, chans, side, side)
        out["pixel_attention_mask"] = torch.ones(1, 1, side, side, dtype=torch.bool)
    elif "image_sizes" in params and getattr(cfg, "image_grid_pinpoints", None):
        # LLaVA-NeXT convention: a base view + the tiles of the first pinpoint resolution
        h, w = cfg.image_grid_pinpoints[0][:2]
        tiles = (h // side) * (w // side) + 1
        out["pixel_values"] = torch.randn(1, tiles, chans, side, side)
        out["image_sizes"] = torch.tensor([[h, w]], dtype=torch.long)
        tokens = None
    else:
        out["pixel_values"] = torch.randn(1, chans, side, side)
        if "image_sizes" in params and first_value([cfg, *vcfgs], "spatial_merge_size"):
            # Pixtral convention: a patch merger reads each image's (height, width)
            out["image_sizes"] = torch.tensor([[side, side]], dtype=torch.long)
    if "pixel_mask" in params:
        out["pixel_mask"] = torch.ones(1, side, side, dtype=torch.long)
    return out, tokens


def _predicted_tokens(cfg: Any, vcfgs: list[Any], side: int, patch: int) -> int | None:
    fixed = first_value([cfg], "mm_tokens_per_image", "image_seq_length", "num_image_tokens",
                        "num_query_tokens", "latent_query_num")
    if isinstance(fixed, int) and fixed > 0:
        return fixed
    if side % patch:
        return None
    n = (side // patch) ** 2
    scale = first_value([cfg, *vcfgs], "scale_factor", "downsample_ratio", "spatial_merge_size")
    if isinstance(scale, int) and scale > 1 and n % (scale * scale) == 0:
        n //= scale * scale
    return n


def video_inputs(params: Iterable[str], cfg: Any) -> tuple[dict[str, Any], int | None]:
    """A clip ``(1, frames, channels, h, w)`` for the forward's video input (``params``: its
    parameters, ``pixel_values_videos`` where it takes one), sized from the vision config,
    and the placeholder tokens predicted: the per-image count (query tokens ...) per frame."""
    import torch

    vcfgs = sub_configs(cfg, "vision")
    chans = _int(first_value(vcfgs, "num_channels", "in_channels", "in_chans"), 3)
    patch = _int(first_value(vcfgs, "patch_size", "spatial_patch_size"), 14)
    side = _side(first_value(vcfgs, *IMAGE_SIZE_KEYS))
    frames = video_frames(vcfgs)
    key = "pixel_values_videos" if "pixel_values_videos" in set(params) else "pixel_values"
    per_frame = _predicted_tokens(cfg, vcfgs, side, patch)
    return ({key: torch.randn(1, frames, chans, side, side)},
            per_frame * frames if per_frame else None)  # fmt: skip


def audio_inputs(params: Iterable[str], cfg: Any) -> tuple[dict[str, Any], int | None]:
    """Log-mel features sized from the audio config (``num_mel_bins``, two frames per source
    position as Whisper-style encoders require), their frame mask when the forward takes one."""
    import torch

    acfgs = sub_configs(cfg, "audio")
    mels = _int(first_value(acfgs, "num_mel_bins", "feature_size", "input_feat_size"), 80)
    frames = min(_int(first_value(acfgs, "max_source_positions"), 1500) * 2, 3000)
    out: dict[str, Any] = {"input_features": torch.randn(1, mels, frames)}
    for mask in ("feature_attention_mask", "input_features_mask"):
        if mask in params:
            out[mask] = torch.ones(1, frames, dtype=torch.long)
    return out, None


def count_features(model: Any, modality: str, made: dict[str, Any]) -> int | None:
    """How many placeholder tokens the model's tower makes of ``made``: its own
    ``get_image_features``/``get_audio_features`` run on them (one row per token, whatever
    the output's nesting). None when the model has no such function or it fails here."""
    import torch

    fn = getattr(model, FEATURE_FNS[modality], None)
    if fn is None and hasattr(model, "model"):
        fn = getattr(model.model, FEATURE_FNS[modality], None)
    if fn is None:  # no feature function: the tower itself, on the main input
        fn = next((m for path, m in model.named_modules()
                   if path and modality in path.rsplit(".", 1)[-1].lower()), None)  # fmt: skip
        if fn is None:
            return None
        made = dict(list(made.items())[:1])
        fn = _positional(fn)
    names = inspect.signature(fn).parameters
    device = next((p.device for p in model.parameters()), None)
    kw = {k: v.to(device) if device is not None else v for k, v in made.items()
          if k in names or "kwargs" in names}  # fmt: skip
    try:
        with torch.no_grad():
            out = fn(**kw)
    except Exception:  # meta tensors meet a value-reading line, or a signature not followed
        return None
    tensors = _feature_tensors(out)
    total = sum(t.numel() // t.shape[-1] for t in tensors if t.dim() >= 2)
    return int(total) or None


def _positional(module: Any) -> Callable[..., Any]:
    """The module called with the one input, whatever its forward names it."""

    def call(**kwargs: Any) -> Any:
        return module(*kwargs.values())

    return call


def _feature_tensors(out: Any) -> list[Any]:
    import torch

    if isinstance(out, torch.Tensor):
        return [out]
    if getattr(out, "pooler_output", None) is not None:
        return _feature_tensors(out.pooler_output)
    if getattr(out, "last_hidden_state", None) is not None:
        return _feature_tensors(out.last_hidden_state)
    if isinstance(out, (list, tuple)):
        if out and all(isinstance(t, torch.Tensor) for t in out):
            return list(out)
        return _feature_tensors(out[0]) if out else []
    return []


def token_id(cfg: Any, keys: Iterable[str]) -> int | None:
    """The first of ``keys`` the config (or its text config) sets to a token id; read with
    getattr, as configs alias these names (``image_token_id`` -> ``image_token_index``)."""
    for c in (cfg, *sub_configs(cfg, "text")):
        for k in keys:
            v = getattr(c, k, None)
            if isinstance(v, int) and not isinstance(v, bool) and v >= 0:
                return v
    return None


def with_placeholders(
    ids: Any, token: int, count: int, bounds: tuple[int | None, int | None] = (None, None)
) -> Any:
    """``ids`` (1, n) with ``count`` placeholder tokens after its first two ids, between the
    start and end tokens ``bounds`` where the config names them. A start named without its
    end still gets one token after the block (a text id): a processor closes every span it
    opens, and position code steps over the end token whether or not the config names it."""
    import torch

    start, end = bounds
    if start is not None and end is None and ids.shape[1] > 2:
        end = int(ids[0, 2])
    block = [t for t in (start, *([token] * count), end) if t is not None]
    made = torch.tensor([block], dtype=ids.dtype)
    return torch.cat([ids[:, :2], made, ids[:, 2:]], dim=1)


def modal_inputs(
    model: Any, cfg: Any, params: Iterable[str], ids: Callable[[], Any]
) -> dict[str, Any]:
    """The inputs feeding a multimodal model's towers: pixels or audio features where the
    forward takes them and the config names their placeholder token, and ``input_ids`` with
    as many placeholders as the tower makes features. {} when the model is not one."""
    import torch

    params = list(params)
    out: dict[str, Any] = {}
    if _TEXT_ONLY:
        return out
    text = ids()
    # a video is fed only to a model whose sole visual placeholder is a video's (InstructBLIP-
    # Video: its pixel_values are clips); one with image placeholders too is fed images
    video_key = "pixel_values_videos" if "pixel_values_videos" in params else "pixel_values"
    makers = (("image", image_inputs, "pixel_values"), ("audio", audio_inputs, "input_features"),
              ("video", video_inputs, video_key))  # fmt: skip
    for modality, makes, key in makers:
        tok = token_id(cfg, TOKEN_KEYS[modality])
        if key not in params or tok is None or key in out:
            continue
        if modality == "video" and token_id(cfg, TOKEN_KEYS["image"]) is not None:
            continue
        made, predicted = makes(params, cfg)
        count = count_features(model, modality, made) or predicted
        if not count:
            continue
        out.update(made)
        FED.add(modality)
        starts, ends = BOUNDS.get(modality, ((), ()))
        bounds = (token_id(cfg, starts), token_id(cfg, ends))
        text = with_placeholders(text, tok, count, bounds)
    if out:
        out["input_ids"] = text
        if "mm_token_type_ids" in params:  # the processor's modality per token: 1 image, 3 audio
            types = torch.zeros_like(text)
            for modality, kind in (("image", 1), ("audio", 3)):
                tok = token_id(cfg, TOKEN_KEYS[modality])
                if tok is not None:
                    types[text == tok] = kind
            out["mm_token_type_ids"] = types
    return out


def paired_inputs(params: Iterable[str], cfg: Any) -> list[str]:
    """The media inputs a forward taking ``input_ids`` also takes where no placeholder token
    ties them to the text (CLIP-like dual encoders, captioners, document models: one tower per
    input): fed as well, so that every tower runs (the atlas retries on the text path when the
    whole forward fails). One per modality, in the order of :data:`MEDIA`; none of a modality
    whose placeholder token the config names (its count was not known: the text path)."""
    if _TEXT_ONLY:
        return []
    params = set(params)
    names: dict[str, str] = {}
    for name, modality in MEDIA.items():
        if modality in TOKEN_KEYS and token_id(cfg, TOKEN_KEYS[modality]) is not None:
            continue
        if name in params and modality not in names.values():
            names[name] = modality
    FED.update(names.values())
    return list(names)


def fit_image_batch(params: Iterable[str], kwargs: dict[str, Any]) -> None:
    """Idefics convention: a forward taking ``image_attention_mask`` reads images per sample
    (``pixel_values`` of (batch, images, channels, h, w)) and which text positions see each
    image ((batch, text length, images)); the mask made for one image seen by every token."""
    pixels, ids = kwargs.get("pixel_values"), kwargs.get("input_ids")
    if "image_attention_mask" not in params or pixels is None or ids is None:
        return
    if pixels.dim() == 4:
        kwargs["pixel_values"] = pixels = pixels.unsqueeze(1)
    kwargs.setdefault("image_attention_mask",
                      ids.new_ones(ids.shape[0], ids.shape[1], pixels.shape[1]))  # fmt: skip


def fit_image_positions(params: Iterable[str], kwargs: dict[str, Any], cfg: Any) -> None:
    """Kosmos-2 convention: a forward taking ``image_embeds_position_mask`` places the image's
    features where the mask is 1 (no placeholder token id): ``input_ids`` get as many
    positions as the config's per-image token count (``latent_query_num`` ...) after their
    first two ids, the mask marking them."""
    import torch

    key = next((p for p in params if p.startswith("image") and p.endswith("_position_mask")), None)
    pixels, ids = kwargs.get("pixel_values"), kwargs.get("input_ids")
    if key is None or key in kwargs or pixels is None or ids is None:
        return
    vcfgs = sub_configs(cfg, "vision")
    side = _side(first_value(vcfgs, *IMAGE_SIZE_KEYS))
    count = _predicted_tokens(cfg, vcfgs, side, _int(first_value(vcfgs, "patch_size"), 14))
    if not count:
        return
    slots = ids[:, 2:3].expand(ids.shape[0], count)  # any id: the features replace them
    kwargs["input_ids"] = torch.cat([ids[:, :2], slots, ids[:, 2:]], dim=1)
    mask = torch.zeros_like(kwargs["input_ids"])
    mask[:, 2:2 + count] = 1
    kwargs[key] = mask


def series_maker(name: str, cfgs: list[Any]) -> Callable[[], Any] | None:
    """Time-series inputs (``past_values``, ``past_time_features``, ``past_observed_mask``,
    ``future_time_features``): the context window plus the largest lag, the config's channels
    and time features. None for a name of no time-series convention."""
    import torch

    context = _int(first_value(cfgs, "context_length", "sequence_length"), 32)
    lags = first_value(cfgs, "lags_sequence")
    past = context + (max(lags) if isinstance(lags, (list, tuple)) and lags else 0)
    future = _int(first_value(cfgs, "prediction_length"), 8)
    chans = _int(first_value(cfgs, "num_input_channels", "input_size"), 1)
    feats = _int(first_value(cfgs, "num_time_features"), 1)
    series = (1, past, chans) if chans > 1 or first_value(cfgs, "num_input_channels") else (1, past)
    makers: dict[str, Callable[[], Any]] = {
        "past_values": lambda: torch.randn(*series),
        "past_observed_mask": lambda: torch.ones(*series),
        "past_time_features": lambda: torch.randn(1, past, feats),
        "future_time_features": lambda: torch.randn(1, future, feats),
    }
    return makers.get(name)


def watch_towers(model: Any) -> list[str]:
    """Hooks noting which of the model's towers (sub-modules named after a non-text modality,
    the outermost of each) run: :func:`forward_path` reads them after the trace."""
    seen: dict[str, bool] = {}
    setattr(model, TOWERS_ATTR, seen)
    for path, mod in model.named_modules():
        if not path or path.count(".") > 2:
            continue
        last = path.rsplit(".", 1)[-1].lower()
        if not any(w in last for w in TOWER_WORDS):
            continue
        if any(path.startswith(p + ".") for p in seen):
            continue
        seen[path] = False

        def ran(*_: Any, _path: str = path) -> None:
            seen[_path] = True

        mod.register_forward_pre_hook(ran)
    return list(seen)


def forward_path(model: Any) -> str:
    """"full" when every tower :func:`watch_towers` found ran (or the model has none),
    "text only: TOWER, ... did not run" otherwise; "" when the towers were not watched."""
    seen = getattr(model, TOWERS_ATTR, None)
    if seen is None:
        return ""
    idle = [p for p, ran in seen.items() if not ran]
    return FULL if not idle else "text only: " + ", ".join(idle) + " did not run"
