"""What the profiling advisor's rules cost a check: matching their op chains on the LLaMA-7B
op list (traced once, in this process, on fake tensors) and turning the hits into tips against
the bundled catalog plus the rules synced from the test mirror of Ascend/mstt.

Target (issue 37): the rule matching <= 20 ms on the 7B op list.
Run: .venv/bin/python benchmarks/bench_advisor.py [--rounds 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=20)
    rounds = parser.parse_args().rounds

    import importlib.util

    import torch
    from testpaths import FIXTURES

    from opcheck.checker.advisor import advisor_tips, match_chains
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.advisor import advisor_rules
    from opcheck.db.build import write_catalog
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import make_engine
    from opcheck.db.snapshot import read_snapshot
    from opcheck.sync.advisor import AdvisorRules
    from opcheck.sync.context import SyncContext
    from opcheck.sync.sources import MirrorSource
    from opcheck.tracers import runtime
    from opcheck.tracers.composites import watched_composites
    from opcheck.tracers.inputs import InputSpec

    data = read_snapshot(snapshot_dir())
    ctx = SyncContext(MirrorSource(FIXTURES / "mirror"))
    ctx.data = data
    AdvisorRules().collect(ctx)
    path = write_catalog(data, Path(tempfile.mkdtemp()) / "catalog.sqlite")
    cat = Catalog.load(make_engine(path))
    spec = importlib.util.spec_from_file_location("bench_models", ROOT / "benchmarks/models.py")
    assert spec is not None and spec.loader is not None
    models = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(models)
    with torch.device("meta"):
        model, args, kwargs = models.llama_7b()
    oplist = runtime.trace_module(model, InputSpec(), example_args=args, example_kwargs=kwargs,
                                  label="llama-7b", composites=watched_composites())
    rules = advisor_rules(cat.engine)
    release = next(r for r in cat.releases if r.torch_npu == "2.7.1.post2")
    match_ms, tips_ms = [], []
    for _ in range(rounds):
        t0 = time.perf_counter()
        hits = match_chains(oplist, rules)
        t1 = time.perf_counter()
        tips = advisor_tips(cat, oplist, release, "910B", rules=rules)
        t2 = time.perf_counter()
        match_ms.append((t1 - t0) * 1000)
        tips_ms.append((t2 - t1) * 1000)
    calls = sum(u.count for u in oplist.ops)
    print(f"llama-7b: {len(oplist.ops)} records, {calls} calls; {len(rules)} advisor rules; "
          f"{len(hits)} chains hit; tips: {', '.join(t['api'] for t in tips) or 'none'}")
    print(f"rule matching: median {statistics.median(match_ms):.2f} ms, max "
          f"{max(match_ms):.2f} ms (target <= 20 ms)")
    print(f"matching + availability reads (tips): median {statistics.median(tips_ms):.2f} ms, "
          f"max {max(tips_ms):.2f} ms; {rounds} rounds")


if __name__ == "__main__":
    main()
