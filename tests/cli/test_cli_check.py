from __future__ import annotations

import json
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from typer.testing import CliRunner

from opcheck.cli.app import app, route
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog

runner = CliRunner()


@pytest.fixture
def cat_path(tmp_path: Path) -> Path:
    return write_catalog(small_catalog(), tmp_path / "c.sqlite")


@pytest.fixture
def oplist_path(tmp_path: Path) -> Path:
    ol = OpList(model="tiny.py", method="runtime", ir="runtime-dispatch", torch_version="2.6.0",
                ops=[OpUse("aten::relu", 4, ["float32"]),
                     OpUse("aten::add.Tensor", 2, ["float32"]),
                     OpUse("aten::isin.Tensor_Tensor", 3, ["int64"], locations=["model.py:42"]),
                     OpUse("npu::npu_gelu", 1)])
    p = tmp_path / "ops.json"
    p.write_text(ol.dumps())
    return p


def invoke(*args: str) -> object:
    return runner.invoke(app, route(list(args)))


def test_routing_keeps_subcommands_and_defaults_to_check() -> None:
    assert route(["op", "aten::add"]) == ["op", "aten::add"]
    assert route(["model.pt2", "--format", "json"]) == ["check", "model.pt2", "--format", "json"]
    assert route(["--help"]) == ["--help"]


def test_check_json_old_vs_new_release(cat_path: Path, oplist_path: Path) -> None:
    old = invoke(str(oplist_path), "--catalog", str(cat_path), "--torch-npu", "2.1.0.post17",
                 "--format", "json")
    assert old.exit_code == 0, old.output  # fallback is not a failure under the default --fail-on
    doc = json.loads(old.output)
    assert doc["target"]["cann"] == "8.3.RC1"
    assert doc["verdict"] == "MAYBE"
    assert doc["fallback_calls"] == 3
    by_op = {o["op"]: o for o in doc["ops"]}
    assert by_op["aten::isin.Tensor_Tensor"]["status"] == "cpu_fallback"
    assert by_op["aten::isin.Tensor_Tensor"]["locations"] == ["model.py:42"]
    assert by_op["aten::isin.Tensor_Tensor"]["first_npu_release_any"] == "2.6.0.post5"
    assert by_op["aten::add.Tensor"]["via"] == ["aten::add.Tensor", "aten::add.out"]
    assert doc["ops"][0]["op"] == "aten::isin.Tensor_Tensor"  # problems first
    new = invoke(str(oplist_path), "--catalog", str(cat_path), "--torch-npu", "2.6.0.post5",
                 "--format", "json", "--fail-on", "fallback")
    assert new.exit_code == 0, new.output
    assert json.loads(new.output)["verdict"] == "YES"
    failing = invoke(str(oplist_path), "--catalog", str(cat_path), "--torch-npu", "2.1.0.post17",
                     "--format", "json", "--fail-on", "fallback")
    assert failing.exit_code == 1


def test_no_cpu_fallback_makes_it_unsupported(cat_path: Path, oplist_path: Path) -> None:
    r = invoke("check", str(oplist_path), "--catalog", str(cat_path), "--torch-npu",
               "2.1.0.post17", "--no-cpu-fallback", "--format", "json")
    assert r.exit_code == 1
    assert json.loads(r.output)["verdict"] == "NO"


def test_formats(cat_path: Path, oplist_path: Path, tmp_path: Path) -> None:
    base = [str(oplist_path), "--catalog", str(cat_path), "--torch-npu", "2.1.0.post17"]
    sarif = json.loads(invoke(*base, "--format", "sarif").output)
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["cpu_fallback"]
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 42
    junit = invoke(*base, "--format", "junit").output
    assert junit.count("<testcase") == 4 and junit.count("<failure") == 1
    md = invoke(*base, "--format", "markdown").output
    assert "| `aten::isin.Tensor_Tensor` | cpu_fallback | 3 |" in md
    assert "## Environment" in md and "| torch |" in md
    table = invoke(*base)
    assert table.exit_code == 0 and "MAYBE" in table.output and "isin" in table.output
    out = tmp_path / "r.json"
    assert invoke(*base, "--format", "json", "-o", str(out)).exit_code == 0
    assert json.loads(out.read_text())["kind"] == "opcheck.report"


def test_all_releases_and_baseline(cat_path: Path, oplist_path: Path, tmp_path: Path) -> None:
    r = invoke(str(oplist_path), "--catalog", str(cat_path), "--all-releases", "--format", "json")
    m = json.loads(r.output)["matrix"]
    assert m["oldest_full_npu_release"] == "2.6.0.post5"
    assert m["ops"]["npu::npu_gelu"]["1.11.0.post8"] == "unsupported"
    old = tmp_path / "old.json"
    invoke(str(oplist_path), "--catalog", str(cat_path), "--torch-npu", "2.1.0.post17",
           "--format", "json", "-o", str(old))
    r = invoke(str(oplist_path), "--catalog", str(cat_path), "--torch-npu", "2.6.0.post5",
               "--format", "json", "--baseline", str(old))
    assert [o["op"] for o in json.loads(r.output)["ops"]] == ["aten::isin.Tensor_Tensor"]


@pytest.mark.parametrize("args, message", [
    (["--torch-npu", "9.9"], "unknown torch_npu release"),
    (["--format", "xml"], "unknown format"),
    (["--fail-on", "sometimes"], "--fail-on must be one of"),
])
def test_bad_input_is_one_line_exit_2(cat_path: Path, oplist_path: Path, args: list[str],
                                      message: str) -> None:
    r = invoke(str(oplist_path), "--catalog", str(cat_path), *args)
    assert r.exit_code == 2
    assert message in r.output and "Traceback" not in r.output


def test_bad_oplist(cat_path: Path, tmp_path: Path) -> None:
    p = tmp_path / "x.json"
    p.write_text('{"kind": "something-else"}')
    r = invoke(str(p), "--catalog", str(cat_path))
    assert r.exit_code == 2 and "not an opcheck op list" in r.output


def test_op_history_command(cat_path: Path) -> None:
    r = invoke("op", "isin.Tensor_Tensor_out", "--catalog", str(cat_path), "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["first_npu_release"] == "2.6.0.post5"
    assert [x["status"] for x in doc["releases"]] == [
        "cpu_fallback", "cpu_fallback", "cpu_fallback", None, "npu"]
    table = invoke("op", "aten::isin.Tensor_Tensor_out", "--catalog", str(cat_path))
    assert "2.6.0.post5" in table.output and "npu" in table.output
