"""Per-call signatures (dtypes per argument, outputs, dtype=, non-tensor arguments) and the
public API each op came from."""

from __future__ import annotations

from typing import Any

import pytest

from opcheck.core.oplist import OpList, OpUse, Signature
from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")
F = torch.nn.functional

from opcheck.tracers import runtime  # noqa: E402

WATCHED = ["aten::to.dtype", "aten::scaled_dot_product_attention", "aten::upsample_bicubic2d.vec"]


class Calls(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.emb = torch.nn.Embedding(10, 4)

    def forward(self, idx: Any, x: Any) -> Any:
        e = self.emb(idx)
        h = e.to(torch.bfloat16)
        c = torch.randn(3, dtype=torch.complex32, device=x.device)
        u = torch.randint(0, 5, (3,), dtype=torch.uint64, device=x.device)
        p = F.max_pool3d(x, 2)
        b = F.interpolate(x[0], scale_factor=2.0, mode="bicubic")
        q = torch.zeros(1, 4, 3, 8, device=x.device)
        kv = torch.zeros(1, 2, 3, 8, device=x.device)
        a = F.scaled_dot_product_attention(q, kv, kv, enable_gqa=True)
        s = x.relu() + x.relu().float()
        return h, c, u, p, b, a, s


def _trace() -> OpList:
    with torch.device("meta"):
        model = Calls()
        idx = torch.zeros(2, 3, dtype=torch.int64)
        x = torch.empty(1, 2, 4, 4, 4, dtype=torch.float64)
    return runtime.trace_module(model, InputSpec(), example_args=(idx, x), composites=WATCHED,
                                label="calls")  # fmt: skip


@pytest.fixture(scope="module")
def traced() -> OpList:
    return _trace()


def _top(ol: OpList, op: str) -> OpUse:
    return next(u for u in ol.ops if u.op == op and not u.via)


def _only(use: OpUse) -> Signature:
    assert len(use.signatures) == 1, use.signatures
    return use.signatures[0]


def test_dtypes_per_argument_name_and_api(traced: OpList) -> None:
    emb = _only(_top(traced, "aten::embedding"))
    assert emb.inputs == {"weight": "float32", "indices": "int64"}
    assert emb.outputs == ["float32"] and emb.apis == ["torch.nn.Embedding"]


def test_cast_and_factory_dtypes(traced: OpList) -> None:
    cast = _top(traced, "aten::to.dtype")
    assert cast.composite
    sig, flt = cast.signatures  # e.to(torch.bfloat16), then x.relu().float()
    assert sig.dtype == "bfloat16" and sig.outputs == ["bfloat16"] and sig.apis == ["Tensor.to"]
    assert sig.inputs == {"self": "float32"}
    assert (flt.inputs, flt.dtype, flt.apis) == ({"self": "float64"}, "float32", ["Tensor.float"])
    copy = next(u for u in traced.ops if u.op == "aten::_to_copy" and u.via == ["aten::to.dtype"])
    assert [x.dtype for x in copy.signatures] == ["bfloat16", "float32"]
    randn = _only(_top(traced, "aten::randn"))
    assert randn.dtype == "complex32" and randn.outputs == ["complex32"]
    assert randn.apis == ["torch.randn"] and randn.args == {"size": [3]}
    randint = _only(_top(traced, "aten::randint.low"))
    assert randint.dtype == "uint64" and randint.args == {"low": 0, "high": 5, "size": [3]}


def test_the_op_the_backend_gets_keeps_the_api_called(traced: OpList) -> None:
    pool = _only(_top(traced, "aten::max_pool3d_with_indices"))
    assert pool.apis == ["torch.nn.functional.max_pool3d"]
    assert pool.inputs == {"self": "float64"} and pool.outputs == ["float64", "int64"]
    assert pool.args == {"kernel_size": [2, 2, 2]}  # stride etc. left at their defaults
    select = _only(_top(traced, "aten::select.int"))
    assert select.apis == ["Tensor.__getitem__"]


def test_non_tensor_arguments(traced: OpList) -> None:
    up = _only(_top(traced, "aten::upsample_bicubic2d.vec"))
    assert up.args == {"align_corners": False, "scale_factors": [2.0, 2.0]}
    assert up.apis == ["torch.nn.functional.interpolate"]
    sdpa = _only(_top(traced, "aten::scaled_dot_product_attention"))
    assert sdpa.args == {"enable_gqa": True}
    assert sdpa.inputs == {"query": "float32", "key": "float32", "value": "float32"}
    assert sdpa.apis == ["torch.nn.functional.scaled_dot_product_attention"]


def test_signatures_are_deduplicated_with_counts(traced: OpList) -> None:
    relu = _top(traced, "aten::relu")
    assert relu.count == 2 and _only(relu).count == 2 and _only(relu).apis == ["Tensor.relu"]
    add = _only(_top(traced, "aten::add.Tensor"))
    assert add.inputs == {"self": "float64", "other": "float32"} and add.outputs == ["float64"]


def test_signatures_round_trip_and_merge(traced: OpList) -> None:
    again = OpList.from_json(traced.to_json())
    assert again.to_json() == traced.to_json()
    relu = traced.by_op()["aten::relu"]
    relu.merge(relu.copy())
    assert relu.count == 4 and _only(relu).count == 4


def test_bad_signatures_are_a_trace_error() -> None:
    from opcheck.core.errors import TraceError

    doc = {"schema_version": 2, "kind": "opcheck.oplist", "method": "runtime",
           "ops": [{"op": "aten::relu", "signatures": [{"args": [1, 2]}]}]}  # fmt: skip
    with pytest.raises(TraceError, match="malformed"):
        OpList.from_json(doc)
