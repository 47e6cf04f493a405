"""opcheck: will this PyTorch model run on an Ascend NPU, at full speed, on these versions?"""

from __future__ import annotations

__version__ = "0.1.0"
