"""Tables adapt to where they are written: columns at 120 terminal columns, the compact layout
at 80, tab-separated lines with every id whole when piped; ``--format csv`` where a table is
the answer. The snapshots in ``snapshots/`` are the expected screens (trailing spaces
dropped); ``OPCHECK_UPDATE_SNAPSHOTS=1`` rewrites them after an intended change."""

from __future__ import annotations

import csv
import io
import os
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from typer.testing import CliRunner, Result

from opcheck.cli.app import app, route
from opcheck.cli.render import WIDTH_ENV, Column, Grid, show_grid
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog
from opcheck.db.data import ApiOpRec

SNAPSHOTS = Path(__file__).parent / "snapshots"
WIDTHS = {"80": "80", "120": "120", "piped": "0"}
LONG_ID = "aten::_native_multi_head_attention_with_a_very_long_overload_name.out"


@pytest.fixture(scope="module")
def cat_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data = small_catalog()
    data.api_ops += [ApiOpRec("torch.isin", "aten::isin.Tensor_Tensor"),
                     ApiOpRec("Tensor.relu", "aten::relu")]
    return write_catalog(data, tmp_path_factory.mktemp("tables") / "c.sqlite")


@pytest.fixture(scope="module")
def oplist_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = "/home/someone/project"
    ol = OpList(model=f"{root}/tiny.py", method="runtime", ir="runtime-dispatch",
                torch_version="2.6.0",
                ops=[OpUse("aten::relu", 4, ["float32"], locations=[f"{root}/tiny.py:7"]),
                     OpUse("aten::add.Tensor", 2, ["float32"]),
                     OpUse("aten::isin.Tensor_Tensor", 3, ["int64"],
                           locations=[f"{root}/tiny.py:42", f"{root}/lib/masks.py:9"]),
                     OpUse("npu::npu_gelu", 1)])
    p = tmp_path_factory.mktemp("tables") / "ops.json"
    p.write_text(ol.dumps())
    return p


def run(width: str, *args: str) -> Result:
    r = CliRunner().invoke(app, route(list(args)), env={WIDTH_ENV: width})
    assert r.exit_code in (0, 1), r.output
    return r


def matches_snapshot(name: str, text: str) -> None:
    got = "\n".join(line.rstrip() for line in text.splitlines()) + "\n"
    path = SNAPSHOTS / f"{name}.txt"
    if os.environ.get("OPCHECK_UPDATE_SNAPSHOTS"):
        path.write_text(got, encoding="utf-8")
    assert got == path.read_text(encoding="utf-8"), f"{name}: compare with {path}"


@pytest.mark.parametrize("width", WIDTHS)
def test_releases_table_snapshot(cat_path: Path, width: str) -> None:
    matches_snapshot(f"releases-{width}",
                     run(WIDTHS[width], "releases", "--catalog", str(cat_path)).stdout)


@pytest.mark.parametrize("width", WIDTHS)
def test_op_history_snapshot(cat_path: Path, width: str) -> None:
    r = run(WIDTHS[width], "op", "aten::isin.Tensor_Tensor_out", "--catalog", str(cat_path))
    matches_snapshot(f"op-{width}", r.stdout)


@pytest.mark.parametrize("width", WIDTHS)
def test_check_report_snapshot(cat_path: Path, oplist_path: Path, width: str) -> None:
    r = run(WIDTHS[width], str(oplist_path), "--catalog", str(cat_path), "--torch-npu",
            "2.1.0.post17", "--all-releases")
    matches_snapshot(f"check-{width}", r.stdout)


def test_piped_tables_keep_every_release_id_whole(cat_path: Path) -> None:
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    releases = [r.torch_npu for r in Catalog.load(open_catalog(cat_path)).releases]
    lines = run("0", "releases", "--catalog", str(cat_path)).stdout.splitlines()
    assert lines[0].split("\t")[0] == "torch_npu"
    assert [line.split("\t")[0] for line in lines[1:]] == releases
    # what `opcheck releases | grep -c 2.1.0.post` counts
    assert sum("2.1.0.post" in line for line in lines) == 2


@pytest.mark.parametrize("width", [None, 80, 120, 200])
def test_no_layout_splits_an_id(width: int | None) -> None:
    grid = Grid([Column("op"), Column("status"), Column("why", wrap=True, compact=False),
                 Column("workarounds", compact=False)])
    grid.add(LONG_ID, "cpu_fallback", "the NPU kernel rejects int64 inputs " * 6,
             "isin-eq-any-broadcast\nisin-via-searchsorted")
    buf = io.StringIO()
    show_grid(grid, file=buf, width=width)
    out = buf.getvalue()
    for ident in (LONG_ID, "isin-eq-any-broadcast", "isin-via-searchsorted", "cpu_fallback"):
        assert ident in out, (width, out)
    if width is not None:
        assert "int64 inputs" in out.replace("\n", " ")  # free text wraps at spaces only
        assert all(len(line.rstrip()) <= max(width, len(LONG_ID) + 16)
                   for line in out.splitlines())


def test_compact_layout_under_100_columns_and_columns_above() -> None:
    grid = Grid([Column("torch_npu"), Column("note", wrap=True, compact=False)])
    grid.add("2.6.0.post5", "kernel list from the wheel")
    narrow, wide = io.StringIO(), io.StringIO()
    show_grid(grid, file=narrow, width=80)
    show_grid(grid, file=wide, width=120)
    assert "    note: kernel list from the wheel" in narrow.getvalue()
    assert "note: " not in wide.getvalue() and "│" in wide.getvalue()


def test_piped_cells_never_hold_a_tab_or_newline() -> None:
    grid = Grid([Column("op"), Column("where")])
    grid.add("aten::relu", "a.py:1\nb.py:2")
    grid.add("aten::add.Tensor", "x\ty")
    buf = io.StringIO()
    show_grid(grid, file=buf, width=None)
    assert buf.getvalue().splitlines() == ["op\twhere", "aten::relu\ta.py:1, b.py:2",
                                           "aten::add.Tensor\tx y"]


@pytest.mark.parametrize("command", [["releases"], ["op", "isin.Tensor_Tensor_out"],
                                     ["diff", "2.1.0.post10", "2.6"]])
def test_csv_is_one_row_per_table_row(cat_path: Path, command: list[str]) -> None:
    piped = run("0", *command, "--catalog", str(cat_path)).stdout.splitlines()
    r = run("120", *command, "--catalog", str(cat_path), "--format", "csv")
    rows = list(csv.reader(io.StringIO(r.stdout)))
    tsv = [line.split("\t") for line in piped if "\t" in line]
    assert rows == tsv


def test_check_csv_lists_every_op(cat_path: Path, oplist_path: Path) -> None:
    r = run("120", str(oplist_path), "--catalog", str(cat_path), "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(r.stdout)))
    assert {row["op"] for row in rows} == {"aten::relu", "aten::add.Tensor",
                                           "aten::isin.Tensor_Tensor", "npu::npu_gelu"}
    isin = next(row for row in rows if row["op"] == "aten::isin.Tensor_Tensor")
    assert isin["where"] == "tiny.py:42; lib/masks.py:9"  # relative to the project folder


def test_piped_releases_of_the_bundled_catalog_grep_whole(bundled_catalog: Path) -> None:
    """`opcheck releases | grep -c 2.1.0.post` counts every 2.1.0.postN release."""
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    want = [r.torch_npu for r in Catalog.load(open_catalog(bundled_catalog)).releases]
    out = run("0", "releases", "--catalog", str(bundled_catalog)).stdout
    assert sum("2.1.0.post" in line for line in out.splitlines()) == sum(
        r.startswith("2.1.0.post") for r in want) > 10
    assert [line.split("\t", 1)[0] for line in out.splitlines()[1:]] == want
