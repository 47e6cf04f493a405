"""Calls whose dtypes the aclnn functions behind them reject on some products (issue 15)."""

from __future__ import annotations

import torch
from torch import nn


class CastBf16(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16)


class RepeatDouble(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.repeat_interleave(x, 2)


class IndexComplex(nn.Module):
    def forward(self, x: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return x[i]


def cast_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return CastBf16(), (torch.randn(4, 4),)


def repeat_double() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return RepeatDouble(), (torch.randn(4, dtype=torch.float64),)


def repeat_float() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return RepeatDouble(), (torch.randn(4),)


def index_complex() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return IndexComplex(), (torch.randn(4, 4, dtype=torch.complex64), torch.tensor([0, 2]))
