"""The checker: an OpList resolved against a target release → a Report.

Statuses come from the resolver only; this module groups, counts and judges them, with what
``opcheck.core.vocab`` says each status means (severity, verdict, fail levels). The report's
output formats are in ``opcheck.checker.formats``.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any

from opcheck.checker.levels import received
from opcheck.checker.resolve import Resolver
from opcheck.checker.target import describe as describe_target
from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpList, OpUse
from opcheck.core.versions import torch_minor
from opcheck.core.vocab import FailOn, Status, Verdict
from opcheck.db.catalog import Catalog, ReleaseInfo

# 2: `complete`/`stopped`, verdict INCOMPLETE, ops[].decomposition_of, restrictions[].inferred
# 3: restrictions[].source (api_docs | cann), param, products_failing, products_fine, error,
#    basis, slow (the aclnn contract); target.cann_paired, cann_basis; graph (--graph);
#    speed (optional, added: host syncs, slow paths, fused-op tips)
REPORT_SCHEMA_VERSION = 3


@dataclass(frozen=True)
class WorkaroundRef:
    id: str
    title: str
    kind: str = ""
    url: str = ""  # where the entry lives (file path or link)
    fix: str = ""  # the entry's fix (Markdown): the markdown report carries it whole


@dataclass(frozen=True)
class Restriction:
    """A documented limit of an op's Python API on the target (dtype, argument, product)."""

    api: str
    text: str
    dtypes_seen_outside: tuple[str, ...] = ()  # traced dtypes the doc does not allow
    link: str = ""
    hardware: str = ""  # the product the statement is about ("" = every product)
    unsupported: bool = False  # the doc says the API is not supported there
    # the API was not recorded by the trace but guessed through the API → ATen link
    inferred: bool = False
    # where the limit comes from: "api_docs" (torch_npu's per-API docs) or "cann" (the aclnn
    # function's contract in CANN's operator docs)
    source: str = "api_docs"
    param: str = ""  # the aclnn parameter the limit is about (cann)
    products_failing: tuple[str, ...] = ()  # cann: products where the call is rejected
    products_fine: tuple[str, ...] = ()  # cann: products where it is accepted
    error: str = ""  # the return code the user would see, e.g. "161002 ACLNN_ERR_PARAM_INVALID"
    # what the facts are: "CANN 9.1.0 docs", or "inferred from CANN 9.0.0 docs (...)"
    basis: str = ""
    slow: bool = False  # a performance hint (slow path), not a failure

    @property
    def violated(self) -> bool:
        return bool(self.dtypes_seen_outside) or self.unsupported


@dataclass
class Finding:
    op: str
    status: Status
    kernel: str = ""
    aclnn: str = ""
    via: list[str] = field(default_factory=list)
    reason: str = ""
    count: int = 0
    dtypes: list[str] = field(default_factory=list)
    shapes: list[list[int]] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    locations: list[str] = field(default_factory=list)
    workarounds: list[WorkaroundRef] = field(default_factory=list)
    first_npu_release: str = ""  # first release of the target's torch line with a kernel
    first_npu_release_any: str = ""
    restricted: bool = False
    restrictions: list[Restriction] = field(default_factory=list)
    # the CompositeImplicitAutograd ops (outermost first) whose decomposition sends this op to
    # the NPU on the target release, because that release has no kernel for them
    decomposition_of: list[str] = field(default_factory=list)
    # product → the kernel path its calls take there (aclnn, acl_op, cpu, …): checker.kernel_path
    path: dict[str, str] = field(default_factory=dict)
    # how the calls run inside CANN on the target product (opcheck.checker.engine): engine per
    # call signature (aicore / aicpu / maybe_aicpu / unknown) with its source lines, host syncs
    # op-plugin adds before; and the kernel binaries of the op types launched
    engine: dict[str, Any] | None = None
    binaries: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Report:
    model: str
    method: str
    ir: str
    target: dict[str, str]
    verdict: Verdict
    fallback_calls: int
    counts: dict[str, int]
    ops: list[Finding]
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    mode: str = "inference"
    catalog: dict[str, str] = field(default_factory=dict)
    matrix: dict[str, Any] | None = None  # --all-releases
    complete: bool = True  # False: the op list stopped before the end of the program
    stopped: str = ""
    graph: dict[str, Any] | None = None  # --graph: torchair graph mode (opcheck.checker.graph)
    capture: dict[str, Any] | None = None  # --capture: ACL graph capture (checker.capture)
    # slow paths counted over the calls: aicpu_calls, maybe_aicpu_calls, host_syncs (engine)
    slow_paths: dict[str, int] = field(default_factory=dict)
    # the speed section (opcheck.checker.speed): host syncs, AI CPU calls, CPU round trips,
    # per-tensor foreach paths, each per step with lines and what to do instead; fused-op tips
    speed: dict[str, Any] | None = None

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.ops if f.status.is_problem or f.restricted]

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"schema_version": REPORT_SCHEMA_VERSION, "kind": "opcheck.report"}
        doc.update(asdict(self))
        if self.matrix is None:
            doc.pop("matrix")
        if self.graph is None:
            doc.pop("graph")
        if self.capture is None:
            doc.pop("capture")
        if self.speed is None:
            doc.pop("speed")
        return doc


RestrictionLookup = Callable[[OpUse, ReleaseInfo], list[Restriction]]
# sets a finding's path per product and keeps the aclnn contract only where aclnn runs
PathHook = Callable[[OpUse, ReleaseInfo, Finding], None]
# opcheck.checker.engine.engine_lookup: returns EngineFacts (engine, binaries, restrictions)
EngineLookup = Callable[[OpUse, ReleaseInfo], Any]
WorkaroundLookup = Callable[[str, ReleaseInfo], list[WorkaroundRef]]


def verdict_of(findings: Sequence[Finding], *, complete: bool = True) -> Verdict:
    """The worst op's verdict; a documented restriction the trace breaks makes it a MAYBE.
    An op list that stopped early is never YES or MAYBE: what it did not see may fail (a NO
    stays NO, since what it saw already fails)."""
    worst = max((f.status.verdict for f in findings), key=lambda v: v.rank, default=Verdict.YES)
    if worst is Verdict.YES and any(f.restricted for f in findings):
        worst = Verdict.MAYBE
    if not complete and worst is not Verdict.NO:
        return Verdict.INCOMPLETE
    return worst


def fail_level(text: str) -> FailOn:
    """``--fail-on`` text → FailOn (a usage error names the choices)."""
    try:
        return FailOn(text)
    except ValueError:
        raise UsageError(f"--fail-on must be one of {', '.join(FailOn)}") from None


def exit_code(report: Report, fail_on: FailOn | str, *, allow_incomplete: bool = False) -> int:
    """0 when clean under ``fail_on``, 1 when there are findings at that level. An incomplete
    op list is a finding at every level but ``never`` unless ``allow_incomplete``."""
    level = fail_level(fail_on)
    failing = level.failing_statuses
    bad = any(f.status in failing for f in report.ops)
    if not report.complete and not allow_incomplete and level is not FailOn.NEVER:
        bad = True
    if level.counts_restrictions:
        bad = bad or any(f.restricted for f in report.ops)
    if level.counts_speed:
        bad = bad or bool(report.speed and report.speed.get("findings"))
    return 1 if bad else 0


def _warnings_of(oplist: OpList, target: ReleaseInfo, target_warnings: list[str]) -> list[str]:
    """What the report must say before its ops: an op list that is not the whole program,
    the target's pairing, a torch version or IR that differs from what the NPU runs."""
    warnings: list[str] = []
    if oplist.on_device is False and not oplist.complete:
        # the run ended, but no tensor ever reached the device: one line, not a YES
        warnings.append(f"NO-DEVICE: {oplist.stopped or 'no tensor reached the device'}; "
                        "nothing was checked: move the model and its inputs to the device "
                        "(`model.to(device)`, `x.to(device)`) and run it again")
    elif not oplist.complete:
        why = oplist.stopped or "no reason recorded"
        if oplist.method == "run" and "--max-steps" in why:
            how = "raise --max-steps (0: no limit) and run it again"
        elif oplist.method == "run":
            how = ("fix what stopped the script, or raise --timeout / --memory-mb, and run it "
                   "again")
        else:
            how = ("run the program on real data (`opcheck run SCRIPT`), or give inputs that "
                   "avoid the data-dependent branch")
        warnings.append(
            f"INCOMPLETE: the program stopped before its end ({why}); the ops after that point "
            f"were not checked. For a complete answer {how}"
        )
    warnings += target_warnings  # after INCOMPLETE: the op list comes first
    if oplist.torch_version:
        try:
            traced, wanted = torch_minor(oplist.torch_version), target.torch_minor
        except ValueError:
            traced, wanted = oplist.torch_version, target.torch_minor
        if traced != wanted:
            warnings.append(
                f"the op list was traced with torch {oplist.torch_version} but torch_npu "
                f"{target.torch_npu} is built for torch {target.torch}: op names and "
                f"decompositions can differ between torch versions; trace with torch "
                f"{target.torch} for an exact answer"
            )
    if oplist.ir == "pre-dispatch":
        warnings.append(
            "static listing (pre-dispatch IR): composite ops are still whole and decompositions "
            "specific to the NPU device are not applied; trace at runtime (--trust) for the "
            "exact op list"
        )
    return warnings


def check(
    cat: Catalog,
    oplist: OpList,
    target: ReleaseInfo,
    *,
    cpu_fallback: bool = True,
    workarounds: WorkaroundLookup | None = None,
    restrictions: RestrictionLookup | None = None,
    cann: str | None = None,
    kernel_paths: PathHook | None = None,
    engine: EngineLookup | None = None,
) -> Report:
    """``cann``: the CANN version the user named; the report keeps it as the target's and
    warns when the release pairs with another (opcheck.checker.target)."""
    resolver = Resolver(cat, target.torch_npu, cpu_fallback=cpu_fallback)
    level = received(oplist, resolver)
    uses = level.ops
    resolutions = resolver.resolve_many([u.op for u in uses])
    # Limits are judged on the CANN the user named (the aclnn contract is per CANN version),
    # the release's paired CANN otherwise.
    target_doc, target_warnings = describe_target(target, cann)
    judged_on = replace(target, cann=target_doc["cann"]) if cann else target
    findings = []
    for use, res in zip(uses, resolutions, strict=True):
        f = Finding(
            op=use.op, status=res.status, kernel=res.kernel, aclnn=res.aclnn,
            via=list(res.via), reason=res.reason, count=use.count, dtypes=list(use.dtypes),
            shapes=[list(s) for s in use.shapes], modules=list(use.modules),
            locations=list(use.locations), first_npu_release=res.first_npu,
            first_npu_release_any=res.first_npu_any, decomposition_of=list(use.via),
        )
        if restrictions is not None:
            f.restrictions = restrictions(use, judged_on)
            f.restricted = any(r.violated for r in f.restrictions)
        if engine is not None and res.status is Status.NPU:
            facts = engine(use, judged_on)
            f.engine, f.binaries = facts.engine, facts.binaries
            f.restrictions += facts.restrictions
            f.restricted = any(r.violated for r in f.restrictions)
        if kernel_paths is not None:
            kernel_paths(use, judged_on, f)
        if workarounds is not None and (f.status.is_problem or f.restricted):
            # Entries may name the op the model calls or the one at the end of its chain
            # (logcumsumexp → _logcumsumexp): both help.
            refs = {w.id: w for op in dict.fromkeys((use.op, *res.via[-1:]))
                    for w in workarounds(op, target)}
            f.workarounds = list(refs.values())
        findings.append(f)
    findings.sort(key=lambda f: (-f.status.severity, -int(f.restricted), -f.count, f.op))
    counts = Counter(f.status for f in findings)
    warnings = _warnings_of(oplist, target, target_warnings)
    slow: Counter[str] = Counter()
    for f in findings:
        for key in ("aicpu_calls", "maybe_aicpu_calls", "host_syncs"):
            slow[key] += (f.engine or {}).get(key, 0)
    return Report(
        slow_paths=dict(slow) if engine is not None else {},
        model=oplist.model, method=oplist.method, ir=oplist.ir,
        target=target_doc,
        verdict=verdict_of(findings, complete=oplist.complete),
        fallback_calls=sum(f.count for f in findings if f.status is Status.CPU_FALLBACK),
        counts={s.value: counts.get(s, 0) for s in Status},
        ops=findings, notes=[*oplist.notes, *level.notes], warnings=warnings, mode=oplist.mode,
        catalog={k: v for k, v in cat.meta.items() if k in ("built_from", "torch_version",
                                                            "snapshot_digest")},
        complete=oplist.complete, stopped=oplist.stopped,
    )


def all_releases_matrix(cat: Catalog, oplist: OpList, *, cpu_fallback: bool = True) -> dict[str, Any]:
    """ops × releases → status, and the oldest release that runs every op on the NPU. Each
    release is checked on the ops it receives (composite ops whole where it has their kernel,
    decomposed elsewhere), so a row has no cell for a release that does not receive the op."""
    rows: dict[str, dict[str, Status]] = {}
    clean: list[str] = []
    releases = [r for r in cat.releases if r.has_kernels]
    for rel in releases:
        resolver = Resolver(cat, rel.torch_npu, cpu_fallback=cpu_fallback)
        ops = [u.op for u in received(oplist, resolver).ops]
        statuses = [resolver.resolve(op).status for op in ops]
        for op, st in zip(ops, statuses, strict=True):
            rows.setdefault(op, {})[rel.torch_npu] = st
        if all(st.runs_on_npu for st in statuses):
            clean.append(rel.torch_npu)
    rows = dict(sorted(rows.items()))
    return {
        "releases": [r.torch_npu for r in releases],
        "ops": rows,
        "oldest_full_npu_release": clean[0] if clean else "",
        "full_npu_releases": clean,
    }


def baseline_filter(report: Report, baseline: Mapping[str, Any]) -> Report:
    """Keep only the ops whose status is new or changed since ``baseline`` (a report JSON)."""
    try:
        old = {o["op"]: (o["status"], bool(o.get("restricted"))) for o in baseline["ops"]}
    except (KeyError, TypeError):
        raise UsageError("baseline is not an opcheck report JSON (no ops list)") from None
    kept = [f for f in report.ops if old.get(f.op) != (f.status, f.restricted)]
    report.notes.append(
        f"baseline: {len(report.ops) - len(kept)} ops unchanged and hidden; "
        f"{len(kept)} new or changed"
    )
    report.ops = kept
    return report
