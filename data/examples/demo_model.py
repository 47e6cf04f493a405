"""The bundled example for `make demo`: one decoding step of a tiny text generator.

It is built the way real generation code is: embeddings, a pre-norm transformer block with
scaled-dot-product attention, an LM head, then the stop-token check `transformers` performs with
`torch.isin` and a log-cumulative-sum used for nucleus scoring. Those last two ops are the
interesting ones on an NPU: `isin` had no kernel in early torch_npu 2.1 releases, and
`logcumsumexp` still falls back to the CPU.

    opcheck --model data/examples/demo_model.py:build
"""

from __future__ import annotations

import torch
from torch import nn


class DemoGenerator(nn.Module):
    def __init__(self, vocab: int = 128, dim: int = 32) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, dim)
        self.block = nn.TransformerEncoderLayer(dim, 4, dim_feedforward=64, dropout=0.0,
                                                batch_first=True, norm_first=True)
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, vocab, bias=False)
        self.register_buffer("stop_tokens", torch.tensor([0, 2]))

    def forward(self, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = self.block(self.emb(ids))
        logits = self.head(self.norm(h[:, -1]))
        probs = logits.softmax(-1)
        sorted_probs, order = probs.sort(-1, descending=True)
        cumulative = torch.logcumsumexp(sorted_probs.log(), -1)
        next_token = order[:, 0]
        done = torch.isin(next_token, self.stop_tokens)
        return next_token, done, cumulative


def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    return DemoGenerator(), (torch.randint(0, 128, (1, 16)),)
