"""Real architectures from transformers configs (no weights, meta device), traced on fake npu."""

from __future__ import annotations

import sys

import pytest
from testpaths import TESTS

from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from opcheck.tracers import runtime  # noqa: E402

sys.path.insert(0, str(TESTS))
from models import hf  # noqa: E402


def _trace(name: str) -> runtime.OpList:
    with torch.device("meta"):
        model, args, kwargs = getattr(hf, name)()
    return runtime.trace_module(
        model, InputSpec(), example_args=args, example_kwargs=kwargs, label=name
    )


def test_llama_without_and_with_kv_cache() -> None:
    plain = _trace("llama_tiny")
    ops = plain.by_op()
    assert {"aten::embedding", "aten::rsqrt", "aten::mm", "aten::_safe_softmax"} <= set(ops)
    assert any(m.startswith("model.layers.0") for u in plain.ops for m in u.modules)
    assert any("modeling_llama.py" in loc for u in plain.ops for loc in u.locations)
    # the cache's lazy init builds a tensor with Python dispatch off: handled, and the ops a
    # real backend receives for it (_to_copy via BackendSelect, lift_fresh) are listed
    cached = _trace("llama_tiny_cache").by_op()
    assert {"aten::_to_copy", "aten::lift_fresh", "aten::cat"} <= set(cached)


@pytest.mark.parametrize("name", ["gpt2_tiny", "bert_tiny"])
def test_gpt2_and_bert(name: str) -> None:
    ops = set(_trace(name).by_op())
    assert {"aten::embedding", "aten::native_layer_norm", "aten::addmm"} <= ops
