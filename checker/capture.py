"""ACL graph capture (``torch.npu.NPUGraph`` / ``torch.npu.graph``, "aclgraph"): would the
recorded calls capture on the target release, and where does capture break first?

Serving stacks capture a decode step once and replay it. Capture records the tasks launched
on a stream; whatever needs the host in the middle of the step breaks it. The rules come from
torch_npu's own sources at the release's tag (``opcheck.scrapers.capture_rules``), combined
with what the report knows about each call:

- **host syncs** (breaks): ops whose output value or shape depends on the data (PyTorch's
  ``data_dependent_output`` / ``dynamic_output_shape`` tags: ``_local_scalar_dense`` from
  ``.item()``/``bool(t)``, ``nonzero``, ``masked_select``, ``unique``, boolean-mask
  ``index.Tensor``) and the ``nonzero`` op-plugin inserts before a boolean-mask index (engine
  facts): the host must wait for the stream, and a stream synchronize fails during capture
  (torch_npu routes its syncs through ``AclrtSynchronizeStreamWithTimeout``; the ACL
  runtime refuses them while capturing: torch_npu's sources do not check it themselves);
- **CPU fallbacks** (breaks): the inputs are copied to the host and back, with a sync;
- **acl_op kernels** (breaks, per product): ``OpCommand::Run`` calls
  ``assertNotCapturingAclop`` ("Cannot run aclop operators during NPU graph capture"): a call
  whose kernel path is acl_op on a product (``checker.kernel_path``) raises there;
- **random ops** (``nondeterministic_seeded``): where every generator access asserts not
  capturing (2.1-era sources, "Not support Generator while in capture mode") they break;
  where ``philox_npu_state`` is graph-safe they capture, unless their kernel still calls
  ``philox_engine_inputs`` (op-plugin's sources are not read for this: "maybe");
- **AI CPU ops**: captured as tasks (torch_npu states no rule against them), listed as slow.

A release whose own tag's sources are not in the catalog is judged on the nearest tag of the
same torch line that has them, labelled "inferred from torch_npu <tag>"; a release of a train
older than a mirrored tag without ``graphs.py`` has no NPUGraph at all (inferred likewise).

"First" is the first call by source position (file order of the trace, then line): the saved
op list keeps no call order.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field
from typing import Any

from opcheck.checker.aclop import ordered
from opcheck.checker.check import Finding, Report
from opcheck.core.oplist import OpList
from opcheck.core.versions import cann_key, release_key, torch_minor
from opcheck.core.vocab import Status
from opcheck.db.aclops import types_of_ops
from opcheck.db.capture import CaptureRule, op_tags, rule_tags, rules_at
from opcheck.db.catalog import Catalog, ReleaseInfo

BREAKS, MAYBE, SLOW = "breaks", "maybe", "slow"
_RANK = {BREAKS: 2, MAYBE: 1, SLOW: 0}
SYNC_TAGS = ("data_dependent_output", "dynamic_output_shape")
# dynamic_output_shape ops that sync only for some arguments: a boolean/byte mask index
_MASK_ONLY = ("aten::index.Tensor", "aten::index_put", "aten::index_put_", "aten::_index_put_impl_")
_MASKS = ("bool", "uint8")
RANDOM_TAG = "nondeterministic_seeded"
MAX_LISTED = 40
_TAG_TRAIN = re.compile(r"^[vV](.+?)-pytorch")


@dataclass
class CaptureBreak:
    op: str
    kind: str  # host_sync | cpu_fallback | acl_op | random | aicpu | unsupported | unknown
    severity: str  # breaks | maybe | slow
    why: str
    count: int = 0
    locations: list[str] = field(default_factory=list)
    products: list[str] = field(default_factory=list)  # where it breaks ([] = everywhere)
    rule: str = ""  # the torch_npu source line stating the rule (path:line at the tag)
    url: str = ""
    message: str = ""  # what torch_npu raises, when it raises
    # acl_op: the CANN op types its kernel runs (the one running names itself in the error:
    # "Current working aclop is Fill")
    op_types: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Basis:
    tag: str  # the tag whose rules are read ("" = none)
    inferred: bool = False
    absent: bool = False  # NPUGraph does not exist in the release

    def label(self, release: str) -> str:
        if not self.tag:
            return ""
        if not self.inferred:
            return f"torch_npu's sources at {self.tag}"
        return (f"inferred from torch_npu {self.tag} (the sources of torch_npu {release}'s own "
                "tag are not in the catalog)")


def _train(tag: str) -> tuple[tuple[int, int], ...] | None:
    m = _TAG_TRAIN.match(tag)
    try:
        return cann_key(m.group(1)) if m else None
    except ValueError:
        return None


def _minor(version: str) -> str:
    try:
        return torch_minor(version)
    except ValueError:
        return version


def capture_basis(cat: Catalog, release: ReleaseInfo, tags: dict[str, bool] | None = None
                  ) -> Basis:
    """Which tag's rules judge ``release``: its own; else, when a mirrored tag of the same or
    a newer train has no NPUGraph, none (absent, inferred); else the nearest tag of the same
    torch line with rules (inferred); else none."""
    tags = rule_tags(cat.engine) if tags is None else tags
    if release.tag in tags:
        return Basis(release.tag, absent=tags[release.tag])
    mine = _train(release.tag) if release.tag else None
    absent_tags = [t for t, absent in tags.items() if absent]
    if mine is not None:
        newer_absent = [t for t in absent_tags if (k := _train(t)) is not None and k >= mine]
        if newer_absent:
            return Basis(min(newer_absent, key=lambda t: _train(t) or ()), inferred=True,
                         absent=True)
    line = [t for t in tags if t not in absent_tags
            and _minor(t.rsplit("pytorch", 1)[-1]) == _minor(release.torch)]
    if not line:
        return Basis("")
    key = release_key(release.torch_npu)
    by_tag = {r.tag: r for r in cat.releases if r.tag}
    best = min(line, key=lambda t: (abs(_order(by_tag, t) - _order(by_tag, release.tag, key)), t))
    return Basis(best, inferred=True)


def _order(by_tag: dict[str, ReleaseInfo], tag: str, fallback: Any = None) -> float:
    rel = by_tag.get(tag)
    if rel is not None:
        return float(rel.sort_key)
    return float(fallback.release[-1]) if fallback is not None else 0.0


def _first_location(b: CaptureBreak) -> tuple[int, str, int]:
    if not b.locations:
        return (1, "", 0)
    path, _, line = b.locations[0].rpartition(":")
    return (0, path, int(line) if line.isdigit() else 0)


def _rule(rules: list[CaptureRule], kind: str, subject: str = "") -> CaptureRule | None:
    return next((r for r in rules if r.kind == kind and (not subject or r.subject.endswith(
        subject))), None)


def _mask_index(f: Finding, oplist: OpList) -> bool:
    for use in oplist.ops:
        if use.op != f.op:
            continue
        for sig in use.signatures:
            if any(k.startswith("indices") and v in _MASKS for k, v in sig.inputs.items()):
                return True
        if not use.signatures and any(d in _MASKS for d in use.dtypes):
            return True
    return False


def _breaks_of(f: Finding, tags: set[str], rules: list[CaptureRule], oplist: OpList,
               op_types: list[str] | None = None) -> list[CaptureBreak]:
    out: list[CaptureBreak] = []

    def add(kind: str, severity: str, why: str, rule: CaptureRule | None = None, *,
            products: list[str] | None = None, message: str = "") -> None:
        out.append(CaptureBreak(
            op=f.op, kind=kind, severity=severity, why=why, count=f.count,
            locations=list(f.locations), products=products or [],
            rule=f"{rule.path}:{rule.line}" if rule else "", url=rule.url if rule else "",
            message=message))

    sync = _rule(rules, "sync_point")
    if f.status is Status.CPU_FALLBACK:
        add("cpu_fallback", BREAKS, "CPU fallback: inputs copied to the host and back, the "
            "stream synchronised on every call", sync)
    elif f.status is Status.UNSUPPORTED:
        add("unsupported", BREAKS, "no kernel: the call raises, captured or not")
    elif f.status is Status.UNKNOWN:
        add("unknown", MAYBE, "not in the catalog: capture behaviour unknown")
    dynamic = tags & set(SYNC_TAGS)
    if dynamic and (f.op not in _MASK_ONLY or _mask_index(f, oplist)):
        what = ("its output value is read on the host" if "data_dependent_output" in dynamic
                else "its output shape depends on the data (the size is read on the host)")
        add("host_sync", BREAKS, f"host sync: {what}; a stream synchronize fails during "
            "capture", sync)
    elif (f.engine or {}).get("host_syncs"):
        add("host_sync", BREAKS, "host sync: op-plugin runs aten::nonzero on the boolean mask "
            f"before the kernel ({(f.engine or {}).get('host_syncs')} calls)", sync)
    acl = [p for p, path in f.path.items() if path == "acl_op"]
    aclop = _rule(rules, "aclop", "OpCommand::Run") or _rule(rules, "aclop")
    if acl and aclop and f.status is Status.NPU:
        msg = _rule(rules, "aclop", "assertNotCapturingAclop")
        everywhere = len(acl) == len(f.path)
        types = op_types or []
        named = (f"; it runs CANN op type{'s' if len(types) > 1 else ''} "
                 f"{', '.join(types[:6])}{', …' if len(types) > 6 else ''} (the error names the "
                 f"one running: \"Current working aclop is {types[0]}\")") if types else ""
        add("acl_op", BREAKS, "acl_op kernel: torch_npu refuses acl_op kernels during capture"
            + ("" if everywhere else f" (on {', '.join(acl)})") + named, aclop,
            products=[] if everywhere else acl, message=msg.message if msg else "")
        out[-1].op_types = types
    if RANDOM_TAG in tags and f.status in (Status.NPU, Status.COMPOSITE):
        safe = _rule(rules, "rng_graph_safe")
        legacy = _rule(rules, "generator", "philox_engine_inputs")
        gen = _rule(rules, "generator", "philox_npu_state") or _rule(rules, "generator")
        if safe is None and gen is not None:
            add("random", BREAKS, "random op: every NPU generator access refuses capture here",
                gen, message=gen.message)
        elif safe is not None and legacy is not None:
            add("random", MAYBE, "random op: captured when its kernel draws offsets through "
                "the graph-safe philox_npu_state; a kernel still calling philox_engine_inputs "
                "raises (op-plugin's kernel not read)", legacy, message=legacy.message)
    aicpu = (f.engine or {}).get("aicpu_calls", 0)
    if aicpu:
        add("aicpu", SLOW, f"AI CPU kernel ({aicpu} calls): captured as a task (no torch_npu "
            "rule against it), but runs on the AI CPU on every replay")
    return out


def _acl_types(cat: Catalog, ops: list[str], release: ReleaseInfo) -> dict[str, list[str]]:
    """op → the op types its acl_op kernel runs in the release, its own first."""
    out: dict[str, list[str]] = {}
    for op, rows in types_of_ops(cat.engine, ops, release.torch_npu).items():
        out[op] = list(dict.fromkeys(r.op_type for r in ordered(op, rows)))
    return out


def capture_check(cat: Catalog, report: Report, oplist: OpList, release: ReleaseInfo
                  ) -> dict[str, Any]:
    """The capture section of a report for the target release (JSON-ready)."""
    tags = rule_tags(cat.engine)
    basis = capture_basis(cat, release, tags)
    rules = rules_at(cat.engine, basis.tag) if basis.tag else []
    notes: list[str] = []
    label = basis.label(release.torch_npu)
    if basis.absent:
        absent = _rule(rules, "absent")
        verdict = "NO"
        notes.append(f"torch_npu {release.torch_npu} has no NPUGraph: "
                     f"{absent.message if absent else 'graphs.py absent'} ({label})")
        breaks: list[CaptureBreak] = []
    elif not basis.tag:
        verdict = "UNKNOWN"
        have = sorted({r.torch_npu for r in cat.releases if r.tag in tags
                       and not tags[r.tag]}, key=release_key, reverse=True)
        notes.append(f"no capture rules in the catalog for torch_npu {release.torch_npu} or its "
                     f"torch line; releases with them: {', '.join(have[:6]) or 'none'}")
        breaks = []
    else:
        by_op = op_tags(cat.engine, [f.op for f in report.ops])
        types = _acl_types(cat, [f.op for f in report.ops if "acl_op" in f.path.values()],
                           release)
        breaks = [b for f in report.ops for b in _breaks_of(f, by_op.get(f.op, set()), rules,
                                                           oplist, types.get(f.op))]
        breaks.sort(key=lambda b: (-_RANK[b.severity], _first_location(b), b.op))
        worst = max((_RANK[b.severity] for b in breaks), default=-1)
        verdict = ("NO" if worst == _RANK[BREAKS] else "MAYBE" if worst == _RANK[MAYBE]
                   else "INCOMPLETE" if not oplist.complete else "YES")
        notes.append("every recorded call is judged as if it ran inside the capture (opcheck "
                     "does not know which part of the program you capture): read the calls of "
                     "the captured step")
        if basis.inferred:
            notes.append(f"capture rules {label}")
        begin = [r for r in rules if r.kind == "capture_begin"]
        if begin:
            notes.append("capture_begin also refuses: " + "; ".join(
                f"{r.message} ({r.path}:{r.line})" for r in begin[:2]))
    breaking = [b for b in breaks if b.severity == BREAKS]
    # the first call that breaks capture on every product judged; else the first anywhere
    everywhere = [b for b in breaking if not b.products]
    first = min(everywhere or breaking, key=_first_location) if breaking else None
    first_some = min(breaking, key=_first_location) if breaking else None
    if first_some is not None and first_some is not first and first_some.products:
        notes.insert(0, f"first break on {', '.join(first_some.products)}: "
                     f"{_where(asdict(first_some))} {first_some.op} ({first_some.why})")
    return {
        "release": release.torch_npu,
        "tag": basis.tag,
        "inferred": basis.inferred,
        "basis": label,
        "verdict": verdict,
        "first": asdict(first) if first else None,
        "breaks": [asdict(b) for b in breaks],
        "counts": {s: sum(b.severity == s for b in breaks) for s in _RANK},
        "notes": notes,
    }


def capture_exit(capture: dict[str, Any] | None) -> int:
    """1 when capture breaks (a NO verdict), else 0."""
    return 1 if capture and capture.get("verdict") == "NO" else 0


def _where(b: dict[str, Any]) -> str:
    return b["locations"][0] if b["locations"] else "(no source line)"


def capture_text(capture: dict[str, Any]) -> str:
    """The capture section as plain text (table format)."""
    head = (f"ACL graph capture (torch.npu.NPUGraph) on torch_npu {capture['release']}: "
            f"{capture['verdict']}")
    if capture.get("inferred"):
        head += f" (inferred from torch_npu {capture['tag']})"
    lines = ["", head]
    first = capture.get("first")
    if first:
        lines.append(f"  first break: {_where(first)}  {first['op']}: {first['why']}")
    for b in capture["breaks"][:MAX_LISTED]:
        more = f" (+{len(b['locations']) - 1} more lines)" if len(b["locations"]) > 1 else ""
        rule = f" [{b['rule']}]" if b["rule"] else ""
        lines.append(f"  {b['severity']:<7} {_where(b)}{more}  {b['op']} ×{b['count']}: "
                     f"{b['why']}{rule}")
    if len(capture["breaks"]) > MAX_LISTED:
        lines.append(f"  … and {len(capture['breaks']) - MAX_LISTED} more "
                     "(--format json lists all)")
    lines += [f"  note: {n}" for n in capture.get("notes", [])]
    return "\n".join(lines) + "\n"


def capture_markdown(capture: dict[str, Any]) -> list[str]:
    """The capture section of the Markdown report."""
    out = ["", "## ACL graph capture (torch.npu.NPUGraph)", "",
           f"**{capture['verdict']}** on torch_npu {capture['release']}"
           + (f" ({capture['basis']})" if capture.get("basis") else ""), ""]
    first = capture.get("first")
    if first:
        out += [f"First break: `{_where(first)}` `{first['op']}`: {first['why']}", ""]
    if capture["breaks"]:
        out += ["| severity | line | op | calls | why | rule |", "|---|---|---|---|---|---|"]
        for b in capture["breaks"][:MAX_LISTED]:
            rule = f"[{b['rule']}]({b['url']})" if b["url"] else b["rule"]
            why = b["why"].replace("|", "\\|")
            out.append(f"| {b['severity']} | `{_where(b)}` | `{b['op']}` | {b['count']} | "
                       f"{why} | {rule} |")
    out += ["", *(f"- {n}" for n in capture.get("notes", []))]
    return out
