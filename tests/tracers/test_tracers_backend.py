"""The fake-PrivateUse1 trace against a real PrivateUse1 backend.

tests/fixtures/tracers/recording_backend.cpp is a tiny real backend (host memory behind the
PrivateUse1 device, CPU fallback for kernels) that records every op reaching the PrivateUse1
dispatch key from outside its own kernels. It is compiled with load_inline and run in a child
process (cpp_backend_run.py) on the same models; the op sets must be equal.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")

from opcheck.tracers import runtime  # noqa: E402

TESTS = TESTS
sys.path.insert(0, str(TESTS))

from models import hf, zoo  # noqa: E402

try:
    import transformers  # noqa: F401

    _HAS_TRANSFORMERS = True
except ImportError:
    _HAS_TRANSFORMERS = False

HF_CASES = {"llama_tiny": hf.llama_tiny, "llama_tiny_cache": hf.llama_tiny_cache,
            "gpt2_tiny": hf.gpt2_tiny, "bert_tiny": hf.bert_tiny}  # fmt: skip
# transformers builds attention masks differently on purpose when it sees a FakeTensor
# (masking_utils: `is_tracing(padding_mask)` -> never skip the mask, never read values), where
# an eager run reads the mask (`.all()`, `.item()`) and skips it. The fake trace therefore lists
# the general (padded-batch) mask ops. Only these ops may differ for those models; everything
# else must match. The KV-cache LLaMA takes the same path in both and must match exactly.
HF_MASK_PATH = frozenset(
    {
        "aten::bitwise_and.Tensor", "aten::eq.Tensor", "aten::index.Tensor", "aten::le.Tensor",
        "aten::new_ones", "aten::arange", "aten::ge.Scalar", "aten::scalar_tensor",
        "aten::unsqueeze", "aten::where.self", "aten::add_.Tensor",
        "aten::_local_scalar_dense", "aten::all", "aten::eq.Scalar", "aten::ones",
        "aten::select.int", "aten::tril", "aten::_reshape_alias",
    }
)  # fmt: skip
EXACT_HF = {"llama_tiny_cache"}
# reshape takes view or _reshape_alias depending on the strides of its input, i.e. on the
# strides the previous kernels returned: this backend's CPU fallback and the meta kernels differ
# inside grouped-query SDPA. Both are metadata-only views every backend implements.
STRIDE_DEPENDENT = frozenset({"aten::_reshape_alias"})


@pytest.fixture(scope="module")
def backend_ops(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    build = tmp_path_factory.mktemp("recording_backend")
    cases = list(zoo.ZOO)
    if _HAS_TRANSFORMERS:  # the project's own models never depend on transformers
        cases += list(HF_CASES)
    names = ",".join(cases)
    proc = subprocess.run(
        [
            sys.executable,
            str(TESTS / "fixtures" / "tracers" / "cpp_backend_run.py"),
            str(build),
            names,
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, dict[str, int]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _fake(made: tuple[object, ...], train: bool, label: str) -> set[str]:
    model, args = made[0], made[1]
    kwargs = dict(made[2]) if len(made) > 2 else {}  # type: ignore[call-overload]
    ol = runtime.trace_module(
        model,
        InputSpec(),
        example_args=tuple(args),
        example_kwargs=kwargs,
        train=train,
        label=label,
    )  # type: ignore[arg-type]
    return set(ol.by_op())


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", list(zoo.ZOO))
def test_zoo_matches_real_backend(name: str, backend_ops: dict[str, dict[str, int]]) -> None:
    factory, train = zoo.ZOO[name]
    with torch.device("meta"):
        made = factory()
    fake = _fake(made, train, name)
    real = set(backend_ops[name])
    assert fake == real, f"fake-only {sorted(fake - real)}, backend-only {sorted(real - fake)}"


@pytest.mark.slow
@pytest.mark.timeout(400)
@pytest.mark.parametrize("name", list(HF_CASES))
def test_transformers_match_real_backend(name: str, backend_ops: dict[str, dict[str, int]]) -> None:
    if not _HAS_TRANSFORMERS:
        pytest.skip("transformers not installed")
    with torch.device("meta"):
        made = HF_CASES[name]()
    fake = _fake(made, False, name)
    real = set(backend_ops[name])
    diff = fake ^ real
    if name in EXACT_HF:
        assert diff <= STRIDE_DEPENDENT, (
            f"fake-only {sorted(fake - real)}, backend-only {sorted(real - fake)}"
        )
    else:
        assert diff <= HF_MASK_PATH, f"unexpected differences {sorted(diff - HF_MASK_PATH)}"
        assert len(fake & real) >= 15


# ------------------------------------------------ a backend with one release's CIA kernels

CIA_RELEASE = "2.7.1.post2"
CIA_CASES = ["conv_net", "transformer", "lstm", "sdpa", "cia_linalg", "cia_casts",
             "cia_inference_mode", "conv_net_train", "transformer_train", "dropout_train",
             "cia_linalg_train", "cia_casts_train"]  # fmt: skip
# torch_npu's codegen (torch >= 2.3) registers each CIA kernel on AutogradPrivateUse1 too, except
# these and ops torch has an autograd formula for (matmul: the trace records that formula, see
# test_tracers_levels)
NO_AUTOGRAD_KERNEL = frozenset({"aten::isclose", "aten::isfinite"})
# AccumulateGrad copies a gradient whose strides differ from its parameter's into the
# parameter's layout. The strides of matmul_backward's gradient (here for weight.t() inside
# linear) are the kernel's choice, not the trace's; both are memory ops every backend has.
GRAD_LAYOUT = frozenset({"aten::new_empty_strided", "aten::copy_"})


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_cia_kernels_of_a_release_match_the_two_level_trace(
    tmp_path_factory: pytest.TempPathFactory, bundled_catalog: Path
) -> None:
    """The C++ backend registers kernels for the CIA ops torch_npu CIA_RELEASE has, on the keys
    torch_npu registers them on; the ops it receives, in inference and in training (forward,
    backward, AdamW step), must be the fake trace's two-level records resolved for that
    release."""
    from opcheck.checker.levels import received
    from opcheck.checker.resolve import Resolver
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog
    from opcheck.tracers.composites import composites_with_kernels

    sys.path.insert(0, str(TESTS / "fixtures" / "tracers"))
    import cia_models

    def has(op: str, key: str) -> bool:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(op, key))

    cat = Catalog.load(open_catalog(bundled_catalog))
    watched = composites_with_kernels(cat)
    resolver = Resolver(cat, CIA_RELEASE)
    install = [op for op in watched
               if op in resolver.kernels and has(op, "CompositeImplicitAutograd")]  # fmt: skip
    assert {"aten::slogdet", "aten::inverse", "aten::repeat_interleave.self_int"} <= set(install)
    autograd = [op for op in install if op not in NO_AUTOGRAD_KERNEL and not has(op, "Autograd")]
    build = tmp_path_factory.mktemp("recording_backend_cia")

    def bare(ops: list[str]) -> str:
        return ",".join(op.removeprefix("aten::") for op in ops)

    proc = subprocess.run(
        [sys.executable, str(TESTS / "fixtures" / "tracers" / "cpp_backend_run.py"), str(build),
         ",".join(CIA_CASES), bare(install), bare(autograd)],
        capture_output=True, text=True, timeout=500,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "an autograd kernel was not registered" not in proc.stderr
    real_ops: dict[str, dict[str, int]] = json.loads(proc.stdout.strip().splitlines()[-1])
    cases = {**zoo.ZOO, **cia_models.CASES}
    for name in CIA_CASES:
        factory, train = cases[name]
        with torch.device("meta"):
            model, args = factory()
        ol = runtime.trace_module(model, InputSpec(), example_args=tuple(args), train=train,
                                  composites=watched, label=name)  # fmt: skip
        fake = {u.op for u in received(ol, resolver).ops}
        real = set(real_ops[name])
        diff = (fake ^ real) - STRIDE_DEPENDENT - (GRAD_LAYOUT if train else frozenset())
        assert not diff, (name, f"fake-only {sorted(fake - real)}, backend-only {sorted(real - fake)}")
    # the example really reached the backend whole, with and without inference mode
    for name in ("cia_linalg", "cia_inference_mode", "cia_linalg_train"):
        assert {"aten::slogdet", "aten::inverse", "aten::repeat_interleave.self_int"} <= set(
            real_ops[name]
        )
    assert "aten::linear" not in real_ops["cia_inference_mode"]  # no kernel on 2.7.1.post2
    # matmul has a kernel: in backward the NPU gets torch's formula op, not mm/bmm
    assert "aten::matmul_backward" in real_ops["transformer_train"]
    assert "aten::bmm" not in real_ops["transformer_train"]
