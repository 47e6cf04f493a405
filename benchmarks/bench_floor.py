"""`opcheck check --model` end to end against the floor process, measured side by side.

The floor is what any tool answering the question must pay at least: a fresh Python process
that imports torch and transformers, builds the model on the meta device, swaps its tensors for
fake ones and runs one bare TorchDispatchMode pass over it (forward; with --train also backward and one AdamW step), with
no recording, no sandbox and no catalog. opcheck's figure is the whole command a user types
(CLI start, catalog load, sandboxed trace, check, JSON report), so the ratio is everything
opcheck adds. Runs alternate (floor, opcheck, floor, ...) so load on the shared machine hits
both alike; wall and CPU seconds (the process and all its children) are medians.

Targets (issue 20): LLaMA-7B inference <= 1.10x the floor; LLaMA-70B --train <= 1.5x (with
repeated-layer tracing, --fast).
Run: .venv/bin/python benchmarks/bench_floor.py [--rounds 5] [--only-7b]
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
MODELS = ROOT / "benchmarks" / "models.py"

FLOOR_CHILD = r"""
import sys
import torch
import transformers  # what the traced model file imports
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._python_dispatch import TorchDispatchMode
sys.path.insert(0, sys.argv[1])
import models

class Bare(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))

train = sys.argv[3] == "1"
with torch.device("meta"):
    model, args, kwargs = getattr(models, sys.argv[2])()
model.train(train)
# fake tensors as any tracer needs them (meta tensors refuse the .item() of HF's mask code)
with FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True):
    model = model.to_empty(device="cpu")
    args = tuple(torch.empty(a.shape, dtype=a.dtype) for a in args)
with (torch.enable_grad() if train else torch.no_grad()), Bare():
    out = model(*args, **kwargs)
    if train:
        out.logits.sum().backward()
        params = [p for p in model.parameters() if p.requires_grad]
        torch.optim.AdamW(params, lr=1e-3, foreach=True).step()
"""


def _timed(cmd: list[str], env: dict[str, str]) -> tuple[float, float]:
    """Wall and CPU seconds (user + system of the process and every child it waited for)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(cmd, check=True, env=env, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu


def _has_fast(env: dict[str, str]) -> bool:
    out = subprocess.run([sys.executable, "-m", "opcheck", "check", "--help"], env=env,
                         capture_output=True, text=True).stdout
    return "--fast" in out


def measure(name: str, factory: str, *, train: bool, fast: bool, rounds: int, target: float,
            env: dict[str, str], report: Path, warm: bool = False) -> None:
    floor_cmd = [sys.executable, "-c", FLOOR_CHILD, str(MODELS.parent), factory,
                 "1" if train else "0"]
    check_cmd = [sys.executable, "-m", "opcheck", "check", "--model", f"{MODELS}:{factory}",
                 "--torch-npu", "2.13.0", "--fail-on", "never", "--format", "json",
                 "--output", str(report), "--quiet"]
    if train:
        check_cmd.append("--train")
    if fast:
        check_cmd.append("--fast")
    if warm:  # once per benchmark, not timed: bytecode and the page cache
        _timed(floor_cmd, env)
        _timed(check_cmd, env)
    floors: list[tuple[float, float]] = []
    checks: list[tuple[float, float]] = []
    for _ in range(rounds):
        floors.append(_timed(floor_cmd, env))
        checks.append(_timed(check_cmd, env))
    fw = statistics.median(w for w, _ in floors)
    fc = statistics.median(c for _, c in floors)
    cw = statistics.median(w for w, _ in checks)
    cc = statistics.median(c for _, c in checks)
    how = " --fast" if fast else ""
    print(f"{name}{how}: opcheck check {cw:.2f} s wall, {cc:.2f} s CPU; floor {fw:.2f} s wall, "
          f"{fc:.2f} s CPU; ratio {cw / fw:.2f}x wall, {cc / fc:.2f}x CPU (target <= {target}x; "
          f"{cc / fc / target:.2f} of target by CPU; median of {rounds} alternating rounds)")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--only-7b", action="store_true", help="the 7B inference figure alone")
    opts = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="opcheck-bench-floor-") as tmp:
        # Both sides run from compiled bytecode, as an installed package does (pip compiles
        # site-packages at install). A development shell's PYTHONDONTWRITEBYTECODE would make
        # every run recompile opcheck's editable sources (~0.2 s CPU) and nothing of the floor.
        env = {**os.environ, "OPCHECK_CACHE_DIR": tmp, "PYTHONWARNINGS": "ignore",
               "PYTHONPYCACHEPREFIX": str(Path(tmp) / "pycache")}
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        report = Path(tmp) / "report.json"
        # first use builds the catalog from the snapshot and the bytecode: not timed
        subprocess.run([sys.executable, "-m", "opcheck", "releases"], check=True, env=env,
                       stdout=subprocess.DEVNULL)
        measure("llama-7b inference", "llama_7b", train=False, fast=False, rounds=opts.rounds,
                target=1.10, env=env, report=report, warm=True)
        if opts.only_7b:
            return
        fast = _has_fast(env)
        measure("llama-70b --train", "llama_70b", train=True, fast=fast,
                rounds=max(2, opts.rounds - 2), target=1.5, env=env, report=report)
        if fast:
            measure("llama-70b --train", "llama_70b", train=True, fast=False, rounds=2,
                    target=1.5, env=env, report=report)


if __name__ == "__main__":
    main()
