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
from opcheck.checker.formats import ZOO_FORMATS
from opcheck.cli import commands_zoo
from opcheck.core.errors import UsageError
from opcheck.core.paths import snapshot_dir
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.db.schema import ATLAS_FILE, ZOO_FILE
from opcheck.db.snapshot import read_rows, read_snapshot, snapshot_equal, write_rows, write_snapshot

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
    return zoo.run_zoo(catalog, ["lstm", f"{broken}:build", "yolo", f"{branch}:branch",
                                 f"{branch}:fallbacks"], timeout=120, jobs=2)


# The catalog: isin (a structured op delegating to isin.Tensor_Tensor_out) is registered as
# unsupported in 2.0.1 (no CPU fallback), falls back in 2.1.0.rc1 – 2.1.0.post7 and has a
# kernel from 2.1.0.post8; logcumsumexp never has a kernel.
EARLY, MID, LATE = "2.0.1", "2.1.0.post4", "2.1.0.post10"
FALLBACKS = "fallbacks"


def _row(result: zoo.ZooResult, model: str, release: str) -> zoo.ZooRec:
    row = result.row(model, release) or result.row(f"{TESTS / 'models' / 'zoo.py'}:{model}",
                                                   release)
    assert row is not None, (model, release)
    return row


def test_the_lstm_reaches_the_npu_whole_on_every_release(result: zoo.ZooResult,
                                                          catalog: Catalog) -> None:
    # torch_npu registers the composite aten::lstm.input in every release, so the NPU receives
    # the whole LSTM, never the fused cell it decomposes into elsewhere
    assert all("aten::lstm.input" in catalog.kernels(r) for r in result.releases)
    rows = [r for r in result.rows if r.model == "lstm"]
    assert rows and all(r.verdict == "YES" and r.problem_ops == "" for r in rows)


def test_an_op_without_kernel_or_fallback_is_unsupported(result: zoo.ZooResult) -> None:
    early = _row(result, FALLBACKS, EARLY)
    assert early.verdict == "NO" and early.unsupported == 1
    assert "aten::isin.Tensor_Tensor=unsupported" in early.problem_ops


def test_the_same_op_falls_back_once_torch_npu_has_the_fallback(result: zoo.ZooResult) -> None:
    mid = _row(result, FALLBACKS, MID)
    assert mid.verdict == "MAYBE" and mid.cpu_fallback == 2
    assert "aten::isin.Tensor_Tensor=cpu_fallback" in mid.problem_ops


def test_the_op_runs_on_the_npu_once_it_has_a_kernel(result: zoo.ZooResult) -> None:
    mid, late = _row(result, FALLBACKS, MID), _row(result, FALLBACKS, LATE)
    assert "isin" not in late.problem_ops and late.cpu_fallback == mid.cpu_fallback - 1
    assert late.traced_with == mid.traced_with != ""


def test_rows_hold_plain_verdict_strings(result: zoo.ZooResult) -> None:
    # zoo.tsv and the zoo_result table store the word, not the enum
    assert {type(r.verdict) for r in result.rows} == {str}


def test_every_release_with_kernels_is_a_column(result: zoo.ZooResult, catalog: Catalog) -> None:
    with_kernels = [r.torch_npu for r in catalog.releases if r.has_kernels]
    assert result.releases == with_kernels
    assert [r.torch_npu for r in result.rows if r.model == "yolo"] == with_kernels


def test_yolo_traces_its_post_processing(result: zoo.ZooResult, catalog: Catalog) -> None:
    # the detector's post-processing (topk, gather, IoU, triu) traced to the end
    with_kernels = [r.torch_npu for r in catalog.releases if r.has_kernels]
    yolo_newest = result.row("yolo", with_kernels[-1])
    assert yolo_newest is not None and yolo_newest.npu + yolo_newest.composite >= 30


def _errors(result: zoo.ZooResult) -> dict[str, zoo.ZooRec]:
    return {r.model.rpartition(":")[2]: r for r in result.rows if r.verdict == zoo.ERROR}


def test_broken_model_is_one_error_row_and_the_rest_ran(result: zoo.ZooResult) -> None:
    errors = _errors(result)
    assert sorted(errors) == ["branch", "build"]
    assert {r.model.rpartition(":")[2] for r in result.rows if r.verdict != zoo.ERROR} == {
        "lstm", "yolo", FALLBACKS}


def test_error_row_has_no_release_and_a_one_line_reason(result: zoo.ZooResult) -> None:
    build = _errors(result)["build"]
    assert build.torch_npu == ""
    assert "this model cannot be built" in build.error
    assert "\n" not in build.error


def test_incomplete_trace_is_an_error_not_coverage(result: zoo.ZooResult) -> None:
    # a trace cut short by data-dependent control flow is no coverage result
    branch = _errors(result)["branch"]
    assert branch.error.startswith("INCOMPLETE: data-dependent control flow")


def test_markdown_folds_releases_with_the_same_cells(result: zoo.ZooResult) -> None:
    md = ZOO_FORMATS.render("markdown", result)
    assert "| torch_npu | lstm |" in md
    # isin falls back from 2.1.0.rc1 to 2.1.0.post7 (the v6.0.rc2.1 hotfix, a release since
    # issue 26): one row for the run of releases
    assert "| 2.1.0.rc1 – 2.1.0.post7 | YES | ERROR | YES | ERROR | MAYBE (2) |" in md
    assert "this model cannot be built" in md


def test_csv_has_a_line_per_row(result: zoo.ZooResult) -> None:
    rows = list(csv.DictReader(io.StringIO(ZOO_FORMATS.render("csv", result))))
    assert len(rows) == len(result.rows)
    mixed = {r["torch_npu"]: r for r in rows if r["model"].endswith(FALLBACKS)}
    assert mixed["2.0.1"]["verdict"] == "NO" and mixed["2.13.0"]["verdict"] == "MAYBE"


def test_json_is_the_zoo_document(result: zoo.ZooResult) -> None:
    doc = json.loads(ZOO_FORMATS.render("json", result))
    assert doc["kind"] == "opcheck.zoo" and len(doc["rows"]) == len(result.rows)


@pytest.fixture
def snap(result: zoo.ZooResult, tmp_path: Path) -> Path:
    """A copy of the bundled snapshot whose zoo.tsv holds ``result``'s rows."""
    snap = tmp_path / "snap"
    shutil.copytree(snapshot_dir(), snap)
    (snap / "zoo.tsv").unlink(missing_ok=True)
    assert read_snapshot(snap).zoo == []
    write_rows(ZOO_FILE, result.rows, snap)
    return snap


def test_zoo_tsv_is_sorted_to_diff(snap: Path) -> None:
    lines = (snap / "zoo.tsv").read_text().splitlines()
    assert lines[1:] == sorted(lines[1:])


def test_zoo_rows_go_through_the_snapshot_into_the_catalog(
    result: zoo.ZooResult, snap: Path, tmp_path: Path
) -> None:
    data = read_snapshot(snap)
    assert len(data.zoo) == len(result.rows)
    db = write_catalog(data, tmp_path / "c.sqlite")
    with sqlite3.connect(db) as conn:
        got = conn.execute("SELECT verdict, cpu_fallback FROM zoo_result "
                           "WHERE model LIKE '%:fallbacks' AND torch_npu = '2.1.0'").fetchall()
        errors = conn.execute("SELECT count(*) FROM zoo_result WHERE verdict = 'ERROR'").fetchone()
    assert got == [("MAYBE", 2)] and errors == (2,)


def test_a_sync_keeps_zoo_tsv(result: zoo.ZooResult, snap: Path) -> None:
    # a sync rewrites the upstream files but keeps zoo.tsv (it does not trace models)
    data = read_snapshot(snap)
    data.zoo = []
    write_snapshot(data, snap)
    assert len(read_rows(ZOO_FILE, snap)) == len(result.rows)
    assert snapshot_equal(snap, snapshot_dir()) == []


def test_the_table_round_trips_from_zoo_tsv(result: zoo.ZooResult, snap: Path) -> None:
    back = zoo.from_rows(read_rows(ZOO_FILE, snap))
    assert back.releases == result.releases
    assert zoo.cell(back.row("lstm", "2.0.1")) == "YES"
    assert zoo.cell(_row(back, FALLBACKS, "2.1.0.post4")) == "MAYBE (2)"


def test_merge_replaces_only_the_models_that_ran(result: zoo.ZooResult) -> None:
    old = [zoo.ZooRec("bert", "2.1.0", "YES"), zoo.ZooRec("lstm", "9.9.9", "NO")]
    merged = zoo.merge_rows(old, result)
    assert zoo.ZooRec("bert", "2.1.0", "YES") in merged
    assert not any(r.torch_npu == "9.9.9" for r in merged)
    assert len(merged) == len(result.rows) + 1


def test_merge_keeps_old_rows_of_a_model_that_failed(result: zoo.ZooResult) -> None:
    broken = next(r.model for r in result.rows if r.verdict == zoo.ERROR)
    kept = zoo.merge_rows([zoo.ZooRec(broken, "2.1.0", "YES")], result)
    assert [r.verdict for r in kept if r.model == broken] == ["YES"]


def test_unknown_zoo_name_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="no zoo model 'resnet9000'"):
        zoo.specs(["resnet9000"])


def test_no_names_means_every_zoo_model() -> None:
    assert [n for n, _ in zoo.specs(None)] == list(zoo.MODELS)


def _app() -> typer.Typer:
    app = typer.Typer()
    commands_zoo.register(app)

    @app.callback()
    def _root() -> None: ...

    return app


def test_cli_is_the_atlas_zoo_and_writes_atlas_tsv(tmp_path: Path) -> None:
    snap = tmp_path / "snap"
    shutil.copytree(snapshot_dir(), snap)
    before = read_rows(ATLAS_FILE, snap)
    out = tmp_path / "zoo.csv"
    res = CliRunner().invoke(_app(), [
        "zoo", "conv_classifier", "--format", "csv", "-o", str(out), "--snapshot", str(snap),
        "--timeout", "120",
    ])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert commands_zoo.NOTE in res.output  # the deprecation note (stderr)
    rows = list(csv.DictReader(out.open()))
    assert {(r["library"], r["architecture"]) for r in rows} == {("zoo", "conv_classifier")}
    assert {r["verdict"] for r in rows} == {"YES"}
    stored = read_rows(ATLAS_FILE, snap)
    mine = [r for r in stored if r.architecture == "conv_classifier"]
    assert len(mine) == len(rows)  # conv_classifier's rows replaced, the others kept
    assert len(stored) - len(mine) == len([r for r in before if r.architecture != "conv_classifier"])


def test_cli_snapshot_and_catalog_exclude_each_other(bundled_catalog: Path, tmp_path: Path) -> None:
    res = CliRunner().invoke(_app(), ["zoo", "lstm", "--snapshot", str(tmp_path),
                                      "--catalog", str(bundled_catalog)])
    assert res.exit_code == 2 and "drop --catalog" in res.output


def test_cli_bad_name_is_one_line_exit_2(bundled_catalog: Path) -> None:
    res = CliRunner().invoke(_app(), ["zoo", "nope", "--catalog", str(bundled_catalog)])
    assert res.exit_code == 2
    assert "no architecture 'nope' in zoo" in res.output and "Traceback" not in res.output


def test_cli_points_a_model_of_ones_own_to_check(bundled_catalog: Path) -> None:
    res = CliRunner().invoke(_app(), ["zoo", "m.py:build", "--catalog", str(bundled_catalog)])
    assert res.exit_code == 2 and "opcheck check --model m.py:build" in res.output


@pytest.mark.slow
def test_full_zoo_traces_every_architecture(catalog: Catalog) -> None:
    full = zoo.run_zoo(catalog, None, timeout=180, jobs=2)
    assert full.models == list(zoo.MODELS)
    assert not [r for r in full.rows if r.verdict == zoo.ERROR]
    assert len(full.rows) == len(zoo.MODELS) * len(full.releases)

    def key(r: zoo.ZooRec) -> tuple[str, str]:
        return r.model, r.torch_npu

    assert sorted(full.rows, key=key) == sorted(read_rows(ZOO_FILE, snapshot_dir()), key=key), (
        "data/snapshot/zoo.tsv is stale: run `opcheck zoo --snapshot data/snapshot`"
    )
