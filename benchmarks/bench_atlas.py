"""``opcheck atlas`` benchmark: a whole library with ``-j 2``, the re-run with nothing changed,
the check cost, and Ray task throughput on a local cluster.

1. ``opcheck atlas LIBRARY -j 2 -f json`` in its own process on a fresh store: wall and CPU
   seconds (it and every child it waited for), peak RSS of the largest process (``ru_maxrss``
   of the children: the tracer template and its forks), traced / skipped / failed counts;
2. the same command again on that store: nothing changed, so nothing is traced or checked;
3. the check alone: the store's cached op lists checked against every release group in this
   process, per architecture (what a catalog change costs without tracing);
4. Ray: ``--ray`` on a local cluster (``ray.init(num_cpus=2)``) tracing N zoo architectures,
   tasks per minute, against the same N with ``-j 2``.

The machine is shared: the load average before and after is printed with the figures.
Run: .venv/bin/python benchmarks/bench_atlas.py [--library transformers] [--only a,b]
     [--ray-tasks 9] [--skip-library]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _cli(args: list[str], cache: Path) -> tuple[float, float, int, dict[str, object]]:
    """Wall s, CPU s, peak RSS (MB) and the JSON document of one ``opcheck atlas`` run."""
    out = cache / "out.json"
    env = {**os.environ, "OPCHECK_CACHE_DIR": str(cache)}
    argv = [sys.executable, "-m", "opcheck", "atlas", *args, "-f", "json", "-o", str(out), "-q"]
    start = time.perf_counter()
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    code = os.waitstatus_to_exitcode(status)
    if code not in (0, 1):
        raise SystemExit(f"opcheck atlas {' '.join(args)} failed: {err.decode(errors='replace')}")
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    peak = max(usage.ru_maxrss, children) // 1024
    return wall, usage.ru_utime + usage.ru_stime, peak, json.loads(out.read_text())


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def library_run(library: str, only: str | None) -> None:
    with tempfile.TemporaryDirectory(prefix="bench-atlas-") as tmp:
        cache = Path(tmp)
        args = [library, "-j", "2", *(["--only", only] if only else [])]
        print(f"load before: {_load()}")
        wall, cpu, peak, doc = _cli(args, cache)
        rows = doc["rows"]
        assert isinstance(rows, list)
        archs = {(r["library"], r["architecture"]) for r in rows}
        print(f"{library} -j 2: {len(archs)} architectures, traced {doc['traced']}, skipped "
              f"{len(doc['skipped'])}, failed {len(doc['failed'])}: {wall:.0f} s wall, "  # type: ignore[arg-type]
              f"{cpu:.0f} s CPU, peak RSS {peak} MB; load after: {_load()}")
        wall2, cpu2, peak2, doc2 = _cli(args, cache)
        print(f"re-run, nothing changed: {wall2:.1f} s wall, {cpu2:.1f} s CPU, peak RSS "
              f"{peak2} MB (traced {doc2['traced']}, re-checked {doc2['rechecked']}, "
              f"unchanged {doc2['current']})")
        check_cost(cache / "atlas.sqlite")


def check_cost(store_path: Path) -> None:
    from opcheck.checker import atlas
    from opcheck.core.oplist import OpList
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    cat = Catalog.load(open_catalog(None))
    start = time.perf_counter()
    groups = atlas.release_groups(cat)
    setup = time.perf_counter() - start
    import sqlite3
    import zlib

    db = sqlite3.connect(store_path)
    blobs = [zlib.decompress(b).decode() for (b,) in
             db.execute("SELECT oplist FROM atlas_trace WHERE oplist IS NOT NULL")]
    db.close()
    base = atlas.CoverageRec("x", "1", "x")
    start = time.perf_counter()
    for text in blobs:
        atlas.coverage_rows(cat, groups, OpList.from_json(json.loads(text)), base,
                            lambda _r, _o: 0)
    took = time.perf_counter() - start
    n_rel = sum(len(g.releases) for g in groups)
    print(f"check alone: {len(blobs)} op lists × {len(groups)} release groups ({n_rel} "
          f"releases): {took:.1f} s, {took / max(1, len(blobs)) * 1000:.0f} ms per "
          f"architecture (+{setup:.1f} s to group the releases)")


def ray_run(tasks: int) -> None:
    from opcheck.checker import atlas
    from opcheck.checker.atlas_ray import ray_tracer
    from opcheck.db.atlas import AtlasStore
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    try:
        import ray
    except ImportError:
        print("ray: not installed (pip install 'opcheck[cluster]')")
        return
    cat = Catalog.load(open_catalog(None))
    archs = atlas.architectures("zoo")[:tasks]
    start = time.perf_counter()
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    started = time.perf_counter() - start
    with tempfile.TemporaryDirectory(prefix="bench-atlas-ray-") as tmp:
        start = time.perf_counter()
        result = atlas.run_atlas(cat, AtlasStore(Path(tmp) / "a.sqlite"), archs,
                                 atlas.Settings(), tracer=ray_tracer("auto"))
        took = time.perf_counter() - start
    ray.shutdown()
    with tempfile.TemporaryDirectory(prefix="bench-atlas-local-") as tmp:
        start = time.perf_counter()
        atlas.run_atlas(cat, AtlasStore(Path(tmp) / "a.sqlite"), archs, atlas.Settings(jobs=2))
        local = time.perf_counter() - start
    print(f"ray local cluster (num_cpus=2): {len(archs)} zoo traces in {took:.1f} s = "
          f"{len(archs) / took * 60:.1f} tasks/min ({len(result.failed)} failed; cluster start "
          f"{started:.1f} s); same traces with -j 2 locally: {local:.1f} s; load {_load()}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--library", default="transformers")
    ap.add_argument("--only", default=None)
    ap.add_argument("--ray-tasks", type=int, default=9)
    ap.add_argument("--skip-library", action="store_true")
    ap.add_argument("--skip-ray", action="store_true")
    args = ap.parse_args()
    if not args.skip_library:
        library_run(args.library, args.only)
    if not args.skip_ray:
        ray_run(args.ray_tasks)


if __name__ == "__main__":
    main()
