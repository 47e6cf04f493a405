"""Models whose speed the checker judges (tests/checker/test_speed.py)."""

from __future__ import annotations

import torch
from torch import nn


class Gate(nn.Module):
    """Branches on a tensor value: the host waits for the device every forward."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(x)
        if h.sum() > 0:  # the sync
            h = h * 2
        return h


def gate() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Gate(), (torch.randn(2, 8),)
