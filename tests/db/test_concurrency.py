"""`opcheck sync` replacing the catalog while other opcheck processes read it.

Several reader processes open the catalog over and over and run real queries while the test
rewrites the same path with three different catalogs (the full bundled snapshot, a subset of
it, and one `opcheck sync --mirror` writes through the real CLI). Every answer a reader gets
must be exactly one of the known-good answers of those catalogs: never an error, never a
mixture of two catalogs, never a half-built file.
"""

from __future__ import annotations

import copy
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from testpaths import TESTS

from opcheck.checker.resolve import Resolver
from opcheck.core.paths import snapshot_dir
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import CatalogData
from opcheck.db.engine import open_catalog
from opcheck.db.snapshot import read_snapshot

HERE = TESTS
MIRROR = HERE / "fixtures" / "mirror"
OPCHECK = Path(sys.executable).with_name("opcheck")
OPS = ["aten::add.Tensor", "aten::isin.Tensor_Tensor", "aten::copy_", "npu::npu_gelu",
       "aten::relu", "aten::isin.Tensor_Tensor_out"]
READERS = 3
READ_SECONDS = 12.0


def fingerprint(path: Path) -> list[Any]:
    """One real query against the catalog at ``path``: load it, resolve ops for its newest
    release with kernels, and summarise the answer (JSON-able, comparable)."""
    engine = open_catalog(path)
    try:
        cat = Catalog.load(engine)
        target = [r for r in cat.releases if r.has_kernels][-1]
        res = Resolver(cat, target.torch_npu).resolve_many(OPS)
        return [
            len(cat.releases), len(cat.operators), cat.meta.get("schema_version", ""),
            target.torch_npu, len(cat.kernels(target.torch_npu)),
            [[r.op, r.status, r.kernel, r.first_npu_any] for r in res],
        ]
    finally:
        engine.dispose()


def reader_main(catalog: str, stop: str, out: str, max_seconds: float) -> None:
    """Reader process: query until ``stop`` exists; write what it saw to ``out`` (JSON)."""
    seen: dict[str, int] = {}
    errors: list[str] = []
    end = time.monotonic() + max_seconds
    while not os.path.exists(stop) and time.monotonic() < end:
        try:
            key = json.dumps(fingerprint(Path(catalog)))
            seen[key] = seen.get(key, 0) + 1
        except Exception as exc:  # anything at all is a failure: report it
            errors.append(f"{type(exc).__name__}: {exc}")
            if len(errors) > 20:
                break
    Path(out).write_text(json.dumps({"seen": seen, "errors": errors}))


def cli_reader_main(catalog: str, stop: str, out: str, max_seconds: float) -> None:
    """A reader that is the real CLI: `opcheck releases --format json`, repeatedly."""
    counts: dict[str, int] = {}
    errors: list[str] = []
    end = time.monotonic() + max_seconds
    while not os.path.exists(stop) and time.monotonic() < end:
        r = subprocess.run([str(OPCHECK), "releases", "--catalog", catalog, "--format", "json"],
                           capture_output=True, text=True, timeout=60)
        if r.returncode != 0:
            errors.append(f"exit {r.returncode}: {r.stderr.strip()[-300:]}")
            continue
        n = str(len(json.loads(r.stdout)["releases"]))
        counts[n] = counts.get(n, 0) + 1
    Path(out).write_text(json.dumps({"seen": counts, "errors": errors}))


def _spawn(func: str, catalog: Path, stop: Path, out: Path) -> subprocess.Popen[bytes]:
    # This module's folder and tests/ (for testpaths), as pytest puts them on sys.path.
    code = (f"import sys; sys.path[:0] = [{str(Path(__file__).parent)!r}, {str(HERE)!r}]; "
            "import test_concurrency as t; "
            f"t.{func}({str(catalog)!r}, {str(stop)!r}, {str(out)!r}, {READ_SECONDS * 4})")
    return subprocess.Popen([sys.executable, "-c", code], cwd=HERE.parent)


def _subset(data: CatalogData, torch_prefix: str) -> CatalogData:
    """A smaller but complete catalog: only the releases of one torch line and their kernels."""
    small = copy.copy(data)
    small.releases = [r for r in data.releases if r.torch.startswith(torch_prefix)]
    keep = {r.torch_npu for r in small.releases}
    small.kernels = [k for k in data.kernels if k.release in keep]
    return small


def _sync_cli(mirror: Path, catalog: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(OPCHECK), "sync", "--mirror", str(mirror), "--catalog", str(catalog)],
                          capture_output=True, text=True, timeout=300, cwd=HERE.parent)


@pytest.mark.slow
@pytest.mark.torch
def test_readers_never_see_a_broken_or_mixed_catalog(tmp_path: Path) -> None:
    pytest.importorskip("torchgen")  # `opcheck sync` reads the installed torch's op list
    full = read_snapshot(snapshot_dir())
    small = _subset(full, "2.1")
    assert 0 < len(small.releases) < len(full.releases)

    # The known-good answers: each catalog built alone, then queried.
    known: dict[str, str] = {}
    for name, data in (("full", full), ("small", small)):
        ref = write_catalog(data, tmp_path / f"ref-{name}.sqlite")
        known[json.dumps(fingerprint(ref))] = name
    ref_mirror = tmp_path / "ref-mirror.sqlite"
    r = _sync_cli(MIRROR, ref_mirror)
    assert r.returncode == 0, r.stderr
    known[json.dumps(fingerprint(ref_mirror))] = "mirror"
    assert len(known) == 3, "the three catalogs must answer differently"
    release_counts = {str(json.loads(k)[0]) for k in known}

    live = tmp_path / "live" / "catalog.sqlite"
    write_catalog(full, live)
    stop = tmp_path / "stop"
    outs = [tmp_path / f"reader{i}.json" for i in range(READERS + 1)]
    procs = [_spawn("reader_main", live, stop, outs[i]) for i in range(READERS)]
    procs.append(_spawn("cli_reader_main", live, stop, outs[-1]))
    written: list[str] = []
    try:
        start = time.monotonic()
        time.sleep(1.0)  # let the readers start querying the first catalog
        while time.monotonic() - start < READ_SECONDS * 0.6:
            write_catalog(small, live)
            write_catalog(full, live)
            written += ["small", "full"]
        r = _sync_cli(MIRROR, live)  # the real CLI replaces the catalog under the readers
        assert r.returncode == 0, r.stderr
        written.append("mirror")
        time.sleep(max(0.0, READ_SECONDS - (time.monotonic() - start)))
    finally:
        stop.touch()
        for p in procs:
            try:
                p.wait(timeout=120)
            except subprocess.TimeoutExpired:
                p.kill()
    assert [p.returncode for p in procs] == [0] * len(procs)

    reports = [json.loads(o.read_text()) for o in outs]
    for rep in reports:
        assert rep["errors"] == []
    seen_names: set[str] = set()
    for rep in reports[:READERS]:
        assert sum(rep["seen"].values()) >= 3, rep  # the readers really read, repeatedly
        for key in rep["seen"]:
            assert key in known, f"an answer matching no complete catalog: {key[:300]}"
            seen_names.add(known[key])
    # the catalog really changed under the readers (else this test proves nothing)
    assert len(seen_names) >= 2, (seen_names, written)
    cli = reports[-1]["seen"]
    assert cli and set(cli) <= release_counts, cli
    # the last write wins and no temporary file is left next to the catalog
    assert known[json.dumps(fingerprint(live))] == "mirror"
    assert sorted(p.name for p in live.parent.iterdir()) == ["catalog.sqlite"]


@pytest.mark.torch
def test_two_syncs_racing_on_one_catalog_leave_a_complete_one(tmp_path: Path) -> None:
    """Two `opcheck sync` processes write the same catalog path at once: both succeed (each
    builds its own temporary file), the survivor is complete, nothing is left behind."""
    pytest.importorskip("torchgen")
    ref = tmp_path / "ref.sqlite"
    assert _sync_cli(MIRROR, ref).returncode == 0
    expected = fingerprint(ref)
    live = tmp_path / "live" / "catalog.sqlite"
    write_catalog(_subset(read_snapshot(snapshot_dir()), "2.1"), live)
    cmd = [str(OPCHECK), "sync", "--mirror", str(MIRROR), "--catalog", str(live)]
    procs = [subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], outs
    assert fingerprint(live) == expected
    assert sorted(p.name for p in live.parent.iterdir()) == ["catalog.sqlite"]
