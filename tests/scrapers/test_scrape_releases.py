from __future__ import annotations

import time
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.releases import (
    CompatTable,
    MatrixResult,
    compat_paths,
    merge_matrix,
    parse_compat,
    parse_releases_tsv,
)
from opcheck.scrapers.rows import CompatRow, Origin, PythonCompatRow


def _read(fixtures: Path, name: str) -> str:
    return (fixtures / "releases" / name).read_text(encoding="utf-8")


def _compat(fixtures: Path, name: str) -> tuple[list[CompatRow], list[PythonCompatRow]]:
    return parse_compat(_read(fixtures, name), origin=Origin(path=f"fx/{name}"))


# --- releases.tsv ---------------------------------------------------------------------------


def test_releases_tsv(fixtures: Path) -> None:
    rows = parse_releases_tsv(_read(fixtures, "releases.tsv"), origin=Origin("releases.tsv"))
    assert [r.tag for r in rows][:2] == ["v3.0.0-pytorch1.5.0", "v3.0.0-pytorch1.11.0"]
    assert rows[0].torch_npu_version == "" and rows[0].line == 2
    r = rows[2]
    assert (r.train, r.torch_version, r.torch_npu_version, r.op_plugin_branch, r.date) == (
        "7.2.0",
        "2.1.0",
        "2.1.0.post17",
        "7.2.0",
        "2025-10-23",
    )
    assert r.op_plugin_commit.startswith("8286bfa4") and r.line == 4


def test_releases_tsv_column_order_is_free() -> None:
    text = (
        "date\ttag\ttrain\ttorch_version\ttorch_npu_version\top_plugin_commit\top_plugin_branch\n"
    )
    text += "2024-01-01\tv5.0.0-pytorch2.1.0\t5.0.0\t2.1.0\t2.1.0\tabc\t5.0.0\n"
    (row,) = parse_releases_tsv(text, origin=Origin("releases.tsv"))
    assert row.date == "2024-01-01" and row.tag == "v5.0.0-pytorch2.1.0"


@pytest.mark.parametrize(
    ("header", "needle"),
    [
        (
            "tag\ttrain\ttorch_version\ttorch_npu_version\top_plugin_commit\top_plugin_branch\tdate\textra",
            "unknown column(s) extra",
        ),
        (
            "tag\ttrain\ttorch_version\ttorch_npu_version\top_plugin_commit\tdate",
            "missing column(s) op_plugin_branch",
        ),
    ],
)
def test_releases_tsv_strict_header(header: str, needle: str) -> None:
    with pytest.raises(ScrapeError) as e:
        parse_releases_tsv(header + "\n", origin=Origin("releases.tsv"))
    assert needle in str(e.value)
    assert str(e.value).startswith("releases.tsv:1: ")


def test_releases_tsv_short_row_names_line(fixtures: Path) -> None:
    text = _read(fixtures, "releases.tsv") + "v9-pytorch2.1.0\t9\n"
    with pytest.raises(
        ScrapeError, match=r"^releases\.tsv:8: expected 7 tab-separated cells, got 2"
    ):
        parse_releases_tsv(text, origin=Origin("releases.tsv"))


# --- compat tables: every layout ------------------------------------------------------------


def test_current_layout_with_details_and_python(fixtures: Path) -> None:
    compat, pythons = _compat(fixtures, "compatibility.md")
    assert [(c.torch_npu_version, c.torch_version, c.cann_version, c.branch) for c in compat] == [
        ("2.6.0.post3", "2.6.0", "8.3.RC1", "v2.6.0-7.2.0"),
        ("2.1.0.post17", "2.1.0", "8.3.RC1", "v2.1.0-7.2.0"),
        ("1.11.0.rc2", "1.11.0", "6.0.1", "v1.11.0-3.0.0"),  # inside <details>, "(beta)" dropped
        ("1.5.0.post3", "1.8.1", "5.0.3", "2.0.3.tr5"),  # verbatim; merge_matrix flags it
    ]
    assert compat[0].line == 14 and compat[2].line == 22
    assert [(p.torch_version, p.pythons, p.min_note) for p in pythons] == [
        ("2.6.0", ("3.9", "3.10", "3.11"), ""),
        ("2.1.0", ("3.8", "3.9", "3.10", "3.11"), ""),
        ("1.11.0", ("3.7", "3.8"), ">=3.7.5"),
    ]


def test_v5_layout_blank_cann_means_same_as_above(fixtures: Path) -> None:
    compat, pythons = _compat(fixtures, "readme_v5.md")
    assert [(c.torch_npu_version, c.torch_version, c.cann_version) for c in compat] == [
        ("2.1.0", "2.1.0", "7.0.0"),
        ("1.11.0.post8", "1.11.0", "7.0.0"),
        ("1.11.0.rc2", "1.11.0", "6.0.1"),  # "（beta)": mixed full/half-width parentheses
        ("1.5.0.post3", "1.8.1", "5.0.3"),
    ]
    # "Python3.7.x(>=3.7.5)" → 3.7 plus the qualifier; ".x" dropped
    assert pythons[0].pythons == ("3.7", "3.8", "3.9", "3.10") and pythons[0].min_note == ">=3.7.5"
    assert pythons[1] == PythonCompatRow("2.1.0", ("3.8", "3.9", "3.10"), line=6)


def test_english_extension_layout(fixtures: Path) -> None:
    compat, pythons = _compat(fixtures, "readme_en.md")
    assert [(c.torch_npu_version, c.cann_version, c.branch) for c in compat] == [
        ("2.10.0rc2", "8.5.0", "v2.10.0"),
        ("2.9.0", "8.5.0", "v2.9.0-7.3.0"),
        ("2.6.0.post3", "8.3.RC1", "v2.6.0-7.2.0"),
    ]
    assert pythons[0].pythons == ("3.10", "3.11", "3.12")


def test_v3_layout_pytorch_column_holds_adapter_version(fixtures: Path) -> None:
    compat, pythons = _compat(fixtures, "readme_v3.md")
    assert pythons == []
    # the stray trailing "\" cell is tolerated; torch version comes from the release name
    assert [(c.torch_npu_version, c.torch_version, c.cann_version, c.branch) for c in compat] == [
        ("1.5.0.post3", "1.5.0", "5.0.3", "2.0.3.tr5"),
        ("1.11.0.rc1", "1.11.0", "6.0.RC1", "v1.11.0-3.0.rc3"),
        ("1.11.0.rc2", "1.11.0", "6.0.0", "v1.11.0-3.0.0"),
    ]


def test_unknown_column_in_compat_table_names_file_and_line(fixtures: Path) -> None:
    with pytest.raises(ScrapeError) as e:
        _compat(fixtures, "bad_column.md")
    msg = str(e.value)
    assert msg.startswith("fx/bad_column.md:3: ") and "'发布日期'" in msg and "\n" not in msg


@pytest.mark.parametrize(
    ("table", "needle"),
    [
        (
            "| CANN版本 | 支持的PyTorch版本 | 支持的Extension版本 |\n|--|--|--|\n|  | 2.1.0 | 2.1.0 |\n",
            "first row has an empty CANN cell",
        ),
        (
            "| CANN版本 | 支持的PyTorch版本 | 支持的Extension版本 |\n|--|--|--|\n| CANN 8.0.0 | 2.1.0 |\n",
            "row has 2 cells, header has 3",
        ),
        (
            "| CANN版本 | 支持的PyTorch版本 | 支持的Extension版本 |\n|--|--|--|\n| CANN 8.0.0 | 2.1.0 | 2.1.0 | v2.1.0 |\n",
            "row has 4 cells",
        ),
        (
            "| CANN版本 | 支持的PyTorch版本 | 支持的Extension版本 |\n|--|--|--|\n| CANN 8.0.0 | two | 2.1.0 |\n",
            "not a PyTorch version: 'two'",
        ),
        (
            "| CANN版本 | 支持的PyTorch版本 |\n|--|--|\n| CANN 8.0.0 | 2.1.0 |\n",
            "lacks a torch_npu or CANN column",
        ),
        (
            "| PyTorch版本 | Python版本 |\n|--|--|\n| PyTorch2.1.0 | 不支持 |\n",
            "no Python version in '不支持'",
        ),
    ],
)
def test_malformed_tables(table: str, needle: str) -> None:
    with pytest.raises(ScrapeError, match=r"^x\.md:\d+: ") as e:
        parse_compat("# t\n\n" + table, origin=Origin("x.md"))
    assert needle in str(e.value)


def test_non_compat_tables_are_ignored() -> None:
    text = "| 架构 | Python版本 | 下载链接 |\n|---|---|---|\n| x86 | Python3.8 | [whl](u) |\n"
    text += "\n| **PyTorch** | **Maintenance Policies** |\n|---|---|\n| 2.1.0 | Regular |\n"
    assert parse_compat(text, origin=Origin("x.md")) == ([], [])


# --- merge ----------------------------------------------------------------------------------


def _fixture_matrix(fixtures: Path) -> MatrixResult:
    tags = parse_releases_tsv(_read(fixtures, "releases.tsv"), origin=Origin("releases.tsv"))
    tables = [
        CompatTable(Origin(f"fx/{n}"), *map(tuple, _compat(fixtures, n)))
        for n in ("compatibility.md", "readme_en.md", "readme_v5.md", "readme_v3.md")
    ]
    return merge_matrix(tags, tables)


def test_merge_one_row_per_release(fixtures: Path) -> None:
    res = _fixture_matrix(fixtures)
    by = {r.torch_npu_version: r for r in res.rows}
    assert len(by) == len(res.rows)
    r = by["2.1.0.post17"]
    assert (r.tag, r.train, r.cann_version, r.pythons, r.branch) == (
        "v7.2.0-pytorch2.1.0",
        "7.2.0",
        "8.3.RC1",
        ("3.8", "3.9", "3.10", "3.11"),
        "v2.1.0-7.2.0",
    )
    assert r.sources[0] == "releases.tsv" and "fx/compatibility.md" in r.sources
    # a release only the tables know has no tag; train comes from its branch name
    assert by["2.10.0rc2"].tag == "" and by["2.9.0"].train == "7.3.0"
    # newest first
    assert res.rows[0].torch_npu_version == "2.10.0rc2"


def test_merge_newer_wins_and_conflicts_are_reported(fixtures: Path) -> None:
    res = _fixture_matrix(fixtures)
    by = {r.torch_npu_version: r for r in res.rows}
    assert by["1.11.0.rc2"].cann_version == "6.0.1"  # compatibility.md beats readme_v3 (6.0.0)
    texts = [str(c) for c in res.conflicts]
    assert any(
        c.torch_npu_version == "1.11.0.rc2"
        and c.field == "cann_version"
        and (c.kept, c.other) == ("6.0.1", "6.0.0")
        and c.other_source == "fx/readme_v3.md:6"
        for c in res.conflicts
    ), texts
    # the 1.5.0.post3 / PyTorch 1.8.1 typo is overridden by the release name, and reported
    assert by["1.5.0.post3"].torch_version == "1.5.0"
    assert any(c.field == "torch_version" and c.other == "1.8.1" for c in res.conflicts)
    # Python tables: compatibility.md (newest) has 3.11 for torch 2.1.0, readme_v5 does not
    assert any(c.field == "pythons" and c.torch_npu_version == "torch 2.1.0" for c in res.conflicts)
    # identical facts repeated by several files are not conflicts
    assert not any(c.torch_npu_version == "2.6.0.post3" for c in res.conflicts)


def test_merge_missing_cann_and_hotfix_inference(fixtures: Path) -> None:
    res = _fixture_matrix(fixtures)
    by = {r.torch_npu_version: r for r in res.rows}
    hotfix = by["2.6.0.post4"]  # train 7.2.0.1, in no table
    assert hotfix.cann_version == "8.3.RC1" and hotfix.cann_inferred
    assert by["2.9.0.post1"].cann_version == "" and not by["2.9.0.post1"].cann_inferred
    assert res.tags_without_cann() == ["v7.3.1-pytorch2.9.0", "v7.2.0.1-pytorch2.6.0"]
    # the tag without a torch_npu version (v3.0.0-pytorch1.5.0) is not a release row
    assert all(r.tag != "v3.0.0-pytorch1.5.0" for r in res.rows)


def test_compat_paths_order_newest_first(fixtures: Path) -> None:
    tags = parse_releases_tsv(_read(fixtures, "releases.tsv"), origin=Origin("releases.tsv"))
    paths = compat_paths(tags, refs=["v2.1.0-7.2.0", "master"])
    assert paths[0] == "github/Ascend/pytorch/master/COMPATIBILITY.md"
    assert paths[4] == "github/Ascend/pytorch/v7.3.1-pytorch2.9.0/README.zh.md"
    assert paths[-1] == "github/Ascend/pytorch/v2.1.0-7.2.0/README.md"


# --- the real snapshot ----------------------------------------------------------------------


@pytest.mark.upstream
def test_real_releases_tsv(upstream: Path) -> None:
    rows = parse_releases_tsv(
        (upstream / "releases.tsv").read_text(encoding="utf-8"), origin=Origin("releases.tsv")
    )
    lines = [ln.split("\t") for ln in
             (upstream / "releases.tsv").read_text(encoding="utf-8").splitlines()[1:] if ln]
    assert len(rows) == len(lines) == 102  # 64 final tags + 38 rc/hotfix tags (issue 26)
    # the v3.0.*-pytorch1.5.0 tags name no torch_npu version (awk -F'\t' '$4==""' → 4)
    assert sum(1 for r in rows if r.torch_npu_version) == sum(1 for c in lines if c[3]) == 98


@pytest.mark.upstream
def test_real_every_table_file_parses(upstream: Path) -> None:
    """Every README*/COMPATIBILITY* of the snapshot parses; counts checked with grep."""
    base = upstream / "github" / "Ascend" / "pytorch"
    files = sorted(p for p in base.glob("*/*.md") if p.name.startswith(("README", "COMPATIBILITY")))
    # find -maxdepth 2 \( -name 'README*' -o -name 'COMPAT*' \): one ref folder each
    assert len(files) == sum(1 for ref in base.iterdir() for f in ref.iterdir()
                             if f.is_file() and f.name.startswith(("README", "COMPATIBILITY")))
    assert len(files) > 180
    t0 = time.perf_counter()
    counts = {}
    for f in files:
        rel = str(f.relative_to(upstream))
        compat, pythons = parse_compat(f.read_text(encoding="utf-8"), origin=Origin(rel))
        counts[rel] = (len(compat), len(pythons))
    assert time.perf_counter() - t0 < 2.0
    master = "github/Ascend/pytorch/master/"
    # grep -c '^| .*| *CANN [0-9]' COMPATIBILITY.md → 62; grep -c '^| *PyTorch [0-9]' → 14
    assert counts[master + "COMPATIBILITY.md"] == (62, 14)
    assert counts[master + "COMPATIBILITY.en.md"] == (62, 14)
    assert counts[master + "README.md"] == (0, 0)
    # 13 rows with a CANN cell + 13 continuation rows with a blank one
    assert counts["github/Ascend/pytorch/v5.0.0-pytorch1.11.0/README.zh.md"] == (26, 3)
    assert counts["github/Ascend/pytorch/v3.0.0-pytorch1.11.0/README.zh.md"] == (13, 0)
    # the 26.x Chinese READMEs moved their tables out (grep -c CANN → 0)
    assert counts["github/Ascend/pytorch/v26.1.0-pytorch2.9.0/README.zh.md"] == (0, 0)
