"""Two-level records of CompositeImplicitAutograd ops and the level each release receives.

The tracer records every watched CIA op with its decomposition; ``opcheck.checker.levels``
picks, per torch_npu release, the outermost op torch_npu has a kernel for. Checked on the bundled
catalog: three ops the issue names, then every CIA op with a kernel in any release, per release.
"""

from __future__ import annotations

import sys
import types
import unittest
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from opcheck.checker.levels import received
from opcheck.checker.resolve import Resolver
from opcheck.core.oplist import OpList
from opcheck.core.vocab import KernelSource
from opcheck.db.catalog import Catalog
from opcheck.db.engine import open_catalog
from opcheck.tracers.composites import composites_with_kernels
from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")

from opcheck.tracers import runtime  # noqa: E402

COMPOSITES = ["aten::slogdet", "aten::inverse", "aten::repeat_interleave.self_int"]


@pytest.fixture(scope="module")
def catalog(bundled_catalog: Path) -> Catalog:
    return Catalog.load(open_catalog(bundled_catalog))


@pytest.fixture(scope="module")
def watched(catalog: Catalog) -> list[str]:
    return composites_with_kernels(catalog)


class Linalg(torch.nn.Module):  # type: ignore[misc]
    def __init__(self, inference_mode: bool = False) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 4)
        self.inference_mode = inference_mode

    def forward(self, x: Any) -> Any:
        with torch.inference_mode(self.inference_mode):
            y = self.proj(x)
            return torch.slogdet(y)[1].sum() + torch.inverse(y).sum() + y.repeat_interleave(2).sum()


def _trace(model: Any, watched: list[str], *, train: bool = False) -> OpList:
    with torch.device("meta"):
        x = torch.empty(4, 4)
    return runtime.trace_module(model, InputSpec(), example_args=(x,), train=train,
                                composites=watched, label=type(model).__name__)  # fmt: skip


def _linalg(inference_mode: bool = False) -> Any:
    with torch.device("meta"):
        return Linalg(inference_mode)


@pytest.mark.parametrize("inference_mode", [False, True])
def test_issue_ops_at_the_level_the_npu_receives(
    catalog: Catalog, watched: list[str], inference_mode: bool
) -> None:
    ol = _trace(_linalg(inference_mode), watched)
    tops = {u.op for u in ol.ops if not u.via}
    assert set(COMPOSITES) <= tops
    # both levels are in the document: the CIA op with its children, the children tagged
    slogdet = next(u for u in ol.ops if u.op == "aten::slogdet" and not u.via)
    assert slogdet.composite and "aten::linalg_slogdet" in slogdet.children
    inner = [u for u in ol.ops if u.op == "aten::_linalg_slogdet"]
    assert inner and all(u.via[0] == "aten::slogdet" for u in inner)
    assert inner[0].parent == inner[0].via[-1]
    # the decomposed view is what schema 1 listed, and what inference mode now yields too
    assert "aten::linalg_inv_ex" in ol.by_op() and "aten::inverse" not in ol.by_op()
    assert "aten::linear" not in {u.op for u in ol.ops}

    got = received(ol, Resolver(catalog, "2.7.1.post2"))
    ops = got.by_op()
    assert set(COMPOSITES) <= set(ops)
    assert not {"aten::_linalg_slogdet", "aten::linalg_inv_ex", "aten::linalg_slogdet"} & set(ops)
    assert {"aten::unsqueeze", "aten::expand", "aten::clone"}.isdisjoint(
        {u.op for u in got.ops if u.via}
    )
    assert set(COMPOSITES) <= set(got.whole)
    statuses = {Resolver(catalog, "2.7.1.post2").resolve(op).status for op in ops}
    assert statuses <= {"npu", "composite"}  # no CPU fallback left


def test_decomposition_named_where_it_runs(catalog: Catalog, watched: list[str]) -> None:
    ol = _trace(_linalg(), watched)
    res = Resolver(catalog, "2.7.1.post2")
    facts = res.kernels["aten::slogdet"]
    assert "aten::linalg_slogdet" not in res.kernels
    # no kernel for slogdet: its decomposition runs, down to the first op with a kernel
    res.kernels = {k: res.kernels[k] for k in res.kernels if k != "aten::slogdet"}  # type: ignore[assignment]
    got = received(ol, res)
    assert "aten::slogdet" not in got.by_op() and "aten::linalg_slogdet" not in got.by_op()
    assert got.by_op()["aten::_linalg_slogdet"].via == ["aten::slogdet", "aten::linalg_slogdet"]
    assert got.decomposed["aten::slogdet"] == ["aten::_linalg_slogdet", "aten::detach"]
    assert any(n.startswith("aten::slogdet has no NPU kernel in torch_npu 2.7.1.post2")
               and "aten::_linalg_slogdet" in n for n in got.notes)  # fmt: skip
    # a kernel one level down (linalg_slogdet) is received whole instead of its children
    res.kernels = {**res.kernels, "aten::linalg_slogdet": facts}  # type: ignore[assignment,dict-item]
    got = received(ol, res)
    assert "aten::linalg_slogdet" in got.by_op() and "aten::_linalg_slogdet" not in got.by_op()
    assert got.by_op()["aten::linalg_slogdet"].via == ["aten::slogdet"]
    assert got.decomposed["aten::slogdet"] == ["aten::linalg_slogdet"]


def test_training_keeps_gradients_through_composite_kernels(watched: list[str]) -> None:
    ol = _trace(_linalg(), watched, train=True)
    leaves = ol.by_op()
    # backward formulas of the decomposition ran: the gradient reached the Linear weight
    assert {"aten::linalg_lu_solve", "aten::mm"} <= set(leaves)
    assert "backward" in leaves["aten::mm"].modules
    assert any(o.startswith("aten::_foreach_") for o in leaves)


class Matmul(torch.nn.Module):  # type: ignore[misc]
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.empty(4, 4))

    def forward(self, x: Any) -> Any:
        return torch.matmul(x.unsqueeze(0).expand(2, 4, 4), self.w)


def test_a_torch_formula_is_received_in_backward_with_its_forward_op(
    catalog: Catalog, watched: list[str]
) -> None:
    # torch has an autograd formula for matmul: once the NPU has a matmul kernel, backward
    # sends it matmul_backward, not the backward of matmul's decomposition
    with torch.device("meta"):
        model = Matmul()
    ol = _trace(model, watched, train=True)
    (formula,) = [u for u in ol.composites() if u.op == "aten::matmul_backward"]
    assert formula.via == [] and formula.modules == ["backward"]
    assert {"aten::mm", "aten::t"} <= set(formula.children)
    assert sorted(u.via for u in ol.ops if u.op == "aten::mm") == [
        ["aten::matmul"], ["aten::matmul_backward"]
    ]
    res = Resolver(catalog, "2.7.1.post2")
    assert "aten::matmul" in res.kernels and "aten::matmul_backward" in res.kernels
    got = received(ol, res).by_op()
    assert {"aten::matmul", "aten::matmul_backward"} <= set(got) and "aten::mm" not in got
    assert "aten::matmul_backward" not in received(ol, res).whole
    # without a matmul kernel both directions run the decomposition, whatever matmul_backward has
    res.kernels = {k: res.kernels[k] for k in res.kernels if k != "aten::matmul"}  # type: ignore[assignment]
    got_decomposed = received(ol, res)
    got = got_decomposed.by_op()
    assert "aten::matmul" not in got and "aten::matmul_backward" not in got
    assert got["aten::mm"].via == ["aten::matmul"]  # called in both directions: forward named
    assert list(got_decomposed.decomposed) == ["aten::matmul"]
    # inference: no gradient, no formula
    assert "aten::matmul_backward" not in {u.op for u in _trace(model, watched).ops}


def test_every_torch_formula_of_a_watched_composite_is_known(watched: list[str]) -> None:
    # torch's own derivatives (shipped with torchgen) name the op each formula calls; a torch
    # that adds a formula for a watched CIA op must add it to BACKWARD_FORMULA
    import re

    import torchgen

    from opcheck.tracers.composites import BACKWARD_FORMULA

    text = (Path(torchgen.__file__).parent / "packaged/autograd/derivatives.yaml").read_text()
    calls = {}
    for m in re.finditer(r"^- name: ([\w.]+)\(.*\n  [\w, ]+: \"?(?:grad\.defined\(\) \? )?(\w+)\(",
                         text, re.M):  # fmt: skip
        calls[m.group(1)] = m.group(2)
    with_formula = {
        op for op in watched
        if torch._C._dispatch_has_kernel_for_dispatch_key(op, "CompositeImplicitAutograd")
        and torch._C._dispatch_has_kernel_for_dispatch_key(op, "Autograd")
        and not op.endswith("_backward") and not op.endswith(".out")  # no first-order backward
    }  # fmt: skip
    assert {"aten::matmul", "aten::max_pool2d"} <= with_formula
    assert with_formula == set(BACKWARD_FORMULA)
    for op, backward in BACKWARD_FORMULA.items():
        assert "aten::" + calls[op.removeprefix("aten::")] == backward


def test_max_pool2d_formula_is_recorded_with_its_arguments(watched: list[str]) -> None:
    class Pool(torch.nn.Module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.empty(1, 2, 4, 4))

        def forward(self, x: Any) -> Any:
            return torch.nn.functional.max_pool2d(x.view(1, 1, 4, 4) * self.w, 2)

    with torch.device("meta"):
        model = Pool()
    ol = _trace(model, watched, train=True)
    (formula,) = [u for u in ol.composites() if u.op == "aten::max_pool2d_backward"]
    assert formula.via == [] and formula.children  # the decomposition's backward
    assert formula.dtypes == ["float32"] and formula.signatures[0].count == 1


def test_schema_1_lists_load_and_pass_through(catalog: Catalog) -> None:
    doc = {"schema_version": 1, "kind": "opcheck.oplist", "model": "m", "method": "runtime",
           "ir": "runtime-dispatch",
           "ops": [{"op": "aten::_linalg_slogdet", "count": 2, "dtypes": ["float32"]},
                   {"op": "aten::_linalg_slogdet", "count": 1, "dtypes": ["float64"]}]}  # fmt: skip
    ol = OpList.from_json(doc)
    assert ol.complete and [u.op for u in ol.ops] == ["aten::_linalg_slogdet"]
    assert ol.ops[0].count == 3 and not ol.ops[0].via and not ol.ops[0].composite
    got = received(ol, Resolver(catalog, "2.7.1.post2"))
    assert [(u.op, u.count) for u in got.ops] == [("aten::_linalg_slogdet", 3)]
    assert not got.notes
    again = OpList.from_json(ol.to_json())
    assert again.to_json() == ol.to_json() and again.to_json()["schema_version"] == 2


def test_v2_round_trip_keeps_both_levels(watched: list[str]) -> None:
    ol = _trace(_linalg(), watched)
    again = OpList.from_json(ol.to_json())
    assert again.to_json() == ol.to_json()
    assert {(u.op, tuple(u.via)) for u in again.ops} == {(u.op, tuple(u.via)) for u in ol.ops}


def test_schema_versions_outside_1_and_2_are_refused() -> None:
    from opcheck.core.errors import TraceError

    for version in (3, "2", True, None):
        with pytest.raises(TraceError, match="schema_version"):
            OpList.from_json({"schema_version": version, "kind": "opcheck.oplist",
                              "method": "runtime", "ops": []})  # fmt: skip


# ------------------------------------------------------------- every CIA op, every release


def _import_op_db() -> Any:
    # torch's test helpers import expecttest only for their TestCase base class
    if "expecttest" not in sys.modules:
        try:
            import expecttest  # noqa: F401
        except ImportError:
            stub = types.ModuleType("expecttest")
            stub.TestCase = unittest.TestCase  # type: ignore[attr-defined]
            sys.modules["expecttest"] = stub
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db


# OpInfo entries whose samples call the op when its name does not match an OpInfo name
OPINFO_ALIASES = {
    "log_sigmoid": ["nn.functional.logsigmoid"],
    "nll_loss2d": ["nn.functional.nll_loss"],
    "slogdet": ["linalg.slogdet"],
    **{
        f"upsample_{m}": ["nn.functional.interpolate"]
        for m in ("bicubic2d", "bilinear2d", "linear1d", "nearest1d", "nearest2d", "nearest3d",
                  "trilinear3d")
    },
}


def _opinfos(base: str, index: dict[str, list[Any]]) -> list[Any]:
    inplace = base.endswith("_") and not base.startswith("_")
    name = base.removesuffix("_") if inplace else base
    names = [name, f"nn.functional.{name}", name.replace("linalg_", "linalg.", 1),
             name.replace("fft_", "fft.", 1), *OPINFO_ALIASES.get(name, [])]  # fmt: skip
    found: list[Any] = []
    for n in names:
        for oi in index.get(n, []):
            if oi not in found and (not inplace or oi.inplace_variant is not None):
                found.append(oi)
    return found


def _on_npu(x: Any) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to("npu")
    if isinstance(x, (list, tuple)):
        return type(x)(_on_npu(v) for v in x)
    if isinstance(x, dict):
        return {k: _on_npu(v) for k, v in x.items()}
    return x


def _samples(oi: Any, limit: int = 4) -> Iterator[tuple[Any, tuple[Any, ...], dict[str, Any]]]:
    dtypes = oi.supported_dtypes("cpu")
    if not dtypes:
        return
    dtype = torch.float32 if torch.float32 in dtypes else sorted(dtypes, key=str)[0]
    try:
        for i, s in enumerate(oi.sample_inputs("cpu", dtype, requires_grad=False)):
            if i >= limit:
                return
            yield s.input, tuple(s.args), dict(s.kwargs)
    except Exception:  # a sample generator that needs a feature this torch build lacks
        return


def _direct(target: str) -> Callable[[], Any] | None:
    """Explicit calls of the ATen overload for ops no OpInfo sample reaches (training-only
    backward ops, RNNs, internal helpers). Tensors are created on the fake npu device."""
    aten = torch.ops.aten
    f32 = torch.float32

    def t(*shape: int, dtype: Any = f32) -> Any:
        return torch.zeros(shape, dtype=dtype, device="npu")

    h = 3
    lstm_params = [t(4 * h, 2), t(4 * h, h), t(4 * h), t(4 * h)]
    gru_params = [t(3 * h, 2), t(3 * h, h), t(3 * h), t(3 * h)]
    calls: dict[str, Callable[[], Any]] = {
        "aten::__ior__.Scalar": lambda: aten.__ior__.Scalar(t(3, dtype=torch.int64), 1),
        "aten::__ior__.Tensor": lambda: aten.__ior__.Tensor(
            t(3, dtype=torch.int64), t(3, dtype=torch.int64)),
        "aten::__xor__.Scalar": lambda: aten.__xor__.Scalar(t(3, dtype=torch.int64), 1),
        "aten::__xor__.Tensor": lambda: aten.__xor__.Tensor(
            t(3, dtype=torch.int64), t(3, dtype=torch.int64)),
        "aten::_batch_norm_impl_index": lambda: aten._batch_norm_impl_index(
            t(2, 3, 4), t(3), t(3), t(3), t(3), False, 0.1, 1e-5, False),
        "aten::_batch_norm_impl_index_backward": lambda: aten._batch_norm_impl_index_backward(
            0, t(2, 3, 4), t(2, 3, 4), t(3), t(3), t(3), t(3), t(3), True, 1e-5,
            [True, True, True], t(0)),
        "aten::_dim_arange": lambda: aten._dim_arange(t(5, 2), 0),
        "aten::_pad_packed_sequence": lambda: aten._pad_packed_sequence(
            t(6, 2), torch.tensor([2, 2, 2]), False, 0.0, 3),
        "aten::_weight_norm": lambda: aten._weight_norm(t(4, 3), t(4, 1), 0),
        "aten::affine_grid_generator_backward": lambda: aten.affine_grid_generator_backward(
            t(1, 4, 4, 2), [1, 1, 4, 4], False),
        "aten::conv_tbc_backward": lambda: aten.conv_tbc_backward(
            t(5, 2, 4), t(5, 2, 3), t(1, 3, 4), t(4), 0),
        "aten::dropout_": lambda: aten.dropout_(t(4, 4), 0.5, True),
        "aten::embedding_backward": lambda: aten.embedding_backward(
            t(3, 4), t(3, dtype=torch.int64), 10, -1, False, False),
        "aten::fill_diagonal_": lambda: aten.fill_diagonal_(t(3, 3), 1.0),
        "aten::flatten_dense_tensors": lambda: aten.flatten_dense_tensors([t(2), t(3)]),
        "aten::unflatten_dense_tensors": lambda: aten.unflatten_dense_tensors(
            t(5), [t(2), t(3)]),
        "aten::gru.input": lambda: aten.gru.input(
            t(5, 1, 2), t(1, 1, h), gru_params, True, 1, 0.0, False, False, False),
        "aten::lstm.input": lambda: aten.lstm.input(
            t(5, 1, 2), [t(1, 1, h), t(1, 1, h)], lstm_params, True, 1, 0.0, False, False,
            False),
        "aten::lstm.data": lambda: aten.lstm.data(
            t(5, 2), torch.tensor([2, 2, 1]), [t(1, 2, h), t(1, 2, h)], lstm_params, True, 1,
            0.0, False, False),
        "aten::lstm_cell": lambda: aten.lstm_cell(
            t(1, 2), [t(1, h), t(1, h)], lstm_params[0], lstm_params[1]),
        "aten::mish_backward": lambda: aten.mish_backward(t(4), t(4)),
        "aten::silu_backward": lambda: aten.silu_backward(t(4), t(4)),
        "aten::selu_": lambda: aten.selu_(t(4)),
        "aten::slogdet": lambda: torch.slogdet(t(3, 3)),
        "aten::slow_conv3d": lambda: aten.slow_conv3d(t(1, 2, 4, 4, 4), t(3, 2, 2, 2, 2),
                                                      [2, 2, 2]),
        "aten::slow_conv3d.out": lambda: aten.slow_conv3d.out(
            t(1, 2, 4, 4, 4), t(3, 2, 2, 2, 2), [2, 2, 2], out=t(1, 3, 3, 3, 3)),
        "aten::true_divide_.Scalar": lambda: aten.true_divide_.Scalar(t(3), 2.0),
        "aten::true_divide_.Tensor": lambda: aten.true_divide_.Tensor(t(3), t(3)),
        "aten::true_divide.Scalar": lambda: aten.true_divide.Scalar(t(3), 2.0),
        "aten::true_divide.Tensor": lambda: aten.true_divide.Tensor(t(3), t(3)),
        "aten::true_divide.out": lambda: aten.true_divide.out(t(3), t(3), out=t(3)),
        "aten::contiguous": lambda: aten.contiguous(t(3, 4).t()),
        "aten::to.dtype": lambda: aten.to.dtype(t(3), torch.float64),
        "aten::to.dtype_layout": lambda: aten.to.dtype_layout(t(3), dtype=torch.float64),
        "aten::to.other": lambda: aten.to.other(t(3), t(3, dtype=torch.float64)),
        "aten::ger": lambda: aten.ger(t(3), t(4)),
        "aten::ger.out": lambda: aten.ger.out(t(3), t(4), out=t(3, 4)),
        "aten::inverse": lambda: aten.inverse(t(3, 3)),
        "aten::inverse.out": lambda: aten.inverse.out(t(3, 3), out=t(3, 3)),
        "aten::linalg_matrix_norm": lambda: aten.linalg_matrix_norm(t(3, 3), 2.0),
        "aten::linalg_matrix_norm.out": lambda: aten.linalg_matrix_norm.out(
            t(3, 3), 2.0, out=t()),
        "aten::linalg_norm.ord_str": lambda: aten.linalg_norm.ord_str(t(3, 3), "fro"),
        "aten::linalg_norm.ord_str_out": lambda: aten.linalg_norm.ord_str_out(
            t(3, 3), "fro", out=t()),
        "aten::multilabel_margin_loss.out": lambda: aten.multilabel_margin_loss.out(
            t(2, 3), t(2, 3, dtype=torch.int64), 1, out=t()),
        "aten::nll_loss.out": lambda: aten.nll_loss.out(
            t(2, 3), t(2, dtype=torch.int64), out=t()),
        "aten::nll_loss2d": lambda: aten.nll_loss2d(t(2, 3, 4, 4), t(2, 4, 4, dtype=torch.int64)),
        "aten::nll_loss2d.out": lambda: aten.nll_loss2d.out(
            t(2, 3, 4, 4), t(2, 4, 4, dtype=torch.int64), out=t()),
        "aten::prelu": lambda: aten.prelu(t(2, 3), t(3)),
        "aten::upsample_nearest2d.vec": lambda: aten.upsample_nearest2d.vec(
            t(1, 2, 4, 4), None, [2.0, 2.0]),
        "aten::upsample_nearest3d.vec": lambda: aten.upsample_nearest3d.vec(
            t(1, 2, 4, 4, 4), None, [2.0, 2.0, 2.0]),
        "aten::where": lambda: aten.where(t(3, dtype=torch.bool)),
        "aten::dropout": lambda: aten.dropout(t(4, 4), 0.5, True),
        "aten::scaled_dot_product_attention": lambda: aten.scaled_dot_product_attention(
            t(1, 2, 4, 8), t(1, 2, 4, 8), t(1, 2, 4, 8)),
        "aten::_lu_with_info": lambda: aten._lu_with_info(t(3, 3)),
        "aten::conj": lambda: aten.conj(t(3, dtype=torch.complex64)),
        "aten::conj_physical": lambda: aten.conj_physical(t(3, dtype=torch.complex64)),
        "aten::linalg_det": lambda: aten.linalg_det(t(3, 3)),
        "aten::linalg_det.out": lambda: aten.linalg_det.out(t(3, 3), out=t()),
        "aten::linalg_eigh": lambda: aten.linalg_eigh(t(3, 3)),
        "aten::linalg_eigh.eigvals": lambda: aten.linalg_eigh.eigvals(
            t(3, 3), eigvals=t(3), eigvecs=t(3, 3)),
        "aten::linalg_eigvalsh": lambda: aten.linalg_eigvalsh(t(3, 3)),
        "aten::linalg_eigvalsh.out": lambda: aten.linalg_eigvalsh.out(t(3, 3), out=t(3)),
        "aten::lu_solve": lambda: aten.lu_solve(t(3, 1), t(3, 3), t(3, dtype=torch.int32)),
        "aten::lu_solve.out": lambda: aten.lu_solve.out(
            t(3, 1), t(3, 3), t(3, dtype=torch.int32), out=t(3, 1)),
        "aten::matrix_exp": lambda: aten.matrix_exp(t(3, 3)),
        "aten::orgqr": lambda: aten.orgqr(t(3, 3), t(3)),
        "aten::orgqr.out": lambda: aten.orgqr.out(t(3, 3), t(3), out=t(3, 3)),
        "aten::tensordot.out": lambda: aten.tensordot.out(t(3, 4), t(4, 5), [1], [0],
                                                          out=t(3, 5)),
        "aten::to_sparse": lambda: aten.to_sparse(t(3, 3)),
        "aten::to_sparse.sparse_dim": lambda: aten.to_sparse.sparse_dim(t(3, 3), 1),
        "aten::ctc_loss.IntList": lambda: aten.ctc_loss.IntList(
            t(6, 2, 5), t(2, 3, dtype=torch.int64), [6, 6], [3, 3]),
    }
    return calls.get(target)


# Watched ops this test builds no call for, with the reason. Must stay small and explicit.
NOT_BUILT: dict[str, str] = {}


class EveryComposite(torch.nn.Module):  # type: ignore[misc]
    """Calls every target op: OpInfo samples through the public API (and with ``out=`` for
    ``.out`` overloads), else an explicit ATen call; stops at the first call that records the
    target at the top level."""

    def __init__(self, targets: list[str], index: dict[str, list[Any]]) -> None:
        super().__init__()
        self.targets = targets
        self.index = index
        self.failed: dict[str, str] = {}
        self.built: dict[str, str] = {}  # op -> "opinfo" | "explicit"

    def forward(self, x: Any) -> Any:
        rec = runtime._ACTIVE[-1][1]
        for target in self.targets:
            base, _, overload = target.partition("::")[2].partition(".")
            wants_out = overload.endswith("out")
            error = "no OpInfo sample or explicit call"
            for how, call in self._calls(target, base, wants_out):
                try:
                    call()
                except Exception as exc:  # this sample needs values the fake trace lacks
                    error = f"{type(exc).__name__}: {str(exc)[:120]}"
                if (target, ()) in rec.ops:
                    self.built[target] = how
                    break
            else:
                self.failed[target] = error
        return x

    def _calls(
        self, target: str, base: str, wants_out: bool
    ) -> Iterator[tuple[str, Callable[[], Any]]]:
        direct = _direct(target)
        if direct is not None:
            yield "explicit", direct
        for oi in _opinfos(base, self.index):  # samples are made only when needed
            fn = oi.inplace_variant if base.endswith("_") else oi.op
            for inp, args, kwargs in _samples(oi):
                yield "opinfo", _sample_call(fn, inp, args, kwargs, wants_out)


def _sample_call(fn: Any, inp: Any, args: tuple[Any, ...], kwargs: dict[str, Any],
                 wants_out: bool) -> Callable[[], Any]:  # fmt: skip
    def call() -> Any:
        a, k = _on_npu((inp, *args)), _on_npu(kwargs)
        if not wants_out:
            return fn(*a, **k)
        res = fn(*a, **k)
        out = tuple(torch.empty_like(r) for r in res) if isinstance(res, tuple) else (
            torch.empty_like(res))  # fmt: skip
        return fn(*a, **k, out=out)

    return call


@pytest.fixture(scope="module")
def every(watched: list[str]) -> tuple[OpList, dict[str, str], dict[str, str]]:
    index: dict[str, list[Any]] = {}
    for oi in _import_op_db():
        for n in [oi.name, *(a.name for a in (oi.aliases or ()))]:
            index.setdefault(n, []).append(oi)
    with torch.device("meta"):
        model = EveryComposite(watched, index)
        x = torch.empty(1)
    ol = runtime.trace_module(model, InputSpec(), example_args=(x,), composites=watched,
                              label="every-composite")  # fmt: skip
    return ol, model.failed, model.built


def test_every_composite_with_a_kernel_is_recorded(
    every: tuple[OpList, dict[str, str], dict[str, str]], watched: list[str]
) -> None:
    ol, failed, built = every
    assert len(watched) > 120
    # most inputs come from torch's OpInfo samples; the explicit calls cover the rest
    assert sum(how == "opinfo" for how in built.values()) >= 60, built
    assert failed == {op: failed[op] for op in NOT_BUILT}, failed
    tops = {u.op for u in ol.ops if u.composite and not u.via}
    assert tops == set(watched) - set(NOT_BUILT)


def test_every_release_receives_its_cia_kernels_whole(
    catalog: Catalog, every: tuple[OpList, dict[str, str], dict[str, str]]
) -> None:
    ol, _, _ = every
    cia = {op for op, info in catalog.operators.items()
           if info.kernel_kind == "CompositeImplicitAutograd"}  # fmt: skip
    # pre-op-plugin releases (one torch_npu registry) are not watched: tracers.composites
    releases = [r.torch_npu for r in catalog.releases
                if r.has_kernels and r.kernel_source is not KernelSource.NPU_NATIVE]
    assert len(releases) > 20
    for release in releases:
        resolver = Resolver(catalog, release)
        expected = {op for op in cia if op in resolver.kernels} - set(NOT_BUILT)
        got = received(ol, resolver)
        outer = {u.op for u in got.ops if u.op in cia}
        assert outer == expected, (release, sorted(outer ^ expected))
        assert set(got.whole) == expected


# ------------------------------------------------------------- the decomposed level is unchanged


@pytest.mark.parametrize("name", ["conv_net_train", "transformer", "transformer_train", "lstm",
                                  "dropout_train", "sdpa"])  # fmt: skip
def test_watching_composites_leaves_the_decomposed_level_unchanged(
    name: str, watched: list[str]
) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from models import zoo

    factory, train = zoo.ZOO[name]
    lists = []
    for composites in ([], watched):
        with torch.device("meta"):
            model, args = factory()
        lists.append(runtime.trace_module(model, InputSpec(), example_args=args, train=train,
                                          composites=composites, label=name))  # fmt: skip
    plain, two_level = lists
    assert not plain.composites()
    assert [(u.op, u.count) for u in two_level.leaves()] == [
        (u.op, u.count) for u in plain.leaves()
    ]
    if name in ("transformer_train", "sdpa", "dropout_train"):
        assert two_level.composites()  # e.g. dropout / SDPA / matmul recorded whole too
