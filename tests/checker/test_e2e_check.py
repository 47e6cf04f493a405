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
    folder = tmp_path_factory.mktemp("oplists")
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


def test_a_kernel_added_between_releases_flips_the_verdict(traced: dict[str, Path],
                                                           bundled_catalog: Path) -> None:
    # op-plugin registers isin.Tensor_Tensor_out from the 6.0.rc3 branch (torch_npu
    # 2.1.0.post8); torch 2.0.1 builds have no CPU fallback at all.
    expected = {
        "2.0.1.post4": ("NO", "unsupported", 1),
        "2.1.0.post4": ("MAYBE", "cpu_fallback", 0),
        "2.1.0.post8": ("YES", "npu", 0),
        "2.13.0": ("YES", "npu", 0),
    }
    for release, (verdict, status, code) in expected.items():
        exit_code, doc = check(traced["stop_check"], bundled_catalog, "--torch-npu", release)
        assert (doc["verdict"], statuses(doc)["aten::isin.Tensor_Tensor"], exit_code) == (
            verdict, status, code), release
    _, old = check(traced["stop_check"], bundled_catalog, "--torch-npu", "2.1.0.post4")
    isin = next(o for o in old["ops"] if o["op"] == "aten::isin.Tensor_Tensor")  # type: ignore[attr-defined]
    assert isin["first_npu_release"] == "2.1.0.post8"
    assert isin["via"] == ["aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor_out"]
    assert isin["locations"] and isin["locations"][0].endswith("check_models.py:13")
    assert {w["id"] for w in isin["workarounds"]} >= {"isin-tensor-tensor-rewrite"}
    assert old["fallback_calls"] == 1
    # --fail-on fallback makes the fallback a failure for CI
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
    assert st["aten::addmm"] == "npu" and st["aten::relu"] == "npu"


def test_a_restricted_dtype_is_flagged(traced: dict[str, Path], bundled_catalog: Path) -> None:
    _, doc = check(traced["float64_cholesky"], bundled_catalog, "--torch-npu", "2.13.0")
    chol = next(o for o in doc["ops"] if o["op"] == "aten::linalg_cholesky_ex")  # type: ignore[attr-defined]
    assert chol["dtypes"] == ["float64"]
    assert doc["verdict"] in ("MAYBE", "NO")
    code, _ = check(traced["float64_cholesky"], bundled_catalog, "--torch-npu", "2.13.0",
                    "--fail-on", "restricted")
    assert code == 1


@pytest.mark.slow
def test_a_real_architecture_from_transformers(bundled_catalog: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    oplist = trace(None, model_spec=f"{MODELS / 'hf.py'}:gpt2_tiny")
    p = tmp_path / "gpt2.json"
    p.write_text(oplist.dumps())
    _, doc = check(p, bundled_catalog, "--torch-npu", "2.13.0", "--all-releases")
    st = statuses(doc)
    assert "aten::addmm" in st and "aten::_scaled_dot_product_flash_attention_for_cpu" not in st
    assert all(s != "unknown" for s in st.values()), st
    # Every op has a kernel on 2.13.0; the docs restrict some dtypes (GPT-2 calls new_ones on
    # int64 ids, and Tensor.new_ones is documented "fp32 only"), so the verdict may be MAYBE,
    # and then only because of documented restrictions, each cited with its link.
    assert set(st.values()) <= {"npu", "composite"}, st
    restricted = [o for o in doc["ops"] if o["restricted"]]  # type: ignore[attr-defined]
    assert doc["verdict"] == ("MAYBE" if restricted else "YES")
    for o in restricted:
        assert any(r["link"].startswith("https://github.com/Ascend/pytorch/")
                   for r in o["restrictions"] if r["dtypes_seen_outside"] or r["unsupported"])
    matrix = doc["matrix"]
    assert matrix["oldest_full_npu_release"]  # type: ignore[index]
    assert "2.13.0" in matrix["full_npu_releases"]  # type: ignore[index]
