"""torchvision and timm for the atlas beside the CPU build of torch, inside the sandbox only.

The registry's torchvision wheels for x86_64 link a CUDA build of torch: beside the CPU torch
this project installs, their C extension does not load and ``import torchvision`` fails
("operator torchvision::nms does not exist"), which would also break ``import transformers``
and ``import timm``. So ``make install`` puts torchvision (the release paired with the installed
torch) and timm with ``--no-deps`` into a folder of their own (:func:`site_dir`), off the
interpreter's path. Only the atlas's listing subprocess and its sandboxed traces put that folder
on ``sys.path`` (:func:`enable`), after replacing torchvision's C extension with its operator
schemas (``torch.library``) and CPU reference kernels. A model that calls them records
``torchvision::nms`` etc., which is what an NPU without torchvision_npu receives too; the rows
say so (:data:`LABEL`).

A torchvision that imports on its own (a matching CPU build in site-packages) is used as it is.
"""

from __future__ import annotations

import os
import sys
from importlib import util
from pathlib import Path
from typing import Any

SITE_ENV = "OPCHECK_ATLAS_SITE"
LABEL = "torchvision ops: schemas + CPU reference kernels (C extension not loadable)"
LIBS = ("torchvision", "timm")

# torchvision's C extension's operators (their meta kernels are registered by torchvision
# itself at import, so each schema must exist before it is imported)
SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "roi_align": "roi_align(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
                 "SymInt pooled_width, int sampling_ratio, bool aligned) -> Tensor",
    "_roi_align_backward": "_roi_align_backward(Tensor grad, Tensor rois, float spatial_scale, "
                           "SymInt pooled_height, SymInt pooled_width, SymInt batch_size, "
                           "SymInt channels, SymInt height, SymInt width, int sampling_ratio, "
                           "bool aligned) -> Tensor",
    "qroi_align": "qroi_align(Tensor input, Tensor rois, float input_scale, int input_zero_point, "
                  "float rois_scale, int rois_zero_point, float spatial_scale, "
                  "SymInt pooled_height, SymInt pooled_width, int sampling_ratio, "
                  "bool aligned) -> Tensor",
    "ps_roi_align": "ps_roi_align(Tensor input, Tensor rois, float spatial_scale, "
                    "SymInt pooled_height, SymInt pooled_width, int sampling_ratio) "
                    "-> (Tensor, Tensor)",
    "_ps_roi_align_backward": "_ps_roi_align_backward(Tensor grad, Tensor rois, "
                              "Tensor channel_mapping, float spatial_scale, SymInt pooled_height, "
                              "SymInt pooled_width, int sampling_ratio, SymInt batch_size, "
                              "SymInt channels, SymInt height, SymInt width) -> Tensor",
    "roi_pool": "roi_pool(Tensor input, Tensor rois, float spatial_scale, SymInt pooled_height, "
                "SymInt pooled_width) -> (Tensor, Tensor)",
    "_roi_pool_backward": "_roi_pool_backward(Tensor grad, Tensor rois, Tensor argmax, "
                          "float spatial_scale, SymInt pooled_height, SymInt pooled_width, "
                          "SymInt batch_size, SymInt channels, SymInt height, SymInt width) "
                          "-> Tensor",
    "ps_roi_pool": "ps_roi_pool(Tensor input, Tensor rois, float spatial_scale, "
                   "SymInt pooled_height, SymInt pooled_width) -> (Tensor, Tensor)",
    "_ps_roi_pool_backward": "_ps_roi_pool_backward(Tensor grad, Tensor rois, "
                             "Tensor channel_mapping, float spatial_scale, SymInt pooled_height, "
                             "SymInt pooled_width, SymInt batch_size, SymInt channels, "
                             "SymInt height, SymInt width) -> Tensor",
    "deform_conv2d": "deform_conv2d(Tensor input, Tensor weight, Tensor offset, Tensor mask, "
                     "Tensor bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, "
                     "SymInt dilation_h, SymInt dilation_w, SymInt groups, SymInt offset_groups, "
                     "bool use_mask) -> Tensor",
    "_deform_conv2d_backward": "_deform_conv2d_backward(Tensor grad, Tensor input, "
                               "Tensor weight, Tensor offset, Tensor mask, Tensor bias, "
                               "SymInt stride_h, SymInt stride_w, SymInt pad_h, SymInt pad_w, "
                               "SymInt dilation_h, SymInt dilation_w, SymInt groups, "
                               "SymInt offset_groups, bool use_mask) "
                               "-> (Tensor, Tensor, Tensor, Tensor, Tensor)",
    "_cuda_version": "_cuda_version() -> int",
}  # fmt: skip

_enabled: str | None = None
_lib: Any = None  # the torch.library.Library: kept alive, its registrations die with it


def site_dir() -> Path:
    """Where ``make install`` puts torchvision and timm for the atlas."""
    return Path(os.environ.get(SITE_ENV) or Path(sys.prefix) / "opcheck-atlas-site")


def installed(library: str) -> bool:
    """``library`` importable on the interpreter's path or present in :func:`site_dir` (no
    import: importing a CUDA-linked torchvision here would fail)."""
    if util.find_spec(library) is not None:
        return True
    return library in LIBS and (site_dir() / library / "__init__.py").is_file()


def shimmed() -> bool:
    """torchvision runs in the atlas with its C extension replaced (no import: it lies in
    :func:`site_dir` only)."""
    return util.find_spec("torchvision") is None and installed("torchvision")


def version(library: str) -> str:
    from importlib.metadata import PackageNotFoundError, distributions
    from importlib.metadata import version as dist_version

    try:
        return dist_version(library)
    except PackageNotFoundError:
        pass
    for dist in distributions(path=[str(site_dir())]):
        if dist.metadata["Name"] == library:
            return str(dist.version)
    return ""


def enable() -> str:
    """Make torchvision (and so timm) importable in this process: "" when it imports on its
    own, else :data:`LABEL` after putting :func:`site_dir` on the path with the C extension
    replaced. Idempotent."""
    global _enabled
    if _enabled is not None:
        return _enabled
    if "torchvision" in sys.modules or util.find_spec("torchvision") is not None:
        _enabled = ""
        return _enabled
    site = site_dir()
    if not (site / "torchvision" / "__init__.py").is_file():
        _enabled = ""
        return _enabled
    sys.path.append(str(site))
    import torch

    ops: Any = torch.ops
    real_load = ops.load_library

    def load_library(path: str) -> None:
        if not str(path).startswith(str(site)):
            real_load(path)
        elif Path(path).name.startswith("_C"):
            _define()
        else:  # image.so and friends link CUDA too: torchvision warns and goes on
            raise OSError(f"{Path(path).name}: not loaded beside the CPU torch")

    ops.load_library = load_library
    try:
        import torchvision  # noqa: F401
    finally:
        ops.load_library = real_load
    _enabled = LABEL
    return _enabled


def _define() -> None:
    global _lib
    import torch

    if _lib is not None:
        return
    library: Any = torch.library
    lib = library.Library("torchvision", "DEF")
    for schema in SCHEMAS.values():
        lib.define(schema)
    lib.impl("nms", _nms, "CPU")
    lib.impl("roi_align", _roi_align, "CPU")
    lib.impl("_cuda_version", lambda: -1, "CompositeExplicitAutograd")
    _lib = lib


def _nms(dets: Any, scores: Any, iou_threshold: float) -> Any:
    """Greedy NMS: highest score first, drop boxes overlapping a kept one above the threshold."""
    import torch

    if dets.numel() == 0:
        return torch.empty(0, dtype=torch.long)
    x1, y1, x2, y2 = dets.unbind(1)
    areas = (x2 - x1) * (y2 - y1)
    order = scores.argsort(descending=True)
    keep: list[int] = []
    suppressed = torch.zeros(dets.shape[0], dtype=torch.bool)
    for i in order.tolist():
        if suppressed[i]:
            continue
        keep.append(i)
        w = (torch.minimum(x2[i], x2) - torch.maximum(x1[i], x1)).clamp(min=0)
        h = (torch.minimum(y2[i], y2) - torch.maximum(y1[i], y1)).clamp(min=0)
        inter = w * h
        suppressed |= inter / (areas[i] + areas - inter) > iou_threshold
    return torch.tensor(keep, dtype=torch.long)


def _roi_align(input: Any, rois: Any, spatial_scale: float, pooled_height: int,
               pooled_width: int, sampling_ratio: int, aligned: bool) -> Any:
    # torchvision's own pure-torch implementation (what it runs where its kernels are missing)
    from torchvision.ops.roi_align import _roi_align as reference

    return reference(input, rois, spatial_scale, pooled_height, pooled_width, sampling_ratio,
                     aligned)
