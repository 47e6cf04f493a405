"""``opcheck zoo`` benchmark: trace time per model and the whole zoo against every release.

Each model is traced in its own sandboxed process, forked from one template process that
imported torch and transformers' model base once (opcheck.tracers.sandbox.shared_imports): the
first model's figure includes the template's imports it waited for, the others do not.
The whole-zoo figure adds checking every op list against every release with a kernel list.
No target is set for it; the figures are for comparison between changes.
Run: .venv/bin/python benchmarks/bench_zoo.py [--jobs 2]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from opcheck.checker import zoo
from opcheck.contrib.workarounds import attach
from opcheck.core.paths import snapshot_dir
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        path = zoo.catalog_from_snapshot(snapshot_dir(), Path(tmp) / "c.sqlite", attach=attach)
        cat = Catalog.load(make_engine(path))
        start = time.perf_counter()
        one = zoo.run_zoo(cat, None, jobs=1)
        serial = time.perf_counter() - start
        for name in one.models:
            print(f"{name}: trace {one.seconds[name]:.2f} s (forked sandbox process)")
        start = time.perf_counter()
        result = zoo.run_zoo(cat, None, jobs=args.jobs)
        took = time.perf_counter() - start
        errors = sum(1 for r in result.rows if r.verdict == zoo.ERROR)
        print(f"whole zoo, {len(result.models)} models × {len(result.releases)} releases: "
              f"{serial:.1f} s with 1 job, {took:.1f} s with {args.jobs} jobs; {errors} errors")


if __name__ == "__main__":
    main()
