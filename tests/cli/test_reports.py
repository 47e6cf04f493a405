"""Markdown reports describe the target and the model; ``--all-releases`` renders the matrix
(ops × groups of releases with identical columns, the first fully-NPU group marked) in table
and markdown; ``--all-ops`` lists every op; locations are relative to the project folder."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from typer.testing import CliRunner, Result

from opcheck.checker.formats.text import matrix_groups, relative_location, report_root
from opcheck.cli.app import app, route
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog

ROOT = "/home/someone/project"


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("reports")
    ol = OpList(model=f"{ROOT}/tiny.py", method="runtime", ir="runtime-dispatch",
                torch_version="2.6.0",
                ops=[OpUse("aten::relu", 4, ["float32"], locations=[f"{ROOT}/tiny.py:7"]),
                     OpUse("aten::isin.Tensor_Tensor", 3, ["int64"],
                           locations=[f"{ROOT}/lib/masks.py:9"]),
                     OpUse("npu::npu_gelu", 1)])
    (folder / "ops.json").write_text(ol.dumps())
    return write_catalog(small_catalog(), folder / "c.sqlite"), folder / "ops.json"


def run(paths: tuple[Path, Path], *args: str) -> Result:
    cat, ops = paths
    r = CliRunner().invoke(app, route([str(ops), "--catalog", str(cat), *args]),
                           env={"OPCHECK_WIDTH": "0"})
    assert r.exit_code in (0, 1), r.output
    return r


def test_markdown_matrix_marks_the_first_fully_npu_group(paths: tuple[Path, Path]) -> None:
    md = run(paths, "--all-releases", "-f", "markdown", "--torch-npu", "2.1.0.post17").stdout
    section = md[md.index("## Every release"):]
    assert "Oldest release running the whole model on the NPU: **2.6.0.post5**" in section
    head = next(line for line in section.splitlines() if line.startswith("| op |"))
    # 2.1.0.post10 and 2.1.0.post17 resolve alike: one column
    assert head == ("| op | 1.11.0.post8 | 2.1.0.post10 – 2.1.0.post17 | "
                    "**2.6.0.post5** ★ |")
    assert "| `aten::isin.Tensor_Tensor` | cpu | cpu | **comp** |" in section
    assert "| `npu::npu_gelu` | NO | npu | **npu** |" in section


def test_table_renders_the_matrix_too(paths: tuple[Path, Path]) -> None:
    out = run(paths, "--all-releases", "--torch-npu", "2.1.0.post17").stdout
    assert "op\tG1\tG2\tG3*" in out
    assert "npu::npu_gelu\tNO\tnpu\tnpu" in out
    assert "G2: 2.1.0.post10 – 2.1.0.post17 (2 releases)" in out
    assert "oldest release running the whole model on the NPU: 2.6.0.post5" in out


def test_all_ops_lists_every_op(paths: tuple[Path, Path]) -> None:
    problems = run(paths, "--torch-npu", "2.1.0.post17").stdout
    every = run(paths, "--torch-npu", "2.1.0.post17", "--all-ops").stdout
    assert "aten::relu\t" not in problems
    assert "aten::relu\tnpu\t4\tfloat32\ttiny.py:7" in every
    md = run(paths, "--all-ops", "-f", "markdown").stdout
    assert "## All ops" in md and "| `aten::relu` | npu | 4 |" in md


def test_markdown_describes_target_and_model_with_relative_paths(
        paths: tuple[Path, Path]) -> None:
    md = run(paths, "-f", "markdown", "--torch-npu", "2.1.0.post17").stdout
    assert md.startswith("# NPU migration report: tiny.py\n")
    target = md[md.index("## Target"):md.index("## Model")]
    assert "| torch_npu | 2.1.0.post17 |" in target and "| CANN | 8.3.RC1 |" in target
    assert "- listing: runtime (runtime-dispatch), mode inference" in md
    assert "lib/masks.py:9" in md and ROOT not in md


def test_relative_locations() -> None:
    assert relative_location(f"{ROOT}/a/b.py:3", ROOT) == "a/b.py:3"
    assert relative_location("/elsewhere/b.py:3", ROOT) == "/elsewhere/b.py:3"
    assert relative_location("model.py:42", "") == "model.py:42"


def test_release_groups_fold_identical_columns() -> None:
    m = {"releases": ["a", "b", "c", "d"], "full_npu_releases": ["c", "d"],
         "ops": {"x": {"a": "cpu_fallback", "b": "cpu_fallback", "c": "npu", "d": "npu"},
                 "y": {"b": "npu", "c": "npu", "d": "npu"}}}
    groups = matrix_groups(m)
    assert [(g.releases, g.full_npu) for g in groups] == [
        (("a",), False), (("b",), False), (("c", "d"), True)]
    assert groups[0].statuses["y"] == ""  # not received there


def test_report_root_is_the_deepest_common_folder() -> None:
    from opcheck.checker.check import Finding, Report
    from opcheck.core.vocab import Status, Verdict

    rep = Report("/p/m.py", "runtime", "runtime-dispatch", {}, Verdict.YES, 0, {},
                 [Finding("aten::relu", Status.NPU, locations=["/p/sub/a.py:1"])])
    assert report_root(rep) == "/p"
