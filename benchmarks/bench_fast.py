"""Repeated layers traced once (``--fast``) against the full trace and the floor process.

Each figure is a fresh process of the same shape: import torch and transformers, build the
LLaMA model on the meta device, then

- floor: swap its tensors for fake ones and run one bare TorchDispatchMode pass (forward; with
  --train also backward of sum(logits) and one AdamW step), no recording;
- full:  opcheck's runtime trace (``runtime.trace_module``, the catalog's watched composites);
- fast:  the same with repeated blocks traced a few times (``repeat.trace_fast``).

Runs alternate (floor, fast, full, floor, ...) so load on the shared machine hits all alike;
wall and CPU seconds (user + system of the child) are medians. The fast and full op lists are
compared per op record and per call signature (counts included).

Target (issue 20): LLaMA-70B --train, fast <= 1.5x the floor.
Run: .venv/bin/python benchmarks/bench_fast.py [--rounds 3] [--only 70b|7b]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

SEQ = 128
SIZES = {
    "7b": {},  # LlamaConfig() defaults are the 7B sizes
    "70b": {"hidden_size": 8192, "intermediate_size": 28672, "num_hidden_layers": 80,
            "num_attention_heads": 64, "num_key_value_heads": 8, "vocab_size": 32000},
}  # fmt: skip

BUILD = r"""
import json, sys
import torch
import transformers
from transformers import LlamaConfig, LlamaForCausalLM
sizes, train, seq = json.loads(sys.argv[1]), sys.argv[2] == "1", int(sys.argv[3])
cfg = LlamaConfig(**sizes)
cfg.use_cache = False
cfg._attn_implementation = "sdpa"
with torch.device("meta"):
    model = LlamaForCausalLM(cfg)
ids = torch.zeros(1, seq, dtype=torch.long)
"""

FLOOR = BUILD + r"""
from torch._subclasses.fake_tensor import FakeTensorMode
from torch.fx.experimental.symbolic_shapes import ShapeEnv
from torch.utils._python_dispatch import TorchDispatchMode
calls = [0]

class Bare(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        calls[0] += 1
        return func(*args, **(kwargs or {}))

model.train(train)
with FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True):
    model = model.to_empty(device="cpu")
    ids = torch.empty(ids.shape, dtype=ids.dtype)
with (torch.enable_grad() if train else torch.no_grad()), Bare():
    out = model(ids, use_cache=False)
    if train:
        out.logits.sum().backward()
        params = [p for p in model.parameters() if p.requires_grad]
        torch.optim.AdamW(params, lr=1e-3, foreach=True).step()
print(json.dumps({"calls": calls[0]}))
"""

TRACE = BUILD + r"""
from opcheck.tracers import repeat, runtime
from opcheck.tracers.inputs import InputSpec
fast, composites, out_path = sys.argv[4] == "1", json.loads(sys.argv[5]), sys.argv[6]
fn = repeat.trace_fast if fast else runtime.trace_module
ol = fn(model, InputSpec(), example_args=(ids,), example_kwargs={"use_cache": False},
        train=train, label="llama", composites=composites)
counts = {}
for u in ol.ops:
    counts[json.dumps([u.op, u.via])] = u.count
    for s in u.signatures:
        counts[json.dumps([u.op, u.via, s.key])] = s.count
with open(out_path, "w") as fh:
    json.dump(counts, fh)
print(json.dumps({"calls": sum(u.count for u in ol.leaves()), "records": len(ol.ops),
                  "fast_used": any(n.startswith("--fast:") and "extrapolated" in n
                                   for n in ol.notes),
                  "notes": [n for n in ol.notes if n.startswith("--fast")]}))
"""


def _run(code: str, *args: str) -> tuple[float, float, dict[str, Any]]:
    """Wall and CPU seconds of a fresh child, and the JSON it printed last."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    out = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                         check=False, env={**os.environ, "PYTHONWARNINGS": "ignore"})
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out.returncode != 0:
        raise SystemExit(f"benchmark child failed:\n{out.stderr[-3000:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return wall, cpu, json.loads(out.stdout.strip().splitlines()[-1])


def measure(name: str, train: bool, rounds: int, composites: str, tmp: Path) -> None:
    sizes = json.dumps(SIZES[name])
    common = [sizes, "1" if train else "0", str(SEQ)]
    runs: dict[str, list[tuple[float, float]]] = {"floor": [], "fast": [], "full": []}
    info: dict[str, dict[str, Any]] = {}
    for _ in range(rounds):
        for kind in runs:
            if kind == "floor":
                wall, cpu, doc = _run(FLOOR, *common)
            else:
                path = tmp / f"{name}-{kind}.json"
                flag = "1" if kind == "fast" else "0"
                wall, cpu, doc = _run(TRACE, *common, flag, composites, str(path))
            runs[kind].append((wall, cpu))
            info[kind] = doc
    fast_counts = json.loads((tmp / f"{name}-fast.json").read_text())
    full_counts = json.loads((tmp / f"{name}-full.json").read_text())
    differ = [k for k in set(fast_counts) | set(full_counts)
              if fast_counts.get(k) != full_counts.get(k)]  # fmt: skip
    med = {k: (statistics.median(w for w, _ in v), statistics.median(c for _, c in v))
           for k, v in runs.items()}  # fmt: skip
    fw, fc = med["floor"]
    mode = "--train" if train else "inference"
    print(f"llama-{name} {mode} (seq {SEQ}), median of {rounds} alternating rounds:")
    print(f"  floor (imports + meta build + bare dispatch pass): {fw:.2f} s wall, {fc:.2f} s CPU, "
          f"{info['floor']['calls']} dispatched calls")
    for kind in ("fast", "full"):
        w, c = med[kind]
        print(f"  {kind:5} trace: {w:.2f} s wall, {c:.2f} s CPU = {w / fw:.2f}x floor wall, "
              f"{c / fc:.2f}x floor CPU; {info[kind]['calls']} calls in the op list, "
              f"{info[kind]['records']} records")
    used = "extrapolated" if info["fast"]["fast_used"] else "FELL BACK to the full trace"
    print(f"  fast {used}; op records and signature counts agree with the full trace: "
          f"{'yes' if not differ else f'NO ({len(differ)} keys differ, e.g. {differ[:3]})'}")
    for note in info["fast"]["notes"]:
        print(f"  note: {note}")
    if train and name == "70b":
        print(f"  target fast <= 1.5x floor: {fc and (med['fast'][1] / fc):.2f}x by CPU, "
              f"{med['fast'][0] / fw:.2f}x by wall")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--only", choices=sorted(SIZES), default=None)
    opts = ap.parse_args()
    from opcheck.tracers.composites import watched_composites

    composites = json.dumps(list(watched_composites()))
    with tempfile.TemporaryDirectory(prefix="opcheck-bench-fast-") as tmp:
        if opts.only in (None, "70b"):
            measure("70b", True, opts.rounds, composites, Path(tmp))
        if opts.only in (None, "7b"):
            measure("7b", False, opts.rounds, composites, Path(tmp))


if __name__ == "__main__":
    main()
