"""The project's own test models: small, one per decomposition family the NPU trace must get right.

Each factory returns ``(model, example_args)``; example tensors are only used for their shape
and dtype. Load by path: ``--model tests/models/zoo.py:conv_net``.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, 3, stride=2)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.relu(self.bn(self.conv1(x)))
        x = F.max_pool2d(x, 2)
        x = F.gelu(self.conv2(x))
        return self.fc(torch.flatten(self.pool(x), 1)).log_softmax(-1)


class TinyTransformer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(50, 16)
        layer = nn.TransformerEncoderLayer(16, 2, dim_feedforward=32, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)
        self.head = nn.Linear(16, 50)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.enc(self.emb(ids)))


class LSTMNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lstm = nn.LSTM(8, 12, num_layers=2, batch_first=True)
        self.fc = nn.Linear(12, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(x)
        return self.fc(out[:, -1])


class DropoutNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(10, 20)
        self.drop = nn.Dropout(0.3)
        self.fc2 = nn.Linear(20, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.drop(torch.tanh(self.fc1(x))))


class SDPANet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.out = nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, _ = x.shape
        q, k, v = self.qkv(x).view(b, t, 3, 2, 8).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, t, 16))


class MaskNet(nn.Module):
    """Boolean masking: an output shape that depends on the data."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(6, 6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        picked = y[y > 0]
        return picked.sum() + y.mean()


class BranchNet(nn.Module):
    """Data-dependent control flow: the branch cannot be followed without values."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.fc(x)
        if y.sum() > 0:
            return y.relu()
        return y.sigmoid()


class FallbackNet(nn.Module):
    """Two ops whose NPU support changed across releases: isin (a CPU fallback in early 2.1
    releases, a kernel from 2.1.0.post8) and logcumsumexp (no kernel: an error before torch_npu
    had a CPU fallback, a fallback after)."""

    def forward(self, x: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        keep = torch.isin(ids, ids[:, :2]).to(x.dtype)
        return torch.logcumsumexp(x, dim=-1) * keep


def conv_net() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return ConvNet(), (torch.randn(2, 3, 16, 16),)


def transformer() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return TinyTransformer(), (torch.randint(0, 50, (2, 7)),)


def lstm() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return LSTMNet(), (torch.randn(2, 5, 8),)


def fallbacks() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return FallbackNet(), (torch.randn(2, 6), torch.randint(0, 9, (2, 6)))


def dropout() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return DropoutNet(), (torch.randn(4, 10),)


def sdpa() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return SDPANet(), (torch.randn(2, 5, 16),)


def masking() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return MaskNet(), (torch.randn(3, 6),)


def branch() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return BranchNet(), (torch.randn(2, 4),)


# name -> (factory, train?) for the backend comparison
ZOO = {
    "conv_net": (conv_net, False),
    "conv_net_train": (conv_net, True),
    "transformer": (transformer, False),
    "transformer_train": (transformer, True),
    "lstm": (lstm, False),
    "dropout_train": (dropout, True),
    "sdpa": (sdpa, False),
    "masking": (masking, False),
}
