"""The explain report (:class:`LogReport`): the diagnosed failures, the signatures no failure
explains, and the catalog status of every op the log names on the target."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from opcheck.contrib.explain.diagnose import diagnose, signature_workarounds
from opcheck.contrib.explain.facts import catalog_facts
from opcheck.contrib.explain.problem import Problem
from opcheck.contrib.explain.scan import ExplainResult, SignatureHit

if TYPE_CHECKING:
    from opcheck.db.catalog import Catalog

@dataclass
class OpStatus:
    op: str
    status: str
    kernel: str
    first_npu_release: str  # on the target's torch line
    workarounds: list[str]
    via: str = ""  # the aclnn function that links it, when the log does not name it
    first_npu_release_any: str = ""  # on any torch line


@dataclass
class LogReport:
    """What ``opcheck explain`` shows: the failures, the signatures no failure explains, and
    the status of every op the log names (or the catalog links to an aclnn function it names)."""

    result: ExplainResult
    problems: list[Problem]
    signatures: list[tuple[SignatureHit, list[str]]]  # shown on their own, with their workarounds
    ops: list[OpStatus]
    target: dict[str, str]
    release: str = ""
    cann: str = ""

    @property
    def named_ops(self) -> set[str]:
        return set(self.result.ops) | {op for p in self.problems for op in p.ops}

    def as_dict(self) -> dict[str, Any]:
        doc = self.result.as_dict()
        named = self.named_ops
        for s in doc["signatures"]:  # a signature's own op list names ops the log may not
            s["ops"] = [op for op in s["ops"] if op in named]
        doc["problems"] = [p.as_dict() for p in self.problems]
        doc["target"] = self.target
        doc["op_status"] = [{"op": o.op, "status": o.status, "kernel": o.kernel,
                             "first_npu_release": o.first_npu_release,
                             "workarounds": o.workarounds, **({"via": o.via} if o.via else {})}
                            for o in self.ops]
        return doc


def report_log(result: ExplainResult, cat: Catalog, *, torch_npu: str | None = None,
               installed_torch: str | None = None) -> LogReport:
    """Explain ``result`` against the catalog: failures diagnosed, ops checked on the target."""
    from opcheck.checker.check import check
    from opcheck.checker.contract import dtype_support
    from opcheck.checker.queries import select_target
    from opcheck.contrib import workarounds as wa
    from opcheck.contrib.workaround_catalog import workaround_lookup
    from opcheck.core.oplist import OpList, OpUse

    target = select_target(cat, torch_npu=torch_npu, installed_torch=installed_torch)
    workaround_ops = {w.id: set(w.ops) for w in wa.load_dir()}
    facts = catalog_facts(cat, target.torch_npu)
    from opcheck.db.messages import has_messages

    problems = diagnose(result, facts=facts, workaround_ops=workaround_ops,
                        messages=facts if has_messages(cat.engine) else None)
    uses = [OpUse(o.op, o.count, locations=[f"line {o.first_line}"]) for o in result.ops.values()]
    via: dict[str, str] = {}
    for p in problems:
        for op in p.ops:
            if op not in result.ops and op not in via:
                via[op] = ", ".join(p.functions)
                uses.append(OpUse(op, 1, locations=[f"line {p.anchor.line}"]))
    for p in problems:  # the documented contract says where the rejected dtype is taken
        p.contract = [s for fn in p.functions for d in p.dtypes
                      for s in [dtype_support(cat, fn, d, target.cann)] if s is not None]
        for cs in p.contract:  # the installed CANN's own check outranks any documentation
            if cs.accepts:
                installed = f"CANN {target.cann}" if target.cann else "the installed CANN"
                p.notes.append(
                    f"this log shows the installed CANN rejecting {cs.dtype} in {cs.function}; "
                    f"the catalog's docs ({cs.basis}) list {cs.dtype} for it on "
                    f"{', '.join(cs.accepts)}: the log line wins, those docs describe another "
                    f"CANN version or product (the report's target is {installed}, a guess "
                    "when the log names no version); a CANN whose docs list it may accept it")
    report = check(cat, OpList(model="log", method="log", ir="log", ops=uses), target,
                   workarounds=workaround_lookup(cat))
    ops = [OpStatus(f.op, str(f.status), f.kernel, f.first_npu_release,
                    [w.id for w in f.workarounds], via.get(f.op, ""), f.first_npu_release_any)
           for f in report.ops]
    named = set(result.ops) | set(via)
    shown = [(h, signature_workarounds(h.signature, named, workaround_ops))
             for h in result.hits.values() if h.standalone]
    return LogReport(result, problems, shown, ops, report.target, target.torch_npu,
                     target.cann or "")
