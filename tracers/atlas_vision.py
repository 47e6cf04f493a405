"""timm's and torchvision's architectures for the atlas, built without weights.

torchvision: every ``torchvision.models.list_models()`` entry (classification, detection,
segmentation, video, optical flow, quantized), ``get_model(name, weights=None)``, inputs by the
entry's module: images, clips, image pairs. timm: one representative per family of
``timm.list_models()`` (variants that differ only in width or depth share the family's name
stem), ``create_model(name, pretrained=False)``, the input size of its ``pretrained_cfg``.

Neither installs on this project's machines (the registry's torchvision wheels link CUDA
torch), so listing says so in one line; the code follows each library's documented API.
"""

from __future__ import annotations

import re
from typing import Any

from opcheck.tracers.atlas_build import Built, ModelSkip, one_line

_TV_TASKS = {"detection": "detection", "segmentation": "segmentation", "video": "video",
             "optical_flow": "optical-flow", "quantization": "vision"}  # fmt: skip


def _family(name: str) -> str:
    """A timm family: the name's stem before its size and variant suffixes."""
    stem = name.split(".")[0].split("_")[0]
    return re.sub(r"[\d]+[a-z]?$", "", stem) or stem


def architectures(library: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    if library == "torchvision":
        import torchvision

        for name in torchvision.models.list_models():
            fn = torchvision.models.get_model_builder(name)
            kind = fn.__module__.split(".")[2] if fn.__module__.count(".") >= 2 else ""
            rows.append({"name": name, "model_class": f"{fn.__module__}.{fn.__name__}",
                         "task": _TV_TASKS.get(kind, "vision"), "family": kind or "classification"})
        return rows
    import timm

    seen: set[str] = set()
    for name in timm.list_models():
        family = _family(name)
        if family in seen:
            continue
        seen.add(family)
        rows.append({"name": name, "model_class": name, "task": "vision", "family": family})
    return rows


def build(
    library: str, name: str, *, train: bool = False, real: bool = False, shrink: int | None = None
) -> Built:
    import torch

    try:
        if library == "torchvision":
            import torchvision

            def make() -> Any:
                return torchvision.models.get_model(name, weights=None)
        else:
            import timm

            def make() -> Any:
                return timm.create_model(name, pretrained=False)

        if real:
            torch.manual_seed(0)
            model = make()
        else:
            with torch.device("meta"):
                model = make()
    except (ModelSkip, MemoryError):
        raise
    except Exception as exc:
        raise ModelSkip(f"{name}: does not build without weights: {one_line(exc)}") from None
    model.eval()
    return model, _inputs(library, name, model), {}


def _inputs(library: str, name: str, model: Any) -> tuple[Any, ...]:
    import torch

    if library == "timm":
        cfg = getattr(model, "pretrained_cfg", None) or {}
        c, h, w = cfg.get("input_size", (3, 224, 224))
        return (torch.randn(1, c, h, w),)
    module = type(model).__module__
    if ".video." in module:
        return (torch.randn(1, 3, 8, 112, 112),)
    if ".optical_flow." in module:
        return (torch.randn(1, 3, 128, 128), torch.randn(1, 3, 128, 128))
    if ".detection." in module:
        return ([torch.randn(3, 224, 224)],)
    return (torch.randn(1, 3, 224, 224),)
