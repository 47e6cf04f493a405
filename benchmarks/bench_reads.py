"""Per-op catalog reads: what reading only the resolved ops' kernel rows buys.

- ``opcheck op X`` against ``opcheck releases`` (both read the release list; ``op`` resolves
  one op on every release);
- a check of the demo model's op list on one release, and with ``--all-releases``;
- the resident memory of a serve worker once it has started (one worker, loopback).

Fresh processes as a user runs them, rounds shuffled, medians of wall time and of CPU seconds
(user + sys of the child: the figure to trust on a shared machine). Run from the repo root:
``.venv/bin/python benchmarks/bench_reads.py [--catalog PATH] [--rounds 7]``.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = Path(__file__).resolve().parent / "out"
OPCHECK = [sys.executable, "-m", "opcheck"]
OP = "aten::isin.Tensor_Tensor_out"


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    c, t = _cpu(), time.perf_counter()
    subprocess.run(cmd, check=True, env=env, cwd=ROOT, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t, _cpu() - c


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def serve_rss(catalog: Path) -> float:
    sys.path.insert(0, str(ROOT / "tests" / "web"))
    from live_server import running_server

    pids: list[int] = []
    with running_server(catalog, workers=1, pids=pids, log=[]):
        time.sleep(1.0)  # start-up warming runs before "ready"; let the allocator settle
        return rss_mb(pids[0])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", type=Path, default=None,
                    help="catalog to read (default: the bundled one, built on first use)")
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    env = {**os.environ, "OPCHECK_CACHE_DIR": str(OUT / "cache")}
    if args.catalog is not None:
        env["OPCHECK_CATALOG"] = str(args.catalog)
        catalog = args.catalog
    else:
        env.pop("OPCHECK_CATALOG", None)
        code = "from opcheck.cli.common import resolve_catalog_path; print(resolve_catalog_path())"
        catalog = Path(subprocess.run([sys.executable, "-c", code], check=True, env=env,
                                      capture_output=True, text=True).stdout.strip())
    oplist = OUT / "demo-oplist.json"
    if not oplist.is_file():
        subprocess.run([*OPCHECK, "trace", "--model", "data/examples/demo_model.py:build",
                        "-o", str(oplist)], check=True, env=env, cwd=ROOT)
    check = [*OPCHECK, str(oplist), "--format", "json", "-o", os.devnull, "--fail-on", "never"]
    cmds = {
        "releases": [*OPCHECK, "releases"],
        "op": [*OPCHECK, "op", OP],
        "check": check,
        "check --all-releases": [*check, "--all-releases"],
    }
    for cmd in cmds.values():
        run(cmd, env)  # warm the page cache; first use builds nothing (catalog given)
    got: dict[str, list[tuple[float, float]]] = {k: [] for k in cmds}
    for _ in range(args.rounds):
        order = list(cmds)
        random.shuffle(order)
        for k in order:
            got[k].append(run(cmds[k], env))
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in got.items()}
    for k, (w, c) in med.items():
        print(f"opcheck {k}: {w:.2f} s wall, {c:.2f} s CPU (median of {args.rounds})")
    (w_op, c_op), (w_rel, c_rel) = med["op"], med["releases"]
    print(f"op {OP} / releases: {w_op / w_rel:.2f}× wall, {c_op / c_rel:.2f}× CPU "
          f"(target ≤ 1.2×; {w_op / w_rel / 1.2:.2f} of target)")
    (w_all, c_all), (w_one, c_one) = med["check --all-releases"], med["check"]
    print(f"--all-releases adds {1000 * (w_all - w_one):.0f} ms wall, "
          f"{1000 * (c_all - c_one):.0f} ms CPU over a single-release check "
          f"(target ≤ 50 ms; {(w_all - w_one) / 0.05:.2f} of target)")
    rss = serve_rss(catalog)
    print(f"serve worker RSS after start: {rss:.0f} MB (target ≤ 150 MB; {rss / 150:.2f} of target)")


if __name__ == "__main__":
    main()
