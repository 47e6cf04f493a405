"""The recording cost of one op call on ``opcheck run``'s real-data npu device.

In one process (torch imported once): each small op below is called N times on plain CPU
tensors and on the recorded device (``realdevice.Session`` with a runtime ``Recorder``, as the
sandboxed worker runs a script), and the decode loop of ``benchmarks/decode_loop.py`` runs
both ways. Times are CPU
time of this process (``time.process_time``), which a busy shared machine disturbs less than
wall time. Printed per case: plain µs per call, recorded µs per call, the recording cost
(difference) and the ratio; for the decode loop, the wall time of each, the op calls recorded
and the cost per recorded call. ``--profile`` prints the top functions of a cProfile run of
the recorded add loop (where the per-call time goes). ``--rounds R`` measures every case R
times, plain and recorded in turn, and prints the minimum and the median of each figure (a
shared machine's load comes and goes; the minimum is the least disturbed).

Run: .venv/bin/python benchmarks/bench_record.py [--calls 20000] [--rounds 5] [--profile]
"""

from __future__ import annotations

import argparse
import contextlib
import io
import runpy
import statistics
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from opcheck.tracers import realdevice, redirect, runtime

HERE = Path(__file__).resolve().parent


def _cases(on: Callable[[Any], Any]) -> dict[str, Callable[[], Any]]:
    a, b = on(torch.randn(64, 64)), on(torch.randn(64, 64))
    v = on(torch.randn(1, 256))
    idx = on(torch.tensor([[1, 2, 3]]))
    return {
        "add (64x64 float32)": lambda: a + b,
        "mul by a scalar": lambda: a * 0.5,
        "softmax (1x256)": lambda: torch.softmax(v, dim=-1),
        "topk (1x256, k=8)": lambda: v.topk(8, dim=-1),
        "gather (1x3 indices)": lambda: v.gather(-1, idx),
        "cat (two 1x256)": lambda: torch.cat([v, v], dim=1),
    }


def _per_call(fn: Callable[[], Any], n: int) -> float:
    fn()
    best = float("inf")
    for _ in range(3):
        t = time.process_time()
        for _ in range(n):
            fn()
        best = min(best, (time.process_time() - t) / n)
    return best * 1e6


def _decode(recorded: bool) -> tuple[float, int]:
    """Wall seconds of the decode loop and the op calls recorded (0 when plain)."""
    sink = io.StringIO()
    rec = runtime.Recorder()
    t = time.process_time()
    with contextlib.redirect_stdout(sink):
        if recorded:
            with realdevice.Session(rec).active():
                runpy.run_path(str(HERE / "decode_loop.py"), run_name="__main__")
        else:
            runpy.run_path(str(HERE / "decode_loop.py"), run_name="__main__")
    seconds = time.process_time() - t
    return seconds, sum(u.count for u in rec.ops.values() if not u.composite)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=20000)
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--profile", action="store_true")
    opts = ap.parse_args()
    rounds = max(opts.rounds, 1)
    # one thread: process time then counts this thread's work, not idle OpenMP workers spinning
    torch.set_num_threads(1)
    # the plain decode loop first: once the redirection is installed it would ask for "cuda"
    _decode(False)  # warm-up: lazy imports, first-call kernels
    p_runs = [_decode(False)[0] for _ in range(rounds)]
    realdevice.install()
    redirect.install(redirect.Findings())  # the decode loop asks for "cuda", as under run
    plain_cases = _cases(lambda t: t)
    plains: dict[str, list[float]] = {k: [] for k in plain_cases}
    recs: dict[str, list[float]] = {k: [] for k in plain_cases}
    session = realdevice.Session(runtime.Recorder())
    with session.active():
        cases = _cases(realdevice.wrap)
        for _ in range(rounds):  # plain and recorded in turn: both see the same load
            for k in plain_cases:
                plains[k].append(_per_call(plain_cases[k], opts.calls))
                recs[k].append(_per_call(cases[k], opts.calls))
        if opts.profile:
            import cProfile
            import pstats

            add = cases["add (64x64 float32)"]
            prof = cProfile.Profile()
            prof.enable()
            for _ in range(opts.calls):
                add()
            prof.disable()
            pstats.Stats(prof).sort_stats("tottime").print_stats(25)
    _decode(True)  # warm-up: torch imports torch.distributed.tensor on a first subclass copy_
    calls = 0
    r_runs: list[float] = []
    for _ in range(rounds):
        r_s, calls = _decode(True)
        r_runs.append(r_s)

    def fig(values: list[float], spec: str, pair: bool = False) -> str:
        if rounds == 1:
            return format(values[0], spec)
        lo, mid = values if pair else (min(values), statistics.median(values))
        return f"{format(lo, spec)} / {format(mid, spec)}"

    if rounds > 1:
        print(f"{rounds} rounds: min / median of each figure")
    print(f"{'op':24} {'plain us':>11} {'recorded us':>13} {'cost us':>11} {'ratio':>11}")
    mean: list[float] = [0.0] * rounds
    for k in plains:
        cost = [r - p for p, r in zip(plains[k], recs[k], strict=True)]
        ratio = [r / p for p, r in zip(plains[k], recs[k], strict=True)]
        mean = [m + c / len(plains) for m, c in zip(mean, cost, strict=True)]
        print(f"{k:24} {fig(plains[k], '.1f'):>11} {fig(recs[k], '.1f'):>13} "
              f"{fig(cost, '.1f'):>11} {fig(ratio, '.1f'):>10}x")  # fmt: skip
    print(f"mean recording cost per op call: {fig(mean, '.1f')} us")
    # the plain runs all come before the recorded ones: figures of the minima, of the medians
    lo, mid = (min(p_runs), min(r_runs)), (statistics.median(p_runs), statistics.median(r_runs))
    ratio = [r / p for p, r in (lo, mid)]
    per = [(r - p) / max(calls, 1) * 1e6 for p, r in (lo, mid)]
    print(f"decode loop (benchmarks/decode_loop.py, in process): plain {fig(p_runs, '.3f')} s, "
          f"recorded {fig(r_runs, '.3f')} s, ratio {fig(ratio, '.1f', True)}x, {calls} op calls "
          f"recorded, {fig(per, '.1f', True)} us per recorded call")


if __name__ == "__main__":
    main()
