"""Dynamic shapes on the NPU: ops whose input shape changes from step to step in a run.

On the acl_op path with jit compile on (torch_npu's default below Ascend910B1, so 910A and
310P; or ``set_compile_mode(jit_compile=True)``), CANN compiles an operator for each new input
shape it meets: a loop whose sequence length changes every step compiles again and again.
From the recorded calls of the forward: an op whose first input took more distinct shapes than
the op has call sites (lines or modules: a shape per site is a static model) and at least one
per step (inferred: a trace keeps shapes per op, not per step), and whose kernel path on the product is acl_op because jit compile is on (the kernel-path
restriction the check attached says why, with torch_npu's own line). On aclnn (910B's
default), no compile: no finding. The recorder keeps at most 8 shapes per op ("at least 8").
Ops with only an acl_op kernel are left out: whether prebuilt binaries serve them with jit
compile off is CANN's closed op-info.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from opcheck.checker.speed import SpeedFinding
from opcheck.core.oplist import MAX_SAMPLES, OpList

if TYPE_CHECKING:
    from opcheck.checker.check import Report

KIND = "dynamic_shape"
_PHASES = {"backward", "optimizer"}
FIX = ("pad inputs to a few fixed lengths (buckets) so each shape compiles once; or "
       "`torch.npu.set_compile_mode(jit_compile=False)` so the aclnn kernel runs with no "
       "per-shape compile (install CANN's operator binaries for the acl_op ops that remain)")


def dynamic_shape_findings(report: Report, oplist: OpList, steps: int,
                           product: str) -> list[SpeedFinding]:
    """One finding per op that compiles per new shape on ``product`` (see the module doc)."""
    if oplist.method != "run" or steps < 2:
        return []
    uses = {u.op: u for u in oplist.ops if not u.via}
    # the run's budget ends a loop once an iteration sends no new op or dtype (a new length is
    # not new): the shapes counted are those of the steps that ran, a lower bound
    shortened = bool(oplist.loop_cuts)
    cut = (" traced (the loop was shortened after its ops repeated: --max-steps 0 runs every "
           "step and counts every shape)") if shortened else ""
    out: list[SpeedFinding] = []
    for f in report.ops:
        use = uses.get(f.op)
        if use is None or len(use.shapes) < 2 or f.path.get(product) != "acl_op":
            continue
        if use.modules and not set(use.modules) - _PHASES:
            continue  # backward and optimizer ops: a shape per parameter, not per step
        sites = max(len(use.locations), len(use.modules), 1)
        if len(use.shapes) <= sites or len(use.shapes) < steps:
            continue  # a shape per call site, or fewer new shapes than steps: static
        jit = next((r for r in f.restrictions if r.source == "kernel_path"
                    and r.hardware == product and "jit compile" in r.text), None)
        if jit is None:
            continue
        n = len(use.shapes)
        count = f"at least {n}" if n >= MAX_SAMPLES or shortened else str(n)
        out.append(SpeedFinding(
            KIND, f.op, n, round(n / steps, 2), list(use.locations), [],
            why=(f"compiles a kernel per new shape on {product} (acl_op path, jit compile on): "
                 f"{count} input shapes in {steps} steps{cut} ({_shapes(use.shapes)})"),
            instead=FIX, source=f"kernel path: {jit.text.split(': ', 1)[-1][:200]}",
            link=jit.link, inferred=True))
    out.sort(key=lambda s: (-s.count, s.op))
    return out


def _shapes(shapes: Sequence[Sequence[int]]) -> str:
    shown = ", ".join("x".join(map(str, s)) or "scalar" for s in shapes[:4])
    return shown + (", …" if len(shapes) > 4 else "")
