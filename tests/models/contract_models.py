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


class Unary(nn.Module):
    """One elementwise call: acos, log1p, gelu (issue 26)."""

    def __init__(self, fn: str) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.fn == "gelu":
            return nn.functional.gelu(x)
        return getattr(torch, self.fn)(x)  # type: ignore[no-any-return]


class Kthvalue(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        values, indices = torch.kthvalue(x, 2)
        return values + indices


def acos_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Unary("acos"), (torch.rand(4, 4, dtype=torch.bfloat16),)


def log1p_complex64() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Unary("log1p"), (torch.randn(4, 4, dtype=torch.complex64),)


def gelu_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Unary("gelu"), (torch.randn(4, 4, dtype=torch.bfloat16),)


def kthvalue_float() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Kthvalue(), (torch.randn(4, 4),)


def _conv(conv: nn.Module, shape: tuple[int, ...],
          dtype: torch.dtype) -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return conv.to(dtype), (torch.randn(*shape, dtype=dtype),)


def conv3d_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """A Qwen2-VL-like patch embedding: a Conv3d whose kernel is its stride."""
    return _conv(nn.Conv3d(3, 16, kernel_size=(2, 4, 4), stride=(2, 4, 4), bias=False),
                 (2, 3, 2, 4, 4), torch.bfloat16)


def conv3d_fp16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _conv(nn.Conv3d(3, 16, kernel_size=(2, 4, 4), stride=(2, 4, 4), bias=False),
                 (2, 3, 2, 4, 4), torch.float16)


def conv2d_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return _conv(nn.Conv2d(3, 16, kernel_size=4, stride=4, bias=False), (2, 3, 8, 8),
                 torch.bfloat16)
