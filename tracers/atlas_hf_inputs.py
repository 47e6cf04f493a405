"""The inputs of a transformers model for the atlas (:mod:`opcheck.tracers.atlas_hf` builds
the model): made by the forward's parameter names, following transformers' naming
conventions, sized from the config and its sub-configs, fitted to each other (patch grids,
placeholder tokens, image batches), the rest shaped as the forward's docstring gives them.

Imported lazily (inside the sandbox), as atlas_hf is.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from typing import Any

from opcheck.tracers import atlas_audio, atlas_documented
from opcheck.tracers.atlas_build import InputsRefused, ModelSkip
from opcheck.tracers.atlas_hf_config import first_value
from opcheck.tracers.atlas_inputs import (
    MEDIA,
    PATCH_PARAMS,
    fit_image_batch,
    fit_image_positions,
    modal_inputs,
    paired_inputs,
    patch_inputs,
    series_maker,
)
from opcheck.tracers.atlas_layouts import (
    DOCUMENTED_INPUTS,
    FRAME_KEYS,
    IMAGE_SIZE_KEYS,
    documented_input,
    fit_image_side,
    fit_patch_grid,
    fit_prompt_canvas,
    image_pair,
    video_frames,
)

SEQ = 8  # text length: enough for every op a longer sequence sends


def subconfigs(cfg: Any) -> list[Any]:
    """The config (first) and every nested config (text_config, vision_config, encoder, ...)."""
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
    cfgs = subconfigs(cfg)
    vocab = int(first_value(cfgs, "vocab_size", default=1000) or 1000)
    kwargs = _dummies(model, params)
    main, mains, wanted = _wanted(model, cfg, params, cfgs, vocab, kwargs)
    missing = _made(model, main, mains, wanted, params, cfgs, vocab, kwargs)
    missing = atlas_audio.fit_inputs(model, cfgs, params, kwargs, missing, real=real)
    _documented(model, main, params, cfgs, kwargs, missing)
    if not real:
        kwargs = {k: v.to("meta") if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    if "use_cache" in params:
        kwargs["use_cache"] = False
    return (), kwargs


def _dummies(model: Any, params: Mapping[str, inspect.Parameter]) -> dict[str, Any]:
    """The model's own ``dummy_inputs`` the forward takes, where its class defines them."""
    from transformers import PreTrainedModel

    if type(model).dummy_inputs is PreTrainedModel.dummy_inputs:
        return {}
    try:
        dummy = model.dummy_inputs
    except Exception:  # a property that needs more than the config: the conventions
        return {}
    return {k: v for k, v in dummy.items() if k in params} if isinstance(dummy, dict) else {}


def _wanted(model: Any, cfg: Any, params: Mapping[str, inspect.Parameter], cfgs: list[Any],
            vocab: int, kwargs: dict[str, Any]) -> tuple[Any, list[str], list[str]]:
    """(the main input's name, the other main inputs a model names, every input to make); a
    multimodal model's tower inputs go into ``kwargs`` directly."""
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
    return main, mains, wanted


def _made(model: Any, main: Any, mains: list[str], wanted: list[str],
          params: Mapping[str, inspect.Parameter], cfgs: list[Any], vocab: int,
          kwargs: dict[str, Any]) -> list[str]:
    """Every wanted input made by the conventions into ``kwargs`` and fitted to each other;
    the names none makes."""
    import torch

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
    fit_image_positions(params, kwargs, cfgs[0])
    fit_prompt_canvas(kwargs)
    if "input_ids" in kwargs and "attention_mask" in params and "attention_mask" not in kwargs:
        kwargs["attention_mask"] = torch.ones(kwargs["input_ids"].shape, dtype=torch.long)
    return missing


def _documented(model: Any, main: Any, params: Mapping[str, inspect.Parameter],
                cfgs: list[Any], kwargs: dict[str, Any], missing: list[str]) -> None:
    """What no convention made (the audio ones included): the shape the docstring gives it;
    a skip naming what is still missing, or what the forward refused."""
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
