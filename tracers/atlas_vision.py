"""timm's and torchvision's architectures for the atlas, built without weights.

torchvision: every ``torchvision.models.list_models()`` entry (classification, detection,
segmentation, video, optical flow, quantized), ``get_model(name, weights=None)`` (and
``weights_backbone=None``: no download), inputs by the entry's module and its weights' preset
transforms (crop size): images, lists of images for detection (made small with
``min_size``/``max_size`` where the builder takes them), clips ``(1, 3, T, H, W)``, image pairs.

timm: one representative per family of ``timm.list_models()``. A family is the entrypoint's
module (``timm.list_models(module=...)``) and the name's architecture prefix (the name up to its
first ``_``, trailing size digits and letter dropped): ``resnet50d`` and ``resnet101`` share
``resnet:resnet``, ``seresnext26d_32x4d`` is ``resnet:seresnext``, every ``vit_*`` of
``vision_transformer`` is one family. Variants that differ only in width or depth share one;
the smallest-sounding name (tiny, small, nano, …) represents it. ``create_model(name,
pretrained=False)``, input size from its ``pretrained_cfg``.

Importing this module makes torchvision importable beside the CPU torch (:mod:`atlas_tvops`):
only the atlas's listing subprocess and its sandboxed traces import it.
"""

from __future__ import annotations

import inspect
import re
from typing import Any

from opcheck.tracers import atlas_tvops
from opcheck.tracers.atlas_build import Built, ModelSkip, one_line

_TV_TASKS = {"detection": "detection", "segmentation": "segmentation", "video": "video",
             "optical_flow": "optical-flow", "quantization": "vision"}  # fmt: skip
_SMALL = ("pico", "nano", "femto", "atto", "micro", "tiny", "small", "xs", "s")
DETECTION_SIZE = 224  # min_size/max_size handed to detection builders (their default: 800)

LABEL = atlas_tvops.enable()


def _prefix(name: str) -> str:
    stem = name.split(".")[0].split("_")[0]
    return re.sub(r"[\d]+[a-z]?$", "", stem) or stem


def _smallness(name: str) -> tuple[int, str]:
    parts = re.split(r"[_.]", name)
    for rank, word in enumerate(_SMALL):
        if word in parts:
            return rank, name
    return len(_SMALL), name


def timm_families() -> dict[str, list[str]]:
    """``module:prefix`` → the family's model names, in timm's order."""
    import timm

    families: dict[str, list[str]] = {}
    for module in timm.list_modules():
        for name in timm.list_models(module=module):
            families.setdefault(f"{module}:{_prefix(name)}", []).append(name)
    return families


def architectures(library: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if library == "torchvision":
        import torchvision

        for name in torchvision.models.list_models():
            fn = torchvision.models.get_model_builder(name)
            kind = fn.__module__.split(".")[2] if fn.__module__.count(".") >= 2 else ""
            rows.append({"name": name, "model_class": f"{fn.__module__}.{fn.__name__}",
                         "task": _TV_TASKS.get(kind, "vision"),
                         "family": kind if kind in _TV_TASKS else "classification"})
        return rows
    for family, names in sorted(timm_families().items()):
        name = min(names, key=_smallness)
        rows.append({"name": name, "model_class": name, "task": "vision", "family": family})
    return rows


def _tv_kwargs(name: str) -> dict[str, Any]:
    import torchvision

    params = inspect.signature(torchvision.models.get_model_builder(name)).parameters
    kwargs: dict[str, Any] = {"weights": None}
    if "weights_backbone" in params:
        kwargs["weights_backbone"] = None
    module = torchvision.models.get_model_builder(name).__module__
    if ".detection." in module and not name.startswith("ssd"):
        kwargs.update(min_size=DETECTION_SIZE, max_size=DETECTION_SIZE)
    return kwargs


def build(
    library: str, name: str, *, train: bool = False, real: bool = False, shrink: int | None = None
) -> Built:
    import torch

    try:
        if library == "torchvision":
            import torchvision

            def make() -> Any:
                return torchvision.models.get_model(name, **_tv_kwargs(name))
        else:
            import timm

            def make() -> Any:
                return timm.create_model(name, pretrained=False)

        if real:
            torch.manual_seed(0)
            model = make()
        else:
            try:
                with torch.device("meta"):
                    model = make()
            except NotImplementedError as exc:
                if "meta tensor" not in str(exc):
                    raise
                # a builder that reads a tensor's value while building (regnet's widths):
                # built on the CPU, then moved to the meta device for the fake trace
                model = make().to("meta")
    except (ModelSkip, MemoryError):
        raise
    except Exception as exc:
        raise ModelSkip(f"{name}: does not build without weights: {one_line(exc)}") from None
    model.eval()
    return model, _inputs(library, name, model), {}


def _weights_facts(name: str) -> tuple[Any, dict[str, Any]]:
    """The entry's first weights' crop size (its preset transforms) and meta."""
    import torchvision

    try:
        first = next(iter(torchvision.models.get_model_weights(name)))
        return first.transforms.keywords.get("crop_size"), dict(first.meta)
    except Exception:
        return None, {}


def _crop(name: str, model: Any, default: int) -> tuple[int, int]:
    """The model's own declared size, else the crop size of its weights' transforms (a
    builder without weights may declare a smaller size than its largest weights use)."""
    own = getattr(model, "image_size", None)
    crop = own if isinstance(own, int) else _weights_facts(name)[0] or default
    if isinstance(crop, (list, tuple)):
        return int(crop[0]), int(crop[-1])
    return int(crop), int(crop)


def _inputs(library: str, name: str, model: Any) -> tuple[Any, ...]:
    import torch

    if library == "timm":
        cfg = getattr(model, "pretrained_cfg", None) or {}
        c, h, w = cfg.get("input_size", (3, 224, 224))
        return (torch.randn(1, c, h, w),)
    module = type(model).__module__
    if ".video." in module:
        h, w = _crop(name, model, 112)
        frames = max(8, int(_weights_facts(name)[1].get("min_temporal_size") or 0))
        return (torch.randn(1, 3, frames, h, w),)
    if ".optical_flow." in module:
        return (torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128))
    if ".detection." in module:
        h, w = (300, 300) if name.startswith("ssd300") else (320, 320) if "ssdlite" in name \
            else (DETECTION_SIZE, DETECTION_SIZE)
        return ([torch.rand(3, h, w)],)
    h, w = _crop(name, model, 224)
    return (torch.randn(1, 3, h, w),)
