"""transformers' architectures for the atlas: one row per model type of its
``MODEL_*_MAPPING_NAMES``, the most representative head, built from the default config made
small (two layers, few experts, narrower) with inputs the way transformers makes them.

Generic rules only (no per-model cases): the next release's architectures follow the same
conventions. Imported lazily (inside the sandbox or the listing subprocess).
"""

from __future__ import annotations

from typing import Any

from opcheck.core.errors import TraceError
from opcheck.tracers import atlas_hf_code, atlas_hf_config, atlas_hf_unset, atlas_tvops
from opcheck.tracers.atlas_build import Built, ModelSkip, missing_package, one_line
from opcheck.tracers.atlas_hf_inputs import make_inputs, subconfigs
from opcheck.tracers.atlas_inputs import (
    fit_image_tokens,
    fit_placeholder_ids,
    fit_tower_widths,
    fit_vocab,
    watch_towers,
)
from opcheck.tracers.atlas_layouts import fit_default_choices

# Models built on timm (DETR's backbones, TimmWrapper, Gemma3n's vision tower, ...): timm and
# torchvision live in the atlas's own site folder; transformers decides which of its classes are
# usable when it is imported, so the folder goes on the path before that.
atlas_tvops.enable()

SLIDING_WINDOW = 4096  # a sliding-attention width where a default config leaves it unset
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


def _shrink_layers(cfg: Any, keep: int = 2) -> None:
    """Two layers (or one per output a neck reads); per-layer lists (layer_types, ...) cut to
    match, so hybrid models keep their first layers' kinds."""
    cfgs = subconfigs(cfg)
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
    for c in subconfigs(cfg):
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
    for c in subconfigs(cfg):  # text model's hidden size it feeds stay equal
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
    for c in subconfigs(cfg):
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
    atlas_hf_config.fix_misspelled(subconfigs(cfg))
    atlas_hf_config.fill_unset(subconfigs(cfg))
    atlas_hf_config.fit_neck_widths(subconfigs(cfg))
    atlas_hf_unset.apply(subconfigs(cfg))
    if 1 <= level < EVERY_LAYER:
        _shrink_layers(cfg)
    if level >= 2:
        _shrink_experts(cfg)
        atlas_hf_config.shrink_expert_pools(subconfigs(cfg))
    if level >= 3:
        # aligned before (so an odd width divides) and after narrowing (so the result does)
        atlas_hf_config.align_mlp_widths(subconfigs(cfg))
        _shrink_widths(cfg)
        atlas_hf_config.align_mlp_widths(subconfigs(cfg))
        # a backbone narrowed by dropping heads may differ from its neck narrowed by a factor
        atlas_hf_config.fit_neck_widths(subconfigs(cfg))
    _fill_unset_sizes(cfg)
    atlas_hf_config.clamp_topk(subconfigs(cfg))
    fit_placeholder_ids(subconfigs(cfg))
    fit_vocab(subconfigs(cfg))
    fit_image_tokens(subconfigs(cfg))
    fit_tower_widths(cfg)
    fit_default_choices(subconfigs(cfg))
    for c in subconfigs(cfg):
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
    return atlas_hf_unset.remember(subconfigs(cfg), why)


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
            atlas_hf_config.fit_rope_sections(subconfigs(cfg), cls)
            if real:
                atlas_hf_config.shrink_vocab(subconfigs(cfg))
                atlas_hf_config.shrink_other_vocabs(subconfigs(cfg))
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
            if missing_package(exc) or not atlas_hf_config.repair(subconfigs(cfg), exc):
                raise
    return cls(cfg)
