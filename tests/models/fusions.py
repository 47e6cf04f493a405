"""The five chains of the profiling advisor's fusion rules, each as a user writes it."""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


class GeGLU(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(16, 32)

    def forward(self, x: Any) -> Any:
        a, b = self.proj(x).chunk(2, dim=-1)
        return a * F.gelu(b)


class GroupNormSilu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(4, 16)

    def forward(self, x: Any) -> Any:
        return F.silu(self.norm(x))


class AddLayerNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 16)
        self.ln = nn.LayerNorm(16)

    def forward(self, x: Any) -> Any:
        return self.ln(x + self.fc(x))


class HeadsTranspose(nn.Module):
    def forward(self, x: Any) -> Any:
        b, s, h = x.shape
        return x.view(b, s, 4, h // 4).permute(0, 2, 1, 3).contiguous().view(b * 4, s, h // 4)


class ScaledMaskedSoftmax(nn.Module):
    def forward(self, scores: Any, mask: Any) -> Any:
        return torch.softmax((scores * 0.125).masked_fill(mask, -1e4), dim=-1)


def cases() -> list[tuple[nn.Module, tuple[Any, ...], str]]:
    """Each model, its inputs and the torch_npu API the advisor names for it."""
    return [
        (GeGLU(), (torch.randn(2, 16),), "torch_npu.npu_geglu"),
        (GroupNormSilu(), (torch.randn(2, 16, 4, 4),), "torch_npu.npu_group_norm_silu"),
        (AddLayerNorm(), (torch.randn(2, 16),), "torch_npu.npu_add_layer_norm"),
        (HeadsTranspose(), (torch.randn(2, 8, 16),), "torch_npu.npu_confusion_transpose"),
        (ScaledMaskedSoftmax(), (torch.randn(2, 4, 4), torch.zeros(2, 4, 4, dtype=torch.bool)),
         "torch_npu.npu_scaled_masked_softmax"),
    ]
