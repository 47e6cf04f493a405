"""Checker benchmarks: `opcheck model.pt2` end to end on a GPT-2-sized export.

Exports GPT-2 (124M parameters, the transformers default config) with torch.export once into
benchmarks/out/, then times the CLI as a user runs it: a fresh process, static .pt2 listing
(no --trust, so torch is never imported), resolve against the bundled catalog, JSON report.
Resolving 1,000 distinct ops is measured by bench_catalog.py.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"


def export_gpt2(path: Path) -> None:
    import torch
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config()
    cfg.use_cache = False
    model = GPT2LMHeadModel(cfg).eval()
    ids = torch.zeros(1, 128, dtype=torch.long)
    ep = torch.export.export(model, (ids,))
    torch.export.save(ep, str(path))
    params = sum(p.numel() for p in model.parameters())
    print(f"exported GPT-2 ({params / 1e6:.0f}M parameters, {len(ep.graph.nodes)} graph nodes, "
          f"{path.stat().st_size / 1e6:.0f} MB)")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    pt2 = OUT / "gpt2.pt2"
    if not pt2.is_file():
        export_gpt2(pt2)
    env = {**os.environ, "OPCHECK_CACHE_DIR": str(OUT / "cache")}
    cmd = [sys.executable, "-m", "opcheck", str(pt2), "--format", "json", "-o",
           str(OUT / "gpt2-report.json"), "--fail-on", "never", "--torch-npu", "2.13.0"]
    subprocess.run(cmd, check=True, env=env)  # first use builds the catalog: not timed
    times = []
    for _ in range(5):
        t = time.perf_counter()
        subprocess.run(cmd, check=True, env=env)
        times.append(time.perf_counter() - t)
    med = statistics.median(times)
    print(f"opcheck gpt2.pt2 end to end (static listing, 2.13.0): median {med:.2f} s, "
          f"best {min(times):.2f} s over 5 runs (target ≤ 3 s; {med / 3:.2f} of target)")


if __name__ == "__main__":
    main()
