"""Datasette site under load: p95 latency of the op page and a faceted table view with 20
concurrent clients, on loopback only (127.0.0.1), with a bounded number of requests.

The server runs as ``opcheck serve`` does by default: one worker process per core. Runs per
page kind: "cold" requests distinct URLs, each once (every request renders: the response cache
misses), "warm" repeats a few popular URLs (served from the response cache), and cold again
with one worker (what the extra processes buy). Those clients send their next request the
moment a response arrives: a saturation test. Then 20 visitors who read each page for about a
second (an open load) on cold pages and on a browsing mix, and the browsing mix at
saturation in three consecutive windows on one server: op pages and faceted views drawn with
Zipf popularity (a few pages are visited often, most rarely), so the cache starts empty and
fills as a team would fill it.

Load comes from wrk (C) when installed; otherwise from a Python client, which on a 2-core
machine spends as much CPU as the server and so inflates its own latencies.

Prints one line per figure as ``name: value unit (target ...)``; run from the repo root:
``.venv/bin/python benchmarks/bench_serve.py [--clients 20] [--workers N] [--seconds 4]``.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

# The loopback server the tests use (tests/web/live_server.py).
sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests" / "web"))
from live_server import running_server

TARGET_MS = 100.0
POPULAR_OPS = ["aten::repeat_interleave.self_Tensor", "aten::add.Tensor",
               "aten::isin.Tensor_Tensor", "aten::mm", "aten::relu", "aten::index_put_"]


def pages(path: Path, *, diverse: bool = False) -> dict[str, tuple[list[str], list[str]]]:
    """page kind → (distinct URLs for the cold run, popular URLs for the warm run)."""
    conn = sqlite3.connect(path)
    ops = [r[0] for r in conn.execute(
        "SELECT op FROM operator WHERE namespace = 'aten' ORDER BY op LIMIT 3000")]
    releases = [r[0] for r in conn.execute(
        "SELECT torch_npu FROM release WHERE kernel_source != 'none' ORDER BY sort_key")]
    conn.close()
    # A faceted view as a visitor gets it: one release's kernels with the configured facets
    # (status, op_api, acl_op), or narrowed by clicking a facet value. (An extra ``_facet=``
    # naming a configured facet would make Datasette compute that facet twice.)
    narrow = ["", "&op_api=1", "&acl_op=1", "&op_api=0"]
    # wrk sends requests for a fixed time: give it enough distinct URLs that a cold run
    # never repeats one (page sizes vary the faceted view without changing its work much).
    sizes = range(20, 70) if diverse else (50,)
    return {
        "op page": ([f"/-/op/{op}" for op in (ops if diverse else ops[::7])],
                    [f"/-/op/{op}" for op in POPULAR_OPS]),
        "faceted table (npukernel of one release, facets)": (
            [f"/catalog/npukernel?release={r}{f}&_size={n}"
             for n in sizes for r in releases for f in narrow],
            ["/catalog/npukernel?release=2.6.0.post5",
             "/catalog/npukernel?release=2.1.0.post17&acl_op=1"]),
    }


async def load(base: str, paths: list[str], total: int, clients: int) -> tuple[list[float], float]:
    """``total`` GETs spread over ``clients`` concurrent connections; per-request seconds."""
    latencies: list[float] = []
    counter = iter(range(total))
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:

        async def worker() -> None:
            for i in counter:
                t = time.perf_counter()
                r = await client.get(paths[i % len(paths)])
                latencies.append(time.perf_counter() - t)
                if r.status_code != 200:
                    raise RuntimeError(f"{paths[i % len(paths)]}: HTTP {r.status_code}")

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(clients)))
        wall = time.perf_counter() - start
    return latencies, wall


_WRK_SCRIPT = """
paths = {%s}
i = 0
request = function()
  i = i + 1
  return wrk.format(nil, paths[(i - 1) %% #paths + 1])
end
done = function(summary, latency, requests)
  io.write(string.format("WRK %%d %%.2f %%.2f %%.2f %%.2f %%d\\n", summary.requests,
    latency:percentile(50) / 1000, latency:percentile(95) / 1000,
    latency:percentile(99) / 1000, latency.max / 1000,
    summary.errors.status + summary.errors.connect + summary.errors.read + summary.errors.timeout))
end
"""


def wrk(base: str, paths: list[str], clients: int, seconds: int, tmp: Path,
        *, distinct: bool = False) -> tuple[str, int]:
    """The same load from wrk (C, one thread): the Python client above spends as much CPU as
    the server on this 2-core machine, so its latencies include its own queueing."""
    import subprocess

    script = tmp / "paths.lua"
    script.write_text(_WRK_SCRIPT % ", ".join(f'"{p}"' for p in paths), encoding="utf-8")
    out = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "-s", str(script), base],
                         capture_output=True, text=True, check=True, timeout=seconds + 30).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRK "))
    n, p50, p95_, p99, mx, errors = line.split()[1:]
    if distinct and int(n) > len(paths):
        raise RuntimeError(f"wrk sent {n} requests but only {len(paths)} distinct URLs exist")
    cold_note = ", every request distinct" if distinct else ""
    return (f"p95 {float(p95_):.1f} ms, p50 {float(p50):.1f} ms, p99 {float(p99):.1f} ms, "
            f"max {float(mx):.1f} ms, {int(n) / seconds:.0f} req/s, {errors} errors "
            f"({n} requests in {seconds} s, {clients} connections{cold_note}; "
            f"target p95 <= {TARGET_MS:.0f} ms, {float(p95_) / TARGET_MS:.2f} of target)"), int(n)


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[18] if len(xs) >= 20 else max(xs)


async def paced_users(base: str, paths: list[str], users: int, seconds: float, think: float,
                      seed: int = 11) -> tuple[list[float], int]:
    """``users`` visitors who each read a page for ``think`` seconds on average (exponential)
    before the next request: an open load of about users / think requests per second, where
    wrk and the saturation runs send the next request the moment a response arrives.
    Returns per-request seconds and the number of requests sent."""
    latencies: list[float] = []
    stream = iter(paths)
    limits = httpx.Limits(max_connections=users, max_keepalive_connections=users)
    async with httpx.AsyncClient(base_url=base, limits=limits, timeout=30) as client:

        async def user(k: int) -> None:
            rng = random.Random(seed + k)
            end = time.perf_counter() + seconds
            while True:
                await asyncio.sleep(rng.expovariate(1 / think))
                if time.perf_counter() > end:
                    return
                url = next(stream, None)
                if url is None:  # every URL visited once: a cold run never repeats one
                    return
                t = time.perf_counter()
                r = await client.get(url)
                latencies.append(time.perf_counter() - t)
                if r.status_code != 200:
                    raise RuntimeError(f"{url}: HTTP {r.status_code}")

        await asyncio.gather(*(user(k) for k in range(users)))
    return latencies, len(latencies)


def browsing_mix(path: Path, n: int, seed: int = 7) -> list[str]:
    """``n`` requests over every aten op page and per-release faceted view, drawn with
    Zipf(1) popularity over a shuffled ranking."""
    conn = sqlite3.connect(path)
    universe = [f"/-/op/{r[0]}" for r in conn.execute(
        "SELECT op FROM operator WHERE namespace = 'aten' ORDER BY op")]
    universe += [f"/catalog/npukernel?release={r[0]}{f}" for r in conn.execute(
        "SELECT torch_npu FROM release WHERE kernel_source != 'none'")
        for f in ("", "&op_api=1", "&acl_op=1", "&op_api=0")]
    conn.close()
    rng = random.Random(seed)
    rng.shuffle(universe)
    return rng.choices(universe, weights=[1.0 / (k + 1) for k in range(len(universe))], k=n)


def warm_up(base: str, workers: int) -> None:
    """A new process compiles its templates and fills SQLite's page cache on its first
    pages; that start-up cost is not what a page costs. Fresh connections reach every worker
    (the kernel spreads them); the URLs used are not measured ones."""
    import urllib.request

    for i in range(workers * 8):
        for url in (f"/-/op/aten::add.Tensor?warm={i}", f"/catalog/npukernel?_size=3&warm={i}",
                    f"/catalog/release?warm={i}"):
            with urllib.request.urlopen(base + url) as r:
                r.read()


def report(label: str, lat_ms: list[float], wall: float, clients: int) -> str:
    return (f"{label}: p95 {p95(lat_ms):.1f} ms, p50 {statistics.median(lat_ms):.1f} ms, "
            f"max {max(lat_ms):.1f} ms, {len(lat_ms) / wall:.0f} req/s ({len(lat_ms)} requests, "
            f"{clients} clients; target p95 <= {TARGET_MS:.0f} ms, "
            f"{p95(lat_ms) / TARGET_MS:.2f} of target)")


def main() -> None:
    from opcheck.cli.common import resolve_catalog_path
    from opcheck.web import server

    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=600, help="per run without wrk (bounded)")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--seconds", type=int, default=4, help="per wrk run")
    ap.add_argument("--workers", type=int, default=server.default_workers())
    ap.add_argument("--catalog", type=Path, default=None)
    args = ap.parse_args()
    total = max(20, min(args.requests, 5000))
    has_wrk = shutil.which("wrk") is not None
    tmp = Path(tempfile.mkdtemp(prefix="opcheck-bench-serve-"))

    def run(base: str, urls: list[str], n: int, *, distinct: bool = False) -> tuple[str, int]:
        if has_wrk:
            text, sent = wrk(base, urls, args.clients, args.seconds, tmp, distinct=distinct)
            return "wrk: " + text, sent
        n = min(n, len(urls))
        lat, wall = asyncio.run(load(base, urls, n, args.clients))
        return report("Python client", [x * 1000 for x in lat], wall, args.clients), n

    try:
        path = resolve_catalog_path(args.catalog)  # served read-only, search indexes built in
        if not has_wrk:
            print("wrk load generator: not installed (apt-get install wrk); Python client used")
        kinds = pages(path, diverse=has_wrk)
        for workers in dict.fromkeys((args.workers, 1)):
            with running_server(path, workers=workers) as base:
                assert base.startswith("http://127.0.0.1:")  # loopback only
                warm_up(base, workers)
                for name, (cold, warm) in kinds.items():
                    print(f"{name}, cold, {workers} worker(s), "
                          f"{run(base, cold, total, distinct=True)[0]}")
                    if workers == args.workers:
                        for _ in range(workers * 4):  # warm: each worker has rendered each
                            asyncio.run(load(base, warm, len(warm), 1))
                        print(f"{name}, warm, {workers} worker(s), {run(base, warm, total)[0]}")
        # Visitors who read what they load: every request a page's first visit (cold), then
        # the popularity mix, each on a fresh server.
        think = 1.0
        for label, urls in ([(f"{name}, cold", cold) for name, (cold, _) in kinds.items()]
                            + [("browsing mix, cache empty at start", browsing_mix(path, 5000))]):
            with running_server(path, workers=args.workers) as base:
                warm_up(base, args.workers)
                lat, n = asyncio.run(paced_users(base, urls, args.clients, 15, think))
                ms = [x * 1000 for x in lat]
                print(f"{label}, {args.clients} visitors reading {think:.0f} s per page on "
                      f"average, {args.workers} worker(s): p95 {p95(ms):.1f} ms, p50 "
                      f"{statistics.median(ms):.1f} ms, max {max(ms):.1f} ms ({n} requests in "
                      f"15 s; target p95 <= {TARGET_MS:.0f} ms, {p95(ms) / TARGET_MS:.2f} of "
                      f"target)")
        # The mix runs in consecutive windows on one server: the first starts with an empty
        # cache, later ones see the pages earlier visitors already rendered.
        drawn = browsing_mix(path, 200_000 if has_wrk else total * 3)
        with running_server(path, workers=args.workers) as base:
            warm_up(base, args.workers)
            seen: set[str] = set()
            at = 0
            for window in range(1, 4):
                text, sent = run(base, drawn[at:], total)
                batch = drawn[at:at + sent]
                first = len(set(batch) - seen) / max(1, len(batch))
                seen.update(batch)
                at += sent
                print(f"browsing mix window {window} (op pages and faceted views, Zipf "
                      f"popularity, {'cache empty at start' if window == 1 else 'continued'}, "
                      f"{first:.0%} of requests a page's first visit), {args.workers} "
                      f"worker(s), {text}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
