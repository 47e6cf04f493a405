"""explain benchmark: `opcheck explain` on a big log, as a user runs it, beside a plain Python
regex line scan of the same file.

Writes explain-<N>mb.log once (in ``--dir``, default benchmarks/out): a training log of ordinary
lines (steps, losses, INFO records, warnings), with a handful of real failure shapes spread
through it (a CANN dtype rejection, an AI Core exception naming a kernel), then times the
baseline (``for line in file: rx.search(line)`` with one compiled error-code regex, in a fresh
process) and the CLI in a fresh process (JSON output, bundled catalog or ``--catalog``), and
reads the CLI's peak RSS. ``--delete`` removes the log afterwards (1 GB runs).

    python benchmarks/bench_explain.py [--catalog PATH] [--size-mb 200] [--dir D] [--delete]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"

_ORDINARY = [
    b"[rank0]:[I1201 10:11:12.123456 1234 train.py:88] step %d loss 0.%04d lr 1e-4 grad_norm 1.%03d\n",
    b"2026-12-01 10:11:12,345 - INFO - epoch 3 iter %d/100000 throughput %d samples/s mem %d MiB\n",
    b"[W compiler_depend.ts:%d] Warning: The oprator of MatMul is executed, Currently High Accuracy "
    b"but Low Performance OP with 64-bit has been used, Please Do Some Cast at Python Functions with "
    b"32-bit for Better Performance! (function operator())\n",
    b"[INFO] RUNTIME(%d,python):2026-12-01-10:11:12.%06d [stream.cc:%d] Stream synchronize ok.\n",
    b"  batch %d: tokens=%d padding=%d\n",
]
_FAILURES = [
    b"RuntimeError: call aclnnCast failed, detail:EZ1001: [PID: 775588] 2025-07-01-15:17:20.355.304 "
    b"self not implemented for DT_BFLOAT16, should be in dtype support list [DT_FLOAT16,DT_FLOAT,"
    b"DT_DOUBLE,DT_INT8,DT_UINT8,DT_INT16,DT_INT32,DT_INT64,DT_BOOL,DT_COMPLEX64,DT_COMPLEX128,].\n",
    b"[ERROR] RUNTIME(3912,python):2024-05-10-09:12:44.122.581 [davinci_model.cc:120] The error "
    b"from device(chipId:0, dieId:0), serial number is 3, there is an aicore error exception, "
    b"core id is 2, error code = 0x800000, kernelName=IndexPutV2_7a1b, opType IndexPutV2\n",
]


def write_log(path: Path, size: int) -> None:
    block: list[bytes] = []
    n = 0
    while sum(map(len, block)) < 1 << 20:
        n += 1
        line = _ORDINARY[n % len(_ORDINARY)]
        block.append(line % tuple(range(n, n + line.count(b"%"))) if b"%" in line else line)
    chunk = b"".join(block)
    with path.open("wb") as fh:
        written, i = 0, 0
        while written < size:
            fh.write(chunk)
            written += len(chunk)
            i += 1
            if i % 40 == 0:
                fh.write(_FAILURES[(i // 40) % len(_FAILURES)])


_BASELINE = ("import re, sys\nrx = re.compile(rb'\\b(?:E[0-9A-Z]\\d{4}|ERR\\d{5})\\b|error', re.I)\n"
             "n = 0\nwith open(sys.argv[1], 'rb') as f:\n    for line in f:\n"
             "        if rx.search(line):\n            n += 1\nprint(n)\n")


def regex_pass(log: Path) -> float:
    """Seconds of a plain Python regex line scan of ``log`` (a fresh process)."""
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-c", _BASELINE, str(log)], check=True, capture_output=True)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--catalog", default=None)
    ap.add_argument("--size-mb", type=int, default=200)
    ap.add_argument("--dir", default=str(OUT))
    ap.add_argument("--delete", action="store_true")
    args = ap.parse_args()
    out = Path(args.dir)
    out.mkdir(exist_ok=True)
    log = out / f"explain-{args.size_mb}mb.log"
    if not log.is_file() or log.stat().st_size < args.size_mb << 20:
        write_log(log, args.size_mb << 20)
    baseline = regex_pass(log)
    cmd = [sys.executable, "-c", "import sys; from opcheck.cli.app import main; sys.argv[0] = "
           "'opcheck'; main()", "explain", str(log), "--format", "json"]
    if args.catalog:
        cmd += ["--catalog", args.catalog]
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, env={**os.environ, "COLUMNS": "200"})
    seconds = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    problems = len(json.loads(proc.stdout or b"{}").get("problems", [])) if proc.stdout else 0
    print(json.dumps({"log_mb": round(log.stat().st_size / 2**20), "seconds": round(seconds, 1),
                      "regex_pass_seconds": round(baseline, 2),
                      "ratio": round(seconds / baseline, 2),
                      "peak_rss_mb": round(peak, 1), "exit": proc.returncode,
                      "problems": problems, "stderr": proc.stderr.decode()[-300:]}))
    if args.delete:
        log.unlink()


if __name__ == "__main__":
    main()
