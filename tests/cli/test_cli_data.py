"""workaround new|lint|verify and explain, on the bundled catalog and the shipped entries."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

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
    # The entry spans 1.11 (no CPU fallback: unsupported) to 2.1.0.post4 (cpu_fallback).
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


def test_explain_a_fallback_log(bundled_catalog: Path, fixtures: Path) -> None:
    log = fixtures / "logs" / "llm_generate_fallback.log"
    r = run("explain", str(log), "--catalog", str(bundled_catalog), "--torch-npu", "2.1.0.post4",
            "--format", "json")
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    status = {o["op"]: o for o in doc["op_status"]}
    assert status["aten::isin.Tensor_Tensor_out"]["status"] == "cpu_fallback"
    # First in op-plugin's 6.0.rc3 branch (op_plugin_functions.yaml line 6316): 2.1.0.post8.
    assert status["aten::isin.Tensor_Tensor_out"]["first_npu_release"] == "2.1.0.post8"
    assert "isin-tensor-tensor-rewrite" in status["aten::isin.Tensor_Tensor_out"]["workarounds"]
    assert status["torchvision::nms"]["status"] == "unknown"
    assert "cpu-fallback" in {s["id"] for s in doc["signatures"]}
