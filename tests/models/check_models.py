"""Small models written to land on one checker status each (see tests/test_e2e_check.py)."""

from __future__ import annotations

import torch
from torch import nn


class StopCheck(nn.Module):
    """The stop-token test of text generation: torch.isin on two tensors."""

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return torch.isin(tokens, torch.tensor([0, 2], device=tokens.device))


def stop_check() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return StopCheck(), (torch.randint(0, 10, (4,)),)


@torch.library.custom_op("opcheck_test::scale", mutates_args=())
def scale(x: torch.Tensor, factor: float) -> torch.Tensor:
    return x * factor


@scale.register_fake
def _scale_fake(x: torch.Tensor, factor: float) -> torch.Tensor:
    return torch.empty_like(x)


class CustomOpNet(nn.Module):
    """A model calling a third-party custom op (what vendor kernels look like to opcheck)."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return scale(torch.relu(self.fc(x)), 0.5)


def custom_op() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return CustomOpNet(), (torch.randn(2, 8),)


class Float64Cholesky(nn.Module):
    """Covariance whitening in float64: a dtype the NPU docs exclude for cholesky."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        cov = x.T @ x + torch.eye(x.shape[1], dtype=x.dtype, device=x.device)
        return torch.linalg.cholesky(cov)


def float64_cholesky() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return Float64Cholesky(), (torch.randn(16, 4, dtype=torch.float64),)
