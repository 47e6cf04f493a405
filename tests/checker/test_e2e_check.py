"""End to end: models traced on the fake NPU, checked against the bundled catalog."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from testpaths import TESTS
from typer.testing import CliRunner

from opcheck.cli.app import app, route
from opcheck.tracers.api import trace

pytestmark = pytest.mark.torch
MODELS = TESTS / "models"
runner = CliRunner()


@pytest.fixture(scope="module")
def traced(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    pytest.importorskip("torch")
    out = {}
    from opcheck.tracers import sandbox

    folder = tmp_path_factory.mktemp("oplists")
    with sandbox.shared_imports():  # three traces forked from one torch-importing template
        for name in ("stop_check", "custom_op", "float64_cholesky"):
            oplist = trace(None, model_spec=f"{MODELS / 'check_models.py'}:{name}")
            out[name] = folder / f"{name}.json"
            out[name].write_text(oplist.dumps())
    return out


def check(oplist: Path, catalog: Path, *args: str) -> tuple[int, dict[str, object]]:
    r = runner.invoke(app, route([str(oplist), "--catalog", str(catalog), "--format", "json",
                                  *args]))
    assert r.exit_code in (0, 1), r.output
    return r.exit_code, json.loads(r.output)


def statuses(doc: dict[str, object]) -> dict[str, str]:
    return {o["op"]: o["status"] for o in doc["ops"]}  # type: ignore[attr-defined, index]


# op-plugin registers isin.Tensor_Tensor_out from the 6.0.rc3 branch (torch_npu 2.1.0.post8);
# torch 2.0.1 builds have no CPU fallback at all.
@pytest.mark.parametrize("release, verdict, status, code", [
    ("2.0.1.post4", "NO", "unsupported", 1),
    ("2.1.0.post4", "MAYBE", "cpu_fallback", 0),
    ("2.1.0.post8", "YES", "npu", 0),
    ("2.13.0", "YES", "npu", 0),
])
def test_a_kernel_added_between_releases_flips_the_verdict(
    traced: dict[str, Path], bundled_catalog: Path, release: str, verdict: str, status: str,
    code: int,
) -> None:
    exit_code, doc = check(traced["stop_check"], bundled_catalog, "--torch-npu", release)
    assert (doc["verdict"], statuses(doc)["aten::isin.Tensor_Tensor"], exit_code) == (
        verdict, status, code)


@pytest.fixture(scope="module")
def before_kernel(traced: dict[str, Path], bundled_catalog: Path) -> dict[str, object]:
    """stop_check on 2.1.0.post4: isin.Tensor_Tensor falls back to the CPU there."""
    _, doc = check(traced["stop_check"], bundled_catalog, "--torch-npu", "2.1.0.post4")
    return doc


def _isin(doc: dict[str, object]) -> dict[str, object]:
    return next(o for o in doc["ops"] if o["op"] == "aten::isin.Tensor_Tensor")  # type: ignore[attr-defined, no-any-return]


def test_a_fallback_names_the_release_that_adds_the_kernel(
    before_kernel: dict[str, object],
) -> None:
    assert _isin(before_kernel)["first_npu_release"] == "2.1.0.post8"


def test_a_fallback_shows_the_chain_to_the_missing_kernel(before_kernel: dict[str, object]) -> None:
    assert _isin(before_kernel)["via"] == ["aten::isin.Tensor_Tensor",
                                           "aten::isin.Tensor_Tensor_out"]


def test_a_fallback_points_at_the_model_source(before_kernel: dict[str, object]) -> None:
    locations = _isin(before_kernel)["locations"]
    assert locations and locations[0].endswith("check_models.py:13")  # type: ignore[index]


def test_a_fallback_offers_its_workaround(before_kernel: dict[str, object]) -> None:
    workarounds = _isin(before_kernel)["workarounds"]
    assert {w["id"] for w in workarounds} >= {"isin-tensor-tensor-rewrite"}  # type: ignore[attr-defined]


def test_fallback_calls_are_counted(before_kernel: dict[str, object]) -> None:
    assert before_kernel["fallback_calls"] == 1


def test_fail_on_fallback_fails_ci_on_a_fallback(traced: dict[str, Path],
                                                 bundled_catalog: Path) -> None:
    code, _ = check(traced["stop_check"], bundled_catalog, "--torch-npu", "2.1.0.post4",
                    "--fail-on", "fallback")
    assert code == 1


def test_a_custom_op_is_unknown_and_named(traced: dict[str, Path], bundled_catalog: Path) -> None:
    _, doc = check(traced["custom_op"], bundled_catalog)
    st = statuses(doc)
    assert st["opcheck_test::scale"] == "unknown"
    assert doc["verdict"] == "MAYBE"
    unknown = next(o for o in doc["ops"] if o["op"] == "opcheck_test::scale")  # type: ignore[attr-defined]
    assert "opcheck_test" in unknown["reason"]


def test_the_aten_ops_around_a_custom_op_still_resolve(traced: dict[str, Path],
                                                       bundled_catalog: Path) -> None:
    _, doc = check(traced["custom_op"], bundled_catalog)
    st = statuses(doc)
    assert st["aten::addmm"] == "npu" and st["aten::relu"] == "npu"


def test_a_restricted_dtype_is_flagged(traced: dict[str, Path], bundled_catalog: Path) -> None:
    _, doc = check(traced["float64_cholesky"], bundled_catalog, "--torch-npu", "2.13.0")
    # 2.13.0 registers a kernel for the composite aten::linalg_cholesky: the NPU receives it
    # whole, and the documented fp32-only limit of the API the model called applies
    ops = {o["op"]: o for o in doc["ops"]}  # type: ignore[attr-defined]
    assert "aten::linalg_cholesky_ex" not in ops
    chol = ops["aten::linalg_cholesky"]
    assert chol["dtypes"] == ["float64"] and chol["restricted"]
    hit = next(r for r in chol["restrictions"]
               if r["dtypes_seen_outside"] and r["source"] == "api_docs")
    assert hit["api"] == "torch.linalg.cholesky" and not hit["inferred"]
    # the aclnn function behind it lists no DOUBLE either (2.13.0's pin is not mirrored:
    # the nearest release's kernel sources, labelled)
    cann = [r for r in chol["restrictions"] if r["source"] == "cann" and r["dtypes_seen_outside"]]
    assert all(r["inferred"] and "not mirrored" in r["basis"] for r in cann)
    assert doc["verdict"] in ("MAYBE", "NO")


def test_fail_on_restricted_fails_ci_on_a_restriction(traced: dict[str, Path],
                                                      bundled_catalog: Path) -> None:
    code, _ = check(traced["float64_cholesky"], bundled_catalog, "--torch-npu", "2.13.0",
                    "--fail-on", "restricted")
    assert code == 1


@pytest.fixture(scope="module")
def gpt2(bundled_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """A tiny GPT-2 from transformers, checked on 2.13.0 with the all-releases matrix."""
    pytest.importorskip("transformers")
    oplist = trace(None, model_spec=f"{MODELS / 'hf.py'}:gpt2_tiny")
    p = tmp_path_factory.mktemp("gpt2") / "gpt2.json"
    p.write_text(oplist.dumps())
    _, doc = check(p, bundled_catalog, "--torch-npu", "2.13.0", "--all-releases")
    return doc


@pytest.mark.slow
def test_a_real_architecture_lists_npu_ops_not_cpu_ones(gpt2: dict[str, object]) -> None:
    st = statuses(gpt2)
    assert "aten::addmm" in st and "aten::_scaled_dot_product_flash_attention_for_cpu" not in st


@pytest.mark.slow
def test_a_real_architecture_has_no_unknown_op(gpt2: dict[str, object]) -> None:
    st = statuses(gpt2)
    assert all(s != "unknown" for s in st.values()), st


@pytest.mark.slow
def test_a_real_architecture_runs_every_op_on_the_newest_release(
    gpt2: dict[str, object],
) -> None:
    st = statuses(gpt2)
    assert set(st.values()) <= {"npu", "composite"}, st


@pytest.mark.slow
def test_a_real_architecture_is_maybe_only_through_cited_restrictions(
    gpt2: dict[str, object],
) -> None:
    # The docs restrict some dtypes (GPT-2 calls new_ones on int64 ids, and Tensor.new_ones is
    # documented "fp32 only"; an aclnn page may lack a dtype on some product), so the verdict
    # may be MAYBE, and then only because of documented restrictions, each cited with its
    # link: torch_npu's API docs or CANN's operator page.
    restricted = [o for o in gpt2["ops"] if o["restricted"]]  # type: ignore[attr-defined]
    assert gpt2["verdict"] == ("MAYBE" if restricted else "YES")
    cited = {"api_docs": "https://github.com/Ascend/pytorch/", "cann": "https://github.com/hicann/"}
    for o in restricted:
        assert any(r["link"].startswith(cited[r["source"]])
                   for r in o["restrictions"] if r["dtypes_seen_outside"] or r["unsupported"])


@pytest.mark.slow
def test_a_real_architecture_matrix_finds_the_oldest_full_npu_release(
    gpt2: dict[str, object],
) -> None:
    matrix = gpt2["matrix"]
    assert matrix["oldest_full_npu_release"]  # type: ignore[index]
    assert "2.13.0" in matrix["full_npu_releases"]  # type: ignore[index]
