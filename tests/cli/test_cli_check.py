from __future__ import annotations

import json
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from click.testing import Result
from typer.testing import CliRunner

from opcheck.checker.formats import ATLAS_FORMATS, REPORT_FORMATS
from opcheck.cli.app import app, route
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog

runner = CliRunner()
OLD, NEW = "2.1.0.post17", "2.6.0.post5"  # isin.Tensor_Tensor falls back on OLD, runs on NEW


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


def invoke(*args: str) -> Result:
    return runner.invoke(app, route(list(args)))


@pytest.fixture
def base(cat_path: Path, oplist_path: Path) -> list[str]:
    """Check the op list against the old release, where isin falls back to the CPU."""
    return [str(oplist_path), "--catalog", str(cat_path), "--torch-npu", OLD]


@pytest.fixture
def old_doc(base: list[str]) -> dict[str, object]:
    r = invoke(*base, "--format", "json")
    assert r.exit_code == 0, r.output  # fallback is not a failure under the default --fail-on
    doc: dict[str, object] = json.loads(r.output)
    return doc


@pytest.mark.parametrize("argv, routed", [
    (["op", "aten::add"], ["op", "aten::add"]),
    (["model.pt2", "--format", "json"], ["check", "model.pt2", "--format", "json"]),
    (["--help"], ["--help"]),
])
def test_routing_keeps_subcommands_and_defaults_to_check(argv: list[str],
                                                         routed: list[str]) -> None:
    assert route(argv) == routed


def test_json_names_the_target_and_the_verdict(old_doc: dict[str, object]) -> None:
    assert old_doc["target"]["cann"] == "8.3.RC1"  # type: ignore[index]
    assert old_doc["verdict"] == "MAYBE"
    assert old_doc["fallback_calls"] == 3


def test_json_finding_says_where_and_since_when(old_doc: dict[str, object]) -> None:
    isin = next(o for o in old_doc["ops"] if o["op"] == "aten::isin.Tensor_Tensor")  # type: ignore[attr-defined]
    assert isin["status"] == "cpu_fallback"
    assert isin["locations"] == ["model.py:42"]
    assert isin["first_npu_release_any"] == NEW


def test_json_structured_op_shows_its_chain(old_doc: dict[str, object]) -> None:
    add = next(o for o in old_doc["ops"] if o["op"] == "aten::add.Tensor")  # type: ignore[attr-defined]
    assert add["via"] == ["aten::add.Tensor", "aten::add.out"]


def test_json_lists_problems_first(old_doc: dict[str, object]) -> None:
    assert old_doc["ops"][0]["op"] == "aten::isin.Tensor_Tensor"  # type: ignore[index]


def test_json_counts_every_status_as_plain_strings(old_doc: dict[str, object]) -> None:
    assert old_doc["counts"] == {"npu": 2, "composite": 1, "cpu_fallback": 1,
                                 "unsupported": 0, "unknown": 0}


def test_new_release_is_clean_even_under_fail_on_fallback(cat_path: Path,
                                                          oplist_path: Path) -> None:
    new = invoke(str(oplist_path), "--catalog", str(cat_path), "--torch-npu", NEW,
                 "--format", "json", "--fail-on", "fallback")
    assert new.exit_code == 0, new.output
    assert json.loads(new.output)["verdict"] == "YES"


@pytest.mark.parametrize("fail_on, code", [
    ("unsupported", 0), ("fallback", 1), ("restricted", 1), ("never", 0),
])
def test_fail_on_levels_set_the_exit_code(base: list[str], fail_on: str, code: int) -> None:
    r = invoke(*base, "--format", "json", "--fail-on", fail_on)
    assert r.exit_code == code, r.output


def test_no_cpu_fallback_makes_it_unsupported(base: list[str]) -> None:
    r = invoke("check", *base, "--no-cpu-fallback", "--format", "json")
    assert r.exit_code == 1
    assert json.loads(r.output)["verdict"] == "NO"


def test_sarif_has_one_rule_result_per_problem_with_its_line(base: list[str]) -> None:
    sarif = json.loads(invoke(*base, "--format", "sarif").output)
    results = sarif["runs"][0]["results"]
    assert [r["ruleId"] for r in results] == ["cpu_fallback"]
    assert results[0]["locations"][0]["physicalLocation"]["region"]["startLine"] == 42


def test_sarif_declares_a_rule_per_problem_status(base: list[str]) -> None:
    sarif = json.loads(invoke(*base, "--format", "sarif").output)
    rules = [r["id"] for r in sarif["runs"][0]["tool"]["driver"]["rules"]]
    assert rules == ["unsupported", "cpu_fallback", "unknown", "restricted"]


def test_junit_has_a_case_per_op_and_a_failure_per_problem(base: list[str]) -> None:
    junit = invoke(*base, "--format", "junit").output
    assert junit.count("<testcase") == 4 and junit.count("<failure") == 1
    assert 'classname="opcheck.cpu_fallback" name="aten::isin.Tensor_Tensor"' in junit


def test_markdown_lists_problems_and_the_environment(base: list[str]) -> None:
    md = invoke(*base, "--format", "markdown").output
    assert "| `aten::isin.Tensor_Tensor` | cpu_fallback | 3 |" in md
    # the target and the model first; the machine that ran opcheck in its own appendix
    assert md.index("## Target") < md.index("## Model") < md.index("## Problems")
    appendix = md[md.index("## Appendix: the machine that ran opcheck"):]
    assert "| torch |" in appendix and "| torch_npu |" in appendix


def test_markdown_coverage_has_a_line_per_status(base: list[str]) -> None:
    md = invoke(*base, "--format", "markdown").output
    assert "| npu | 2 | 5 |" in md and "| cpu_fallback | 1 | 3 |" in md
    assert "| unknown | 0 | 0 |" in md


def test_table_is_the_default_format(base: list[str]) -> None:
    table = invoke(*base)
    assert table.exit_code == 0
    assert "MAYBE: 2 on NPU, 1 composite, 1 CPU fallback (3 CPU round-trips per forward)" in (
        " ".join(table.output.split()))
    assert "isin" in table.output


@pytest.mark.parametrize("fmt", [f for f in REPORT_FORMATS.names if f != "markdown"])
def test_every_format_writes_to_a_file_what_it_prints(base: list[str], tmp_path: Path,
                                                      fmt: str) -> None:
    out = tmp_path / f"r.{fmt}"
    written = invoke(*base, "--format", fmt, "-o", str(out))
    assert written.exit_code == 0 and written.output == ""
    printed = invoke(*base, "--format", fmt).output
    if fmt == "table":  # a file gets the piped width, as the test runner's stdout does
        assert out.read_text().split() == printed.split()
    else:
        assert out.read_text() == printed


def test_json_file_is_a_report_document(base: list[str], tmp_path: Path) -> None:
    out = tmp_path / "r.json"
    assert invoke(*base, "--format", "json", "-o", str(out)).exit_code == 0
    assert json.loads(out.read_text())["kind"] == "opcheck.report"


def test_all_releases_finds_the_oldest_full_npu_release(cat_path: Path,
                                                        oplist_path: Path) -> None:
    r = invoke(str(oplist_path), "--catalog", str(cat_path), "--all-releases", "--format", "json")
    m = json.loads(r.output)["matrix"]
    assert m["oldest_full_npu_release"] == NEW
    assert m["ops"]["npu::npu_gelu"]["1.11.0.post8"] == "unsupported"


def test_baseline_shows_only_what_changed(base: list[str], cat_path: Path, oplist_path: Path,
                                          tmp_path: Path) -> None:
    old = tmp_path / "old.json"
    invoke(*base, "--format", "json", "-o", str(old))
    r = invoke(str(oplist_path), "--catalog", str(cat_path), "--torch-npu", NEW,
               "--format", "json", "--baseline", str(old))
    doc = json.loads(r.output)
    assert [o["op"] for o in doc["ops"]] == ["aten::isin.Tensor_Tensor"]
    assert "baseline: 3 ops unchanged and hidden; 1 new or changed" in doc["notes"]


@pytest.mark.parametrize("args, message", [
    (["--torch-npu", "9.9"], "unknown torch_npu release"),
    (["--format", "xml"],
     "unknown format 'xml' (choose from table, json, markdown, sarif, csv, junit, github)"),
    (["--fail-on", "sometimes"],
     "--fail-on must be one of unsupported, fallback, restricted, never"),
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


@pytest.mark.parametrize("command, registry", [("check", REPORT_FORMATS), ("zoo", ATLAS_FORMATS)])
def test_format_help_lists_the_registered_formats(command: str, registry: object) -> None:
    r = invoke(command, "--help")
    assert r.exit_code == 0
    assert registry.help_text() in " ".join(r.output.split())  # type: ignore[attr-defined]


def test_zoo_rejects_an_unknown_format_before_tracing(cat_path: Path) -> None:
    r = invoke("zoo", "lstm", "--catalog", str(cat_path), "--format", "xml")
    assert r.exit_code == 2
    assert "unknown format 'xml' (choose from table, json, csv, markdown)" in r.output


def test_op_history_json_lists_every_release(cat_path: Path) -> None:
    r = invoke("op", "isin.Tensor_Tensor_out", "--catalog", str(cat_path), "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["first_npu_release"] == NEW
    assert [x["status"] for x in doc["releases"]] == [
        "cpu_fallback", "cpu_fallback", "cpu_fallback", None, "npu"]


def test_op_history_table_names_the_first_npu_release(cat_path: Path) -> None:
    table = invoke("op", "aten::isin.Tensor_Tensor_out", "--catalog", str(cat_path))
    assert table.exit_code == 0
    assert NEW in table.output and "npu" in table.output


def test_op_shows_the_aclnn_contract_per_cann_and_graph_runs(bundled_catalog: Path) -> None:
    out = invoke("op", "aten::index.Tensor", "--catalog", str(bundled_catalog)).output
    assert "aclnn aclnnIndex: called in" in out
    # per CANN version, newest first, with what each product lacks
    assert out.index("CANN 9.1.0 (ops-nn)") < out.index("CANN 9.0.0 (ops-nn)")
    assert "910A: no BFLOAT16, COMPLEX64" in out and "aclnnIndex.md#L" in out
    assert "graph mode (torchair):" in out
    doc = json.loads(invoke("op", "aten::index.Tensor", "--catalog", str(bundled_catalog),
                            "--format", "json").output)
    [entry] = doc["aclnn"]
    newest = entry["docs"][-1]
    self_ = next(p for p in newest["params"] if p["param"] == "self")
    assert "COMPLEX64" in self_["by_product"]["950"]
    assert "COMPLEX64" not in self_["by_product"]["910B"]
