"""Will it run at full speed: the report's speed section.

A kernel on the NPU is not the whole answer. Five things cost time every step although every
op runs, and each is a finding here, with its count per step (or per forward), its source
lines, the Python API that made it, and what to do instead:

- **host syncs**: the host waits for the NPU stream to read a value or a data-dependent size.
  Which ops do that comes from PyTorch's own op tags (``data_dependent_output``,
  ``dynamic_output_shape`` in native_functions.yaml, which the catalog already stores per op:
  read from there rather than from torch at record time, so op lists from logs, old traces
  and other torch versions get the same answer), narrowed by the recorded call signature
  (``index.Tensor`` only with boolean indices), plus boolean-mask ``index_put`` (op-plugin
  turns the mask into indices with ``nonzero``: the engine facts) and copies to the CPU;
- **AI CPU calls** (``opcheck.checker.engine``: CANN runs the call's level-0 op on the AI CPU);
- **CPU round trips**: calls that fall back to the CPU (copy in, CPU kernel, copy back);
- **per-tensor foreach slow paths** (``opcheck.checker.kernel_path``: one launch per tensor);
- **collectives torch_npu emulates or completes on the NPU** (``opcheck.checker.hccl``: gather
  through allgather, ReduceOp.AVG divided after the sum).

A fake-tensor ``check`` stops at the first value-dependent branch; the sync it stopped at is
a finding too (``stopped_here``), not only the report's INCOMPLETE.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from opcheck.core.oplist import OpList, Signature
from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from opcheck.checker.check import Finding, Report

SYNC_TAGS = ("data_dependent_output", "dynamic_output_shape")
FOREACH_SLOW = "per-tensor slow path"  # opcheck.checker.kernel_path.FOREACH_SLOW
DEFAULT_PRODUCT = "910B"  # the engine's product when none is named
_BOOL = {"bool", "uint8", "torch.bool", "torch.uint8"}
_CPU_COPIES = {"aten::_to_copy", "aten::to.device", "aten::to.dtype_layout", "aten::copy_",
               "aten::to.other", "aten::_copy_from", "aten::_copy_from_and_resize"}
_STEP = re.compile(r"\bstep \d+ \(")
_STOP_AT = re.compile(r"control flow at (?P<at>\S+?:\d+)")

# What to do instead, by the Python API that made the sync (recorded per call signature)
_BY_API = {
    "Tensor.item": "keep the value on the device (accumulate it in a tensor, e.g. "
                   "`total += loss.detach()`) and call .item() once every N steps or after the "
                   "loop",
    "Tensor.tolist": "keep the values on the device, or move them to the CPU once outside the "
                     "loop",
    "Tensor.__bool__": "keep the flag on the device: `torch.where(cond, a, b)` or a multiply "
                       "by the mask instead of `if tensor:`; or decide from CPU data once",
    "Tensor.__int__": "keep the value on the device, or compute it on the CPU once",
    "Tensor.__float__": "keep the value on the device, or compute it on the CPU once",
    "Tensor.__index__": "index with a tensor kept on the device, or a Python int computed once",
}
# ... and by the op, when no API was recorded
_BY_OP = {
    "aten::_local_scalar_dense": "keep the value on the device (`torch.where` instead of a "
                                 "Python branch, accumulate in a tensor instead of .item())",
    "aten::nonzero": "keep shapes static: a mask with `torch.where` / `masked_fill_` instead "
                     "of the indices of the True elements",
    "aten::argwhere": "keep shapes static: a mask with `torch.where` / `masked_fill_`",
    "aten::masked_select": "keep shapes static: `torch.where(mask, x, 0)` or `x.masked_fill_("
                           "~mask, 0)` and reduce, instead of selecting",
    "aten::index.Tensor": "boolean-mask indexing: `torch.where(mask, x, y)` / `masked_fill_` "
                          "keep the shape static; or turn the mask into indices on the CPU once",
    "aten::index_put_": "boolean-mask assignment: `x.masked_fill_(mask, v)` or "
                        "`torch.where(mask, v, x)` instead of `x[mask] = v`",
    "aten::_index_put_impl_": "boolean-mask assignment: `x.masked_fill_(mask, v)` or "
                              "`torch.where(mask, v, x)` instead of `x[mask] = v`",
    "aten::repeat_interleave.Tensor": "pass output_size= (the total, known on the host) so "
                                      "the size is not read back from the device",
    "aten::bincount": "pass minlength= and keep the counts on the device, or compute on the "
                      "CPU once",
    "aten::equal": "compare on the device (`(a == b).all()`) and keep the result a tensor",
    "aten::allclose": "compare on the device (`torch.isclose(a, b).all()`) and keep the result "
                      "a tensor",
}
_UNIQUE = "compute it on the CPU once (e.g. in the data loader), or bound the output size"
_CPU_COPY = ("move to the CPU once, after the loop (or every N steps), instead of every step; "
             "keep logging values on the device until then")


@dataclass
class SpeedFinding:
    """One cause of lost time: its kind, the op, how often, where, and what to do instead."""

    kind: str  # host_sync | aicpu | cpu_fallback | foreach_slow
    op: str
    count: int  # calls in the recorded run (every step the op list covers)
    per_step: float  # count per step (per forward without steps)
    locations: list[str] = field(default_factory=list)
    apis: list[str] = field(default_factory=list)
    why: str = ""
    instead: str = ""
    source: str = ""  # the fact it rests on (op tag, engine fact, kernel path, status)
    link: str = ""
    stopped_here: bool = False  # the fake trace stopped at this sync (check, INCOMPLETE)
    inferred: bool = False

    @property
    def label(self) -> str:
        return KIND_LABELS.get(self.kind, self.kind)


KIND_LABELS = {"host_sync": "host sync", "aicpu": "AI CPU", "cpu_fallback": "CPU round trip",
               "foreach_slow": "per-tensor foreach", "collective": "HCCL collective",
               "dynamic_shape": "dynamic shape", "setting": "script setting"}


def steps_of(oplist: OpList) -> tuple[int, str]:
    """How many steps the op list covers and what a step is: a run's step budget note
    (``op calls per step: step 1 (optimizer): …``), else one forward (one training step with
    --train)."""
    if oplist.method == "run":
        for note in oplist.notes:
            if note.startswith("op calls per step:"):
                n = len(_STEP.findall(note))
                if n:
                    return n, "step"
        return 1, "run"
    return 1, "training step" if oplist.mode == "train" else "forward"


def _signatures(oplist: OpList) -> dict[str, list[Signature]]:
    out: dict[str, list[Signature]] = {}
    for use in oplist.ops:
        out.setdefault(use.op, []).extend(use.signatures)
    return out


def _apis(sigs: Sequence[Signature]) -> list[str]:
    return list(dict.fromkeys(a for s in sigs for a in s.apis))


def _bool_indices(sig: Signature) -> bool:
    return any(k.startswith("indices") and any(d.strip() in _BOOL for d in v.split(","))
               for k, v in sig.inputs.items())


def _to_cpu(sig: Signature) -> bool:
    return str(sig.args.get("device", "")).startswith("cpu") or \
        str(sig.args.get("to_device", "")).startswith("cpu")


def _instead(op: str, apis: Sequence[str], tags: Sequence[str]) -> str:
    for api in apis:
        if api in _BY_API:
            return _BY_API[api]
    if op in _BY_OP:
        return _BY_OP[op]
    if "unique" in op:
        return _UNIQUE
    if "data_dependent_output" in tags:
        return _BY_OP["aten::_local_scalar_dense"]
    return "keep shapes static (masks and `torch.where` instead of data-dependent sizes), or " \
           "compute it on the CPU once"


def _per(count: int, steps: int) -> float:
    return round(count / steps, 2) if steps > 1 else float(count)


def speed_findings(report: Report, oplist: OpList,
                   tagged: Mapping[str, tuple[tuple[str, ...], str]],
                   product: str | None = None) -> tuple[list[SpeedFinding], dict[str, Any]]:
    """The speed findings of a checked report (its ops, engine facts and kernel paths) and the
    op list it came from; ``tagged``: op → (PyTorch tags, source URL) for the ops tagged with
    SYNC_TAGS (``opcheck.db.reads.ops_tagged``); ``product``: the target product alias
    (None: judged on 910B, like the engine facts)."""
    steps, unit = steps_of(oplist)
    judged_on = product or DEFAULT_PRODUCT
    sigs_of = _signatures(oplist)
    out: list[SpeedFinding] = []
    for f in report.ops:
        sigs = sigs_of.get(f.op, [])
        out += _syncs(f, sigs, tagged, steps)
        out += _slow(f, sigs, steps, judged_on, product is None)
    _stop(out, oplist, steps)
    order = {"host_sync": 0, "cpu_fallback": 1, "aicpu": 2, "foreach_slow": 3, "collective": 4}
    out.sort(key=lambda s: (not s.stopped_here, order.get(s.kind, 9), -s.count, s.op))
    meta = {"steps": steps, "unit": unit, "judged_on": judged_on,
            "product_named": product is not None,
            "maybe_aicpu_calls": report.slow_paths.get("maybe_aicpu_calls", 0)}
    return out, meta


def _syncs(f: Finding, sigs: Sequence[Signature],
           tagged: Mapping[str, tuple[tuple[str, ...], str]], steps: int) -> list[SpeedFinding]:
    tags, link = tagged.get(f.op, ((), ""))
    apis = _apis(sigs)
    if f.op == "aten::index.Tensor" or f.op in ("aten::index_put_", "aten::_index_put_impl_",
                                                 "aten::index_put"):
        bool_calls = sum(s.count for s in sigs if _bool_indices(s))
        host = (f.engine or {}).get("host_syncs", 0)
        n = max(bool_calls, host)
        if not n:
            return []  # integer indices: the shape is known from the index tensors
        return [SpeedFinding(
            "host_sync", f.op, n, _per(n, steps), list(f.locations), apis,
            why="boolean-mask indexing: the output size is the number of True elements, read "
                "back from the device (op-plugin turns the mask into indices with nonzero)",
            instead=_BY_OP.get(f.op, _BY_OP["aten::index.Tensor"]),
            source=("PyTorch op tag dynamic_output_shape; boolean indices in the recorded call"
                    if tags else "boolean indices in the recorded call; op-plugin "
                    "npu_expand_tensors (nonzero)"), link=link)]
    if f.op in _CPU_COPIES:
        host = [s for s in sigs if _to_cpu(s)]
        n = sum(s.count for s in host)
        if not n:
            return []
        # locations are kept per op, not per call: host-bound copies are among these lines
        return [SpeedFinding(
            "host_sync", f.op, n, _per(n, steps), list(f.locations), _apis(host),
            why="a copy from the NPU to the CPU waits for every queued kernel (lines: every "
                f"{f.op} call; the host-bound ones are among them)",
            instead=_CPU_COPY, source="recorded call with device=cpu", inferred=True)]
    if not tags:
        return []
    why = ("the host reads a value computed on the device: it waits for the stream"
           if "data_dependent_output" in tags else
           "the output size depends on the values: the host reads it back from the device")
    return [SpeedFinding(
        "host_sync", f.op, f.count, _per(f.count, steps), list(f.locations), apis, why=why,
        instead=_instead(f.op, apis, tags),
        source="PyTorch op tag " + ", ".join(t for t in tags if t in SYNC_TAGS)
               + " (native_functions.yaml)", link=link)]


def _slow(f: Finding, sigs: Sequence[Signature], steps: int, judged_on: str,
          default_product: bool) -> list[SpeedFinding]:
    out: list[SpeedFinding] = []
    apis = _apis(sigs)
    on = f"on {judged_on}" + (" (pass --hardware for another product)" if default_product else "")
    if f.status is Status.CPU_FALLBACK:
        fix = (f"see workaround {', '.join(w.id for w in f.workarounds)}" if f.workarounds else
               f"compute it on the CPU once outside the loop, or use a release with an NPU "
               f"kernel{f' (from {f.first_npu_release})' if f.first_npu_release else ''}")
        out.append(SpeedFinding(
            "cpu_fallback", f.op, f.count, _per(f.count, steps), list(f.locations), apis,
            why="no NPU kernel: torch_npu copies the inputs to the host, runs the CPU kernel "
                "and copies the result back, every call",
            instead=fix, source=f"status {f.status.value} ({f.reason})"))
    for r in f.restrictions:
        if r.slow and r.source == "hccl":
            # torch_npu's own handling of a collective (checker.hccl): "<why> Fix: <instead>"
            why, _, instead = r.text.partition(" Fix: ")
            out.append(SpeedFinding(
                "collective", f.op, f.count, _per(f.count, steps), list(f.locations), apis,
                why=why, instead=instead, source=r.basis, link=r.link,
                inferred=r.basis.startswith("inferred")))
    engine = f.engine or {}
    if engine.get("aicpu_calls"):
        slow = next((r for r in f.restrictions if r.slow and r.source == "cann_engine"), None)
        out.append(SpeedFinding(
            "aicpu", f.op, int(engine["aicpu_calls"]), _per(int(engine["aicpu_calls"]), steps),
            list(f.locations), apis,
            why=(slow.text if slow else f"CANN runs this call on the AI CPU {on}"),
            instead="call it with a dtype the AI Core kernel takes (the conditions are in the "
                    "engine facts), or move it out of the step",
            source=str(engine.get("basis", "")), link=slow.link if slow else "",
            inferred=bool(slow.inferred) if slow else False))
    path = f.path.get(judged_on, "")
    if path == FOREACH_SLOW:
        slow_on = sorted(p for p, v in f.path.items() if v == FOREACH_SLOW)
        # the kernel-path note names op-plugin's own condition and line (SoC, every SoC, or
        # the call's dtypes)
        rule = next((r for r in f.restrictions if r.slow and r.source == "kernel_path"
                     and r.hardware == judged_on), None)
        out.append(SpeedFinding(
            "foreach_slow", f.op, f.count, _per(f.count, steps), list(f.locations), apis,
            why=f"op-plugin's {f.op} runs PyTorch's per-tensor slow path {on} (one kernel "
                f"launch per tensor; slow on {', '.join(slow_on)})"
                + (f": {rule.text.removeprefix(f'{judged_on}: {FOREACH_SLOW} (').removesuffix(')')}"
                   if rule else ""),
            instead="a fused optimizer where the release has one (`fused=True`, see the tips), "
                    "or a product with the aclnn foreach kernel",
            source="kernel path (op-plugin's fallback condition)", link=rule.link if rule else "",
            inferred=bool(rule.inferred) if rule else False))
    return out


def _stop(out: list[SpeedFinding], oplist: OpList, steps: int) -> None:
    """Mark the sync a fake trace stopped at; add it when the op list did not record it."""
    if oplist.complete or not oplist.stopped:
        return
    m = _STOP_AT.search(oplist.stopped)
    if not m:
        return
    at = m["at"]
    hit = [s for s in out if s.kind == "host_sync" and at in s.locations]
    for s in hit:
        s.stopped_here = True
    if not hit:
        out.append(SpeedFinding(
            "host_sync", "", 1, 1.0, [at], [],
            why="a Python branch on a tensor value: the host waits for the device to read it",
            instead=_BY_API["Tensor.__bool__"], source="where the fake trace stopped",
            stopped_here=True, inferred=True))


def section(findings: Sequence[SpeedFinding], meta: Mapping[str, Any],
            tips: Sequence[Mapping[str, Any]] = ()) -> dict[str, Any]:
    """The report's ``speed`` document."""
    doc: dict[str, Any] = dict(meta)
    doc["findings"] = [asdict(s) for s in findings]
    doc["totals"] = {k: sum(s.count for s in findings if s.kind == k) for k in KIND_LABELS}
    doc["tips"] = [dict(t) for t in tips]
    return doc


def speed_lines(speed: Mapping[str, Any]) -> list[str]:
    """The speed section as plain sentences (text formats share them)."""
    unit = speed.get("unit", "forward")
    lines: list[str] = []
    for s in speed.get("findings", []):
        where = ", ".join(s["locations"][:3]) or "line unknown"
        per = s["per_step"]
        per_text = f"{per:g} per {unit}" if unit != "run" else f"{s['count']} in the run"
        if s["kind"] == "setting" and s["count"] == 1:
            per_text = "set once"
        api = f" via {', '.join(s['apis'][:2])}" if s.get("apis") else ""
        stop = " [the fake trace stopped here]" if s.get("stopped_here") else ""
        inf = " (inferred)" if s.get("inferred") else ""
        op = s["op"] or "a tensor value"
        # a collective's handling is torch_npu's own code: its line is the evidence
        src = f" ({s['link']})" if s["kind"] == "collective" and s.get("link") else ""
        lines.append(f"{KIND_LABELS.get(s['kind'], s['kind'])}: {op}{api}, {per_text} at "
                     f"{where}{stop}{inf}: {s['why'].rstrip('.')}{src}. Instead: "
                     f"{s['instead']}.")
    return lines


def tip_lines(speed: Mapping[str, Any]) -> list[str]:
    lines = []
    for t in speed.get("tips", []):
        sites = ", ".join(t["call_sites"][:3]) or "line unknown"
        lines.append(f"{t['pattern']}: use {t['api']} instead of {' + '.join(t['replaces'][:5])} "
                     f"at {sites} ({t['availability']}). Source: {t['source']}")
    return lines
