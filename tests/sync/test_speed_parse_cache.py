"""SyncContext.parsed: each distinct file parsed once per sync, and once across syncs until
the parser's code changes."""

from __future__ import annotations

import importlib
import json
import os
import pickle
import shutil
import sys
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.db.snapshot import snapshot_equal, write_snapshot
from opcheck.scrapers.rows import Origin
from opcheck.sync.context import SyncContext
from opcheck.sync.pipeline import Universe, collect
from opcheck.sync.sources import MirrorSource

CALLS: list[tuple[str, str | None]] = []


def count_lines(text: str, *, origin: Origin, torch: str | None = None) -> list[str]:
    CALLS.append((origin.path, torch))
    return [f"{torch}:{line}" for line in text.splitlines()]


def where(text: str, *, origin: Origin) -> str:
    CALLS.append((origin.path, None))
    return origin.path


@pytest.fixture
def files(tmp_path: Path) -> MirrorSource:
    CALLS.clear()
    root = tmp_path / "mirror"
    for name, text in (("a/f.yaml", "x\ny\n"), ("b/f.yaml", "x\ny\n"), ("c/f.yaml", "z\n")):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return MirrorSource(root)


def test_identical_files_are_parsed_once_per_options(files: MirrorSource) -> None:
    ctx = SyncContext(files)
    first = ctx.parsed("a/f.yaml", count_lines)
    assert ctx.parsed("b/f.yaml", count_lines) is first  # same text, other path
    assert ctx.parsed("c/f.yaml", count_lines) == ["None:z"]
    assert ctx.parsed("a/f.yaml", count_lines, torch="2.1") == ["2.1:x", "2.1:y"]
    assert CALLS == [("a/f.yaml", None), ("c/f.yaml", None), ("a/f.yaml", "2.1")]
    assert ctx.parse_stats == {"parsed": 3, "reused": 1, "cached": 0}


def test_a_parse_that_reads_its_origin_is_kept_per_file(files: MirrorSource) -> None:
    ctx = SyncContext(files)
    assert ctx.parsed("a/f.yaml", where, by_origin=True) == "a/f.yaml"
    assert ctx.parsed("b/f.yaml", where, by_origin=True) == "b/f.yaml"
    assert ctx.parsed("b/f.yaml", where, by_origin=True) == "b/f.yaml"
    assert len(CALLS) == 2


def test_lambdas_and_closures_are_refused(files: MirrorSource) -> None:
    ctx = SyncContext(files)
    with pytest.raises(TypeError, match="module-level"):
        ctx.parsed("a/f.yaml", lambda text, origin: text)


def test_a_second_sync_reads_parses_from_the_cache(files: MirrorSource, tmp_path: Path) -> None:
    cache = tmp_path / "parsed"
    SyncContext(files, parse_cache=cache).parsed("a/f.yaml", count_lines, torch="2.1")
    ctx = SyncContext(files, parse_cache=cache)
    assert ctx.parsed("b/f.yaml", count_lines, torch="2.1") == ["2.1:x", "2.1:y"]
    assert ctx.parse_stats["cached"] == 1
    assert CALLS == [("a/f.yaml", "2.1")]
    # A cache entry that cannot be read (a sync killed mid-write, a foreign file) is a miss.
    for entry in cache.rglob("*.json"):
        entry.write_bytes(b"\x80\x05truncated")
    assert SyncContext(files, parse_cache=cache).parsed("a/f.yaml", count_lines,
                                                        torch="2.1") == ["2.1:x", "2.1:y"]
    assert len(CALLS) == 2


def test_editing_the_parser_invalidates_its_cached_parses(files: MirrorSource, tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cache = tmp_path / "parsed"
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    module = pkg / "speed_cache_parser.py"
    monkeypatch.syspath_prepend(str(pkg))
    monkeypatch.delitem(sys.modules, "speed_cache_parser", raising=False)

    def parse_with(body: str) -> object:
        module.write_text(f"def parse(text, *, origin):\n    return {body}\n")
        importlib.invalidate_caches()
        mod = importlib.reload(sys.modules["speed_cache_parser"]) \
            if "speed_cache_parser" in sys.modules else importlib.import_module("speed_cache_parser")
        return SyncContext(files, parse_cache=cache).parsed("a/f.yaml", mod.parse)

    assert parse_with("text.split()") == ["x", "y"]
    assert parse_with("text.split()") == ["x", "y"]  # same code: from the cache
    # A changed parser (a fixed bug) must not serve what the old code parsed.
    assert parse_with("text.upper().split()") == ["X", "Y"]
    versions = list((cache / "speed_cache_parser.parse").iterdir())
    assert len(versions) == 1  # entries of the old code are gone
    entry = next(versions[0].iterdir())
    assert json.loads(entry.read_bytes())["value"] == ["X", "Y"]


def test_collect_with_a_parse_cache_builds_the_same_catalog(
    fixtures: Path, tmp_path: Path
) -> None:
    from opcheck.scrapers.pytorch import parse_native_functions

    origin = Origin("torchgen/packaged/ATen/native/native_functions.yaml", ref="torch-test")
    universe = Universe(parse_native_functions((fixtures / "universe.yaml").read_text(),
                                               origin=origin), "2.6.0", origin)
    mirror = tmp_path / "mirror"
    shutil.copytree(fixtures / "mirror", mirror)
    plain = collect(MirrorSource(mirror), universe=universe)
    cache = tmp_path / "parsed"
    cold = collect(MirrorSource(mirror), universe=universe, parse_cache=cache)
    warm = collect(MirrorSource(mirror), universe=universe, parse_cache=cache)
    assert any(cache.rglob("*.json"))
    assert not plain.failures and not cold.failures and not warm.failures
    for n, res in enumerate((plain, cold, warm)):
        write_snapshot(res.data, tmp_path / f"snap{n}")
    assert plain.data.kernels
    assert snapshot_equal(tmp_path / "snap0", tmp_path / "snap1") == []
    assert snapshot_equal(tmp_path / "snap0", tmp_path / "snap2") == []


def fail_on_z(text: str, *, origin: Origin) -> list[str]:
    CALLS.append((origin.path, None))
    if "z" in text:
        raise ScrapeError("a z", source=origin.path, line=1)
    return text.split()


def test_prefetch_parses_distinct_files_in_workers(files: MirrorSource, tmp_path: Path) -> None:
    cache = tmp_path / "parsed"
    ctx = SyncContext(files, parse_cache=cache, workers=2)
    gots = [files.fetch(p) for p in ("a/f.yaml", "b/f.yaml", "c/f.yaml")]
    ctx.prefetch(gots, count_lines, torch="2.1")
    got = [ctx.parsed(g, count_lines, torch="2.1") for g in gots]
    ctx.close()
    assert got == [["2.1:x", "2.1:y"], ["2.1:x", "2.1:y"], ["2.1:z"]]
    assert CALLS == []  # parsed in the worker processes, not here
    assert ctx.parse_stats == {"parsed": 2, "reused": 1, "cached": 0}
    # the workers wrote the parse cache: a later sync reads both back
    later = SyncContext(files, parse_cache=cache, workers=0)
    assert [later.parsed(g, count_lines, torch="2.1") for g in gots] == got
    assert later.parse_stats == {"parsed": 0, "reused": 1, "cached": 2}


def test_a_parse_failing_in_a_worker_fails_where_it_is_asked_for(files: MirrorSource) -> None:
    ctx = SyncContext(files, workers=2)
    gots = [files.fetch(p) for p in ("a/f.yaml", "c/f.yaml")]
    ctx.prefetch(gots, fail_on_z)
    assert ctx.parsed(gots[0], fail_on_z) == ["x", "y"]
    with pytest.raises(ScrapeError, match="a z") as err:
        ctx.parsed(gots[1], fail_on_z)
    ctx.close()
    assert err.value.source == "c/f.yaml"
    assert CALLS == [("c/f.yaml", None)]  # parsed again here to raise the error


def test_a_combined_result_is_kept_across_syncs_by_its_files(files: MirrorSource,
                                                            tmp_path: Path) -> None:
    cache = tmp_path / "parsed"
    gots = [files.fetch(p) for p in ("a/f.yaml", "c/f.yaml")]
    made: list[int] = []

    def both() -> list[str]:
        made.append(1)
        return [line for g in gots for line in g.text.split()]

    assert SyncContext(files, parse_cache=cache).combined(gots, count_lines, both) == \
        ["x", "y", "z"]
    ctx = SyncContext(files, parse_cache=cache)
    assert ctx.combined(gots, count_lines, both) == ["x", "y", "z"]
    assert len(made) == 1 and ctx.parse_stats["cached"] == 1
    # same contents under other paths: another result (it may name its files)
    other = [files.fetch("b/f.yaml"), gots[1]]
    SyncContext(files, parse_cache=cache).combined(other, count_lines, both)
    assert len(made) == 2


def test_collect_in_worker_processes_builds_the_same_catalog(
    fixtures: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from concurrent.futures import ProcessPoolExecutor

    from opcheck.scrapers.pytorch import parse_native_functions
    from opcheck.sync import context

    monkeypatch.setattr(context, "PREFETCH_MIN", 1)  # the fixture mirror has few files
    sent: list[int] = []
    submit = ProcessPoolExecutor.submit

    def counting(self: ProcessPoolExecutor, fn: object, *args: object) -> object:
        if fn is context._parse_jobs:
            sent.append(len(args[0]))  # type: ignore[arg-type]
        return submit(self, fn, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(ProcessPoolExecutor, "submit", counting)

    origin = Origin("torchgen/packaged/ATen/native/native_functions.yaml", ref="torch-test")
    universe = Universe(parse_native_functions((fixtures / "universe.yaml").read_text(),
                                               origin=origin), "2.6.0", origin)
    mirror = tmp_path / "mirror"
    shutil.copytree(fixtures / "mirror", mirror)
    alone = collect(MirrorSource(mirror), universe=universe, workers=0)
    pooled = collect(MirrorSource(mirror), universe=universe, workers=2,
                     parse_cache=tmp_path / "parsed")
    assert not alone.failures and not pooled.failures
    assert sum(sent) >= 3  # files were parsed in the workers
    assert any((tmp_path / "parsed").rglob("*.json"))
    write_snapshot(alone.data, tmp_path / "alone")
    write_snapshot(pooled.data, tmp_path / "pooled")
    assert alone.data.kernels
    assert snapshot_equal(tmp_path / "alone", tmp_path / "pooled") == []


def test_a_swapped_cache_entry_never_runs_code(files: MirrorSource, tmp_path: Path) -> None:
    """Issue 32: the cache held pickles, so a replaced file ran its code at the next sync."""
    cache = tmp_path / "parsed"
    SyncContext(files, parse_cache=cache).parsed("a/f.yaml", count_lines, torch="2.1")
    (entry,) = cache.rglob("*.json")
    marker = tmp_path / "ran"

    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (os.system, (f"touch {marker}",))

    entry.write_bytes(pickle.dumps(Evil()))
    calls = len(CALLS)
    assert SyncContext(files, parse_cache=cache).parsed(
        "a/f.yaml", count_lines, torch="2.1"
    ) == ["2.1:x", "2.1:y"]
    assert not marker.exists() and len(CALLS) == calls + 1  # a miss: parsed again
    # Well-formed JSON naming a class outside opcheck, or written for another key, is a miss too.
    key = json.loads(cache.joinpath(entry.relative_to(cache)).read_bytes())["key"]
    for doc in (
        {"key": key, "value": {"c": ["os:system", ["touch " + str(marker)]]}},
        {"key": key, "value": {"c": ["subprocess:Popen", [["touch", str(marker)]]]}},
        {"key": "other", "value": ["forged"]},
        {"key": key, "value": {"zz": []}},
    ):
        entry.write_text(json.dumps(doc))
        assert SyncContext(files, parse_cache=cache).parsed(
            "a/f.yaml", count_lines, torch="2.1"
        ) == ["2.1:x", "2.1:y"]
    assert not marker.exists()


def test_codec_round_trips_rows_and_containers() -> None:
    from opcheck.core.vocab import Status
    from opcheck.scrapers.rows import KernelRow
    from opcheck.sync import cachecodec

    row = KernelRow(op="aten::add.Tensor", torch="2.1", op_api=True, line=3)
    value = {
        ("a", 1): [row, (row, None)],
        "s": {frozenset({"x"}), 2.5},
        "e": Status.NPU,
        "big": 10**40,
    }
    assert cachecodec.decode("k", cachecodec.encode("k", value)) == value
    with pytest.raises(cachecodec.CodecError, match="another key"):
        cachecodec.decode("j", cachecodec.encode("k", value))
    with pytest.raises(cachecodec.CodecError, match="cannot cache"):
        cachecodec.encode("k", object())
