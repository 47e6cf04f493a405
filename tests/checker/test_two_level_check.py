"""The checker on two-level op lists: which level each release receives, incomplete traces,
and restrictions judged on the API the user called and the argument the doc speaks of."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import Result

from opcheck.checker.check import check, exit_code
from opcheck.checker.restrictions import restriction_lookup
from opcheck.core.oplist import OpList
from opcheck.core.vocab import FailOn, Status, Verdict
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

POOL = "aten::max_pool2d"
POOL_CHILD = "aten::max_pool2d_with_indices"


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


def _oplist(ops: list[dict[str, Any]], **extra: Any) -> OpList:
    doc = {"schema_version": 2, "kind": "opcheck.oplist", "model": "m.py", "method": "runtime",
           "ir": "runtime-dispatch", "torch_version": "", "mode": "inference", "ops": ops,
           **extra}
    return OpList.from_json(doc)


def _pool_list() -> OpList:
    return _oplist([
        {"op": POOL, "count": 2, "dtypes": ["float32"], "composite": True,
         "children": [POOL_CHILD]},
        {"op": POOL_CHILD, "count": 2, "dtypes": ["float32"], "parent": POOL, "via": [POOL]},
    ])


def _releases_split(cat: Catalog, op: str) -> tuple[str, str]:
    """A release that has a kernel for ``op`` and one that has not (both with kernel lists)."""
    with_kernel = without = ""
    for rel in cat.releases:
        if not rel.has_kernels:
            continue
        if op in cat.kernels(rel.torch_npu):
            with_kernel = with_kernel or rel.torch_npu
        else:
            without = without or rel.torch_npu
    assert with_kernel and without, f"the bundled catalog no longer splits on {op}"
    return with_kernel, without


def test_a_release_with_the_composite_kernel_receives_the_op_whole(cat: Catalog) -> None:
    rel, _ = _releases_split(cat, POOL)
    rep = check(cat, _pool_list(), cat.release(rel))
    ops = {f.op: f for f in rep.ops}
    assert POOL in ops and POOL_CHILD not in ops
    assert ops[POOL].status is Status.NPU and ops[POOL].decomposition_of == []


def test_a_release_without_it_receives_the_decomposition_and_says_so(cat: Catalog) -> None:
    _, rel = _releases_split(cat, POOL)
    rep = check(cat, _pool_list(), cat.release(rel))
    ops = {f.op: f for f in rep.ops}
    assert POOL not in ops and ops[POOL_CHILD].decomposition_of == [POOL]
    assert any(POOL in n and POOL_CHILD in n for n in rep.notes)


def test_the_release_matrix_checks_each_release_on_what_it_receives(cat: Catalog) -> None:
    from opcheck.checker.check import all_releases_matrix

    with_kernel, without = _releases_split(cat, POOL)
    matrix = all_releases_matrix(cat, _pool_list())
    assert with_kernel in matrix["ops"][POOL] and with_kernel not in matrix["ops"][POOL_CHILD]
    assert without in matrix["ops"][POOL_CHILD] and without not in matrix["ops"][POOL]


def test_an_incomplete_op_list_is_never_yes(cat: Catalog) -> None:
    rel, _ = _releases_split(cat, POOL)
    ol = _oplist([{"op": "aten::relu", "count": 1, "dtypes": ["float32"]}],
                 complete=False, stopped="data-dependent output shape at model.py:12 "
                 "(aten::linalg_lstsq)")
    rep = check(cat, ol, cat.release(rel))
    assert rep.verdict is Verdict.INCOMPLETE and not rep.complete
    assert "aten::linalg_lstsq" in rep.warnings[0] and "opcheck run" in rep.warnings[0]
    assert rep.to_json()["verdict"] == "INCOMPLETE"


@pytest.mark.parametrize("level", [FailOn.UNSUPPORTED, FailOn.FALLBACK, FailOn.RESTRICTED])
def test_fail_on_counts_an_incomplete_list_unless_allowed(cat: Catalog, level: FailOn) -> None:
    rel, _ = _releases_split(cat, POOL)
    ol = _oplist([{"op": "aten::relu", "count": 1}], complete=False, stopped="x")
    rep = check(cat, ol, cat.release(rel))
    assert exit_code(rep, level) == 1
    assert exit_code(rep, level, allow_incomplete=True) == 0
    assert exit_code(rep, FailOn.NEVER) == 0


def test_a_complete_list_of_npu_ops_is_yes(cat: Catalog) -> None:
    rel, _ = _releases_split(cat, POOL)
    rep = check(cat, _oplist([{"op": "aten::relu", "count": 1}]), cat.release(rel))
    assert rep.verdict is Verdict.YES and exit_code(rep, FailOn.UNSUPPORTED) == 0


def _sig_list(op: str, inputs: dict[str, str], apis: list[str], **sig: Any) -> OpList:
    dtypes = sorted({d for v in inputs.values() for d in v.split(",")})
    return _oplist([{"op": op, "count": 1, "dtypes": dtypes, "signatures": [
        {"inputs": inputs, "outputs": sig.pop("outputs", []), "count": 1, "apis": apis, **sig}]}])


def _restricted(cat: Catalog, ol: OpList, release: str) -> bool:
    rep = check(cat, ol, cat.release(release), restrictions=restriction_lookup(cat, None))
    return rep.ops[0].restricted


def test_the_api_the_user_called_is_checked_not_the_guessed_one(cat: Catalog) -> None:
    # F.max_pool3d reaches the backend as max_pool3d_with_indices, which the API → ATen link
    # does not name; the recorded API carries the documented bf16/fp16/fp32 list.
    ol = _sig_list("aten::max_pool3d_with_indices", {"self": "float64"},
                   ["torch.nn.functional.max_pool3d"])
    assert _restricted(cat, ol, "2.7.1.post2")
    rep = check(cat, ol, cat.release("2.7.1.post2"), restrictions=restriction_lookup(cat, None))
    hit = next(r for r in rep.ops[0].restrictions if r.violated)
    assert hit.api == "torch.nn.functional.max_pool3d" and hit.dtypes_seen_outside == ("fp64",)
    assert not hit.inferred and "#L" in hit.link


def test_the_same_call_in_float32_is_not_restricted(cat: Catalog) -> None:
    ol = _sig_list("aten::max_pool3d_with_indices", {"self": "float32"},
                   ["torch.nn.functional.max_pool3d"])
    assert not _restricted(cat, ol, "2.7.1.post2")


def test_embedding_is_judged_on_its_indices_not_its_float_weight(cat: Catalog) -> None:
    ol = _sig_list("aten::embedding", {"weight": "float32", "indices": "int64"},
                   ["torch.nn.Embedding"])
    assert not _restricted(cat, ol, "2.6.0.post5")
    bad = _sig_list("aten::embedding", {"weight": "float32", "indices": "int16"},
                    ["torch.nn.Embedding"])
    assert _restricted(cat, bad, "2.6.0.post5")


def test_a_cast_is_judged_by_the_dtype_it_produces(cat: Catalog) -> None:
    # The 2.6.0 docs list Tensor.to without bf16; 2.7.1 lists it.
    cast = _sig_list("aten::_to_copy", {"self": "float32"}, ["Tensor.to"],
                     dtype="bfloat16", outputs=["bfloat16"])
    assert _restricted(cat, cast, "2.6.0.post5")
    assert not _restricted(cat, cast, "2.7.1.post2")
    to_fp16 = _sig_list("aten::_to_copy", {"self": "bfloat16"}, ["Tensor.to"],
                        dtype="float16", outputs=["float16"])
    assert not _restricted(cat, to_fp16, "2.6.0.post5")


def test_a_list_without_api_records_falls_back_to_the_link_and_says_so(cat: Catalog) -> None:
    ol = _oplist([{"op": "aten::max_pool3d", "count": 1, "dtypes": ["float64"]}])
    rep = check(cat, ol, cat.release("2.7.1.post2"), restrictions=restriction_lookup(cat, None))
    hits = [r for r in rep.ops[0].restrictions if r.violated]
    assert hits and all(r.inferred for r in hits)


def test_the_cli_hints_at_run_for_a_python_file(cli: Callable[..., Result],
                                                tmp_path: Path) -> None:
    script = tmp_path / "train.py"
    script.write_text("print('hi')\n")
    res = cli(str(script))
    assert res.exit_code == 2
    assert f"opcheck run {script}" in res.output and f"--model {script}:NAME" in res.output


def _cia_split_by_torch_line(cat: Catalog) -> tuple[str, str, str]:
    """A CIA op (no torch autograd formula) with a kernel on a release built on torch < 2.3
    and on one built on torch >= 2.3."""
    from opcheck.tracers.composites import BACKWARD_FORMULA, composites_with_kernels

    def line(rel: Any) -> tuple[int, ...]:
        return tuple(int(x) for x in rel.torch_minor.split("."))

    old = [r for r in cat.releases if r.has_kernels and line(r) < (2, 3)]
    new = [r for r in cat.releases if r.has_kernels and line(r) >= (2, 3)]
    for op in composites_with_kernels(cat):
        if op in BACKWARD_FORMULA:
            continue
        o = next((r for r in old if op in cat.kernels(r.torch_npu)), None)
        n = next((r for r in new if op in cat.kernels(r.torch_npu)), None)
        if o is not None and n is not None:
            return op, o.torch_npu, n.torch_npu
    raise AssertionError("the bundled catalog has no CIA kernel on both sides of torch 2.3")


@pytest.mark.parametrize("mode", ["train", "inference"])
def test_training_on_a_release_before_torch_2_3_is_labelled_approximate(
        cat: Catalog, mode: str) -> None:
    op, old, new = _cia_split_by_torch_line(cat)
    ol = _oplist([{"op": op, "count": 1, "dtypes": ["float32"], "composite": True}], mode=mode)

    def flagged(rel: str) -> list[str]:
        return [n for n in check(cat, ol, cat.release(rel)).notes
                if n.startswith("approximate:") and op in n]

    assert bool(flagged(old)) == (mode == "train")
    assert flagged(new) == []
