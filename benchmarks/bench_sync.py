"""Sync benchmarks: `opcheck sync --mirror` cold (empty parse cache) and warm (a second sync
over the same mirror with the parse cache of the first), and where a cold sync spends its time.

Prints one line per figure; run from the repo root:
``.venv/bin/python benchmarks/bench_sync.py [--mirror ../shared/upstream] [--rounds 3]``.
Wall time and CPU seconds (user + sys of the child) are medians over the rounds; the CPU figure
is the one to trust on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPCHECK = [sys.executable, "-m", "opcheck"]


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def sync(mirror: Path, cache: Path, out: Path) -> tuple[float, float]:
    env = {**os.environ, "OPCHECK_CACHE_DIR": str(cache)}
    cmd = [*OPCHECK, "sync", "--mirror", str(mirror), "--catalog", str(out / "c.sqlite"),
           "--snapshot", str(out / "snap")]
    c, t = _cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=ROOT, capture_output=True)
    return time.perf_counter() - t, _cpu() - c


def breakdown(mirror: Path, parse_cache: Path | None = None) -> list[tuple[str, float]]:
    """CPU seconds per upstream of one in-process collect, parsing in this process only
    (worker processes' CPU would not show in process_time)."""
    from opcheck.sync.pipeline import collect, installed_universe
    from opcheck.sync.sources import MirrorSource
    from opcheck.sync.upstreams import UPSTREAMS

    spent: list[tuple[str, float]] = []

    class Timed:
        def __init__(self, inner: object) -> None:
            self.inner = inner
            self.name = inner.name  # type: ignore[attr-defined]
            self.reads = self.parser = self.adds = ""

        def collect(self, ctx: object) -> None:
            t = time.process_time()
            self.inner.collect(ctx)  # type: ignore[attr-defined]
            spent.append((self.name, time.process_time() - t))

    collect(MirrorSource(mirror), universe=installed_universe(),
            upstreams=[Timed(u) for u in UPSTREAMS], parse_cache=parse_cache, workers=0)
    return spent


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mirror", type=Path, default=ROOT.parent / "shared" / "upstream")
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    if not (args.mirror / "releases.tsv").is_file():
        print(f"sync --mirror: skipped ({args.mirror} not found)")
        return
    cold: list[tuple[float, float]] = []
    warm: list[tuple[float, float]] = []
    with tempfile.TemporaryDirectory(prefix="opcheck-bench-sync-") as tmp:
        for i in range(args.rounds):
            cache, out = Path(tmp) / f"cache{i}", Path(tmp) / f"out{i}"
            cold.append(sync(args.mirror, cache, out))
            warm.append(sync(args.mirror, cache, out))
    from opcheck.sync.context import default_workers

    # parsing in worker processes depends on how busy the machine is: say what it was
    print(f"parse workers a sync would start now: {default_workers()} "
          f"(load {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)")
    for label, runs in (("cold (empty parse cache)", cold), ("warm (parse cache of a previous sync)", warm)):
        wall = statistics.median(w for w, _ in runs)
        cpu = statistics.median(c for _, c in runs)
        print(f"sync --mirror {label}: {wall:.1f} s wall, {cpu:.1f} s CPU "
              f"(target ≤ 8 s; {wall / 8:.2f} of target; median of {len(runs)})")
    with tempfile.TemporaryDirectory(prefix="opcheck-bench-sync-") as tmp:
        for label in ("cold", "warm"):
            spent = breakdown(args.mirror, Path(tmp))
            total = sum(s for _, s in spent)
            print(f"{label} collect in process (no workers): {total:.1f} CPU s; " + ", ".join(
                f"{n} {s:.1f}" for n, s in sorted(spent, key=lambda x: -x[1]) if s >= 0.1))


if __name__ == "__main__":
    main()
