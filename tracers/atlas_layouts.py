"""Input layouts the atlas reads off a transformers model's config and forward: the image sizes,
video frames and image pairs a forward takes, inputs whose shape its docstring documents, the
defaults a config leaves to a choice it lists, and the kwargs fitted to what the forward does
with them (patch grids of NaViT packers, prompt canvases, image sides a config's own grid
needs). Split from :mod:`opcheck.tracers.atlas_inputs`, which makes the inputs; keyed by
parameter names and config attributes, never by model type. torch is imported lazily.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Iterable
from typing import Any

from opcheck.core.opname import split_top_level
from opcheck.tracers.atlas_hf_config import first_value


def _int(v: Any, default: int) -> int:
    if isinstance(v, (list, tuple)) and v:
        v = v[0]
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else default


# config attributes sizing a model's images (or video frames), in order of preference
IMAGE_SIZE_KEYS = ("image_size", "img_size", "input_size", "crop_size", "max_img_size")
# config attributes counting a video's frames: a model whose config has one reads pixels as
# (batch, frames, channels, h, w)
FRAME_KEYS = ("num_frames", "frames_per_clip")
# config attributes grouping frames into one patch in time (frames must be a multiple)
TUBELET_KEYS = ("tubelet_size", "temporal_patch_size", "patch_temporal")


def video_frames(cfgs: list[Any]) -> int:
    """The frames of a video input: the config's own count (a frame-padding prompt or a
    temporal position table is sized by it), else 8; a multiple of the frames grouped into one
    temporal patch."""
    frames = _int(first_value(cfgs, *FRAME_KEYS), 8)
    tubelet = max(_int(first_value(cfgs, *TUBELET_KEYS), 1), 1)
    return -(-frames // tubelet) * tubelet


def image_pair(cfg: Any) -> int | None:
    """2 where the model's type is one transformers lists for keypoint matching: such models
    read ``pixel_values`` as image pairs ``(batch, 2, channels, h, w)`` (the task's convention,
    whatever the forward's generated docstring says); None otherwise."""
    from transformers.models.auto import modeling_auto

    matching = getattr(modeling_auto, "MODEL_FOR_KEYPOINT_MATCHING_MAPPING_NAMES", {})
    return 2 if getattr(cfg, "model_type", None) in matching else None


# inputs a document or detection processor makes beside the ids (a box per token, region
# features and their positions) that the forward needs to run at all, made from the shape the
# forward documents: their sizes are config attributes (``visual_feat_dim``) or the text length
DOCUMENTED_INPUTS = ("bbox", "visual_feats", "visual_pos")
# ``name (`kind` of shape `(dims)`...``: the shape in backticks (a bracketed list too, and
# nested parentheses: ``dim * len(config.target_layer_ids)``), else the first parenthesis
_DOC_SHAPE = r"{name} \(`([^`]*)`[^`\n]*`([(\[][^`]*[)\]])`([^\n]*)"
_DOC_SHAPE_BARE = r"{name} \(`([^`]*)`[^(\n]*\(([^)]*)\)([^\n]*)"
# the library's names of the model width where a docstring says ``dim`` and the config
# calls it ``hidden_size``
WIDTH_SYNONYMS = ("dim", "hidden_dim", "embed_dim", "d_model", "hidden_size")


def documented_shape(forward: Any, name: str) -> tuple[str, list[str], bool] | None:
    """``(kind, dims, optional)`` of the input ``name`` as the forward's docstring gives it:
    the tensor kind (``torch.LongTensor``), its dimensions as written, and whether the line
    marks it ``*optional*``. None when undocumented or not a tensor (a dict of tensors)."""
    import re

    doc = inspect.getdoc(forward) or ""
    m = re.search(_DOC_SHAPE.format(name=re.escape(name)), doc) \
        or re.search(_DOC_SHAPE_BARE.format(name=re.escape(name)), doc)
    if m is None or "Tensor" not in m.group(1) or m.group(1).startswith(("dict", "list", "tuple")):
        return None
    inner = m.group(2)
    if inner[:1] in "([" and inner[-1:] in ")]":
        inner = inner[1:-1]
    # commas at the outer level only (``len(a, b)`` stays one dimension)
    dims = split_top_level(inner, angles=False)
    return m.group(1), dims, "*optional*" in m.group(3)


def _dim(term: str, cfgs: list[Any], seq: int) -> int:
    """One documented dimension: a number, a config attribute (``config.`` or not), ``len()``
    of a config list, products and sums of these; the batch 1, any other name ``seq``."""
    import re

    term = term.replace("config.", "").replace("`", "").strip()
    if "+" in term:
        return sum(_dim(t, cfgs, seq) for t in term.split("+"))
    if "*" in term:
        return math.prod(_dim(t, cfgs, seq) for t in term.split("*"))
    if term.isdigit():
        return int(term)
    if term == "batch_size":
        return 1
    m = re.fullmatch(r"len\((\w+)\)", term)
    if m:
        v = first_value(cfgs, m.group(1))
        return len(v) if isinstance(v, (list, tuple)) and v else 1
    if not re.fullmatch(r"\w+", term):
        return seq
    names = (term, *WIDTH_SYNONYMS) if term in WIDTH_SYNONYMS else (term,)
    return _int(first_value(cfgs, *names), seq)


def documented_input(forward: Any, name: str, cfgs: list[Any], seq: int) -> Any:
    """The input ``name`` of the shape the forward's docstring gives it (``(batch_size,
    num_boxes, 4)``, ``(batch_size, num_visual_features, visual_feat_dim)``,
    ``[batch_size, config.block_size, dim]``): a dimension a config attribute names takes its
    value, a number itself, the batch 1, any other ``seq``. Boxes (``bbox``: last dimension 4)
    are well-formed, ``x0 <= x1``, in the 0-1000 range of the layout embeddings, or 0-1 where
    the docstring says floats. None when undocumented."""
    import torch

    found = documented_shape(forward, name)
    if found is None:
        return None
    kind, dims, _optional = found
    shape: list[int] = []
    for d in dims:
        if d == "{0}":  # the library's template for (batch_size, sequence_length)
            shape += [1, seq]
        else:
            own = _own_length(name, d)
            value = first_value(cfgs, *own) if own else None
            shape.append(_int(value, seq) if value is not None else _dim(d, cfgs, seq))
    if name == "bbox" and shape[-1] == 4:
        corner = torch.arange(shape[-2] if len(shape) > 1 else 1) * 10 % 500
        box = torch.stack([corner, corner, corner + 100, corner + 100], dim=-1)
        box = box.expand(*shape).contiguous()
        return box.long() if "Long" in kind else box.float() / 1000
    if "Long" in kind or name.endswith("_ids"):  # ids documented as a plain Tensor too
        return torch.zeros(*shape, dtype=torch.long)
    # in [0, 1): a column the model reads as an index (flattened patches' row and column)
    # rounds to 0, a valid row of any table
    return torch.rand(*shape)


def _own_length(name: str, dim: str) -> tuple[str, ...]:
    """The config's names of an input's own sequence length (``task_inputs``' sequence_length
    is ``task_seq_len``): the input's first word before the length's usual spellings."""
    if dim != "sequence_length":
        return ()
    word = name.split("_")[0]
    return (f"{word}_seq_len", f"{word}_seq_length", f"{word}_sequence_length")


def fit_default_choices(cfgs: Iterable[Any]) -> None:
    """A ``default_X`` a config leaves unset where it lists the choices ``Xs`` (X-MOD's
    ``default_language`` among ``languages``: the forward refuses to guess): the first."""
    for c in cfgs:
        d = vars(c)
        for key, value in list(d.items()):
            if not key.startswith("default_") or value is not None:
                continue
            choices = d.get(key.removeprefix("default_") + "s")
            if isinstance(choices, (list, tuple)) and choices:
                setattr(c, key, choices[0])


def fit_patch_grid(main: Any, params: Iterable[str], kwargs: dict[str, Any],
                   cfgs: list[Any]) -> None:
    """NaViT-style packer convention: a vision tower whose forward takes ``target_sizes`` (the
    patch grid ``(h, w)`` per image, its position ids bucketed from it) given the grid of the
    image made, patches per side by the config's ``patch_size``."""
    import torch

    pixels = kwargs.get("pixel_values")
    if main != "pixel_values" or "target_sizes" not in params or "target_sizes" in kwargs \
            or pixels is None or pixels.dim() != 4:
        return
    patch = _int(first_value(cfgs, "patch_size"), 14)
    grid = [[pixels.shape[-2] // patch, pixels.shape[-1] // patch]]
    kwargs["target_sizes"] = torch.tensor(grid, dtype=torch.int32)


def fit_prompt_canvas(kwargs: dict[str, Any]) -> None:
    """SegGPT convention (in-context segmentation): the forward stacks the prompt image over
    the input image (and the prompt's masks over each other) into the configured canvas, so
    each of ``pixel_values``, ``prompt_pixel_values`` and ``prompt_masks`` is half its height."""
    if "prompt_pixel_values" not in kwargs:
        return
    for key in ("pixel_values", "prompt_pixel_values", "prompt_masks"):
        v = kwargs.get(key)
        if v is not None and v.dim() == 4 and v.shape[-2] % 2 == 0:
            kwargs[key] = v[..., : v.shape[-2] // 2, :].contiguous()


def fit_image_side(cfgs: list[Any], h: int, w: int) -> tuple[int, int]:
    """An image of the configured size fitted to what a config's own grid needs: at least
    ``patch_size / min(scale ratios)`` where the model cuts patches from downscaled copies
    (Depth Pro's ``scaled_images_ratios``: a 384 patch from a quarter-size copy needs 1536),
    and whole windows of patches per side where the encoder splits the patch grid into
    ``num_windows`` per side (RF-DETR's 518 pixels are 37 patches of 14, not 4 windows)."""
    for c in cfgs:
        d = vars(c)
        patch = d.get("patch_size")
        if not isinstance(patch, int) or isinstance(patch, bool) or patch <= 0:
            continue
        for key, v in d.items():
            if key.endswith("_ratios") and isinstance(v, (list, tuple)) and v \
                    and all(isinstance(r, (int, float)) and 0 < r <= 1 for r in v):
                need = math.ceil(patch / min(v))
                h, w = max(h, need), max(w, need)
        windows = d.get("num_windows")
        if isinstance(windows, int) and not isinstance(windows, bool) and windows > 0:
            unit = patch * windows
            h, w = max(h - h % unit, unit), max(w - w % unit, unit)
    return h, w
