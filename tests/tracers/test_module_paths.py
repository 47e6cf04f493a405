"""Module paths of recorded ops when the model calls a module made outside its own tree (the
``kernels`` hub of transformers >= 5.25 wraps ``apply_rotary_pos_emb`` in a module of its own,
called from the attention's forward): the ops keep the caller's path, with the helper's class
under it, so per-module matching (fused-op tips) still sees them inside the attention."""

from __future__ import annotations

from typing import Any

import pytest

from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")

from opcheck.tracers import runtime  # noqa: E402


class _Rotate(torch.nn.Module):
    def forward(self, x: Any) -> Any:
        return torch.cat((-x[..., 2:], x[..., :2]), dim=-1)


ROTATE = _Rotate()  # no parent module: made at import, as a hub-wrapped function is


class _Attention(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.q_proj = torch.nn.Linear(4, 4)

    def forward(self, x: Any) -> Any:
        return ROTATE(self.q_proj(x))


class _Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.self_attn = _Attention()

    def forward(self, x: Any) -> Any:
        return self.self_attn(x) * 2


def test_a_module_outside_the_models_tree_is_placed_under_its_caller() -> None:
    ol = runtime.trace_module(_Model(), InputSpec(), example_args=(torch.randn(2, 4),),
                              label="paths")  # fmt: skip
    where = {u.op: set(u.modules) for u in ol.ops}
    assert where["aten::cat"] == {"self_attn._Rotate"}
    assert "self_attn.q_proj" in where["aten::addmm"]
    assert where["aten::mul.Tensor"] == {"_Model"}  # the root keeps its class name
