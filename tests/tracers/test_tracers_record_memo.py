"""The recorder's per-call memo (a call like one recorded before only counts) loses nothing.

This module is also the workload: run as a script it records the same small program twice on
``opcheck run``'s real-data npu device, once with the recorder's caches on and once with every
per-call cache off (``MAX_CACHED_CALLS = 0``: each call takes the full path), and prints both op
lists. The program covers what a cached call could get wrong: one torch function reached from
two user lines, a user helper reached from two callers, module paths, scalars that change from
call to call, growing shapes, in-place and ``out=`` ops, a host copy, factories, composite ops at
both levels, and a training step (backward, the engine's gradient sums, the optimizer).
One subprocess for the module (the device takes PrivateUse1 for the process).
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("torch")

HERE = Path(__file__).resolve()
WATCHED = ("aten::linear", "aten::layer_norm", "aten::gelu")  # CIA ops recorded at both levels


def _line(marker: str) -> int:
    """The line of this file that holds ``# <marker>``: where the workload calls an op."""
    for n, text in enumerate(HERE.read_text(encoding="utf-8").splitlines(), start=1):
        if text.rstrip().endswith(f"# <{marker}>"):
            return n
    raise AssertionError(marker)


def _half(x: Any) -> Any:
    return x * 0.5  # <helper>


def _workload(steps: int) -> dict[str, int]:
    """The program recorded; returns how many times some lines ran."""
    import torch
    import torch.nn.functional as F

    torch.manual_seed(0)
    dev = "npu"
    model = torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.GELU(), torch.nn.LayerNorm(8),
                                torch.nn.Linear(8, 4)).to(dev)  # fmt: skip
    x = torch.randn(2, 8, device=dev)
    tokens = torch.zeros(1, 1, dtype=torch.long, device=dev)
    ran = {"a": 0, "b": 0}
    with torch.no_grad():
        for i in range(steps):
            y = model(x)
            p = F.softmax(y, dim=-1)  # <softmax-a>
            ran["a"] += 1
            if i % 3 == 0:
                q = F.softmax(y * 2, dim=-1)  # <softmax-b>
                ran["b"] += 1
                p = _half(q) + p  # <helper-caller-a>
            p = _half(p)  # <helper-caller-b>
            s = p * (i / 10)  # <changing-scalar>
            top, idx = s.topk(2, dim=-1)
            tokens = torch.cat([tokens, idx[:1, :1]], dim=1)  # <growing>
            s.add_(1)
            _ = torch.empty_like(s), s.t().clone(memory_format=torch.contiguous_format)
            torch.add(top, top, out=top)
            _ = tokens.sum().item()
            _ = torch.arange(i + 1, device=dev).float().mean().cpu()  # <host-copy>
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    for _ in range(2):
        loss = model(x).pow(2).mean()
        loss.backward()
        opt.step()
        opt.zero_grad()
    return ran


def _record(cached: bool, steps: int) -> dict[str, Any]:
    from opcheck.tracers import composite_kernels, realdevice, recorder, runtime

    limit = recorder.MAX_CACHED_CALLS
    recorder.MAX_CACHED_CALLS = limit if cached else 0
    rec = runtime.Recorder()
    rec.watched = frozenset(WATCHED) & composite_kernels._COMPOSITE_INSTALLED
    # count the calls that take the full path; the counter's code is named like generated code
    # ("<...>"), which the recorder's walk to the user's line steps over as it does torch's
    scope: dict[str, Any] = {"record_new": rec._record_new, "new_calls": [0]}
    exec(compile("def counted(*a, **k):\n    new_calls[0] += 1\n    return record_new(*a, **k)\n",
                 "<memo-counter>", "exec"), scope)  # fmt: skip
    rec._record_new = scope["counted"]  # type: ignore[method-assign]
    new_calls = scope["new_calls"]
    try:
        with realdevice.Session(rec).active():
            ran = _workload(steps)
    finally:
        recorder.MAX_CACHED_CALLS = limit
    ops = [dataclasses.asdict(u) for u in rec.sorted_ops()]
    return {"ops": ops, "ran": ran, "steps": steps, "full_path_calls": new_calls[0],
            "calls": sum(u.count for u in rec.ops.values())}  # fmt: skip


def _main() -> None:
    from opcheck.tracers import composite_kernels, realdevice

    realdevice.install()
    composite_kernels.install_composite_kernels(WATCHED)
    steps = int(sys.argv[1])
    print(json.dumps({"uncached": _record(False, steps), "cached": _record(True, steps)}))


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    cwd = tmp_path_factory.mktemp("memo")
    proc = subprocess.run([sys.executable, str(HERE), "12"], capture_output=True, text=True,
                          timeout=300, cwd=cwd, env=None)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


def _uses(run: dict[str, Any], op: str) -> list[dict[str, Any]]:
    return [u for u in run["ops"] if u["op"] == op]


def test_cached_calls_record_what_the_full_path_records(runs: dict[str, Any]) -> None:
    cached, uncached = runs["cached"], runs["uncached"]
    assert cached["calls"] == uncached["calls"] > 300
    assert cached["ops"] == uncached["ops"]
    # and the cache is used: most calls only count
    assert uncached["full_path_calls"] == uncached["calls"]
    assert cached["full_path_calls"] < cached["calls"] / 3


def _where(line: str) -> str:
    return f"{HERE.name}:{_line(line)}"


def _loc_match(locations: list[str], marker: str) -> bool:
    return any(loc.endswith(_where(marker)) for loc in locations)


def test_one_torch_function_from_two_lines_keeps_both_lines_and_counts(
    runs: dict[str, Any],
) -> None:
    run = runs["cached"]
    (softmax,) = [u for u in _uses(run, "aten::_softmax") if not u["via"]]
    assert _loc_match(softmax["locations"], "softmax-a")
    assert _loc_match(softmax["locations"], "softmax-b")
    assert softmax["count"] == run["ran"]["a"] + run["ran"]["b"]
    apis = {a for s in softmax["signatures"] for a in s["apis"]}
    assert "torch.nn.functional.softmax" in apis


def test_a_helper_reached_from_two_callers_reports_its_own_line(runs: dict[str, Any]) -> None:
    run = runs["cached"]
    muls = [u for u in _uses(run, "aten::mul.Tensor") if not u["via"]]
    locs = [loc for u in muls for loc in u["locations"]]
    # the innermost user line is the helper's, whichever line called the helper
    assert _loc_match(locs, "helper")
    assert not _loc_match(locs, "helper-caller-a") and not _loc_match(locs, "helper-caller-b")
    # the scalar that changes every step is a new signature each time, up to the bound
    scalars = [s for u in muls for s in u["signatures"] if s["args"].get("other") not in (None, 0.5)]
    assert len(scalars) >= 5


def test_growing_shapes_host_copies_and_phases_are_kept(runs: dict[str, Any]) -> None:
    run = runs["cached"]
    (cat,) = _uses(run, "aten::cat")
    assert len(cat["shapes"]) >= 5  # one per step, up to the bound
    assert _loc_match(cat["locations"], "growing")
    copies = [s for u in _uses(run, "aten::_to_copy") for s in u["signatures"]
              if s["args"].get("device") == "cpu"]  # fmt: skip
    assert copies and sum(s["count"] for s in copies) == run["steps"]
    assert any("backward" in u["modules"] for u in run["ops"])
    assert any("optimizer" in u["modules"] for u in run["ops"])
    linear = [u for u in run["ops"] if u["op"] == "aten::linear"]
    assert linear and all(u["composite"] and u["children"] for u in linear)


if __name__ == "__main__":
    _main()
