"""transformers' architectures for the atlas: one row per model type of its
``MODEL_*_MAPPING_NAMES``, the most representative head, built from the default config made
small (two layers, few experts, narrower) with inputs the way transformers makes them.

Generic rules only (no per-model cases): the next release's architectures follow the same
conventions. Imported lazily (inside the sandbox or the listing subprocess).
"""

from __future__ import annotations

import inspect
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.tracers import (
    atlas_audio,
    atlas_documented,
    atlas_hf_code,
    atlas_hf_config,
    atlas_hf_unset,
    atlas_tvops,
)
from opcheck.tracers.atlas_build import Built, InputsRefused, ModelSkip, missing_package, one_line
from opcheck.tracers.atlas_hf_config import first_value
from opcheck.tracers.atlas_inputs import (
    MEDIA,
    PATCH_PARAMS,
    fit_image_batch,
    fit_image_positions,
    fit_image_tokens,
    fit_placeholder_ids,
    fit_tower_widths,
    fit_vocab,
    modal_inputs,
    paired_inputs,
    patch_inputs,
    series_maker,
    watch_towers,
)
from opcheck.tracers.atlas_layouts import (
    DOCUMENTED_INPUTS,
    FRAME_KEYS,
    IMAGE_SIZE_KEYS,
    documented_input,
    fit_default_choices,
    fit_image_side,
    fit_patch_grid,
    fit_prompt_canvas,
    image_pair,
    video_frames,
)

# Models built on timm (DETR's backbones, TimmWrapper, Gemma3n's vision tower, ...): timm and
# torchvision live in the atlas's own site folder; transformers decides which of its classes are
# usable when it is imported, so the folder goes on the path before that.
atlas_tvops.enable()

SLIDING_WINDOW = 4096  # a sliding-attention width where a default config leaves it unset
SEQ = 8  # text length: enough for every op a longer sequence sends
# Heads in order of preference (the most representative use of a model type) and the task the
# atlas shows for each. A model type appearing under several takes the first.
# Encoder-decoders first: their causal-LM head (where there is one) is the decoder alone.
HEADS = (
    ("MODEL_FOR_SEQ_TO_SEQ_CAUSAL_LM_MAPPING_NAMES", "seq2seq"),
    ("MODEL_FOR_SPEECH_SEQ_2_SEQ_MAPPING_NAMES", "audio"),
    ("MODEL_FOR_CAUSAL_LM_MAPPING_NAMES", "causal-lm"),
    ("MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES", "multimodal"),
    ("MODEL_FOR_MULTIMODAL_LM_MAPPING_NAMES", "multimodal"),
    ("MODEL_FOR_VISUAL_QUESTION_ANSWERING_MAPPING_NAMES", "multimodal"),
    ("MODEL_FOR_MASKED_LM_MAPPING_NAMES", "masked-lm"),
    ("MODEL_FOR_CTC_MAPPING_NAMES", "audio"),
    ("MODEL_FOR_AUDIO_CLASSIFICATION_MAPPING_NAMES", "audio"),
    ("MODEL_FOR_VIDEO_CLASSIFICATION_MAPPING_NAMES", "video"),
    ("MODEL_FOR_IMAGE_CLASSIFICATION_MAPPING_NAMES", "vision"),
    ("MODEL_FOR_OBJECT_DETECTION_MAPPING_NAMES", "detection"),
    ("MODEL_FOR_ZERO_SHOT_OBJECT_DETECTION_MAPPING_NAMES", "detection"),
    ("MODEL_FOR_SEMANTIC_SEGMENTATION_MAPPING_NAMES", "segmentation"),
    ("MODEL_FOR_UNIVERSAL_SEGMENTATION_MAPPING_NAMES", "segmentation"),
    ("MODEL_FOR_INSTANCE_SEGMENTATION_MAPPING_NAMES", "segmentation"),
    ("MODEL_FOR_IMAGE_SEGMENTATION_MAPPING_NAMES", "segmentation"),
    ("MODEL_FOR_DEPTH_ESTIMATION_MAPPING_NAMES", "vision"),
    ("MODEL_FOR_TIME_SERIES_PREDICTION_MAPPING_NAMES", "time-series"),
    ("MODEL_FOR_TIME_SERIES_CLASSIFICATION_MAPPING_NAMES", "time-series"),
    ("MODEL_FOR_TIME_SERIES_REGRESSION_MAPPING_NAMES", "time-series"),
    ("MODEL_FOR_TEXT_TO_SPECTROGRAM_MAPPING_NAMES", "audio"),
    ("MODEL_FOR_TEXT_TO_WAVEFORM_MAPPING_NAMES", "audio"),
    ("MODEL_FOR_SEQUENCE_CLASSIFICATION_MAPPING_NAMES", "text-classification"),
    ("MODEL_FOR_TOKEN_CLASSIFICATION_MAPPING_NAMES", "text-classification"),
    ("MODEL_FOR_QUESTION_ANSWERING_MAPPING_NAMES", "question-answering"),
    ("MODEL_FOR_ZERO_SHOT_IMAGE_CLASSIFICATION_MAPPING_NAMES", "multimodal"),
    ("MODEL_FOR_MASK_GENERATION_MAPPING_NAMES", "segmentation"),
    ("MODEL_FOR_IMAGE_MAPPING_NAMES", "vision"),
    ("MODEL_FOR_BACKBONE_MAPPING_NAMES", "vision"),
    ("MODEL_FOR_PRETRAINING_MAPPING_NAMES", "pretraining"),
    ("MODEL_MAPPING_NAMES", "base"),
)
# config attributes counting layers (of the model or of one of its sub-configs)
LAYER_KEYS = (
    "num_hidden_layers", "num_layers", "n_layer", "n_layers", "encoder_layers", "decoder_layers",
    "num_encoder_layers", "num_decoder_layers", "num_text_layers", "num_vision_layers", "depth",
)  # fmt: skip
EXPERT_KEYS = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
TOPK_KEYS = ("num_experts_per_tok", "moe_topk", "top_k", "num_selected_experts")
WIDTH_KEYS = (
    "hidden_size", "intermediate_size", "d_model", "n_embd", "ffn_dim", "encoder_ffn_dim",
    "decoder_ffn_dim", "d_ff", "moe_intermediate_size", "shared_expert_intermediate_size",
    "n_inner", "embed_dim", "dim", "projection_dim",
)  # fmt: skip
# widths split into attention heads (the others: MLP widths, free to shrink)
ATTENTION_WIDTHS = ("hidden_size", "embed_dim", "d_model", "n_embd", "dim")
HEAD_KEYS = ("num_attention_heads", "n_head", "n_heads", "encoder_attention_heads",
             "decoder_attention_heads", "num_heads")  # fmt: skip


def _mappings() -> Any:
    from transformers.models.auto import modeling_auto

    return modeling_auto


def _class_name(entry: Any) -> str:
    return str(entry[0] if isinstance(entry, (list, tuple)) else entry)


def _head(model_type: str) -> tuple[str, str]:
    m = _mappings()
    for mapping, task in HEADS:
        names = getattr(m, mapping, {})
        if model_type in names:
            return _class_name(names[model_type]), task
    for mapping in sorted(dir(m)):  # heads the list above does not rank (a new kind of task)
        names = getattr(m, mapping)
        if mapping.startswith("MODEL_FOR_") and mapping.endswith("_MAPPING_NAMES") \
                and isinstance(names, dict) and model_type in names:
            task = mapping.removeprefix("MODEL_FOR_").removesuffix("_MAPPING_NAMES")
            return _class_name(names[model_type]), task.lower().replace("_", "-")
    raise ModelSkip(f"{model_type}: not a transformers model type")


def model_types() -> list[str]:
    m = _mappings()
    found: set[str] = set()
    for attr in dir(m):
        if attr.startswith("MODEL_") and attr.endswith("_MAPPING_NAMES"):
            found.update(getattr(m, attr))
    return sorted(found)


def architectures(library: str) -> list[dict[str, Any]]:
    import transformers

    rows = []
    for model_type in model_types():
        cls_name, task = _head(model_type)
        row: dict[str, Any] = {"name": model_type, "model_class": cls_name, "task": task,
                               "family": model_type}  # fmt: skip
        try:
            cls = getattr(transformers, cls_name)
            row["family"] = cls.__module__.split(".")[2] if cls.__module__.count(".") >= 2 else ""
        except Exception as exc:  # a dummy class that needs a package raises on access
            row["skip"] = _reason(exc)
        rows.append(row)
    return rows


def _reason(exc: BaseException) -> str:
    pkg = missing_package(exc)
    if pkg:
        return f"needs the {pkg} package, not installed"
    return one_line(exc)


def _subconfigs(cfg: Any) -> list[Any]:
    """The config and every nested config (text_config, vision_config, encoder, ...)."""
    from transformers import PretrainedConfig

    out, stack, seen = [], [cfg], set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        out.append(c)
        for value in vars(c).values():
            if isinstance(value, PretrainedConfig):
                stack.append(value)
    return out


def _shrink_layers(cfg: Any, keep: int = 2) -> None:
    """Two layers (or one per output a neck reads); per-layer lists (layer_types, ...) cut to
    match, so hybrid models keep their first layers' kinds."""
    cfgs = _subconfigs(cfg)
    for c in cfgs:
        d = vars(c)
        # a config holding this one with no layers of its own may name which of its layers
        # it reads (Depth Pro's intermediate_hook_ids on the top config)
        holders = [p for p in cfgs if any(v is c for v in vars(p).values()) and not _layer_counts(p)]
        for key in LAYER_KEYS:
            n = d.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and n > keep:
                kept = atlas_hf_config.layers_kept(c, n, keep, holders)
                if kept >= n:
                    continue
                setattr(c, key, kept)
                stages = False  # a list of layer counts per stage cut: a hierarchical encoder
                for other, val in list(d.items()):
                    if isinstance(val, (list, tuple)) and len(val) == n and other not in LAYER_KEYS:
                        setattr(c, other, type(val)(val[:kept]))
                        stages |= all(isinstance(v, int) and not isinstance(v, bool) for v in val)
                if stages:
                    atlas_hf_config.fit_stage_width(c, n, kept)
                atlas_hf_config.remap_layer_outputs(c, n, kept, holders)


def _layer_counts(c: Any) -> list[int]:
    d = vars(c)
    return [d[k] for k in LAYER_KEYS if isinstance(d.get(k), int) and not isinstance(d[k], bool)]


def _shrink_experts(cfg: Any) -> None:
    for c in _subconfigs(cfg):
        d = vars(c)
        for key in EXPERT_KEYS:
            n = d.get(key)
            if isinstance(n, int) and not isinstance(n, bool) and n > 4:
                setattr(c, key, 4)
        for key in TOPK_KEYS:
            k = d.get(key)
            if isinstance(k, int) and not isinstance(k, bool) and k > 2:
                setattr(c, key, 2)
        for key in ("n_group", "topk_group"):
            if isinstance(d.get(key), int) and d[key] > 1:
                setattr(c, key, 1)


def _shrink_widths(cfg: Any, factor: int = 8) -> None:
    """Widths divided by ``factor`` (or less) where an attention width still splits into
    heads whose width divides by 4 (rotary embeddings halve a head, then pair its dims)."""
    chosen: dict[int, int] = {}  # one new width per old one: a tower's output width and the
    for c in _subconfigs(cfg):  # text model's hidden size it feeds stay equal
        d = vars(c)
        done = _fewer_heads(c, factor, chosen)
        heads = next((d[k] for k in HEAD_KEYS if isinstance(d.get(k), int) and d[k] > 0), 1)
        for key in WIDTH_KEYS:
            w = d.get(key)
            if key in done:
                continue
            if not isinstance(w, int) or isinstance(w, bool) or w < 256:
                continue
            if w in chosen and not (key in ATTENTION_WIDTHS and chosen[w] % heads):
                setattr(c, key, chosen[w])
                continue
            for f in (factor, factor // 2, 2):
                small = w // f
                if w % f or (key in ATTENTION_WIDTHS and (small % heads or small // heads % 4)):
                    continue
                setattr(c, key, small)
                chosen.setdefault(w, small)
                break


def _fewer_heads(c: Any, factor: int, chosen: dict[int, int]) -> set[str]:
    """The attention width narrowed by dropping heads, each head as wide as released (its
    rotary sections, kernels and head-size checks unchanged); the key narrowed, if any."""
    d = vars(c)
    hkey = next((k for k in HEAD_KEYS if isinstance(d.get(k), int) and d[k] > 0), None)
    wkey = next((k for k in ATTENTION_WIDTHS if isinstance(d.get(k), int) and d[k] >= 256), None)
    if hkey is None or wkey is None or isinstance(d.get("head_dim"), int):
        return set()
    heads, width, kv = d[hkey], d[wkey], d.get("num_key_value_heads")
    for f in (factor, factor // 2, 2):
        if heads % f or width % f or width % heads:
            continue
        if isinstance(kv, int) and kv % f and (heads // f) % kv:
            continue
        setattr(c, hkey, heads // f)
        setattr(c, wkey, width // f)
        if isinstance(kv, int):
            c.num_key_value_heads = kv // f if kv % f == 0 else kv
        chosen.setdefault(width, width // f)
        return {wkey}
    return set()


def _fill_unset_sizes(cfg: Any) -> None:
    """Sizes a default config leaves unset (None) where the model derives them from others:
    the head width from the hidden size, one key/value head per attention head."""
    for c in _subconfigs(cfg):
        d = vars(c)
        heads = d.get("num_attention_heads")
        hidden = d.get("hidden_size")
        odd = isinstance(heads, int) and heads and isinstance(hidden, int) \
            and hidden % heads and hidden // heads % 2
        if isinstance(heads, int) and heads and isinstance(hidden, int) \
                and d.get("head_dim") is None and ("head_dim" in d or odd):
            # a hidden size that does not split into the heads, to an odd quotient (a default
            # config pairing a released width with another head count, its checkpoint naming
            # head_dim; the model reads head_dim where set): a width rotary embeddings can
            # halve and pair (Qwen3-Omni's thinker: 2048 / 28 heads, 73-wide heads)
            c.head_dim = hidden // heads // 4 * 4 if odd else hidden // heads
        if "num_key_value_heads" in d and d["num_key_value_heads"] is None \
                and isinstance(heads, int):
            c.num_key_value_heads = heads
        # a window left to the checkpoint where the config has sliding-window layers (their
        # own heads, a layer type): the model builds a sliding mask and needs a width
        sliding = any("sliding" in k and isinstance(v, int) and not isinstance(v, bool) and v
                      for k, v in d.items()) or "sliding_attention" in (d.get("layer_types") or ())
        if "sliding_window" in d and d["sliding_window"] is None and sliding:
            c.sliding_window = SLIDING_WINDOW


# the real-data build's last resort: experts and widths narrowed, every layer kept. A count
# the model compares with its layer count (the last N layers that predict masks, a window of
# layers) breaks when only two layers are left, and a real run then stops on a shape
EVERY_LAYER = 4


def make_config(model_type: str, level: int) -> Any:
    """The default config, made small: level 3 layers + experts + widths, 2 layers + experts,
    1 layers only, 0 the defaults as they are; EVERY_LAYER (4) experts + widths."""
    cfg = atlas_hf_config.default_config(model_type)
    atlas_hf_config.fix_misspelled(_subconfigs(cfg))
    atlas_hf_config.fill_unset(_subconfigs(cfg))
    atlas_hf_config.fit_neck_widths(_subconfigs(cfg))
    atlas_hf_unset.apply(_subconfigs(cfg))
    if 1 <= level < EVERY_LAYER:
        _shrink_layers(cfg)
    if level >= 2:
        _shrink_experts(cfg)
        atlas_hf_config.shrink_expert_pools(_subconfigs(cfg))
    if level >= 3:
        # aligned before (so an odd width divides) and after narrowing (so the result does)
        atlas_hf_config.align_mlp_widths(_subconfigs(cfg))
        _shrink_widths(cfg)
        atlas_hf_config.align_mlp_widths(_subconfigs(cfg))
        # a backbone narrowed by dropping heads may differ from its neck narrowed by a factor
        atlas_hf_config.fit_neck_widths(_subconfigs(cfg))
    _fill_unset_sizes(cfg)
    atlas_hf_config.clamp_topk(_subconfigs(cfg))
    fit_placeholder_ids(_subconfigs(cfg))
    fit_vocab(_subconfigs(cfg))
    fit_image_tokens(_subconfigs(cfg))
    fit_tower_widths(cfg)
    fit_default_choices(_subconfigs(cfg))
    for c in _subconfigs(cfg):
        if "use_cache" in vars(c):
            c.use_cache = False  # a forward without a cache: one op list, no cache classes
    return cfg


def repair_after(name: str, why: str) -> bool:
    """Whether a trace of ``name`` that stopped with ``why`` names config fields left unset
    that the next builds set (a clamp bound, a per-class threshold list)."""
    import transformers

    try:
        cls = getattr(transformers, _head(name)[0])
        cfg = atlas_hf_config.for_class(make_config(name, 0), cls)
    except Exception:  # no config to repair: the trace's own failure is the row's reason
        return False
    return atlas_hf_unset.remember(_subconfigs(cfg), why)


def build(
    library: str, name: str, *, train: bool = False, real: bool = False, shrink: int | None = None
) -> Built:
    """``shrink``: the first config level tried (make_config). Fake tensors cost nothing per
    width, so the fake build keeps the default widths (level 2: fewer layers and experts),
    which every model accepts; the real-data build is narrowed too (level 3)."""
    import transformers

    try:
        cls_name, _task = _head(name)
        cls = getattr(transformers, cls_name)
    except ModelSkip:
        raise
    except Exception as exc:
        raise ModelSkip(f"{name}: {_reason(exc)}") from None
    errors: list[str] = []
    start = (3 if real else 2) if shrink is None else shrink
    # real weights never below level 2: all the experts or all the layers of a default config
    # are gigabytes (the fake build stops there too in practice: every level-2 config built)
    levels = [start] if start == EVERY_LAYER else range(start, 1 if real else -1, -1)
    for level in levels:
        try:
            cfg = atlas_hf_config.for_class(make_config(name, level), cls)
            atlas_hf_config.fit_rope_sections(_subconfigs(cfg), cls)
            if real:
                atlas_hf_config.shrink_vocab(_subconfigs(cfg))
                atlas_hf_config.shrink_other_vocabs(_subconfigs(cfg))
                if level != 3:  # every layer of a default config can be gigabytes too
                    _fits_real(cls, cfg, name, errors[-1] if errors else "",
                               "with every layer" if level == EVERY_LAYER
                               else "at the default widths")  # fmt: skip
            model = _construct(cls, cfg, real=real)
        except (MemoryError, TraceError):
            raise
        except Exception as exc:
            pkg = missing_package(exc)
            if pkg:
                raise ModelSkip(f"{name}: needs the {pkg} package, not installed") from None
            errors.append(one_line(exc))
            continue
        model.eval()
        atlas_hf_code.fill_read_token_ids(model)
        args, kwargs = make_inputs(model, cfg, real=real)
        watch_towers(model)
        return model, args, kwargs
    if real and not errors:
        raise TraceError(f"{name}: no real-data build below level 2 (shrink={start})")
    raise ModelSkip(f"{name}: its default config does not build ({cls_name}): {errors[-1]}")


REAL_PARAMS = 500_000_000  # real weights of a default-width build: 2 GB in float32 (of 4)


def _fits_real(cls: Any, cfg: Any, name: str, narrowed: str,
               what: str = "at the default widths") -> None:  # fmt: skip
    """Refuse a real-data build (of default widths, or of every layer) larger than REAL_PARAMS
    parameters (counted on the meta device): the sandbox would run out of memory half-way
    through the forward."""
    n = sum(p.numel() for p in _construct(cls, cfg, real=False).parameters())
    if n > REAL_PARAMS:
        raise TraceError(f"atlas:transformers/{name}: the real-data build {what} "
                         f"has {n / 1e6:.0f} M parameters, more than the real-data device holds "
                         f"({REAL_PARAMS / 1e6:.0f} M)"
                         + (f"; the narrowed build: {narrowed}" if narrowed else ""))  # fmt: skip


def _construct(cls: Any, cfg: Any, *, real: bool, repairs: int = 6) -> Any:
    """``cls(cfg)``, the config repaired where the failure names a field it left unset
    (atlas_hf_config.repair) and built again."""
    import torch

    for _ in range(repairs):
        try:
            if not real:
                with torch.device("meta"):
                    return cls(cfg)
            torch.manual_seed(0)
            return cls(cfg)
        except MemoryError:
            raise
        except Exception as exc:
            if missing_package(exc) or not atlas_hf_config.repair(_subconfigs(cfg), exc):
                raise
    return cls(cfg)


def _size2(v: Any) -> tuple[int, int]:
    if isinstance(v, dict):
        h = v.get("height") or v.get("shortest_edge") or 224
        return int(h), int(v.get("width") or h)
    if isinstance(v, (list, tuple)):
        return int(v[0]), int(v[-1])
    return int(v), int(v)


def _timm_size(model: Any) -> tuple[int, int] | None:
    """The (h, w) a timm model inside ``model`` takes (a TimmWrapper tower: its config names
    the timm architecture only, the size is in the built model's ``pretrained_cfg``)."""
    for mod in model.modules():
        pretrained = getattr(mod, "pretrained_cfg", None)
        size = pretrained.get("input_size") if isinstance(pretrained, dict) else None
        if isinstance(size, (list, tuple)) and len(size) == 3:
            return int(size[1]), int(size[2])
    return None


def _maker(
    name: str, cfgs: list[Any], vocab: int, size: tuple[int, int] | None = None
) -> Any:
    """A function making the input called ``name`` by transformers' naming conventions, or
    None when the name follows none of them. ``size``: the image size when no config gives
    one."""
    import torch

    def ids(n: int = SEQ) -> Any:
        # ids past the special tokens, the same in every run
        return (torch.arange(n, dtype=torch.long) % max(vocab - 10, 1) + 5).unsqueeze(0) % vocab

    def image() -> Any:
        chans = int(first_value(cfgs, "num_channels", "in_channels", "in_chans", default=3))
        given = first_value(cfgs, *IMAGE_SIZE_KEYS)
        h, w = fit_image_side(cfgs, *(_size2(given) if given is not None
                                      else size or (224, 224)))
        pair = image_pair(cfgs[0]) if name == "pixel_values" else None
        if pair:  # an image pair (keypoint matching): the pair before the channels
            return torch.randn(1, pair, chans, h, w)
        if name.endswith("_videos") or any(k in vars(c) for c in cfgs for k in FRAME_KEYS):
            return torch.randn(1, video_frames(cfgs), chans, h, w)  # frames before channels
        return torch.randn(1, chans, h, w)

    def features() -> Any:
        mels = int(first_value(cfgs, "num_mel_bins", "feature_size", "input_feat_size", default=80))
        frames = int(first_value(cfgs, "max_source_positions", default=100)) * 2
        return torch.randn(1, mels, min(frames, 3000))

    if name in ("input_ids", "decoder_input_ids") or name.endswith("_input_ids"):
        return (lambda: ids(4)) if name.startswith("decoder") else ids
    if name in ("pixel_values", "pixel_values_videos") or name.endswith(("_pixel_values",
                                                                        "_masks")):
        return image
    if name == "input_values":
        return lambda: torch.randn(1, 16000)
    if name == "input_features":
        return features
    return series_maker(name, cfgs)


def make_inputs(model: Any, cfg: Any, *, real: bool) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Inputs by the forward's parameter names, sized from the config (the model's own sub-
    configs first: a vision tower's image size is in vision_config): the main input, every
    required parameter, decoder ids for an encoder-decoder; the model's own ``dummy_inputs``
    where it defines them."""
    import torch
    from transformers import PreTrainedModel

    if type(model).forward is torch.nn.Module.forward:
        # a wrapper that only generates, chaining its parts (Bark's stages, an omni model's
        # thinker and talker, a VQ-VAE's encode/decode): nothing one forward would trace
        parts = [n for n, m in model.named_children() if isinstance(m, PreTrainedModel)]
        raise ModelSkip(f"{type(model).__name__}: no forward of its own, it runs by generate() "
                        "or its own methods"
                        + (f" (its parts {', '.join(parts)} have forwards)" if parts else ""))
    params = inspect.signature(model.forward).parameters
    cfgs = _subconfigs(cfg)
    vocab = int(first_value(cfgs, "vocab_size", default=1000) or 1000)
    kwargs: dict[str, Any] = {}
    if type(model).dummy_inputs is not PreTrainedModel.dummy_inputs:
        try:
            dummy = model.dummy_inputs
            if isinstance(dummy, dict):
                kwargs = {k: v for k, v in dummy.items() if k in params}
        except Exception:  # a property that needs more than the config: the conventions
            kwargs = {}
    main: Any = getattr(model, "main_input_name", "input_ids")
    wanted = [n for n, p in params.items() if p.default is inspect.Parameter.empty
              and p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]  # fmt: skip
    mains: list[str] = []
    if isinstance(main, (list, tuple)):
        # a model naming several main inputs (an image and its task's tokens): each one fed,
        # the first the one the conventions below read as the main input, the others made as
        # the forward's docstring shapes them where no convention names them
        mains = [n for n in main[1:] if n in params]
        wanted = [*mains, *wanted]
        main = main[0] if main else "input_ids"
    if main in params:
        wanted.insert(0, main)
    elif not wanted:
        wanted = [n for n in ("input_ids", "pixel_values", "input_values", "input_features")
                  if n in params][:1]  # fmt: skip
    if getattr(cfg, "is_encoder_decoder", False) and "decoder_input_ids" in params:
        wanted.append("decoder_input_ids")
    if "input_ids" in params:
        # a multimodal model's towers fed too (pixels, audio, their placeholder tokens): the
        # ids then hold the placeholders, so they replace any the model's dummies made
        modal = modal_inputs(model, cfg, params, _maker("input_ids", cfgs, vocab))
        if modal:
            kwargs.pop("attention_mask", None)
            kwargs.update(modal)
        else:  # a dual encoder (CLIP-like): each tower its own input, every one fed
            wanted.extend(["input_ids", *paired_inputs(params, cfg)])
        # the ids of every other text encoder the forward takes (InstructBLIP's Q-Former)
        wanted.extend(n for n in params if n.endswith("_input_ids") and "decoder" not in n)
    elif isinstance(main, str) and main in MEDIA:
        # an encoder of several modalities and no text (audio + video): every tower fed, as
        # its embedder aligns them (the atlas retries on the main input alone when that fails)
        wanted.extend(n for n in paired_inputs(params, cfg) if MEDIA[n] != MEDIA[main])
    wanted.extend(n for n in DOCUMENTED_INPUTS if n in params)
    # a vision tower fed flattened patches: its grid / shapes / positions made with them
    # (a pixel model's optional patch conventions too: without them its patches are misread)
    patch_names = [n for n in params if n in wanted
                   or (str(main).startswith("pixel_values") and main in wanted
                                          and n in PATCH_PARAMS)]
    for name, value in patch_inputs(patch_names, cfgs).items():
        kwargs.setdefault(name, value)
    missing = []
    for name in dict.fromkeys(wanted):
        if name in kwargs:
            continue
        make = _maker(name, cfgs, vocab, _timm_size(model))
        if name == "decoder_input_ids" and "input_ids" in kwargs:
            # the batch of the encoder's ids (the model's dummy_inputs may have two rows)
            kwargs[name] = kwargs["input_ids"][:, :4]
        elif make is None and (name in DOCUMENTED_INPUTS or name in mains):
            made = documented_input(model.forward, name, cfgs, SEQ)
            if made is None:
                missing.append(name)
            else:
                kwargs[name] = made
        elif make is None:
            missing.append(name)
        else:
            kwargs[name] = make()
    fit_image_batch(params, kwargs)
    fit_patch_grid(main, params, kwargs, cfgs)
    fit_image_positions(params, kwargs, cfg)
    fit_prompt_canvas(kwargs)
    if "input_ids" in kwargs and "attention_mask" in params and "attention_mask" not in kwargs:
        kwargs["attention_mask"] = torch.ones(kwargs["input_ids"].shape, dtype=torch.long)
    missing = atlas_audio.fit_inputs(model, cfgs, params, kwargs, missing, real=real)
    # what no convention made (the audio ones included): the shape the docstring gives it
    documented = atlas_documented.make_documented(model.forward, missing, kwargs, cfgs, SEQ)
    if main in documented:  # inputs of no convention: the others the docstring requires too
        documented += atlas_documented.make_siblings(model.forward, params, kwargs, cfgs, SEQ)
    if main in missing and "input_ids" in kwargs and atlas_documented.optional_main(
            model.forward, main):  # fmt: skip
        missing.remove(main)  # the ids stand in for a generic main input (Perceiver's)
    if (documented or atlas_documented.kv_state_params(model.forward)) and not missing:
        refused = atlas_documented.fit_widths(model, params, kwargs, documented, cfgs, SEQ)
        if refused:  # made from the docstring, refused by the forward: the processor's kind
            raise InputsRefused(f"{type(model).__name__}: needs inputs made by its processor "
                                f"({', '.join(documented)}: made to the shapes its docstring "
                                f"gives, the forward refused them: {refused[:100]})")
    if missing:
        raise ModelSkip(f"{type(model).__name__}: needs inputs made by its processor "
                        f"({', '.join(missing)}), which a config alone does not give")  # fmt: skip
    if not real:
        kwargs = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    if "use_cache" in params:
        kwargs["use_cache"] = False
    return (), kwargs
