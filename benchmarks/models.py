"""Benchmark models as a user hands them to opcheck: ``--model benchmarks/models.py:llama_7b``.

transformers LLaMA configs at their real sizes (built on the meta device by opcheck, so no
weights are allocated), fed 128 token ids like the tracer benchmarks.
"""

from __future__ import annotations

from typing import Any

import torch

SEQ = 128

LLAMA_70B = {
    "hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
    "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 32000,
}  # fmt: skip


def _llama(**sizes: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**sizes)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    ids = torch.zeros(1, SEQ, dtype=torch.long)
    return LlamaForCausalLM(cfg), (ids,), {"use_cache": False}


def llama_7b() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return _llama()  # LlamaConfig() defaults are the 7B sizes


def llama_70b() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return _llama(**LLAMA_70B)
