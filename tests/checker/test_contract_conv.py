"""Convolution dimensionality on the aclnn contract: a 3-D convolution (Qwen2-VL's patch
embedding) is rejected on a product whose constraint column leaves 3-D out, or limits it to
FLOAT16 (LlamaFactory#6694, vllm-ascend#5017, Ascend/pytorch#73)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from testpaths import MODELS

from opcheck.checker.check import Restriction, check
from opcheck.checker.contract_dims import judge_dims, spatial_dims
from opcheck.checker.restrictions import all_restrictions
from opcheck.core.oplist import Signature
from opcheck.db.catalog import Catalog
from opcheck.db.contract import ConstraintFact, FunctionDoc
from opcheck.db.engine import make_engine

sys.path.insert(0, str(MODELS))


def _doc() -> FunctionDoc:
    doc = FunctionDoc("aclnnConvolution", "9.1.0", "ops-nn", "conv/aclnnConvolution.md", "",
                      1, ("910B", "310B", "310P"), (), 5)
    doc.constraints = [ConstraintFact("dims", "", "2", ("310B",), 455),
                       ConstraintFact("dims_dtype", "3D", "FLOAT16", ("310P",), 461),
                       ConstraintFact("rank_max", "rows", "8", ("910B",), 470)]
    return doc


def _call(dtype: str, dims: int) -> Signature:
    return Signature(inputs={"input": dtype, "weight": dtype},
                     args={"stride": [1] * dims, "padding": [0] * dims, "transposed": False})


def test_spatial_dims_from_the_argument_lists() -> None:
    assert spatial_dims(_call("float16", 3)) == 3
    assert spatial_dims(_call("float16", 2)) == 2
    assert spatial_dims(Signature(inputs={"input": "float16"})) is None


def test_3d_rejected_where_the_column_leaves_it_out() -> None:
    [f] = judge_dims(_doc(), [_call("float16", 3)], ["910B", "310B", "310P"])
    assert (f.kind, f.dims, f.products, f.line) == ("dims", 3, ("310B",), 455)


def test_3d_bf16_rejected_where_3d_is_float16_only() -> None:
    got = {(f.kind, f.products, f.dtypes) for f in
           judge_dims(_doc(), [_call("bfloat16", 3)], ["910B", "310B", "310P"])}
    assert got == {("dims", ("310B",), ()), ("dims_dtype", ("310P",), ("BFLOAT16",))}
    fp32 = judge_dims(_doc(), [_call("float32", 3)], ["310P"])
    assert [(f.kind, f.dtypes) for f in fp32] == [("dims_dtype", ("FLOAT",))]


def test_2d_and_unshaped_calls_pass() -> None:
    products = ["910B", "310B", "310P"]
    assert judge_dims(_doc(), [_call("bfloat16", 2)], products) == []
    assert judge_dims(_doc(), [Signature(inputs={"input": "bfloat16"})], products) == []
    assert judge_dims(_doc(), [_call("float16", 3)], ["910B", "310P"]) == []


# --------------------------------------------------------------------------- bundled catalog

torch_only = pytest.mark.torch


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


def _check(cat: Catalog, name: str, release: str, product: str) -> list[Restriction]:
    pytest.importorskip("torch")
    import contract_models

    from opcheck.tracers.composites import composites_with_kernels
    from opcheck.tracers.inputs import InputSpec
    from opcheck.tracers.runtime import trace_module

    model, args = getattr(contract_models, name)()
    ol = trace_module(model, InputSpec(), example_args=args,
                      composites=composites_with_kernels(cat), label=name)
    rep = check(cat, ol, cat.release(release), restrictions=all_restrictions(cat, product))
    conv = next(f for f in rep.ops if f.op == "aten::convolution")
    return [r for r in conv.restrictions if r.source == "cann" and r.violated]


RELEASE = "2.7.1.post2"


@torch_only
def test_conv3d_flagged_on_310b_not_on_a2(cat: Catalog) -> None:
    [r] = _check(cat, "conv3d_fp16", RELEASE, "310B")
    assert (r.api, r.products_failing, r.unsupported) == ("aclnnConvolution", ("310B",), True)
    assert "3-D convolution is not supported on 310B" in r.text
    assert "aclnnConvolution.md#L" in r.link
    assert _check(cat, "conv3d_bf16", RELEASE, "A2") == []


@torch_only
def test_conv3d_bf16_flagged_on_310p_fp16_not(cat: Catalog) -> None:
    hits = _check(cat, "conv3d_bf16", RELEASE, "310P")
    assert hits and all(r.products_failing == ("310P",) for r in hits)
    assert any("accepts only FLOAT16" in r.text and r.dtypes_seen_outside == ("BFLOAT16",)
               for r in hits)
    assert _check(cat, "conv3d_fp16", RELEASE, "310P") == []


@torch_only
@pytest.mark.parametrize("product", ["310B", "310P", "A2"])
def test_conv2d_not_flagged_for_dimensionality(cat: Catalog, product: str) -> None:
    hits = _check(cat, "conv2d_bf16", RELEASE, product)
    assert not any("convolution" in r.text and "-D" in r.text for r in hits)
