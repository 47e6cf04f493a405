"""`opcheck sync`: collecting a mirror into a catalog, atomically, with loud failures."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from opcheck.checker.resolve import Resolver
from opcheck.cli.app import app
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.engine import open_catalog
from opcheck.db.snapshot import read_snapshot, snapshot_equal, write_snapshot
from opcheck.scrapers.pytorch import parse_native_functions
from opcheck.scrapers.rows import Origin
from opcheck.sync.pipeline import Universe, collect
from opcheck.sync.sources import MirrorSource

runner = CliRunner()


@pytest.fixture
def universe(fixtures: Path) -> Universe:
    origin = Origin("torchgen/packaged/ATen/native/native_functions.yaml", ref="torch-test")
    text = (fixtures / "universe.yaml").read_text()
    return Universe(parse_native_functions(text, origin=origin), "2.6.0", origin)


@pytest.fixture
def mirror(fixtures: Path, tmp_path: Path) -> Path:
    dest = tmp_path / "mirror"
    shutil.copytree(fixtures / "mirror", dest)
    return dest


def test_collect_picks_the_most_exact_kernel_source(mirror: Path, universe: Universe) -> None:
    res = collect(MirrorSource(mirror), universe=universe)
    assert res.failures == []
    rels = {r.torch_npu: r for r in res.data.releases}
    assert {v: r.kernel_source for v, r in rels.items()} == {
        "1.11.0.post8": "op_plugin", "2.1.0.post17": "op_plugin", "2.6.0.post5": "wheel"}
    assert rels["2.1.0.post17"].cann == "8.3.RC1"
    assert rels["2.1.0.post17"].pythons == "3.8,3.9,3.10,3.11"
    assert not rels["1.11.0.post8"].has_cpu_fallback and rels["2.1.0.post17"].has_cpu_fallback
    facts = {(k.op, k.release): k.facts for k in res.data.kernels}
    # combined format: relu has op_api only from v2.2, so 2.1 is acl_op only
    assert facts[("aten::relu", "2.1.0.post17")].op_api is False
    assert facts[("aten::add.out", "2.1.0.post17")].aclnn == "aclnnAdd"
    assert facts[("aten::isin.Tensor_Tensor_out", "1.11.0.post8")].status == "tocpu"
    assert facts[("aten::conj", "1.11.0.post8")].status == "unsupported"
    assert facts[("aten::copy_", "2.1.0.post17")].native  # from the tag's npu_native_functions
    assert ("aten::isin.Tensor_Tensor_out", "2.1.0.post17") not in facts
    assert facts[("aten::isin.Tensor_Tensor_out", "2.6.0.post5")].op_api
    # provenance: every kernel fact points at an existing source file
    paths = {s.id: s.path for s in res.data.sources}
    assert paths[next(k.source_id for k in res.data.kernels
                      if k.release == "2.6.0.post5" and k.source_id)].startswith("pypi/torch-npu/")
    assert all(k.source_id in paths for k in res.data.kernels)
    assert [d.op for d in res.data.deprecations] == ["npu::npu_silu"]


def test_catalog_from_mirror_answers_questions(mirror: Path, universe: Universe,
                                               tmp_path: Path) -> None:
    data = collect(MirrorSource(mirror), universe=universe).data
    cat = Catalog.load(open_catalog(write_catalog(data, tmp_path / "c.sqlite")))
    r = Resolver(cat, "2.1.0.post17").resolve_many(
        ["aten::isin.Tensor_Tensor", "aten::add.Tensor", "aten::copy_", "npu::npu_gelu"])
    by = {x.op: x for x in r}
    assert by["aten::isin.Tensor_Tensor"].status == "cpu_fallback"
    assert by["aten::isin.Tensor_Tensor"].first_npu_any == "2.6.0.post5"
    assert by["aten::add.Tensor"].status == "composite"
    assert by["aten::copy_"].kernel == "aclnn"  # native registration with op_api
    assert by["npu::npu_gelu"].aclnn == "aclnnGeluV2"
    # snapshot round trip of real-shaped data is stable
    write_snapshot(data, tmp_path / "s1")
    write_snapshot(read_snapshot(tmp_path / "s1"), tmp_path / "s2")
    assert snapshot_equal(tmp_path / "s1", tmp_path / "s2") == []


def _sync(mirror: Path, catalog: Path, *extra: str) -> object:
    return runner.invoke(app, ["sync", "--mirror", str(mirror), "--catalog", str(catalog), *extra])


@pytest.mark.torch
def test_sync_cli_writes_catalog_and_snapshot(mirror: Path, tmp_path: Path) -> None:
    pytest.importorskip("torchgen")
    cat = tmp_path / "c.sqlite"
    r = _sync(mirror, cat, "--snapshot", str(tmp_path / "snap"))
    assert r.exit_code == 0, r.output
    assert "3 releases (3 with kernel lists)" in r.output
    assert (tmp_path / "snap" / "kernels.tsv").is_file()
    op = runner.invoke(app, ["op", "aten::isin.Tensor_Tensor_out", "--catalog", str(cat),
                             "--format", "json"])
    doc = json.loads(op.output)
    assert doc["first_npu_release"] == "2.6.0.post5"
    assert [x["status"] for x in doc["releases"]] == ["cpu_fallback", "cpu_fallback", "npu"]


def _break(mirror: Path, how: str) -> str:
    f = mirror / "github/Ascend/op-plugin/c210c210/op_plugin/config/op_plugin_functions.yaml"
    if how == "malformed":
        f.write_text(f.read_text().replace("    op_api: [v2.2, newest]", "    op_api: [v2.2, newest"))
    elif how == "truncated":
        text = f.read_text()
        f.write_text(text[: text.index("[v2.2, newest]") + 8])
    elif how == "unknown key":
        f.write_text(f.read_text().replace("    acl_op: all_version\n    op_api: [v2.2",
                                           "    acl_op: all_version\n    fast_path: yes\n    op_api: [v2.2"))
    elif how == "missing":
        f.unlink()
    return "github/Ascend/op-plugin/c210c210"


@pytest.mark.parametrize("how", ["malformed", "truncated", "unknown key", "missing"])
def test_broken_source_fails_loudly_and_keeps_old_catalog(
    mirror: Path, tmp_path: Path, universe: Universe, how: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import opcheck.sync.pipeline as sync_mod

    monkeypatch.setattr(sync_mod, "installed_universe", lambda: universe)
    cat = tmp_path / "c.sqlite"
    assert _sync(mirror, cat).exit_code == 0
    before = cat.read_bytes()
    where = _break(mirror, how)
    r = _sync(mirror, cat)
    assert r.exit_code == 1, r.output
    assert where in r.output and "the catalog was not replaced" in r.output
    assert "Traceback" not in r.output
    assert cat.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_mirror_manifest_catches_a_copy_cut_at_a_line_boundary(
    mirror: Path, universe: Universe
) -> None:
    import hashlib

    rel = "github/Ascend/op-plugin/c210c210/op_plugin/config/op_plugin_functions.yaml"
    f = mirror / rel
    digest = hashlib.sha256(f.read_bytes()).hexdigest()
    (mirror / "MANIFEST.tsv").write_text(
        f"path\trepo\tref\tcommit\tsha256\n{rel}\tAscend/op-plugin\tc210c210\tc210c210\t{digest}\n")
    assert collect(MirrorSource(mirror), universe=universe).failures == []
    text = f.read_text()
    f.write_text(text[: text.index("  - func: relu")])  # still valid YAML, one op short
    failures = collect(MirrorSource(mirror), universe=universe).failures
    assert len(failures) == 1 and rel in failures[0] and "truncated or modified" in failures[0]


def test_save_mirror_round_trips(mirror: Path, tmp_path: Path, universe: Universe) -> None:
    from opcheck.sync.sources import SavingSource

    saved = tmp_path / "saved"
    first = collect(SavingSource(MirrorSource(mirror), saved), universe=universe)
    again = collect(MirrorSource(saved), universe=universe)
    assert again.failures == []
    key = lambda d: sorted((k.op, k.release, k.facts) for k in d.kernels)  # noqa: E731
    assert key(again.data) == key(first.data)
    assert (saved / "MANIFEST.tsv").read_text().count("op_plugin_functions.yaml") >= 2


def test_sync_usage_errors(tmp_path: Path) -> None:
    r = runner.invoke(app, ["sync"])
    assert r.exit_code == 2 and "--mirror" in r.output
    r = runner.invoke(app, ["sync", "--mirror", str(tmp_path / "nope")])
    assert r.exit_code == 2 and "does not exist" in r.output


def test_mirror_without_release_list_is_an_error(tmp_path: Path, universe: Universe,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    import opcheck.sync.pipeline as sync_mod

    monkeypatch.setattr(sync_mod, "installed_universe", lambda: universe)
    (tmp_path / "m").mkdir()
    r = _sync(tmp_path / "m", tmp_path / "c.sqlite")
    assert r.exit_code == 2 and "releases.tsv" in r.output


def test_run_sync_writes_only_when_nothing_failed(
    mirror: Path, tmp_path: Path, universe: Universe, monkeypatch: pytest.MonkeyPatch
) -> None:
    import opcheck.sync.pipeline as sync_mod
    from opcheck.sync.pipeline import SyncOptions, run_sync

    monkeypatch.setattr(sync_mod, "installed_universe", lambda: universe)
    seen: list[int] = []
    opts = SyncOptions(mirror=(mirror,), catalog=tmp_path / "c.sqlite", snapshot=tmp_path / "snap")
    out = run_sync(opts, before_write=lambda data: seen.append(len(data.releases)))
    assert out.catalog == tmp_path / "c.sqlite" and out.catalog.is_file()
    assert out.snapshot == tmp_path / "snap" and (tmp_path / "snap" / "releases.tsv").is_file()
    assert seen == [3]
    _break(mirror, "unknown key")
    again = run_sync(SyncOptions(mirror=(mirror,), catalog=tmp_path / "d.sqlite"),
                     before_write=lambda data: seen.append(0))
    assert again.catalog is None and again.result.failures and seen == [3]
    assert not (tmp_path / "d.sqlite").exists()


def test_live_wheels_asks_for_every_release_since_the_first_published_wheel(mirror: Path) -> None:
    from opcheck.sync.pipeline import live_wheels

    assert live_wheels(MirrorSource(mirror), ["9.9"]) == ["9.9"]
    # newest first, as the matrix lists them; 1.11.0.post8 predates published wheels
    assert live_wheels(MirrorSource(mirror), None) == ["2.6.0.post5", "2.1.0.post17"]
