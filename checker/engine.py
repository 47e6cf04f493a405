"""How a recorded call runs inside CANN: on the AI Core or the AI CPU, and whether the op types
it launches have a kernel binary for the target SoC.

The facts come from CANN's open operator sources (``opcheck.scrapers.cann_engine``: every
launch an aclnn entry reaches, with the condition under which it does;
``opcheck.scrapers.cann_binaries``: the binaries shipped per SoC). This module decides them on
one call signature: the ATen op → aclnn functions its kernel calls in the release (op_aclnn),
the call's dtypes per argument, and the SoC of the target product.

* ``aicpu``: an AI CPU launch is reached whatever the undecided conditions are (``holds``);
  the finding cites the conditions that decided it (file:line);
* ``aicore``: no AI CPU launch is reachable, or only for shapes and sizes (rank, element or
  index counts), which are listed (``aicpu_when``);
* ``maybe_aicpu``: an AI CPU launch depends on something the signature does not say (index
  positions, argument values): "may run on the AI CPU when <condition>" with its file:line;
* ``unknown``: the aclnn function launches nothing the open sources define (CANN's closed
  built-in kernels): never guessed.

What op-plugin does before CANN sees the call comes first: boolean/byte masks in ``index`` /
``index_put`` are turned into int64 indices with ``nonzero`` (``npu_expand_tensors``, a host
sync and a data-dependent shape), so the routing is decided on int64 indices and the nonzero
is reported as a step of its own.

CANN versions before 8.5.0 have no open sources: facts come from the earliest documented
version and say so (``basis``), as the aclnn contract does.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from opcheck.core.oplist import OpUse, Signature
from opcheck.scrapers.cann_engine import (
    Call,
    DtypeEq,
    DtypeIs,
    EngineSite,
    Formula,
    SocIs,
    Unknown,
    deciding_atoms,
    describe,
    f_or,
    holds,
    role,
    undecided_atoms,
)

# --hardware alias → the SoC name of CANN's sources and binary lists
SOC_OF_PRODUCT = {
    "910A": "ascend910", "910B": "ascend910b", "910C": "ascend910_93", "310P": "ascend310p",
    "310B": "ascend310b", "950": "ascend950",
}

# op-plugin turns boolean/byte masks into int64 indices before these aclnn functions run
MASK_EXPANDED = frozenset({"aclnnIndexPutImpl", "aclnnIndex", "aclnnIndexPut"})
MASK_DTYPES = frozenset({"bool", "uint8"})


@dataclass(frozen=True)
class Cite:
    text: str
    where: str  # library/path:line (relative to the library at that CANN version)
    url: str = ""


@dataclass
class EngineDecision:
    """One aclnn function on one call signature and SoC."""

    aclnn: str
    engine: str  # aicore | aicpu | maybe_aicpu | unknown
    aicpu_ops: list[str] = field(default_factory=list)  # AI CPU op types it may launch
    aicore_ops: list[str] = field(default_factory=list)
    because: list[Cite] = field(default_factory=list)  # aicpu: what decided it
    when: list[Cite] = field(default_factory=list)  # maybe_aicpu / aicore: undecided conditions
    launch: list[Cite] = field(default_factory=list)  # the AI CPU launch lines


def _cite(atom: Formula, urls: Mapping[str, str]) -> Cite:
    where = atom.where if isinstance(atom, (DtypeIs, DtypeEq, SocIs, Unknown)) else ""
    return Cite(describe(atom), where, _url(where, urls))


def _url(where: str, urls: Mapping[str, str]) -> str:
    path, _, line = where.rpartition(":")
    base = urls.get("")
    return f"{base}{path}#L{line}" if base and path else ""


def call_of(sig: Signature, soc: str, aclnn: str) -> tuple[Call, list[str]]:
    """The call CANN receives for ``sig``: dtypes by role, masks expanded where op-plugin
    expands them. Returns the call and the steps op-plugin adds before it (e.g. nonzero)."""
    dtypes: dict[str, tuple[str, ...]] = {}
    steps: list[str] = []
    for name, value in sig.inputs.items():
        parts = tuple(p for p in value.split(",") if p and p != "None")
        if aclnn in MASK_EXPANDED and role(name) == role("indices") and MASK_DTYPES & set(parts):
            steps.append("nonzero")
            # a k-dim mask becomes k int64 index tensors; their count is not recorded
            parts = tuple("int64" if p in MASK_DTYPES else p for p in parts)
        dtypes[role(name)] = parts
    return Call(soc, dtypes), steps


def decide(aclnn: str, sites: Sequence[EngineSite], call: Call,
           urls: Mapping[str, str] | None = None) -> EngineDecision:
    """The engine of one aclnn function for one call (see the module docstring)."""
    urls = urls or {}
    cpu = [s for s in sites if s.engine == "aicpu"]
    core = [s for s in sites if s.engine == "aicore"]
    out = EngineDecision(aclnn, "unknown")
    if not sites:
        return out
    cpu_f = f_or(*(s.condition for s in cpu))
    core_f = f_or(*(s.condition for s in core))
    verdict = holds(cpu_f, call)
    out.aicore_ops = sorted({s.op_type for s in core if holds(s.condition, call) is not False})
    reachable = [s for s in cpu if holds(s.condition, call) is not False]
    out.aicpu_ops = sorted({s.op_type for s in reachable})
    out.launch = [Cite(f"{s.op_type} (AI CPU)", s.launch, _url(s.launch, urls))
                  for s in reachable]
    if verdict is True:
        out.engine = "aicpu"
        seen: dict[str, Cite] = {}
        for s in reachable:
            for atom in deciding_atoms(s.condition, call):
                if isinstance(atom, DtypeIs):  # the dtype lines decide; SoC lines are context
                    seen.setdefault(atom.where, _cite(atom, urls))
        out.because = list(seen.values())
        return out
    if verdict is False:
        out.engine = "aicore" if holds(core_f, call) is not False else "unknown"
        return out
    undecided: dict[str, Cite] = {}
    kinds: set[str] = set()
    for s in reachable:
        for atom in undecided_atoms(s.condition, call):
            kinds.add(atom.kind if isinstance(atom, Unknown) else "dtype")
            undecided.setdefault(atom.where + describe(atom), _cite(atom, urls))
    out.when = list(undecided.values())
    out.engine = "aicore" if kinds <= {"size"} else "maybe_aicpu"
    return out


@dataclass
class OpEngine:
    """The engine facts of one op on the target, per call signature (the report's ``engine``)."""

    calls: list[dict[str, Any]] = field(default_factory=list)
    aicpu_calls: int = 0
    maybe_aicpu_calls: int = 0
    host_syncs: int = 0
    basis: str = ""

    def to_json(self) -> dict[str, Any]:
        return {"calls": self.calls, "aicpu_calls": self.aicpu_calls,
                "maybe_aicpu_calls": self.maybe_aicpu_calls, "host_syncs": self.host_syncs,
                "basis": self.basis}


def _json(d: EngineDecision, limit: int = 6) -> dict[str, Any]:
    def cites(items: Iterable[Cite]) -> list[dict[str, str]]:
        return [{"text": c.text, "at": c.where, **({"url": c.url} if c.url else {})}
                for c in list(items)[:limit]]

    out: dict[str, Any] = {"aclnn": d.aclnn, "engine": d.engine}
    if d.aicpu_ops:
        out["aicpu_ops"] = d.aicpu_ops
    if d.aicore_ops:
        out["aicore_ops"] = d.aicore_ops
    if d.because:
        out["because"] = cites(d.because)
    if d.when:
        out["aicpu_when"] = cites(d.when)
    if d.launch and d.engine != "aicore":
        out["launch"] = cites(d.launch)
    return out


def engine_of_use(use: OpUse, functions: Sequence[str], soc: str,
                  sites_of: Mapping[str, Sequence[EngineSite]],
                  urls: Mapping[str, str] | None = None, basis: str = "") -> OpEngine:
    """Every recorded signature of ``use`` decided for the aclnn functions its kernel calls."""
    result = OpEngine(basis=basis)
    sigs = use.signatures or [Signature(inputs={"self": d for d in use.dtypes[:1]},
                                        count=use.count)]
    for sig in sigs:
        decisions = []
        steps: list[str] = []
        for fn in functions:
            call, pre = call_of(sig, soc, fn)
            steps += [p for p in pre if p not in steps]
            decisions.append(decide(fn, sites_of.get(fn, ()), call, urls))
        engines = {d.engine for d in decisions}
        worst = next((e for e in ("aicpu", "maybe_aicpu", "aicore") if e in engines), "unknown")
        entry: dict[str, Any] = {"inputs": dict(sig.inputs), "count": sig.count,
                                 "engine": worst, "aclnn": [_json(d) for d in decisions]}
        if steps:
            entry["before"] = [{"step": "nonzero", "host_sync": True,
                                "why": "op-plugin turns the boolean mask into int64 indices "
                                       "(npu_expand_tensors) before CANN runs"}]
            result.host_syncs += sig.count
        if worst == "aicpu":
            result.aicpu_calls += sig.count
        elif worst == "maybe_aicpu":
            result.maybe_aicpu_calls += sig.count
        result.calls.append(entry)
    return result
