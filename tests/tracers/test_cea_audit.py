"""Audit: every CompositeExplicitAutograd op the catalog calls composite (no NPU kernel), judged
by ``opcheck run`` as the C++ recording backend receives it, per release family.

A CEA op without a kernel runs generic code whose calls reach the backend: torch.linalg.lstsq
sends ``aten::linalg_lstsq.out``, which has no NPU kernel, so the op falls back to the CPU.
tests/fixtures/tracers/cea_audit_driver.py calls each op (torch's OpInfo samples) once on
``opcheck run``'s real-data device and once on the C++ backend of recording_backend.cpp, which
records what a backend without a kernel for the op receives (``op>callee`` chains). For each
release family (the newest release of each torch line from 2.1 on), opcheck's status of the op
(the run's op list through checker.levels and the resolver) must be the status the backend's
calls give: the op's own where the release has its kernel, else the worst of its callees'
(recursively for callees that are composite themselves).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from testpaths import FIXTURES

from opcheck.checker.levels import received
from opcheck.checker.resolve import COMPOSITE_EXPLICIT, Resolver
from opcheck.core.oplist import OpList, OpUse
from opcheck.core.versions import minor_key
from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog
from opcheck.db.engine import open_catalog

torch = pytest.importorskip("torch")

DRIVER = FIXTURES / "tracers" / "cea_audit_driver.py"
# must match realdevice.DEVICE_SPECIFIC: recorded whole by both backends
WHOLE = {"aten::convolution", "aten::_convolution", "aten::_convolution.deprecated",
         "aten::convolution_backward", "aten::_unsafe_view", "aten::copy_"}  # fmt: skip


def _families(cat: Catalog) -> list[str]:
    newest: dict[str, str] = {}
    for r in cat.releases:  # oldest first
        if r.has_kernels and r.has_cpu_fallback and minor_key(r.torch_minor) >= (2, 1):
            newest[r.torch_minor] = r.torch_npu
    return list(newest.values())


def _targets(cat: Catalog, families: list[str]) -> list[str]:
    """CEA ops of this torch (views and device-specific ones aside: recorded whole) that the
    catalog alone calls composite on at least one family."""
    resolvers = [Resolver(cat, f) for f in families]
    out = []
    for op, info in sorted(cat.operators.items()):
        if info.kernel_kind != COMPOSITE_EXPLICIT[0] or op in WHOLE:
            continue
        if not torch._C._dispatch_has_kernel_for_dispatch_key(op, "CompositeExplicitAutograd"):
            continue
        base, _, overload = op.removeprefix("aten::").partition(".")
        try:
            schema = getattr(getattr(torch.ops.aten, base), overload or "default")._schema
        except (AttributeError, RuntimeError):
            continue
        if any(r.alias_info is not None and not r.alias_info.is_write for r in schema.returns):
            continue
        if any(r.resolve(op).status is Status.COMPOSITE for r in resolvers):
            out.append(op)
    return out


def _drive(mode: str, targets: Path, build: Path) -> dict[str, Any]:
    proc = subprocess.run([sys.executable, str(DRIVER), mode, str(targets), str(build)],
                          capture_output=True, text=True, timeout=900)  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    doc: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return doc


def _oplist(chains: dict[str, int], composite: set[str]) -> OpList:
    """The run's records of one call as an op list (what `opcheck run` hands the checker)."""
    ops = []
    for key, count in chains.items():
        *via, op = key.split(">")
        ops.append(OpUse(op=op, count=count, via=via, parent=via[-1] if via else "",
                         composite=op in composite))
    for use in ops:
        prefix = (*use.via, use.op)
        use.children = [u.op for u in ops if tuple(u.via) == prefix]
    return OpList(model="audit", method="run", ir="runtime-dispatch", ops=ops)


def _backend_status(target: str, chains: dict[str, int], composite: set[str],
                    resolver: Resolver) -> Status:  # fmt: skip
    """What the C++ backend's calls say: the op's kernel where the release has one, else the
    worst of the calls its generic kernel made (composite when they all run on the NPU)."""
    callees: dict[str, list[str]] = {}
    for key in chains:
        parts = key.split(">")
        for i in range(1, len(parts)):
            callees.setdefault(">".join(parts[:i]), []).append(">".join(parts[: i + 1]))

    def status(chain: str) -> Status:
        op = chain.rsplit(">", 1)[-1]
        if op in resolver.kernels or op not in composite:
            return resolver.resolve(op).status
        kids = [status(c) for c in dict.fromkeys(callees.get(chain, []))]
        worst = max(kids, key=lambda s: s.severity, default=Status.COMPOSITE)
        return worst if worst.is_problem else Status.COMPOSITE

    return status(target)


@pytest.mark.slow
@pytest.mark.timeout(1200)
def test_every_composite_explicit_op_as_the_backend_receives_it(
    bundled_catalog: Path, tmp_path: Path
) -> None:
    cat = Catalog.load(open_catalog(bundled_catalog))
    families = _families(cat)
    assert len(families) >= 6, families
    targets = _targets(cat, families)
    assert len(targets) > 300
    listed = tmp_path / "targets.txt"
    listed.write_text("\n".join(targets))
    real = _drive("cpp", listed, tmp_path / "build")
    run = _drive("run", listed, tmp_path / "build")
    audited = sorted(set(real["calls"]) & set(run["calls"]))
    # the calls each backend received under the op: the same chains (both record views whole)
    differ = {}
    for op in audited:
        mine = {k for k in run["calls"][op]["chains"] if k == op or k.startswith(op + ">")}
        theirs = {k for k in real["calls"][op]["chains"] if k == op or k.startswith(op + ">")}
        if mine != theirs:
            differ[op] = (sorted(mine - theirs), sorted(theirs - mine))
    assert not differ, "\n".join(f"{op}: run-only {a}, backend-only {b}"
                                  for op, (a, b) in differ.items())
    mismatches = []
    tally: dict[str, int] = {}
    falling: dict[str, list[str]] = {}
    for family in families:
        resolver = Resolver(cat, family)
        for op in audited:
            ol = _oplist(run["calls"][op]["chains"], set(run["composite"]))
            level = received(ol, resolver)
            assert op in {u.op for u in level.ops}, (family, op)
            mine = resolver.resolve(op).status
            want = _backend_status(op, real["calls"][op]["chains"], set(real["composite"]),
                                   resolver)  # fmt: skip
            tally[mine.value] = tally.get(mine.value, 0) + 1
            if mine is Status.CPU_FALLBACK:
                falling.setdefault(op, []).append(family)
            if mine is not want:
                mismatches.append((family, op, mine.value, want.value))
    assert not mismatches, mismatches
    print(f"audited {len(audited)} of {len(targets)} CEA ops on {len(families)} release "
          f"families {families}; statuses {tally}; no call for {len(real['missed'])}")
    for op, where in sorted(falling.items()):
        print(f"  CPU fallback through its callees: {op} on {len(where)} families")
    # the example: CPU fallback through linalg_lstsq.out on every 2.x family
    assert "aten::linalg_lstsq" in audited
    for family in families:
        resolver = Resolver(cat, family)
        received(_oplist(run["calls"]["aten::linalg_lstsq"]["chains"], set(run["composite"])),
                 resolver)  # fmt: skip
        res = resolver.resolve("aten::linalg_lstsq")
        assert res.status is Status.CPU_FALLBACK, (family, res)
        assert res.via[-1] == "aten::linalg_lstsq.out"
    # OpInfo samples and the ATen calls captured from them reach 87 of the ~820 ops here (most
    # of the rest are out= and backward overloads no sample calls); a drop means lost calls
    assert len(audited) >= 80, (len(audited), sorted(real["missed"].items())[:20])
