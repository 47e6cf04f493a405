"""``opcheck atlas``: release groups, incremental runs, the store's one writer under kill -9
and concurrent runs. Traces are handed in (op lists written here) except where a test says it
traces: the tracer is tested by the tracers' own tests and the zoo's."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest

from opcheck.checker import atlas
from opcheck.checker.check import check
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.atlas import AtlasStore, CachedTrace
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

OPS = ["aten::add.Tensor", "aten::relu", "aten::isin.Tensor_Tensor"]


def _oplist(ops: Sequence[str]) -> OpList:
    return OpList("m", "runtime", "runtime-dispatch", torch_version="2.6.0",
                  ops=[OpUse(op=o, count=2, dtypes=["float32"]) for o in ops])


def _arch(name: str, library: str = "zoo") -> atlas.Architecture:
    return atlas.Architecture(library, name, f"never-traced:{name}", task="test")


class FakeTracer:
    """Hands back op lists (or failures) per architecture and counts what it was asked."""

    def __init__(self, lists: dict[str, Sequence[str] | str]) -> None:
        self.lists = lists
        self.asked: list[str] = []

    def __call__(self, todo: Sequence[atlas.Architecture]) -> Iterator[atlas.Traced]:
        for a in todo:
            self.asked.append(a.name)
            got = self.lists[a.name]
            if isinstance(got, str):
                yield a, CachedTrace("", got, 0.1, "", "", a.task)
            else:
                yield a, CachedTrace(json.dumps(_oplist(got).to_json()), "", 0.1, "fake", "",
                                     a.task)


@pytest.fixture
def small(small_catalog_path: Path) -> Catalog:
    return Catalog.load(make_engine(small_catalog_path))


def test_grouped_check_gives_every_release_the_verdict_of_its_own_check(
        bundled_catalog: Path) -> None:
    cat = Catalog.load(make_engine(bundled_catalog))
    groups = atlas.release_groups(cat)
    with_kernels = [r for r in cat.releases if r.has_kernels]
    assert sum(len(g.releases) for g in groups) == len(with_kernels)
    assert len(groups) < len(with_kernels)  # the point of grouping
    ol = _oplist(["aten::add.Tensor", "aten::isin.Tensor_Tensor", "aten::_foreach_add.List",
                  "aten::nonzero", "aten::linalg_qr"])
    base = atlas.CoverageRec(library="zoo", library_version="1", architecture="m")
    rows = atlas.coverage_rows(cat, groups, ol, base, lambda _r, _o: 0)
    seen = []
    order = [r.torch_npu for r in with_kernels]
    for row in rows:
        span = order[order.index(row.first_release):order.index(row.last_release) + 1]
        for rel in span:
            rep = check(cat, ol, cat.release(rel))
            assert row.verdict == rep.verdict.value, rel
            assert row.cpu_fallback == rep.counts["cpu_fallback"], rel
            problems = ",".join(f"{f.op}={f.status}" for f in rep.ops if f.status.is_problem)
            assert row.problem_ops == problems, rel
        seen += span
    assert seen == order  # consecutive runs covering every release once
    assert len({r.verdict for r in rows}) > 1  # this op list does change across releases


def test_a_run_writes_rows_per_release_run_and_an_error_row(small: Catalog,
                                                             tmp_path: Path) -> None:
    store = AtlasStore(tmp_path / "atlas.sqlite")
    tracer = FakeTracer({"good": OPS, "broken": "TraceError: needs weights to build"})
    result = atlas.run_atlas(small, store, [_arch("good"), _arch("broken")], atlas.Settings(),
                             tracer=tracer)
    assert result.traced == 2 and len(result.failed) == 1
    good = [r for r in result.rows if r.architecture == "good"]
    assert good[0].first_release == "1.11.0.post8" and good[-1].last_release == "2.6.0.post5"
    assert good[-1].verdict == "YES"
    assert "aten::isin.Tensor_Tensor" in good[0].problem_ops  # no kernel yet on the oldest
    (bad,) = [r for r in result.rows if r.architecture == "broken"]
    assert bad.verdict == atlas.ERROR and bad.error == "TraceError: needs weights to build"
    assert sorted((r.architecture, r.first_release) for r in store.rows()) == sorted(
        (r.architecture, r.first_release) for r in result.rows)


def test_a_rerun_with_nothing_changed_traces_and_checks_nothing(small: Catalog,
                                                                tmp_path: Path) -> None:
    store = AtlasStore(tmp_path / "atlas.sqlite")
    first = atlas.run_atlas(small, store, [_arch("a"), _arch("b")], atlas.Settings(),
                            tracer=FakeTracer({"a": OPS, "b": OPS[:1]}))
    again = FakeTracer({})
    second = atlas.run_atlas(small, store, [_arch("a"), _arch("b")], atlas.Settings(),
                             tracer=again)
    assert again.asked == [] and second.current == 2 and second.rechecked == 0
    assert sorted(map(repr, second.rows)) == sorted(map(repr, first.rows))


def test_a_rerun_with_nothing_changed_counts_the_stored_failures_and_skips(
        small: Catalog, tmp_path: Path) -> None:
    store = AtlasStore(tmp_path / "atlas.sqlite")
    archs = [_arch("a"), _arch("broken"), _arch("gone")]
    lists: dict[str, Sequence[str] | str] = {"a": OPS, "broken": "TraceError: x"}
    first = atlas.run_atlas(small, store, archs[:2], atlas.Settings(), tracer=FakeTracer(lists))
    second = atlas.run_atlas(small, store, archs[:2], atlas.Settings(), tracer=FakeTracer({}))
    assert second.current == 2 and second.traced == 0
    assert second.failed == first.failed == ["zoo/broken: TraceError: x"]
    # each stored row once, even beside an architecture traced in the same run
    third = atlas.run_atlas(small, store, archs, atlas.Settings(),
                            tracer=FakeTracer({"gone": "TraceError: y"}))
    assert third.current == 2 and third.traced == 1
    assert sorted(third.failed) == ["zoo/broken: TraceError: x", "zoo/gone: TraceError: y"]
    assert len(third.rows) == len(first.rows) + 1


def test_a_catalog_change_rechecks_from_the_cached_trace(small: Catalog, tmp_path: Path,
                                                         bundled_catalog: Path) -> None:
    store = AtlasStore(tmp_path / "atlas.sqlite")
    atlas.run_atlas(small, store, [_arch("a")], atlas.Settings(),
                    tracer=FakeTracer({"a": OPS}))
    bundled = Catalog.load(make_engine(bundled_catalog))
    again = FakeTracer({})
    result = atlas.run_atlas(bundled, store, [_arch("a")], atlas.Settings(), tracer=again)
    assert again.asked == [] and result.rechecked == 1
    newest = [r.torch_npu for r in bundled.releases if r.has_kernels][-1]
    assert result.rows[-1].last_release == newest


def test_a_new_library_version_traces_again(small: Catalog, tmp_path: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    store = AtlasStore(tmp_path / "atlas.sqlite")
    atlas.run_atlas(small, store, [_arch("a")], atlas.Settings(), tracer=FakeTracer({"a": OPS}))
    monkeypatch.setattr(atlas, "library_version", lambda lib: "next")
    again = FakeTracer({"a": OPS})
    atlas.run_atlas(small, store, [_arch("a")], atlas.Settings(), tracer=again)
    assert again.asked == ["a"]
    assert {r.library_version for r in store.rows()} == {"next"}


def test_a_skipped_architecture_is_a_row_with_its_reason_and_not_a_failure(
        small: Catalog, tmp_path: Path) -> None:
    store = AtlasStore(tmp_path / "atlas.sqlite")
    arch = atlas.Architecture("zoo", "s", "x", skip="needs a tokenizer file")
    result = atlas.run_atlas(small, store, [arch], atlas.Settings(), tracer=FakeTracer({}))
    assert result.failed == [] and result.skipped == ["zoo/s: needs a tokenizer file"]
    assert [r.verdict for r in store.rows()] == [atlas.SKIPPED]


def test_the_listing_reads_names_and_objects_and_fails_in_one_line() -> None:
    got = atlas.parse_listing("timm", json.dumps(
        ["resnet", {"name": "vit", "task": "image-classification", "skip": ""}]))
    assert [(a.name, a.spec, a.task) for a in got] == [
        ("resnet", "atlas:timm/resnet", ""), ("vit", "atlas:timm/vit", "image-classification")]
    with pytest.raises(atlas.TraceError, match="not JSON"):
        atlas.parse_listing("timm", "Traceback (most recent call last):")


# --------------------------------------------------------- the one writer: kill -9, two runs

WRITER = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from opcheck.db.atlas import AtlasStore, State
    from opcheck.db.data import CoverageRec
    store = AtlasStore(Path(sys.argv[1]))
    tag, first, last = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    for i in range(first, last):
        rows = [CoverageRec(library="zoo", library_version=tag, architecture=f"m{i}", first_release=str(k), last_release=str(k),
                            verdict="YES", problem_ops="x" * 2000) for k in range(20)]
        store.write(State("zoo", f"m{i}", False, "", tag, f"t{i}", "c"), rows)
        print(i, flush=True)
""")


def _writer(path: Path, tag: str, first: int, last: int) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-c", WRITER, str(path), tag, str(first), str(last)],
                            stdout=subprocess.PIPE, text=True)


def _consistent(path: Path) -> dict[str, int]:
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    rows = dict(db.execute("SELECT architecture, count(*) FROM model_coverage GROUP BY 1"))
    states = {r[0] for r in db.execute("SELECT architecture FROM atlas_state")}
    db.close()
    assert set(rows) == states  # rows without state, or state without rows: a torn write
    assert set(rows.values()) <= {20}
    return rows


def test_kill_9_mid_run_leaves_the_store_whole_and_the_next_run_resumes(
        small: Catalog, tmp_path: Path) -> None:
    path = tmp_path / "atlas.sqlite"
    AtlasStore(path)
    proc = _writer(path, "v1", 0, 100_000)
    assert proc.stdout is not None
    for _ in range(30):
        proc.stdout.readline()
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    done = _consistent(path)
    assert 30 <= len(done) < 100_000
    # the next run writes over the killed run's rows (its keys are not this run's), and a
    # run after that finds everything current
    store = AtlasStore(path)
    names = ["m0", "m1", "fresh"]
    tracer = FakeTracer({n: OPS for n in names})
    atlas.run_atlas(small, store, [_arch(n) for n in names], atlas.Settings(), tracer=tracer)
    again = FakeTracer({})
    atlas.run_atlas(small, store, [_arch(n) for n in names], atlas.Settings(), tracer=again)
    assert again.asked == []


def test_two_concurrent_runs_lose_nothing_and_write_nothing_twice(tmp_path: Path) -> None:
    path = tmp_path / "atlas.sqlite"
    AtlasStore(path)
    # overlapping ranges: m60..m119 are written by both
    procs = [_writer(path, "a", 0, 120), _writer(path, "b", 60, 180)]
    for p in procs:
        p.communicate(timeout=300)
        assert p.returncode == 0
    rows = _consistent(path)
    assert set(rows) == {f"m{i}" for i in range(180)}
    db = sqlite3.connect(path)
    tags = dict(db.execute("SELECT architecture, group_concat(DISTINCT library_version) "
                           "FROM model_coverage GROUP BY 1"))
    db.close()
    assert all("," not in t for t in tags.values())  # one run's rows per model, never mixed


def test_a_store_from_another_opcheck_is_refused_in_one_line(tmp_path: Path) -> None:
    path = tmp_path / "atlas.sqlite"
    AtlasStore(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE atlas_meta SET value = '999' WHERE key = 'version'")
    db.commit()
    db.close()
    with pytest.raises(atlas.OpcheckError, match="delete the file"):
        AtlasStore(path)


# ------------------------------------------------------------------------------ the CLI


def test_cli_usage_errors_exit_2(cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    store = ["--store", str(tmp_path / "a.sqlite")]
    for args in (["nosuchlib"], ["zoo", "--only", "nosuch"], ["zoo", "--hardware", "x86"],
                 ["zoo", "-j", "0"], ["zoo", "-f", "yaml"]):
        res = cli("atlas", *args, *store)
        assert res.exit_code == 2, args
        assert "Traceback" not in res.output


@pytest.mark.torch
def test_cli_traces_zoo_models_and_a_rerun_is_quick(cli, tmp_path: Path,  # type: ignore[no-untyped-def]
                                                   small_catalog_path: Path) -> None:
    store = ["--store", str(tmp_path / "a.sqlite"), "--catalog", str(small_catalog_path)]
    res = cli("atlas", "zoo", "--only", "lstm,conv_classifier", "-f", "json", *store)
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["traced"] == 2 and doc["failed"] == []
    assert {r["architecture"] for r in doc["rows"]} == {"lstm", "conv_classifier"}
    assert all(r["verdict"] in ("YES", "MAYBE", "NO") for r in doc["rows"])
    start = time.monotonic()
    res = cli("atlas", "zoo", "--only", "lstm,conv_classifier", "-f", "csv", *store)
    assert res.exit_code == 0 and time.monotonic() - start < 30
    assert res.stdout.count("\nzoo,") == len(doc["rows"])


def test_cli_rerun_with_nothing_changed_exits_1_while_failures_stand(  # type: ignore[no-untyped-def]
        cli, tmp_path: Path, small_catalog_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tracer = FakeTracer({"lstm": "TraceError: x", "conv_classifier": OPS})
    monkeypatch.setattr(atlas, "local_tracer", lambda *_a, **_k: tracer)
    args = ["atlas", "zoo", "--only", "lstm,conv_classifier", "-f", "json", "--store",
            str(tmp_path / "a.sqlite"), "--catalog", str(small_catalog_path)]
    first, again = cli(*args), cli(*args)
    assert sorted(tracer.asked) == ["conv_classifier", "lstm"]  # the second run traced nothing
    assert first.exit_code == again.exit_code == 1, again.output
    assert json.loads(again.stdout)["failed"] == ["zoo/lstm: TraceError: x"]
    assert "2 unchanged, 0 skipped, 1 failed" in again.stderr
