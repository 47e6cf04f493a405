"""The catalog built from the real upstream snapshot in ../shared/upstream (skips when absent)."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest
from testpaths import ROOT

from opcheck.db.snapshot import snapshot_equal, write_snapshot
from opcheck.sync.pipeline import SyncResult

ROOT = ROOT

pytestmark = pytest.mark.upstream


@pytest.fixture(scope="module")
def synced(upstream_synced: SyncResult) -> SyncResult:
    return upstream_synced  # one sync per session (tests/sync/conftest.py)


def test_no_source_fails(synced: SyncResult) -> None:
    assert synced.failures == []


def test_every_release_tag_is_in_the_catalog_with_its_cann(synced: SyncResult, upstream: Path) -> None:
    with (upstream / "releases.tsv").open() as fh:
        tags = [r for r in csv.DictReader(fh, delimiter="\t") if r["torch_npu_version"]]
    # old tags spell the version as setup.py did (1.8.1rc1): the release row is found by tag
    rels = {r.tag: r for r in synced.data.releases if r.tag}
    for t in tags:
        rel = rels[t["tag"]]
        assert rel.torch_npu.replace(".", "") == t["torch_npu_version"].replace(".", "").replace(
            "11rc", "110rc")
        # Tags before op-plugin existed (3.0.x, 5.0.rc1/rc2) pin no op-plugin commit: their
        # own npu_native_functions.yaml lists every kernel.
        expected = ("wheel", "op_plugin") if t["op_plugin_commit"] else ("npu_native",)
        assert rel.kernel_source in expected, t["tag"]
    # Tables name a CANN version for these trains; hotfix trains (5.0.1, 7.3.1, 26.0.1, ...)
    # appear in no table, so their CANN is the base train's (inferred) or unknown.
    by_tag = {r.tag: r for r in synced.data.releases if r.tag}
    assert by_tag["v7.2.0-pytorch2.1.0"].cann == "8.3.RC1"
    assert by_tag["v26.1.0-pytorch2.12.0"].cann == "9.1.0"
    assert by_tag["v5.0.0-pytorch1.11.0"].cann == "7.0.0"
    with_table_cann = [t for t in tags if t["train"].count(".") == 2
                       and t["train"] not in ("5.0.1", "7.3.1", "26.0.1")]
    assert all(by_tag[t["tag"]].cann for t in with_table_cann)
    # 22 tags of rc trains (awk -F'\t' '$4!="" && $2~/rc/ && split($2,a,".")==3') and 32 of
    # final trains: 3.0.0: 2, 5.0.0: 3, 6.0.0: 3, 7.0.0: 4, 7.1.0: 3, 7.2.0: 4, 7.3.0: 4, 26.0.0: 4, 26.1.0: 5
    assert len(with_table_cann) == 22 + 32


def test_wheels_are_the_kernel_source_where_published(synced: SyncResult, upstream: Path) -> None:
    wheels = {p.name for p in (upstream / "pypi" / "torch-npu").iterdir()}
    rels = {r.torch_npu: r for r in synced.data.releases}
    assert {v for v, r in rels.items() if r.kernel_source == "wheel"} == wheels
    assert rels["2.13.0"].torch == "2.13.0"  # from the wheel's METADATA, no tag needed


def test_committed_snapshot_is_what_the_mirror_builds(synced: SyncResult, tmp_path: Path) -> None:
    write_snapshot(synced.data, tmp_path)
    assert snapshot_equal(tmp_path, ROOT / "data" / "snapshot") == [], (
        "data/snapshot is stale: run `make catalog MIRROR=../shared/upstream`"
    )
