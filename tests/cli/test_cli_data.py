"""workaround new|lint|verify and explain, on the bundled catalog and the shipped entries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml
from testpaths import FIXTURES
from typer.testing import CliRunner

from opcheck.cli.app import app
from opcheck.contrib.workarounds import default_workarounds_dir

runner = CliRunner()


def run(*args: str) -> object:
    return runner.invoke(app, list(args))


def test_shipped_entries_pass_lint_against_the_catalog(bundled_catalog: Path) -> None:
    r = run("workaround", "lint", "--catalog", str(bundled_catalog))
    assert r.exit_code == 0, r.output


def test_every_rewrite_verifies_on_cpu_and_npu(bundled_catalog: Path) -> None:
    r = run("workaround", "verify", "--catalog", str(bundled_catalog), "--format", "json")
    assert r.exit_code == 0, r.output
    results = json.loads(r.output)
    assert len(results) >= 6 and all(x["ok"] for x in results)
    isin = next(x for x in results if x["id"] == "isin-tensor-tensor-rewrite")
    assert "aten::isin.Tensor_Tensor" not in isin["ops"] and isin["cases"] >= 5


def _copy_entries(tmp_path: Path) -> Path:
    dest = tmp_path / "entries"
    shutil.copytree(default_workarounds_dir(), dest)
    return dest


def test_lint_names_file_and_line_of_an_unknown_op(bundled_catalog: Path, tmp_path: Path) -> None:
    entries = _copy_entries(tmp_path)
    f = entries / "isin-tensor-tensor-rewrite.yaml"
    f.write_text(f.read_text().replace("- aten::isin.Tensor_Tensor\n", "- aten::isin.Tensor_Tensr\n", 1))
    r = run("workaround", "lint", "--dir", str(entries), "--catalog", str(bundled_catalog))
    assert r.exit_code == 1
    assert "isin-tensor-tensor-rewrite.yaml" in r.output and "aten::isin.Tensor_Tensr" in r.output


def test_verify_catches_a_wrong_replacement(bundled_catalog: Path, tmp_path: Path) -> None:
    entries = _copy_entries(tmp_path)
    f = entries / "isin-tensor-tensor-rewrite.yaml"
    f.write_text(f.read_text().replace("return ~out if invert else out", "return out"))
    r = run("workaround", "verify", "isin-tensor-tensor-rewrite", "--dir", str(entries),
            "--catalog", str(bundled_catalog))
    assert r.exit_code == 1 and "FAIL isin-tensor-tensor-rewrite" in r.output


def test_verify_catches_a_replacement_that_falls_back(bundled_catalog: Path, tmp_path: Path) -> None:
    entries = _copy_entries(tmp_path)
    f = entries / "isin-tensor-tensor-rewrite.yaml"
    # Same values, but through torch.isin itself: the op the entry exists to avoid.
    f.write_text(f.read_text().replace(
        "        return ~out if invert else out",
        "        return torch.isin(elements, test_elements, invert=invert)"))
    r = run("workaround", "verify", "isin-tensor-tensor-rewrite", "--dir", str(entries),
            "--catalog", str(bundled_catalog), "--format", "json")
    assert r.exit_code == 1
    problems = json.loads(r.output)[0]["problems"]
    # The entry spans 1.11 (no CPU fallback: unsupported) to 2.3.1 (cpu_fallback).
    assert any("aten::isin.Tensor_Tensor," in p and "not on the NPU" in p
               and "1.11.0.post8: unsupported" in p for p in problems)


def test_new_scaffolds_an_entry_that_passes_the_schema(bundled_catalog: Path, tmp_path: Path) -> None:
    out = tmp_path / "e" / "x.yaml"
    out.parent.mkdir()
    r = run("workaround", "new", "aten::logcumsumexp", "-o", str(out))
    assert r.exit_code == 0, r.output
    from opcheck.contrib.workarounds import load_file

    entry = load_file(out)
    assert entry.ops == ["aten::logcumsumexp"]
    assert run("workaround", "new", "aten::logcumsumexp", "-o", str(out)).exit_code == 2


@pytest.fixture(scope="module")
def explained(bundled_catalog: Path) -> dict[str, Any]:
    """``opcheck explain`` of a fallback log against 2.1.0.post4, as JSON."""
    log = FIXTURES / "logs" / "llm_generate_fallback.log"
    r = run("explain", str(log), "--catalog", str(bundled_catalog), "--torch-npu", "2.1.0.post4",
            "--format", "json")
    assert r.exit_code == 0, r.output
    doc: dict[str, Any] = json.loads(r.output)
    return doc


def _status(doc: dict[str, Any], op: str) -> dict[str, Any]:
    found: dict[str, Any] = next(o for o in doc["op_status"] if o["op"] == op)
    return found


def test_explain_resolves_the_ops_a_log_names(explained: dict[str, Any]) -> None:
    assert _status(explained, "aten::isin.Tensor_Tensor_out")["status"] == "cpu_fallback"


def test_explain_names_the_release_that_adds_the_kernel(explained: dict[str, Any]) -> None:
    # First in op-plugin's 6.0.rc3 branch (op_plugin_functions.yaml line 6316): 2.1.0.post8.
    isin = _status(explained, "aten::isin.Tensor_Tensor_out")
    assert isin["first_npu_release"] == "2.1.0.post8"


def test_explain_offers_the_workaround(explained: dict[str, Any]) -> None:
    isin = _status(explained, "aten::isin.Tensor_Tensor_out")
    assert "isin-tensor-tensor-rewrite" in isin["workarounds"]


def test_explain_marks_a_third_party_op_unknown(explained: dict[str, Any]) -> None:
    assert _status(explained, "torchvision::nms")["status"] == "unknown"


def test_explain_matches_the_fallback_signature(explained: dict[str, Any]) -> None:
    assert "cpu-fallback" in {s["id"] for s in explained["signatures"]}


def test_new_never_proposes_an_existing_id(tmp_path: Path) -> None:
    from opcheck.contrib.workaround_lint import existing_ids

    r = run("workaround", "new", "aten::isin.Tensor_Tensor")
    assert r.exit_code == 0, r.output
    proposed = yaml.safe_load(r.stdout)["id"]
    assert proposed == "isin-tensor-tensor-rewrite-2"
    assert proposed not in existing_ids(default_workarounds_dir())
    # and in another folder, against that folder's entries
    entries = _copy_entries(tmp_path)
    (entries / "isin-tensor-tensor-rewrite-2.yaml").write_text(r.stdout)
    again = run("workaround", "new", "aten::isin.Tensor_Tensor", "--dir", str(entries))
    assert yaml.safe_load(again.stdout)["id"] == "isin-tensor-tensor-rewrite-3"


def test_lint_rejects_an_unedited_scaffold(bundled_catalog: Path, tmp_path: Path) -> None:
    entries = _copy_entries(tmp_path)
    out = entries / "logcumsumexp-rewrite-2.yaml"
    assert run("workaround", "new", "aten::_logcumsumexp", "--dir", str(entries),
               "-o", str(out)).exit_code == 0
    r = run("workaround", "lint", "--dir", str(entries), "--catalog", str(bundled_catalog))
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert all("logcumsumexp-rewrite-2.yaml" in ln and ": placeholder: " in ln for ln in lines)
    said = " ".join(lines)
    assert "title still says TODO" in said and "your-github-handle" in said
    assert "issues/TODO is the scaffold's placeholder link" in said


def test_lint_holds_release_ranges_and_fixed_in_to_the_catalog(
        bundled_catalog: Path, tmp_path: Path) -> None:
    """The shipped isin entries as they were: ranges stopping at 2.1.0.post4, `fixed_in:
    2.1.0.post10`."""
    entries = _copy_entries(tmp_path)
    up = entries / "isin-tensor-tensor-upgrade.yaml"
    doc = yaml.safe_load(up.read_text())
    doc.update(fixed_in="2.1.0.post10", applies_to={"releases": [
        {"min": "2.1.0", "max": "2.1.0.post4"}]})
    del doc["uncovered_reason"]
    up.write_text(yaml.safe_dump(doc, sort_keys=False))
    rw = entries / "isin-tensor-tensor-rewrite.yaml"
    doc = yaml.safe_load(rw.read_text())
    doc["applies_to"] = {"releases": [{"min": "1.11.0.post8", "max": "2.1.0.post4"}]}
    rw.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run("workaround", "lint", "--dir", str(entries), "--catalog", str(bundled_catalog))
    assert r.exit_code == 1
    lines = r.stderr.splitlines()
    assert (f"{up}: fixed-in: fixed_in is 2.1.0.post10 but the catalog's first NPU release of "
            "aten::isin.Tensor_Tensor is 2.1.0.post8") in lines
    # 2.1.0.post5/post7, 2.2.0.post1/post3 and 2.3.1.post1: the hotfix releases of issue 26
    assert any(ln.startswith(f"{rw}: uncovered-fallback: ")
               and "2.1.0.post5–2.1.0.post7, 2.2.0–2.3.1.post1" in ln for ln in lines)
    assert any(ln.startswith(f"{up}: uncovered-fallback: ")
               and "2.1.0.rc1, 2.1.0.post5–2.1.0.post7" in ln for ln in lines)


def test_shipped_isin_entries_cover_every_fallback_release(bundled_catalog: Path) -> None:
    from opcheck.checker.resolve import Resolver
    from opcheck.contrib.workarounds import load_file
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    cat = Catalog.load(open_catalog(bundled_catalog))
    falls_back = [r.torch_npu for r in cat.releases if r.has_kernels and Resolver(
        cat, r.torch_npu).resolve("aten::isin.Tensor_Tensor").status == "cpu_fallback"]
    assert {"2.1.0.post6", "2.1.0.post7", "2.2.0", "2.2.0.post3", "2.3.1", "2.3.1.post1"} <= set(
        falls_back)
    rewrite = load_file(default_workarounds_dir() / "isin-tensor-tensor-rewrite.yaml")
    assert all(rewrite.applies(r) for r in falls_back)
    upgrade = load_file(default_workarounds_dir() / "isin-tensor-tensor-upgrade.yaml")
    assert upgrade.fixed_in == "2.1.0.post8"


@pytest.mark.slow
def test_verify_stops_an_endless_inputs(bundled_catalog: Path, tmp_path: Path) -> None:
    entries = _copy_entries(tmp_path)
    f = entries / "isin-tensor-tensor-rewrite.yaml"
    f.write_text(f.read_text().replace("    def inputs():\n",
                                       "    def inputs():\n        while True:\n            pass\n"))
    r = run("workaround", "verify", "isin-tensor-tensor-rewrite", "--dir", str(entries),
            "--catalog", str(bundled_catalog), "--timeout", "10")
    assert r.exit_code == 1
    assert r.stdout.splitlines()[:2] == [
        "FAIL isin-tensor-tensor-rewrite: 0 cases (+0 edge cases), 0 ops",
        "     isin-tensor-tensor-rewrite: timed out after 10 s (a loop in inputs() or "
        "replacement() that does not end?)"]
