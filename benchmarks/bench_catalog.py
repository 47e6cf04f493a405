"""Catalog benchmarks: rebuild from the mirror, first use from the snapshot, size, resolving.

Prints one line per figure as ``name: value unit (target ...)``; run from the repo root:
``.venv/bin/python benchmarks/bench_catalog.py [--mirror ../shared/upstream]``.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def best_of(n: int, fn: object) -> float:
    times = []
    for _ in range(n):
        t = time.perf_counter()
        fn()  # type: ignore[operator]
        times.append(time.perf_counter() - t)
    return min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", type=Path, default=ROOT.parent / "shared" / "upstream")
    args = ap.parse_args()
    from opcheck.checker.resolve import Resolver
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.build import write_catalog
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog
    from opcheck.db.snapshot import read_snapshot

    tmp = Path(tempfile.mkdtemp(prefix="opcheck-bench-"))
    if (args.mirror / "releases.tsv").is_file():
        from opcheck.sync.pipeline import collect, installed_universe
        from opcheck.sync.sources import MirrorSource

        t = time.perf_counter()
        res = collect(MirrorSource(args.mirror), universe=installed_universe())
        write_catalog(res.data, tmp / "mirror.sqlite")
        full = time.perf_counter() - t
        print(f"full rebuild from mirror: {full:.1f} s (target ≤ 60 s; {full / 60:.2f} of target)")
    else:
        print(f"full rebuild from mirror: skipped ({args.mirror} not found)")

    # First use, as a user sees it: a fresh process, imports included.
    env = {**os.environ, "OPCHECK_CACHE_DIR": str(tmp / "cache")}
    env.pop("OPCHECK_CATALOG", None)
    code = "from opcheck.cli.common import resolve_catalog_path; resolve_catalog_path()"
    t = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, env=env)
    first = time.perf_counter() - t
    print(f"first-use build from snapshot (new process): {first:.2f} s "
          f"(target ≤ 3 s; {first / 3:.2f} of target)")
    path = write_catalog(read_snapshot(snapshot_dir()), tmp / "snap.sqlite")
    size = path.stat().st_size / 1e6
    snap = sum(p.stat().st_size for p in snapshot_dir().glob("*.tsv")) / 1e6
    print(f"catalog size on disk: {size:.1f} MB (snapshot text {snap:.1f} MB)")

    cat = Catalog.load(open_catalog(path))
    release = [r for r in cat.releases if r.has_kernels][-1].torch_npu
    ops = sorted(cat.operators)[:1000]
    assert len(ops) == 1000

    def resolve_all() -> None:
        Resolver(cat, release).resolve_many(ops)

    fresh = Catalog.load(open_catalog(path))
    t = time.perf_counter()
    Resolver(fresh, release).resolve_many(ops)
    cold = time.perf_counter() - t
    warm = best_of(5, resolve_all)
    print(f"resolve 1,000 distinct ops on {release}: cold {cold * 1000:.0f} ms, "
          f"warm {warm * 1000:.0f} ms (target ≤ 100 ms; {cold / 0.1:.2f} of target)")

    t = time.perf_counter()
    subprocess.run([sys.executable, "-m", "opcheck", "--help"], check=True,
                   stdout=subprocess.DEVNULL)
    helptime = time.perf_counter() - t
    probe = subprocess.run(
        [sys.executable, "-c", "import sys; sys.argv=['opcheck','--help']\n"
         "try:\n from opcheck.cli.app import main; main()\nexcept SystemExit: pass\n"
         "print('torch' in sys.modules)"], capture_output=True, text=True, check=True)
    print(f"opcheck --help: {helptime:.2f} s (target ≤ 0.3 s; torch imported: "
          f"{probe.stdout.strip().splitlines()[-1]})")


if __name__ == "__main__":
    main()
