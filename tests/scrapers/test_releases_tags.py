"""Release tags beyond vX.Y.Z: rc trains, their hotfixes, the capital-V tag, and what the
tags add to the matrix (exact pins, inferred CANN, tag-vs-table disagreements).

``fixtures/releases/rc_tags.tsv`` holds the rows the tag list gives for the tags the old
pattern skipped, read from the Ascend/pytorch repository (version.txt or setup.py VERSION,
the third_party/op-plugin gitlink, .gitmodules branch, tag commit date).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.scrapers.releases import (
    CompatTable,
    MatrixResult,
    merge_matrix,
    parse_compat,
    parse_releases_tsv,
    parse_tag_name,
)
from opcheck.scrapers.rows import Origin, ReleaseTagRow
from opcheck.sync.sources import MirrorSource
from opcheck.sync.upstreams import compat_tables

# The releases the catalog approximated from op-plugin branch heads although their tag pins
# an op-plugin commit (the 13), with that pin.
FORMERLY_APPROXIMATED = {
    "1.11.0.post4": "186f4b87e2db4791a6ed697cea78d58a0ae92db1",
    "2.0.1": "186f4b87e2db4791a6ed697cea78d58a0ae92db1",
    "2.1.0.rc1": "186f4b87e2db4791a6ed697cea78d58a0ae92db1",
    "1.11.0.post7": "725c521edc14354bb7c37e2b493386cc64c53b86",
    "1.11.0.post11": "0200d703b71cd6ae6e727f70c7e7ea03ef554e3f",
    "2.2.0": "0200d703b71cd6ae6e727f70c7e7ea03ef554e3f",
    "1.11.0.post14": "b761d5824d7bc3f48033fe7120552cc2cfbce56d",
    "2.1.0.post6": "b761d5824d7bc3f48033fe7120552cc2cfbce56d",
    "2.2.0.post2": "b761d5824d7bc3f48033fe7120552cc2cfbce56d",
    "2.3.1": "b761d5824d7bc3f48033fe7120552cc2cfbce56d",
    "2.1.0.post8": "070332e65baff39923406c86d06eeb3e14047c6f",
    "2.3.1.post2": "070332e65baff39923406c86d06eeb3e14047c6f",
    "2.4.0": "070332e65baff39923406c86d06eeb3e14047c6f",
}


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("v7.2.0-pytorch2.1.0", ("7.2.0", "2.1.0")),
        ("v26.1.0-pytorch2.12.0", ("26.1.0", "2.12.0")),
        ("v6.0.rc2-pytorch2.3.1", ("6.0.rc2", "2.3.1")),
        ("v5.0.rc3.3-pytorch1.11.0", ("5.0.rc3.3", "1.11.0")),
        ("v6.0.rc2.1-pytorch2.2.0", ("6.0.rc2.1", "2.2.0")),
        ("V7.2.0.1-pytorch2.1.0", ("7.2.0.1", "2.1.0")),
        ("v3.0.RC1-pytorch1.8.1", ("3.0.rc1", "1.8.1")),  # trains are spelled as branches do
        # pre-release builds and other tags are not releases
        ("v6.0.RC1.alpha001-pytorch2.1.0", None),
        ("v7.2.RC1.alpha003-pytorch2.9.0", None),
        ("v5.0.0.alpha002-pytorch2.0.1", None),
        ("v26.1.0-beta.1-pytorch2.10.0", None),
        ("v26.2.0-0day-pytorch2.13.0", None),
        ("v3.0.alpha003-pytorch1.8.1", None),
        ("v2.0.3-rc1", None),
        ("v2.0.4", None),
        ("compatibility_release-pytorch2.13.0", None),
        ("v7.2.0-pytorch2.1", None),
    ],
)
def test_tag_names(name: str, want: tuple[str, str] | None) -> None:
    assert parse_tag_name(name) == want


def test_rc_fixture_trains_follow_from_the_tag_names(fixtures: Path) -> None:
    rows = _rc_rows(fixtures)
    assert len(rows) == 24
    for r in rows:
        assert parse_tag_name(r.tag) == (r.train, r.torch_version), r.tag


def _rc_rows(fixtures: Path) -> list[ReleaseTagRow]:
    text = (fixtures / "releases" / "rc_tags.tsv").read_text(encoding="utf-8")
    return parse_releases_tsv(text, origin=Origin("releases.tsv"))


def _tags(rows: list[tuple[str, ...]]) -> list[ReleaseTagRow]:
    return [ReleaseTagRow(*r, line=i) for i, r in enumerate(rows, start=2)]


_TABLE = """\
| CANN版本 | 支持的PyTorch版本 | 支持的Extension版本 | Gitee分支 |
|---|---|---|---|
| CANN 8.3.RC1 | 2.1.0 | 2.1.0.post17 | v2.1.0-7.2.0 |
| CANN 8.0.RC3 | 2.1.0 | 2.1.0.post8 | v2.1.0-6.0.rc3 |
|  | 2.4.0 | 2.4.0 | v2.4.0-6.0.rc3 |
| CANN 8.0.RC1 | 2.2.0 | 2.2.0 | v2.2.0-6.0.rc1 |
| CANN 7.0.0 | 1.11.0 | 1.11.0.post7 | v1.11.0-5.0.0 |
| CANN 7.0.RC1 | 1.11.0 | 1.11.0.post4 | v1.11.0-5.0.rc3 |
| CANN 5.1.RC1 | 1.8.1 | 1.8.1.rc1 | v1.8.1-3.0.rc1 |
"""


def _small_matrix(tags: list[ReleaseTagRow]) -> MatrixResult:
    compat, pythons = parse_compat(_TABLE, origin=Origin("fx/README.md"))
    return merge_matrix(tags, [CompatTable(Origin("fx/README.md"), tuple(compat), tuple(pythons))])


def test_rc_tags_give_exact_pins_and_inferred_cann() -> None:
    res = _small_matrix(_tags([
        ("v5.0.rc3-pytorch1.11.0", "5.0.rc3", "1.11.0", "1.11.0.post4", "186f4b8", "5.0.rc3",
         "2023-10-13"),
        ("v5.0.rc3.3-pytorch1.11.0", "5.0.rc3.3", "1.11.0", "1.11.0.post7", "725c521", "5.0.rc3",
         "2023-12-08"),
        ("v6.0.rc1-pytorch2.1.0", "6.0.rc1", "2.1.0", "2.1.0.post3", "0200d70", "6.0.rc1",
         "2024-04-18"),
        ("v6.0.rc3-pytorch2.1.0", "6.0.rc3", "2.1.0", "2.1.0.post8", "070332e", "6.0.rc3",
         "2024-10-28"),
        ("v7.2.0-pytorch2.1.0", "7.2.0", "2.1.0", "2.1.0.post17", "8286bfa", "7.2.0",
         "2025-10-23"),
        ("V7.2.0.1-pytorch2.1.0", "7.2.0.1", "2.1.0", "2.1.0.post18", "5a96cdd", "7.2.0",
         "2025-11-12"),
        # setup.py spelling of the 3.0.rc1 tag; the tables write 1.8.1.rc1
        ("v3.0.rc1-pytorch1.8.1", "3.0.rc1", "1.8.1", "1.8.1rc1", "", "", "2022-04-16"),
    ]))
    by = {r.torch_npu_version: r for r in res.rows}
    r = by["2.1.0.post8"]
    assert (r.train, r.op_plugin_commit, r.cann_version, r.cann_inferred) == (
        "6.0.rc3", "070332e", "8.0.RC3", False)
    # 2.1.0.post18: the capital-V hotfix tag, CANN of the train it fixes, marked inferred
    r = by["2.1.0.post18"]
    assert (r.tag, r.train, r.op_plugin_commit, r.cann_version, r.cann_inferred) == (
        "V7.2.0.1-pytorch2.1.0", "7.2.0.1", "5a96cdd", "8.3.RC1", True)
    # a later build of a tabled train no table names: its train's CANN, inferred
    assert (by["2.1.0.post3"].cann_version, by["2.1.0.post3"].cann_inferred) == ("8.0.RC1", True)
    # one release, not two spellings of it
    assert "1.8.1rc1" not in by and by["1.8.1.rc1"].tag == "v3.0.rc1-pytorch1.8.1"


def test_tag_beats_the_readme_row_for_1_11_0_post7() -> None:
    """The README lists 1.11.0.post7 under branch v1.11.0-5.0.0 (CANN 7.0.0) although the 5.0.0
    tag builds 1.11.0.post8; the tag v5.0.rc3.3-pytorch1.11.0 sets 1.11.0.post7 and pins 725c521.
    The tag's train and pin are kept and the disagreement is reported; that row's CANN is not
    evidence for the train of either."""
    res = _small_matrix(_tags([
        ("v5.0.rc3-pytorch1.11.0", "5.0.rc3", "1.11.0", "1.11.0.post4", "186f4b8", "5.0.rc3",
         "2023-10-13"),
        ("v5.0.rc3.3-pytorch1.11.0", "5.0.rc3.3", "1.11.0", "1.11.0.post7", "725c521", "5.0.rc3",
         "2023-12-08"),
        ("v5.0.rc3.2-pytorch1.11.0", "5.0.rc3.2", "1.11.0", "1.11.0.post6", "31cab77", "5.0.rc3",
         "2023-11-13"),
    ]))
    by = {r.torch_npu_version: r for r in res.rows}
    post7 = by["1.11.0.post7"]
    assert (post7.train, post7.op_plugin_commit, post7.op_plugin_branch) == (
        "5.0.rc3.3", "725c521", "5.0.rc3")
    assert [(c.field, c.kept, c.other, c.other_source) for c in res.conflicts
            if c.torch_npu_version == "1.11.0.post7"] == [
        ("train", "5.0.rc3.3", "5.0.0", "fx/README.md:7")]
    # the sibling hotfix takes the CANN of 5.0.rc3 (the train it fixes), not the 7.0.0 row's
    assert (by["1.11.0.post6"].cann_version, by["1.11.0.post6"].cann_inferred) == (
        "7.0.RC1", True)


def test_a_cell_with_two_adapters_is_two_rows() -> None:
    text = ("| AscendPyTorch版本 | CANN版本 | 支持PyTorch版本 |\n| :-- | :-- | :-- |\n"
            "| 2.0.4 | CANN 5.0.4 | 1.5.0.post4 |\n| 3.0.rc1 | CANN 5.0.4 | 1.5.0.post5，1.8.1.rc1 |\n")
    compat, _ = parse_compat(text, origin=Origin("README.zh.md"))
    assert [(c.torch_npu_version, c.torch_version, c.cann_version, c.line) for c in compat] == [
        ("1.5.0.post4", "1.5.0", "5.0.4", 3),
        ("1.5.0.post5", "1.5.0", "5.0.4", 4),
        ("1.8.1.rc1", "1.8.1", "5.0.4", 4),
    ]


# --- the real upstream files -----------------------------------------------------------------


@pytest.mark.upstream
def test_real_tag_names_parse(upstream: Path) -> None:
    """Every tag releases.tsv and torchair_pins.tsv name is a release tag, with the train and
    torch releases.tsv gives it (torchair_pins.tsv lists the rc-style and capital-V tags
    releases.tsv lacks)."""
    tsv = parse_releases_tsv((upstream / "releases.tsv").read_text(encoding="utf-8"),
                             origin=Origin("releases.tsv"))
    for t in tsv:
        assert parse_tag_name(t.tag) == (t.train, t.torch_version), t.tag
    lines = (upstream / "torchair_pins.tsv").read_text(encoding="utf-8").splitlines()[1:]
    names = [line.split("\t")[0] for line in lines if line.strip()]
    assert len(names) == 68  # awk 'NR>1' torchair_pins.tsv | wc -l
    parsed = {n: parse_tag_name(n) for n in names}
    assert [n for n, p in parsed.items() if p is None] == []
    # releases.tsv now lists the rc-style and capital-V tags too (102 tags): every tag
    # torchair_pins.tsv names is one of them
    assert sorted(set(names) - {t.tag for t in tsv}) == []
    assert {"V7.2.0.1-pytorch2.1.0", "v6.0.rc2.1-pytorch2.3.1"} <= {t.tag for t in tsv}
    assert parsed["v6.0.rc2.1-pytorch2.3.1"] == ("6.0.rc2.1", "2.3.1")


@pytest.mark.upstream
def test_real_tables_with_the_rc_tags(upstream: Path, fixtures: Path) -> None:
    """The real compatibility tables joined with the full tag list (releases.tsv holds the rc
    and hotfix tags since issue 26): the 13 releases the catalog approximated get their exact
    pins, 2.1.0.post18 is a release, hotfixes of rc trains get the CANN of their train, marked
    inferred. ``rc_tags.tsv`` (the fixture these tags were first added from) agrees."""
    source = MirrorSource(upstream)
    tags = parse_releases_tsv((upstream / "releases.tsv").read_text(encoding="utf-8"),
                              origin=Origin("releases.tsv"))
    rc = _rc_rows(fixtures)
    assert {(t.tag, t.op_plugin_commit) for t in rc} <= {(t.tag, t.op_plugin_commit)
                                                         for t in tags}
    tables = compat_tables(source, tags)
    finals = [t for t in tags if t.tag not in {r.tag for r in rc}]
    before = {r.torch_npu_version: r for r in merge_matrix(finals, tables).rows}
    res = merge_matrix(tags, tables)
    by = {r.torch_npu_version: r for r in res.rows}
    for version, pin in FORMERLY_APPROXIMATED.items():
        assert not before[version].op_plugin_commit, version  # final tags only: no pin
        assert by[version].op_plugin_commit == pin, version
        assert by[version].tag, version
    post18 = by["2.1.0.post18"]
    assert "2.1.0.post18" not in before
    assert (post18.train, post18.cann_version, post18.cann_inferred, post18.op_plugin_commit) == (
        "7.2.0.1", "8.3.RC1", True, "5a96cdd2776450dcc991cff5da70e000ade084f3")
    assert (by["1.11.0.post7"].train, by["1.11.0.post7"].op_plugin_commit) == (
        "5.0.rc3.3", "725c521edc14354bb7c37e2b493386cc64c53b86")
    assert any(c.torch_npu_version == "1.11.0.post7" and c.field == "train"
               and (c.kept, c.other) == ("5.0.rc3.3", "5.0.0") for c in res.conflicts)
    for version, cann in (("2.1.0.post7", "8.0.RC2"), ("2.3.1.post1", "8.0.RC2"),
                          ("2.1.0.post5", "8.0.RC1"), ("1.11.0.post5", "7.0.RC1")):
        assert (by[version].cann_version, by[version].cann_inferred) == (cann, True), version
    # tabled releases keep their table's CANN, not an inference
    assert (by["2.1.0.post8"].cann_version, by["2.1.0.post8"].cann_inferred) == ("8.0.RC3", False)
    # 10 releases only the tags know: 1.11.0.post5/6/13/15, 2.1.0.post3/5/7/18, 2.2.0.post3,
    # 2.3.1.post1 (v6.0.rc1.1-pytorch2.2.0 sets 2.2.0 again); none lost
    assert len(by) - len(before) == 10
    assert set(before) <= set(by)
