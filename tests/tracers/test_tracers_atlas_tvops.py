"""torchvision and timm in the atlas beside the CPU torch: the C extension replaced by operator
schemas and CPU reference kernels, in a child process only (as the sandbox does)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from opcheck.tracers import atlas_tvops

pytestmark = pytest.mark.torch

CHILD = r"""
import json, sys
from opcheck.tracers import atlas_tvops
label = atlas_tvops.enable()
import torch, torchvision
from torchvision.ops import nms, roi_align
boxes = torch.tensor([[0, 0, 10, 10], [1, 1, 11, 11], [50, 50, 60, 60], [0, 0, 9, 10]],
                     dtype=torch.float)
scores = torch.tensor([0.9, 0.8, 0.7, 0.95])
feat = torch.arange(2 * 3 * 8 * 8, dtype=torch.float).reshape(2, 3, 8, 8)
rois = torch.tensor([[0, 0, 0, 4, 4], [1, 2, 2, 7, 6]], dtype=torch.float)
got = roi_align(feat, rois, (2, 2), 1.0, 2, True)
from torchvision.ops.roi_align import _roi_align
want = _roi_align(feat, rois, 1.0, 2, 2, 2, True)
print(json.dumps({"label": label, "keep": nms(boxes, scores, 0.5).tolist(),
                  "roi_shape": list(got.shape), "roi_same": bool(torch.equal(got, want)),
                  "families": len(torchvision.models.list_models()),
                  "in_modules": "torchvision" in sys.modules}))
"""


def test_torchvision_runs_in_a_child_with_schemas_and_reference_kernels() -> None:
    if not atlas_tvops.installed("torchvision"):
        pytest.skip("torchvision is not installed for the atlas (make install)")
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    if atlas_tvops.shimmed():
        assert doc["label"] == atlas_tvops.LABEL
    # greedy NMS: 0.95 first suppresses boxes 0 and 1 (IoU > 0.5), box 2 is apart
    assert doc["keep"] == [3, 2]
    assert doc["roi_shape"] == [2, 3, 2, 2] and doc["roi_same"]
    assert doc["families"] > 100


def test_this_process_does_not_see_the_atlas_folder() -> None:
    # the folder is on the path only where enable() ran: importing transformers here must not
    # find a torchvision that cannot load
    import importlib.util

    if atlas_tvops.shimmed():
        assert importlib.util.find_spec("torchvision") is None
    assert atlas_tvops.installed("nope") is False


HF_CHILD = r"""
import json
from opcheck.tracers import atlas_build, atlas_hf  # noqa: F401 (puts the atlas folder on the path)
from transformers.utils import is_timm_available
model, args, kwargs = atlas_build.build("transformers", "timm_wrapper")
print(json.dumps({"timm": is_timm_available(), "model": type(model).__name__, "inputs": sorted(kwargs)}))
"""


def test_a_transformers_trace_sees_the_atlas_folders_timm() -> None:
    pytest.importorskip("transformers")
    # not shimmed(): an earlier test importing atlas_hf put the folder on this process's path
    if not atlas_tvops.installed("timm"):
        pytest.skip("timm is neither installed nor in the atlas's own folder (make install)")
    done = subprocess.run([sys.executable, "-c", HF_CHILD], capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    doc = json.loads(done.stdout.strip().splitlines()[-1])
    assert doc["timm"] is True
    assert doc["model"] == "TimmWrapperForImageClassification" and "pixel_values" in doc["inputs"]
