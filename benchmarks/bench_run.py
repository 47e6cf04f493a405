"""``opcheck run`` benchmarks: the recorded real-data npu device against plain CPU execution.

For each script (a small conv-net training loop, 20 AdamW steps; a tiny transformers LLaMA
greedy ``generate()`` of 8 tokens), run to its end (no step budget) in fresh subprocesses:

* plain: ``runpy`` of the script on CPU (``torch.cuda.is_available()`` is false here);
* recorded: :func:`opcheck.tracers.script.handle`, the sandboxed worker's code path (device
  setup, CUDA redirection, recording), minus the sandbox's process start;
* whole command: :func:`opcheck.tracers.script.run_script` (sandbox subprocess included)
  against ``python SCRIPT``.

Printed: wall time of each and the ratio, peak RSS of each and the difference, op calls
recorded and the per-op cost (extra time / op calls); then a micro-benchmark of one small op
(``add`` on 64×64 float32) on a plain CPU tensor and on the wrapper; then the ops that differ
between the recorded run and a plain CPU run of the same script (CPU ops listed by a dispatch
mode), with why.

Run: .venv/bin/python benchmarks/bench_run.py [--repeat 3]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = ROOT / "tests" / "fixtures" / "scripts"
CASES = {"train (conv net, 20 AdamW steps)": "bench_train.py",
         "tiny LLaMA generate (8 tokens)": "llama_generate.py"}  # fmt: skip

CHILD = r"""
import contextlib, io, json, resource, runpy, sys, time
mode, script = sys.argv[1], sys.argv[2]
import torch
try:
    import transformers  # a library import, outside the timed part in both modes
except ImportError:
    pass
ops = {}
sink = io.StringIO()
t0 = time.perf_counter()
if mode == "plain":
    sys.argv = [script]
    with contextlib.redirect_stdout(sink):
        runpy.run_path(script, run_name="__main__")
elif mode == "cpu-ops":
    from torch.utils._python_dispatch import TorchDispatchMode
    class Ops(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            name = func._schema.name + ("." + func._schema.overload_name if func._schema.overload_name else "")
            ops[name] = ops.get(name, 0) + 1
            return func(*args, **(kwargs or {}))
    sys.argv = [script]
    with contextlib.redirect_stdout(sink), Ops():
        runpy.run_path(script, run_name="__main__")
else:
    from opcheck.tracers.composites import watched_composites
    from opcheck.tracers import script as run
    composites = list(watched_composites())
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sink):
        doc = run.handle({"kind": "script", "script": script, "argv": [], "cwd": ".",
                          "max_steps": 0, "composites": composites, "label": script})
    for u in doc["oplist"]["ops"]:
        if not u["composite"]:
            ops[u["op"]] = ops.get(u["op"], 0) + u["count"]
    assert not doc["script_error"], doc["script_error"]
t1 = time.perf_counter()
print(json.dumps({"seconds": t1 - t0, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
                  "ops": ops}))
"""

MICRO = r"""
import json, time, torch
from opcheck.tracers import realdevice, runtime
a, b = torch.randn(64, 64), torch.randn(64, 64)
n = 20000
def loop(x, y):
    t = time.perf_counter()
    for _ in range(n):
        x = x + y
    return (time.perf_counter() - t) / n
loop(a, b)
plain = loop(a, b)
session = realdevice.Session(runtime.Recorder())
with session.active():
    wa, wb = realdevice.wrap(a), realdevice.wrap(b)
    loop(wa, wb)
    rec = loop(wa, wb)
print(json.dumps({"plain_us": plain * 1e6, "recorded_us": rec * 1e6}))
"""

# why a recorded npu run and a plain CPU run of the same script list different ops (first
# matching prefix wins)
SDPA = "SDPA picks its kernel by device type: a fused flash kernel on CPU, the math path " \
       "(bmm, _safe_softmax, masks) on a PrivateUse1 device"
ADAMW_CPU = "AdamW's per-tensor loop on CPU; the foreach path on an accelerator"
MIXED = "AdamW's per-tensor loop (CPU run), or host-side math at model construction " \
        "(rotary frequencies) that never touches the device"
HOST = "host-side work: weights initialised on the CPU before .to(device), CPU scalars"
WHY = {
    "aten::_foreach_": "optimizers take the foreach path on an accelerator, the per-tensor loop "
                       "on CPU",
    "aten::_to_copy": "host→device / device→host copies (`.to(device)`, `.tolist()`, `.cpu()`)",
    "aten::native_dropout": "dropout is fused on accelerators (native_dropout), "
                            "bernoulli_ + div_ on CPU",
    "aten::bernoulli": "dropout on CPU (bernoulli_ + div_), native_dropout on accelerators",
    "aten::_reshape_alias": "reshape of a non-contiguous tensor: view on a subclass "
                            "(SUBCLASS_BRANCHES) vs _reshape_alias on CPU",
    "aten::_scaled_dot_product": SDPA, "aten::_safe_softmax": SDPA, "aten::bmm": SDPA,
    "aten::tril": SDPA, "aten::where.self": SDPA, "aten::expand": SDPA,
    "aten::mul.Scalar": SDPA, "aten::scalar_tensor": SDPA, "aten::add_.Tensor": SDPA,
    "aten::addcdiv_": ADAMW_CPU, "aten::addcmul_": ADAMW_CPU, "aten::lerp_": ADAMW_CPU,
    "aten::sqrt": ADAMW_CPU, "aten::mul_": ADAMW_CPU, "aten::div_": ADAMW_CPU,
    "aten::div.Tensor": MIXED, "aten::mul.Tensor": MIXED, "aten::pow.Scalar": MIXED,
    "aten::reciprocal": MIXED,
    "aten::normal_": HOST, "aten::uniform_": HOST, "aten::fill_": HOST, "aten::zero_": HOST,
    "aten::ones": HOST, "aten::zeros": HOST, "aten::empty": HOST, "aten::lift_fresh": HOST,
    "aten::arange": HOST, "aten::copy_": HOST,
    "profiler::": "record_function markers a dispatch mode sees on CPU",
}  # fmt: skip


def _child(mode: str, script: Path) -> dict[str, object]:
    proc = subprocess.run([sys.executable, "-c", CHILD, mode, str(script)], cwd=ROOT,
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(f"{mode} {script.name} failed:\n{proc.stderr[-3000:]}")
    result: dict[str, object] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def _best(mode: str, script: Path, repeat: int) -> dict[str, object]:
    runs = [_child(mode, script) for _ in range(repeat)]
    return min(runs, key=lambda r: float(r["seconds"]))  # type: ignore[arg-type]


def _whole(script: Path) -> tuple[float, float]:
    start = time.perf_counter()
    subprocess.run([sys.executable, str(script)], cwd=ROOT, capture_output=True, check=True)
    plain = time.perf_counter() - start
    sys.path.insert(0, str(ROOT.parent))
    from opcheck.tracers.script import run_script

    start = time.perf_counter()
    run_script(script, max_steps=0, timeout=900)
    return plain, time.perf_counter() - start


def _why(op: str) -> str:
    for prefix, why in WHY.items():
        if op.startswith(prefix):
            return why
    return ""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3, help="runs per measurement (best is kept)")
    args = ap.parse_args()
    for title, name in CASES.items():
        script = SCRIPTS / name
        plain = _best("plain", script, args.repeat)
        rec = _best("recorded", script, args.repeat)
        cpu = _child("cpu-ops", script)
        p_s, r_s = float(plain["seconds"]), float(rec["seconds"])  # type: ignore[arg-type]
        calls = sum(rec["ops"].values())  # type: ignore[attr-defined]
        print(f"{title}:")
        print(f"  script (after import torch): plain CPU {p_s:.3f} s, recorded npu {r_s:.3f} s, "
              f"ratio {r_s / p_s:.1f}x")  # fmt: skip
        print(f"  per-op overhead: {(r_s - p_s) / max(calls, 1) * 1e6:.0f} us over {calls} "
              "recorded op calls (device setup and redirection included)")  # fmt: skip
        p_m, r_m = float(plain["peak_rss_mb"]), float(rec["peak_rss_mb"])  # type: ignore[arg-type]
        print(f"  peak RSS: plain {p_m:.0f} MB, recorded {r_m:.0f} MB, "
              f"+{r_m - p_m:.0f} MB ({r_m / p_m:.2f}x)")  # fmt: skip
        whole_plain, whole_run = _whole(script)
        print(f"  whole command: `python {name}` {whole_plain:.2f} s, run_script (sandbox) "
              f"{whole_run:.2f} s, ratio {whole_run / whole_plain:.1f}x")  # fmt: skip
        rec_ops, cpu_ops = set(rec["ops"]), set(cpu["ops"])  # type: ignore[call-overload]
        only_rec, only_cpu = sorted(rec_ops - cpu_ops), sorted(cpu_ops - rec_ops)
        print(f"  ops: {len(rec_ops)} recorded on npu, {len(cpu_ops)} on a plain CPU run, "
              f"{len(rec_ops & cpu_ops)} in both")  # fmt: skip
        for label, ops in (("only on npu", only_rec), ("only on CPU", only_cpu)):
            for op in ops:
                why = _why(op)
                print(f"    {label}: {op}" + (f"  ({why})" if why else ""))
    proc = subprocess.run([sys.executable, "-c", MICRO], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-3000:])
    micro = json.loads(proc.stdout.strip().splitlines()[-1])
    print(f"one op (add, 64x64 float32): plain {micro['plain_us']:.1f} us, recorded "
          f"{micro['recorded_us']:.1f} us, ratio {micro['recorded_us'] / micro['plain_us']:.1f}x")


if __name__ == "__main__":
    main()
