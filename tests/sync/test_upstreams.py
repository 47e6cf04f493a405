"""The upstream classes of a sync, and the registry collect() iterates."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.scrapers.releases import parse_releases_tsv
from opcheck.scrapers.rows import Origin
from opcheck.sync.context import SyncContext
from opcheck.sync.pipeline import collect
from opcheck.sync.sources import MirrorSource
from opcheck.sync.upstreams import UPSTREAMS, Upstream, compat_tables, load_matrix


def _read(fixtures: Path, name: str) -> str:
    return (fixtures / "releases" / name).read_text(encoding="utf-8")


# Patch / hotfix releases that no table in the snapshot lists (checked: grep -rl
# '2\.6\.0\.post4' --include=*.md finds nothing). 14 of them are four-part hotfix trains
# whose CANN is inferred from the base train.
NO_CANN_IN_ANY_TABLE = {
    "v26.0.1-pytorch2.10.0", "v26.0.1-pytorch2.9.0", "v26.0.1-pytorch2.8.0",
    "v26.0.1-pytorch2.7.1", "v7.3.1-pytorch2.9.0", "v7.3.1-pytorch2.8.0",
    "v7.3.1-pytorch2.7.1", "v7.3.1-pytorch2.6.0", "v7.2.0.1-pytorch2.8.0",
    "v7.2.0.1-pytorch2.7.1", "v7.2.0.1-pytorch2.6.0", "v7.1.0.2-pytorch2.6.0",
    "v7.1.0.1-pytorch2.6.0", "v7.1.0.2-pytorch2.5.1", "v7.1.0.1-pytorch2.5.1",
    "v7.0.0.1-pytorch2.4.0", "v6.0.0.1-pytorch2.4.0", "v6.0.0.1-pytorch2.3.1",
    "v7.1.0.2-pytorch2.1.0", "v7.0.0.1-pytorch2.1.0", "v7.1.0.1-pytorch2.1.0",
    "v6.0.0.1-pytorch2.1.0", "v5.0.1.1-pytorch2.1.0", "v5.0.1-pytorch2.1.0",
    "v5.0.1.2-pytorch2.0.1", "v5.0.1.1-pytorch2.0.1", "v5.0.1-pytorch2.0.1",
    "v5.0.1.2-pytorch1.11.0", "v5.0.1.1-pytorch1.11.0", "v5.0.1-pytorch1.11.0",
}  # fmt: skip


@pytest.mark.upstream
def test_real_matrix(upstream: Path) -> None:
    res, tags, tables = load_matrix(MirrorSource(upstream))
    assert tables[0].origin.path == "github/Ascend/pytorch/master/COMPATIBILITY.md"
    by_tag = {r.tag: r for r in res.rows if r.tag}
    released = [t for t in tags if t.torch_npu_version]
    # every release tag is a row (the v3.0.*-pytorch1.5.0 tags, which name no version, on the
    # release their table branch lists), and carries a CANN version whenever a table gives one
    assert set(by_tag) == {t.tag for t in tags}
    assert by_tag["v3.0.rc1-pytorch1.5.0"].torch_npu_version == "1.5.0.post5"
    # plus the rc-train hotfix tags releases.tsv has listed since issue 26 (no table names
    # them either: their CANN is their train's, inferred)
    hotfixes = {t.tag for t in tags if t.tag.startswith("V")
                or (".rc" in t.train and t.train.count(".") == 3)}
    no_cann = NO_CANN_IN_ANY_TABLE | (
        hotfixes - {"v5.0.rc2.1-pytorch1.11.0", "v5.0.rc2.2-pytorch1.11.0",
                    "v5.0.rc3.3-pytorch1.11.0"})  # these three are in the tables
    assert set(res.tags_without_cann()) == no_cann
    for t in released:
        if t.tag not in no_cann:
            assert by_tag[t.tag].cann_version and not by_tag[t.tag].cann_inferred, t.tag
    assert sum(1 for r in res.rows if r.cann_inferred) == 24  # 14 + the 10 hotfixes above
    r = by_tag["v7.2.0-pytorch2.1.0"]
    assert (r.torch_npu_version, r.cann_version, r.branch) == (
        "2.1.0.post17",
        "8.3.RC1",
        "v2.1.0-7.2.0",
    )
    assert r.pythons == ("3.8", "3.9", "3.10", "3.11")
    assert by_tag["v26.1.0-pytorch2.12.0"].cann_version == "9.1.0"
    assert by_tag["v7.2.0.1-pytorch2.6.0"].cann_version == "8.3.RC1"  # inferred from 7.2.0
    # older releases known only from tables (1.5.0.post2 …) are rows too
    assert len(res.rows) == 111  # 100 + 2.2.0.post1 and the ten releases issue 26 lists
    # conflicts between tables (newest wins), as found in the snapshot
    cann = {
        (c.torch_npu_version, c.kept, c.other) for c in res.conflicts if c.field == "cann_version"
    }
    assert cann == {
        ("1.5.0.post8", "6.0.1", "6.0.0"),
        ("1.8.1", "6.0.1", "6.0.0"),
        ("1.11.0.rc2", "6.0.1", "6.0.0"),
        # the v3.0.rc1 READMEs (mirrored since issue 26) say 5.0.4; COMPATIBILITY.md 5.1.RC1
        ("1.5.0.post5", "5.1.RC1", "5.0.4"),
        ("1.8.1.rc1", "5.1.RC1", "5.0.4"),
    }
    torch = [c for c in res.conflicts if c.field == "torch_version"]
    assert [(c.torch_npu_version, c.kept, c.other) for c in torch] == [
        ("1.5.0.post3", "1.5.0", "1.8.1")
    ]
    assert {c.torch_npu_version for c in res.conflicts if c.field == "pythons"} == {
        "torch 2.1.0", "torch 2.6.0", "torch 2.7.1", "torch 2.8.0", "torch 2.9.0",
        "torch 2.10.0", "torch 2.11.0", "torch 2.12.0",
        "torch 2.3.1",  # v6.0.rc2.1-pytorch2.3.1's README: no 3.11 yet
    }  # fmt: skip


def test_compat_tables_on_a_small_mirror(tmp_path: Path, fixtures: Path) -> None:
    (tmp_path / "releases.tsv").write_text(_read(fixtures, "releases.tsv"), encoding="utf-8")
    master = tmp_path / "github/Ascend/pytorch/master"
    master.mkdir(parents=True)
    (master / "COMPATIBILITY.md").write_text(_read(fixtures, "compatibility.md"), encoding="utf-8")
    old = tmp_path / "github/Ascend/pytorch/v3.0.0-pytorch1.11.0"
    old.mkdir(parents=True)
    (old / "README.zh.md").write_text(_read(fixtures, "readme_v3.md"), encoding="utf-8")
    src = MirrorSource(tmp_path)
    tags = parse_releases_tsv(src.fetch("releases.tsv").text, origin=Origin("releases.tsv"))
    tables = compat_tables(src, tags)
    assert [t.origin.path for t in tables] == [
        "github/Ascend/pytorch/master/COMPATIBILITY.md",
        "github/Ascend/pytorch/v3.0.0-pytorch1.11.0/README.zh.md",
    ]
    assert len(tables[0].origin.sha256) == 64


# --- the registry ------------------------------------------------------------------------------


def test_every_upstream_says_what_it_reads_parses_and_adds() -> None:
    assert type(UPSTREAMS[0]).__name__ == "ReleaseMatrix"  # the others build on it
    for u in UPSTREAMS:
        assert isinstance(u, Upstream)
        assert u.name and u.reads and u.adds, type(u).__name__
        for module in u.parser.replace(" (codegen)", "").split(", "):
            assert module.startswith("opcheck.scrapers."), (type(u).__name__, module)
            __import__(module)


class _Readme:
    """A new upstream as a contributor would add it: fetch, parse, add, with provenance."""

    name = "readme"
    reads = "github/Ascend/pytorch/master/README.md"
    parser = "opcheck.scrapers.releases"
    adds = "a note per release the matrix knows"

    def __init__(self) -> None:
        self.seen_releases = 0

    def collect(self, ctx: SyncContext) -> None:
        self.seen_releases = len(ctx.matrix.rows)  # runs after the matrix
        got, sid = ctx.fetch("releases.tsv", self.name)
        ctx.count(sid, len(parse_releases_tsv(got.text, origin=got.origin)))
        ctx.notes.append(f"{self.name}: {self.seen_releases} releases")


def test_a_registered_upstream_runs_in_order_with_provenance(fixtures: Path, tmp_path: Path) -> None:
    from opcheck.scrapers.pytorch import parse_native_functions
    from opcheck.sync.universe import Universe

    origin = Origin("torchgen/packaged/ATen/native/native_functions.yaml", ref="torch-test")
    universe = Universe(parse_native_functions((fixtures / "universe.yaml").read_text(),
                                               origin=origin), "2.6.0", origin)
    extra = _Readme()
    res = collect(MirrorSource(fixtures / "mirror"), universe=universe,
                  upstreams=[UPSTREAMS[0], extra])
    assert res.failures == []
    assert extra.seen_releases == 3 and res.notes == ["readme: 3 releases"]
    src = next(s for s in res.data.sources if s.scraper == "readme")
    assert src.path == "releases.tsv" and len(src.sha256) == 64 and src.rows == 2  # two tags
    # only what the two upstreams add: no kernels, no operators
    assert res.data.kernels == [] and res.data.operators == [] and res.data.pythons


def test_load_matrix_reads_the_release_list_once_per_call(fixtures: Path) -> None:
    res, tags, tables = load_matrix(MirrorSource(fixtures / "mirror"))
    assert {r.torch_npu_version for r in res.rows} >= {"2.1.0.post17"}
    assert tags and tables
