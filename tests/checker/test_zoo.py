"""``opcheck zoo``: real traces of zoo models checked against the bundled catalog's releases."""

from __future__ import annotations

import csv
import io
import json
import shutil
import sqlite3
from pathlib import Path

import pytest
import typer
from testpaths import TESTS
from typer.testing import CliRunner

from opcheck.checker import zoo
from opcheck.cli import commands_zoo
from opcheck.core.errors import UsageError
from opcheck.core.paths import snapshot_dir
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.db.snapshot import read_snapshot, read_zoo, snapshot_equal, write_snapshot, write_zoo

pytestmark = pytest.mark.torch
pytest.importorskip("torch")

BROKEN = '''
def build():
    raise RuntimeError("this model cannot be built")
'''


@pytest.fixture(scope="module")
def catalog(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


@pytest.fixture(scope="module")
def result(catalog: Catalog, tmp_path_factory: pytest.TempPathFactory) -> zoo.ZooResult:
    broken = tmp_path_factory.mktemp("zoo") / "broken.py"
    broken.write_text(BROKEN)
    branch = TESTS / "models" / "zoo.py"
    return zoo.run_zoo(catalog, ["lstm", f"{broken}:build", "yolo", f"{branch}:branch"],
                       timeout=120, jobs=2)


def test_lstm_needs_a_release_with_the_fused_cell_kernel(result: zoo.ZooResult) -> None:
    # The catalog: aten::_thnn_fused_lstm_cell has an NPU kernel from 2.7.1.post4 on; 1.11/2.0
    # have no CPU fallback, 2.1 – 2.7.1.post3 fall back.
    early, mid, late = (result.row("lstm", r) for r in ("2.0.1", "2.1.0.post10", "2.7.1.post4"))
    assert early is not None and early.verdict == "NO" and early.unsupported == 1
    assert "aten::_thnn_fused_lstm_cell=unsupported" in early.problem_ops
    assert mid is not None and mid.verdict == "MAYBE" and mid.cpu_fallback == 1
    assert mid.problem_ops == "aten::_thnn_fused_lstm_cell=cpu_fallback"
    assert mid.fallback_calls == 2 * 12 * 2  # two layers × two directions × 12 steps
    assert late is not None and late.verdict == "YES" and late.problem_ops == ""
    assert late.npu + late.composite == mid.npu + mid.composite + 1
    assert late.traced_with == mid.traced_with != ""


def test_every_release_with_kernels_is_a_column(result: zoo.ZooResult, catalog: Catalog) -> None:
    with_kernels = [r.torch_npu for r in catalog.releases if r.has_kernels]
    assert result.releases == with_kernels
    assert [r.torch_npu for r in result.rows if r.model == "yolo"] == with_kernels
    # the detector's post-processing (topk, gather, IoU, triu) traced to the end
    yolo_newest = result.row("yolo", with_kernels[-1])
    assert yolo_newest is not None and yolo_newest.npu + yolo_newest.composite >= 30


def test_broken_model_is_one_error_row_and_the_rest_ran(result: zoo.ZooResult) -> None:
    errors = {r.model.rpartition(":")[2]: r for r in result.rows if r.verdict == zoo.ERROR}
    assert sorted(errors) == ["branch", "build"]
    assert errors["build"].torch_npu == ""
    assert "this model cannot be built" in errors["build"].error
    assert "\n" not in errors["build"].error
    # a trace cut short by data-dependent control flow is no coverage result
    assert errors["branch"].error.startswith("INCOMPLETE: data-dependent control flow")
    assert {r.model for r in result.rows if r.verdict != zoo.ERROR} == {"lstm", "yolo"}


def test_markdown_and_csv(result: zoo.ZooResult) -> None:
    md = zoo.to_markdown(result)
    assert "| torch_npu | lstm |" in md
    assert "| 2.1.0.rc1 – 2.7.1.post3 | MAYBE (1) | ERROR | YES | ERROR |" in md
    assert "this model cannot be built" in md
    rows = list(csv.DictReader(io.StringIO(zoo.to_csv(result))))
    assert len(rows) == len(result.rows)
    lstm = {r["torch_npu"]: r for r in rows if r["model"] == "lstm"}
    assert lstm["2.0.1"]["verdict"] == "NO" and lstm["2.13.0"]["verdict"] == "YES"
    doc = json.loads(zoo.to_json(result))
    assert doc["kind"] == "opcheck.zoo" and len(doc["rows"]) == len(result.rows)


def test_zoo_rows_go_through_the_snapshot_into_the_catalog(
    result: zoo.ZooResult, tmp_path: Path
) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(snapshot_dir(), snap)
    (snap / "zoo.tsv").unlink(missing_ok=True)
    assert read_snapshot(snap).zoo == []
    write_zoo(result.rows, snap)
    lines = (snap / "zoo.tsv").read_text().splitlines()
    assert lines[1:] == sorted(lines[1:])  # diffable
    data = read_snapshot(snap)
    assert len(data.zoo) == len(result.rows)
    db = write_catalog(data, tmp_path / "c.sqlite")
    with sqlite3.connect(db) as conn:
        got = conn.execute("SELECT verdict, cpu_fallback FROM zoo_result "
                           "WHERE model = 'lstm' AND torch_npu = '2.1.0'").fetchall()
        errors = conn.execute("SELECT count(*) FROM zoo_result WHERE verdict = 'ERROR'").fetchone()
    assert got == [("MAYBE", 1)] and errors == (2,)
    # a sync rewrites the upstream files but keeps zoo.tsv (it does not trace models)
    data.zoo = []
    write_snapshot(data, snap)
    assert len(read_zoo(snap)) == len(result.rows)
    assert snapshot_equal(snap, snapshot_dir()) == []
    # the table round-trips from zoo.tsv
    back = zoo.from_rows(read_zoo(snap))
    assert back.releases == result.releases
    assert zoo.cell(back.row("lstm", "2.0.1")) == "NO (1)"


def test_merge_replaces_only_the_models_that_ran(result: zoo.ZooResult) -> None:
    old = [zoo.ZooRec("bert", "2.1.0", "YES"), zoo.ZooRec("lstm", "9.9.9", "NO")]
    merged = zoo.merge_rows(old, result)
    assert zoo.ZooRec("bert", "2.1.0", "YES") in merged
    assert not any(r.torch_npu == "9.9.9" for r in merged)
    assert len(merged) == len(result.rows) + 1
    broken = next(r.model for r in result.rows if r.verdict == zoo.ERROR)
    kept = zoo.merge_rows([zoo.ZooRec(broken, "2.1.0", "YES")], result)
    assert [r.verdict for r in kept if r.model == broken] == ["YES"]


def test_unknown_zoo_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no zoo model 'resnet9000'"):
        zoo.specs(["resnet9000"])
    assert [n for n, _ in zoo.specs(None)] == list(zoo.MODELS)


def _app() -> typer.Typer:
    app = typer.Typer()
    commands_zoo.register(app)

    @app.callback()
    def _root() -> None: ...

    return app


def test_cli_writes_csv_and_snapshot(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(snapshot_dir(), snap)
    write_zoo([zoo.ZooRec("bert", "2.1.0", "YES"), zoo.ZooRec("conv_classifier", "9.9", "NO")],
              snap)
    out = tmp_path / "zoo.csv"
    res = CliRunner().invoke(_app(), [
        "zoo", "conv_classifier", "--format", "csv", "-o", str(out), "--snapshot", str(snap),
        "--timeout", "120",
    ])  # fmt: skip
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out.open()))
    assert {r["verdict"] for r in rows} == {"YES"} and len(rows) > 50
    stored = read_zoo(snap)
    assert {r.model for r in stored} == {"bert", "conv_classifier"}
    assert len(stored) == len(rows) + 1  # conv_classifier's old row replaced, bert's kept


def test_cli_snapshot_and_catalog_exclude_each_other(bundled_catalog: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(_app(), ["zoo", "lstm", "--snapshot", str(tmp_path),
                                      "--catalog", str(bundled_catalog)])
    assert res.exit_code == 2 and "drop --catalog" in res.output


def test_cli_bad_name_is_one_line_exit_2(bundled_catalog: Path) -> None:
    res = CliRunner().invoke(_app(), ["zoo", "nope", "--catalog", str(bundled_catalog)])
    assert res.exit_code == 2
    assert "no zoo model 'nope'" in res.output and "Traceback" not in res.output


@pytest.mark.slow
def test_full_zoo_traces_every_architecture(catalog: Catalog) -> None:
    full = zoo.run_zoo(catalog, None, timeout=180, jobs=2)
    assert full.models == list(zoo.MODELS)
    assert not [r for r in full.rows if r.verdict == zoo.ERROR]
    assert len(full.rows) == len(zoo.MODELS) * len(full.releases)

    def key(r: zoo.ZooRec) -> tuple[str, str]:
        return r.model, r.torch_npu

    assert sorted(full.rows, key=key) == sorted(read_zoo(snapshot_dir()), key=key), (
        "data/snapshot/zoo.tsv is stale: run `opcheck zoo --snapshot data/snapshot`"
    )
