"""Datasette site under load: p95 latency of the op page and a faceted table view with 20
concurrent clients, on loopback only (127.0.0.1), with a bounded number of requests.

Two runs per page kind: "cold" requests distinct URLs, each once (every request renders: the
response cache misses), "warm" repeats a few popular URLs (served from the response cache).

Prints one line per figure as ``name: value unit (target ...)``; run from the repo root:
``.venv/bin/python benchmarks/bench_serve.py [--requests 400] [--clients 20]``.
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sqlite3
import statistics
import tempfile
import time
from pathlib import Path

import httpx

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
    facets = ["status", "op_api", "acl_op"]
    # wrk sends requests for a fixed time: give it enough distinct URLs that a cold run
    # never repeats one (page sizes vary the faceted view without changing its work much).
    sizes = range(20, 70) if diverse else (50,)
    return {
        "op page": ([f"/-/op/{op}" for op in (ops if diverse else ops[::7])],
                    [f"/-/op/{op}" for op in POPULAR_OPS]),
        "faceted table (npukernel of one release, facet)": (
            [f"/catalog/npukernel?release={r}&_facet={f}&_size={n}"
             for n in sizes for r in releases for f in facets],
            ["/catalog/npukernel?release=2.6.0.post5&_facet=status",
             "/catalog/npukernel?release=2.1.0.post17&_facet=status"]),
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


def wrk(base: str, paths: list[str], clients: int, seconds: int, tmp: Path) -> str:
    """The same load from wrk (C, one thread): the Python client above spends as much CPU as
    the server on this 2-core machine, so its latencies include its own queueing."""
    import subprocess

    script = tmp / "paths.lua"
    script.write_text(_WRK_SCRIPT % ", ".join(f'"{p}"' for p in paths), encoding="utf-8")
    out = subprocess.run(["wrk", "-t1", f"-c{clients}", f"-d{seconds}s", "-s", str(script), base],
                         capture_output=True, text=True, check=True, timeout=seconds + 30).stdout
    line = next(x for x in out.splitlines() if x.startswith("WRK "))
    n, p50, p95_, p99, mx, errors = line.split()[1:]
    cold_note = " (list not exhausted: every request distinct)" if int(n) <= len(paths) else ""
    return (f"p95 {float(p95_):.1f} ms, p50 {float(p50):.1f} ms, p99 {float(p99):.1f} ms, "
            f"max {float(mx):.1f} ms, {int(n) / seconds:.0f} req/s, {errors} errors "
            f"({n} requests in {seconds} s, {clients} connections{cold_note}; "
            f"target p95 <= {TARGET_MS:.0f} ms, {float(p95_) / TARGET_MS:.2f} of target)")


def p95(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=20)[18] if len(xs) >= 20 else max(xs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--requests", type=int, default=400, help="per page kind (bounded)")
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--catalog", type=Path, default=None)
    args = ap.parse_args()
    total = max(20, min(args.requests, 5000))
    from opcheck.db import serve
    from opcheck.db.engine import resolve_catalog_path

    tmp = Path(tempfile.mkdtemp(prefix="opcheck-bench-serve-"))
    try:
        path = tmp / "catalog.sqlite"
        shutil.copyfile(resolve_catalog_path(args.catalog), path)
        conn = sqlite3.connect(path)
        serve.create_search_index(conn)
        conn.commit()
        conn.close()
        with serve.running_server(path) as base:
            assert base.startswith("http://127.0.0.1:")  # loopback only
            for name, (cold, warm) in pages(path).items():
                for label, paths, n in (("cold", cold, min(total, len(cold))),
                                        ("warm", warm, total)):
                    if label == "warm":  # one visit each first: warm means served from cache
                        asyncio.run(load(base, paths, len(paths), 1))
                    lat, wall = asyncio.run(load(base, paths, n, args.clients))
                    ms = [x * 1000 for x in lat]
                    print(f"{name}, {label}, Python client: p95 {p95(ms):.1f} ms, p50 "
                          f"{statistics.median(ms):.1f} ms, max {max(ms):.1f} ms, "
                          f"{len(ms) / wall:.0f} req/s ({len(ms)} requests, {args.clients} "
                          f"clients; target p95 <= {TARGET_MS:.0f} ms)")
            if shutil.which("wrk") is None:
                print("wrk load generator: not installed (apt-get install wrk), skipped")
                return
            for name, (cold, warm) in pages(path, diverse=True).items():
                print(f"{name}, cold, wrk: {wrk(base, cold, args.clients, 3, tmp)}")
                asyncio.run(load(base, warm, len(warm), 1))  # warm: each page rendered once
                print(f"{name}, warm, wrk: {wrk(base, warm, args.clients, 3, tmp)}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
