"""Models for the trace-fidelity checks: each calls an API whose documented limit is about one
argument, a produced dtype, or a composite level that depends on the release."""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class Pool3d(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.max_pool3d(x, 2)


class Embed(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(20, 8)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.emb(ids)


class CastBf16(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.to(torch.bfloat16) * 2


class Lstsq(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        sol = torch.linalg.lstsq(a, b).solution
        return sol.relu()


class LinalgMix(nn.Module):
    def forward(self, a: torch.Tensor) -> torch.Tensor:
        _, logdet = torch.slogdet(a)
        return torch.inverse(a).repeat_interleave(2) * logdet


def pool3d() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Pool3d(), (torch.randn(1, 2, 4, 4, 4, dtype=torch.float64),)


def embed() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Embed(), (torch.randint(0, 20, (2, 5)),)


def cast_bf16() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return CastBf16(), (torch.randn(4, 4),)


def lstsq() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Lstsq(), (torch.randn(6, 3), torch.randn(6, 2))


def linalg_mix() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return LinalgMix(), (torch.randn(3, 3),)
