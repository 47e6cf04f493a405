"""The atlas's reach: every architecture of a model library through the sandboxed trace.

Lists the library's architectures (``python -m opcheck.tracers.atlas_build list LIBRARY``, a
subprocess as the atlas command does), then traces each as ``opcheck.tracers.api.trace(None,
model_spec="atlas:LIBRARY/NAME")`` with children forked from one template
(``sandbox.shared_imports``), ``-j`` at a time. Prints traced (per recorder), skipped with a
reason about the model, failed, the failure causes grouped, and the time per model; ``--out``
keeps one JSON line per architecture.

Run: .venv/bin/python benchmarks/atlas_reach.py transformers [-j 2] [--only a,b] [--limit N [--offset K]]
"""

from __future__ import annotations

import argparse
import collections
import json
import re
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.tracers import api, sandbox
from opcheck.tracers.atlas_build import ModelSkip, preload


def listing(library: str) -> dict[str, Any]:
    done = subprocess.run([sys.executable, "-m", "opcheck.tracers.atlas_build", "list", library],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise SystemExit(done.stderr.strip())
    return dict(json.loads(done.stdout))


def trace_one(library: str, row: dict[str, Any], timeout: float, train: bool) -> dict[str, Any]:
    out = {"name": row["name"], "task": row["task"], "model_class": row["model_class"]}
    if row.get("skip"):
        return {**out, "status": "skipped", "reason": row["skip"], "seconds": 0.0}
    start = time.perf_counter()
    try:
        ol = api.trace(None, model_spec=f"atlas:{library}/{row['name']}", timeout=timeout,
                       memory_mb=4096, train=train)
        status = "traced" if ol.complete else "partial"
        out.update(recorder=ol.recorder, ops=len(ol.ops), reason=ol.stopped, forward=ol.forward)
    except ModelSkip as exc:
        status, out["reason"] = "skipped", str(exc)
    except TraceError as exc:
        status, out["reason"] = "failed", str(exc)
    return {**out, "status": status, "seconds": round(time.perf_counter() - start, 2)}


def cause(reason: str) -> str:
    """A failure's cause without the model's own names and numbers: groups alike failures."""
    text = re.sub(r"^atlas:\S+: ", "", reason)
    text = re.sub(r"tracing failed at [^:]+:\d+: ", "", text)
    text = re.sub(r"\d+", "N", text)
    return text[:110]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("library")
    ap.add_argument("-j", type=int, default=2)
    ap.add_argument("--only", default="")
    ap.add_argument("--limit", type=int, default=0)
    ap.add_argument("--offset", type=int, default=0,
                    help="with --limit: start the every-Nth sample here (another sample)")
    ap.add_argument("--timeout", type=float, default=120.0)
    ap.add_argument("--train", action="store_true")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    doc = listing(args.library)
    rows = doc["architectures"]
    if args.only:
        wanted = set(args.only.split(","))
        rows = [r for r in rows if r["name"] in wanted]
    if args.limit:
        rows = rows[args.offset:: max(1, len(rows) // args.limit)][: args.limit]
    print(f"{args.library} {doc['version']}: {len(rows)} architectures, -j {args.j}",
          file=sys.stderr)
    start = time.perf_counter()
    results: list[dict[str, Any]] = []
    sink = args.out.open("w") if args.out else None
    with sandbox.shared_imports(preload(args.library)), ThreadPoolExecutor(args.j) as pool:
        futures = [pool.submit(trace_one, args.library, r, args.timeout, args.train)
                   for r in rows]
        for i, fut in enumerate(futures, 1):
            res = fut.result()
            results.append(res)
            if sink:
                sink.write(json.dumps(res) + "\n")
                sink.flush()
            print(f"[{i}/{len(rows)}] {res['name']}: {res['status']} "
                  f"{res.get('recorder', '')} {res['seconds']}s {res.get('reason', '')[:150]}",
                  file=sys.stderr)
    wall = time.perf_counter() - start
    counts = collections.Counter(r["status"] for r in results)
    recorders = collections.Counter(r.get("recorder", "") for r in results
                                    if r["status"] == "traced")
    by_task: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for r in results:
        by_task[r["task"]][r["status"]] += 1
    causes = collections.Counter(cause(r.get("reason", "")) for r in results
                                 if r["status"] in ("failed", "partial"))
    skips = collections.Counter(cause(r.get("reason", "")) for r in results
                                if r["status"] == "skipped")
    multimodal = [r for r in results if r["task"] == "multimodal" and r["status"] == "traced"]
    full = sum(1 for r in multimodal if r.get("forward") == "full")
    traced_times = sorted(r["seconds"] for r in results if r["status"] == "traced")
    n = len(results) or 1
    print(f"\n{args.library} {doc['version']}: {len(results)} architectures in {wall:.0f} s "
          f"(-j {args.j}, {wall / n:.1f} s per architecture)")
    print(f"traced {counts['traced']} ({100 * counts['traced'] / n:.1f}%: "
          + ", ".join(f"{k} {v}" for k, v in recorders.most_common()) + f"), skipped "
          f"{counts['skipped']}, partial {counts['partial']}, failed {counts['failed']}")
    if traced_times:
        print(f"trace time per model: median {traced_times[len(traced_times) // 2]:.1f} s, "
              f"max {traced_times[-1]:.1f} s")
    print("per task: " + "; ".join(
        f"{t} {c['traced']}/{sum(c.values())}" for t, c in sorted(by_task.items())))
    print(f"multimodal traced with every tower run (forward full): {full}/{len(multimodal)}")
    for title, grouped in (("failure causes", causes), ("skip reasons", skips)):
        if grouped:
            print(f"{title}:")
            for text, k in grouped.most_common(25):
                print(f"  {k:4d}  {text}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
