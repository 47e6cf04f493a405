"""Real architectures nobody here wrote, built from transformers configs on the meta device.

Factories take no arguments (``--model tests/models/hf.py:llama_tiny``) and return
``(model, example_args, example_kwargs)``. Tiny sizes for tests; ``llama_7b`` for benchmarks.
"""

from __future__ import annotations

from typing import Any

import torch

SEQ = 8


def _ids(vocab: int, seq: int = SEQ) -> torch.Tensor:
    return torch.zeros(1, seq, dtype=torch.long)


def _llama(use_cache: bool, **sizes: Any) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(**sizes)
    cfg.use_cache = use_cache
    cfg._attn_implementation = "sdpa"
    model = LlamaForCausalLM(cfg)
    return model, (_ids(cfg.vocab_size),), {"use_cache": use_cache}


TINY_LLAMA = {
    "vocab_size": 128, "hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2,
    "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64,
}  # fmt: skip


def llama_tiny() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return _llama(False, **TINY_LLAMA)


def llama_tiny_cache() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return _llama(True, **TINY_LLAMA)


def llama_7b() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return _llama(False)  # LlamaConfig() defaults are the 7B sizes


def llama_7b_cache() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    return _llama(True)


def gpt2_tiny() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    cfg.use_cache = False
    return GPT2LMHeadModel(cfg), (_ids(128),), {}


def bert_tiny() -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
        intermediate_size=64, max_position_embeddings=64,
    )  # fmt: skip
    mask = torch.ones(1, SEQ, dtype=torch.long)
    return BertModel(cfg), (_ids(128),), {"attention_mask": mask}
