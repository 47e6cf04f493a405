"""The vendor profiling advisor's affinity-API rules (msprof-analyze, synced from Ascend/mstt
into ``advisor_rule``), decided on a trace instead of an NPU profile.

The advisor matches each rule's op chain (``"(slice|chunk)-gelu-mul"``) on the ATen events of a
profile, in time order. A trace records, per op, the source lines and module paths that called
it, not the order of the calls, so a chain is matched here as the set of its required elements
(an element with a ``{0,n}``, ``*`` or ``?`` count is optional) met on one source line, or in
one module together with its direct children (``F.silu(self.norm(x))``: group_norm in ``norm``,
silu in its parent); the order is not checked, and every tip says so. Op names are compared
without namespace, overload and leading or trailing ``_``, and with the names the same call is
recorded under on the NPU device (``chunk`` → ``split``, ``contiguous`` → ``clone``,
``layer_norm`` → ``native_layer_norm`` …: :data:`ALIASES`). A rule whose required ops are a
strict subset of another matched rule's is dropped at a site it shares with it, and wherever
the other's hit replaces all its recorded ops (``gelu`` → fast_gelu inside a GeGLU). A tip is given only where the target release has the API's kernel (``npu::<name>``) on
the target product (``opcheck.checker.tips.availability``; where the aclnn docs leave the
product out but the kernel is an acl_op graph op older than its aclnn function, the tip is
given, labelled inferred, only with the catalog's evidence that the graph op runs on the
product, cited: op-plugin's SoC check sending its chips to the acl_op kernel, or CANN's open
libraries building every op type that kernel runs for its SoC; with no evidence, none)
and its CANN is at least the rule set's CANN version.

Optimizer rules (``SGD.step`` → ``torch_npu.optim.NpuFusedSGD``) are matched on the optimizer
classes a run recorded (``OpList.settings``). Rules whose API is not torch_npu's
(``torch.addmm`` for ``mul-mul-add``, ``mindspeed.ops.*``) are not given: the first needs the
call order and multiplicity a trace does not keep, the second a library outside torch_npu.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from opcheck.checker.tips import Api, availability
from opcheck.core.oplist import OpList
from opcheck.core.versions import cann_key
from opcheck.db.advisor import AdvisorRule, advisor_rules
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.scrapers.advisor import ATEN, OPTIMIZER, split_chain

# The names one advisor element is recorded under on the NPU device (after normalising)
ALIASES: dict[str, frozenset[str]] = {
    "chunk": frozenset({"chunk", "split", "split_with_sizes", "unsafe_split"}),
    "slice": frozenset({"slice", "narrow", "select"}),
    "contiguous": frozenset({"contiguous", "clone"}),
    "reshape": frozenset({"reshape", "view", "unsafe_view", "reshape_alias"}),
    "view": frozenset({"view", "reshape", "unsafe_view", "reshape_alias"}),
    "layer_norm": frozenset({"layer_norm", "native_layer_norm"}),
    "group_norm": frozenset({"group_norm", "native_group_norm"}),
    "softmax": frozenset({"softmax", "safe_softmax"}),
    "matmul": frozenset({"matmul", "mm", "bmm", "baddbmm"}),
    "dropout": frozenset({"dropout", "native_dropout"}),
    "type_as": frozenset({"type_as", "to_copy"}),
    # not aten::t: nn.Linear records it (with a view for 3-D inputs) at every layer, and the
    # runtime trace does not always record aten::linear as the composite it came from
    "transpose": frozenset({"transpose"}),
}
_LINEAR = "aten::linear"
NOTE = ("matched as the set of the chain's ops on one source line or in one module and its "
        "children (a trace keeps no call order)")


@dataclass(frozen=True)
class Chain:
    required: tuple[frozenset[str], ...]  # each element: the names that satisfy it

    @classmethod
    def parse(cls, pattern: str) -> Chain:
        out = []
        for element in split_chain(pattern):
            m = re.match(r"^\(?([\w\s|]+)\)?(.*)$", element)
            if m is None or re.match(r"^(\{0,\d+\}|[*?])$", m.group(2)):
                continue  # optional
            names: set[str] = set()
            for raw in m.group(1).split("|"):
                name = _norm(raw.strip())
                names |= ALIASES.get(name, frozenset({name}))
            out.append(frozenset(names))
        return cls(tuple(out))

    def holds(self, ops: set[str]) -> bool:
        return bool(self.required) and all(e & ops for e in self.required)

    def names(self) -> frozenset[str]:
        return frozenset().union(*self.required)


def _norm(op: str) -> str:
    return op.split("::")[-1].split(".")[0].strip("_")


@dataclass
class Hit:
    rule: AdvisorRule
    chain: Chain
    keys: list[str]
    ops: list[str]  # the recorded ops it replaces
    lines: list[str]
    count: int


def _sites(oplist: OpList) -> dict[str, dict[str, set[str]]]:
    """site → normalised name → recorded ops: each source line, and each module with its
    direct children."""
    sites: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for use in oplist.ops:
        if _LINEAR in use.via:
            # nn.Linear's own weight transpose and input reshape (its decomposition), not a
            # transpose or view the user wrote: no confusion_transpose for every Linear
            continue
        name = _norm(use.op)
        for loc in use.locations:
            sites[loc][name].add(use.op)
        for m in use.modules:
            sites[f"module {m}"][name].add(use.op)
            parent = m.rpartition(".")[0] if "." in m else ""
            if parent:
                sites[f"module {parent}"][name].add(use.op)
    return sites


def match_chains(oplist: OpList, rules: Sequence[AdvisorRule]) -> list[Hit]:
    """The aten rules whose chains hold at some site of the op list (see the module doc)."""
    chains = [(r, Chain.parse(r.pattern)) for r in rules
              if r.kind == ATEN and r.api.startswith("torch_npu.")]
    if not chains:
        return []
    sites = _sites(oplist)
    by_name: dict[str, set[str]] = defaultdict(set)  # name → the sites it was met at
    for key, names in sites.items():
        for n in names:
            by_name[n].add(key)
    empty: set[str] = set()
    where: list[set[str]] = []
    for _, c in chains:  # the sites holding every required element: one set op per element
        held: set[str] | None = None
        for element in c.required:
            at = set().union(*(by_name.get(n, empty) for n in element))
            held = at if held is None else held & at
        where.append(held or set())
    for i, (_, c) in enumerate(chains):  # a bigger chain at the same site wins
        for k, (_, o) in enumerate(chains):
            if where[i] and where[k] and c.names() < o.names():
                where[i] -= where[k]
    hits: list[Hit] = []
    by_op = {u.op: u for u in oplist.ops}
    for (r, c), keys in zip(chains, where, strict=True):
        if not keys:
            continue
        wanted = c.names()
        ops = sorted({op for k in keys for n, got in sites[k].items() if n in wanted
                      for op in got})
        lines: list[str] = []
        for use in oplist.ops:
            if use.op in ops and (keys & set(use.locations)
                                  or keys & {f"module {m}" for m in use.modules}):
                lines += [loc for loc in use.locations if loc not in lines]
        count = max((by_op[o].count for o in ops if o in by_op), default=0)
        hits.append(Hit(r, c, sorted(keys), ops, lines, count))
    # a smaller chain whose ops a bigger chain's hit already replaces (gelu, in a GeGLU whose
    # chunk is on the line before) is part of that fusion
    return [h for h in hits if not any(
        h.chain.names() < o.chain.names() and set(h.ops) <= set(o.ops) for o in hits)]


def _cann_ok(release: ReleaseInfo, rule: AdvisorRule) -> bool:
    if not release.cann or not rule.cann:
        return True
    try:
        return cann_key(release.cann) >= cann_key(rule.cann)
    except ValueError:
        return True


def advisor_tips(cat: Catalog, oplist: OpList, release: ReleaseInfo, product: str | None,
                 given: Iterable[str] = (),
                 rules: Sequence[AdvisorRule] | None = None) -> list[dict[str, Any]]:
    """The advisor's tips for the op list on ``release`` and ``product``: only APIs whose
    kernel exists there, none of the APIs in ``given`` (the tips already made)."""
    rules = advisor_rules(cat.engine) if rules is None else rules
    if not rules:
        return []
    skip = set(given)
    hits = [h for h in match_chains(oplist, rules) if h.rule.api not in skip]
    spans = cat.kernel_releases({f"npu::{h.rule.api.rsplit('.', 1)[-1]}" for h in hits})
    releases: Callable[[str], list[str]] = lambda op: spans.get(op, [])  # noqa: E731
    tips: list[dict[str, Any]] = []
    for h in sorted(hits, key=lambda h: (h.rule.line, h.rule.api)):
        api = Api(h.rule.api, f"npu::{h.rule.api.rsplit('.', 1)[-1]}",
                  f"the profiling advisor's fusion of {h.rule.pattern}")
        if api.name in skip or not _cann_ok(release, h.rule):
            continue
        av = availability(cat, api, release, product, releases)
        text = av.text
        if not av.ok:
            built = (", but " in av.text and _graph_op_first(cat, release, api.op,
                                                             releases(api.op))
                     and graph_op_built(cat, release, api.op, product))
            if not built:
                continue
            text = (f"{av.text}; an acl_op kernel too, older than the aclnn function "
                    f"(inferred: {built})")
        skip.add(api.name)
        tips.append({
            "pattern": f"advisor: {h.rule.pattern}", "api": api.name, "kernel": api.op,
            "why": f"{api.why}; {NOTE}", "replaces": h.ops, "call_sites": h.lines,
            "where": sorted(h.keys)[:8], "count": h.count,
            "availability": f"{text}; advisor rule from CANN {h.rule.cann}",
            "products": av.products, "inferred": True,
            "source": h.rule.url or f"{h.rule.path}:{h.rule.line}",
        })
    tips += optimizer_tips(oplist, rules, skip)
    return tips


def graph_op_built(cat: Catalog, release: ReleaseInfo, op: str, product: str | None) -> str:
    """The catalog's evidence that ``op``'s acl_op kernel runs on ``product`` at ``release``,
    as text citing it; "" when there is none. Evidence: op-plugin's SoC check in the op's
    op_api kernel sends the product's chips to the acl_op kernel (``kernel_soc_check``), or
    CANN's open libraries build or configure every op type that kernel runs
    (``op_acl_type``) for the product's SoC (``op_binary``)."""
    from opcheck.checker.aclop import type_facts
    from opcheck.checker.engine import SOC_OF_PRODUCT
    from opcheck.checker.kernel_path import KernelPaths
    from opcheck.db.aclops import types_of_ops

    if not product:
        return ""
    paths = KernelPaths(cat)
    checked = {rel for c in paths.checks.get(op, []) for rel in c.releases.split(",")}
    order = [r.torch_npu for r in cat.releases]
    at = order.index(release.torch_npu) if release.torch_npu in order else len(order)
    # the release's own check; else the nearest release's (later ones first): the acl_op
    # kernel it sends the chips to is the same graph op
    near = ([release.torch_npu] if release.torch_npu in checked
            else [*order[at + 1:], *reversed(order[:at])])
    for rel in near:
        info = next((r for r in cat.releases if r.torch_npu == rel), None)
        if rel not in checked or info is None:
            continue
        routed = paths.acl_op_by_soc(op, info, product)
        if routed is not None:
            return routed.why + ("" if rel == release.torch_npu
                                 else f" in torch_npu {rel}, the nearest release with the check")
    soc = SOC_OF_PRODUCT.get(product)
    rows, note = types_of_ops(cat.engine, [op], release.torch_npu).get(op, []), ""
    if not rows:  # a release whose op-plugin pin was not read: the newest that was
        read = {rel for r in types_of_ops(cat.engine, [op]).get(op, []) for rel in r.releases}
        newest = next((r.torch_npu for r in reversed(cat.releases) if r.torch_npu in read), "")
        rows = types_of_ops(cat.engine, [op], newest).get(op, []) if newest else []
        note = f" (the op types of torch_npu {newest}'s acl_op kernel)"
    types = sorted({r.op_type for r in rows})
    if soc is None or not types:
        return ""
    facts = type_facts(cat, types, soc, release.cann)
    if any(facts[t].kernel != "binary" for t in types):
        return ""
    return "; ".join(f"CANN's open libraries build {t} for {soc} ({facts[t].basis})"
                     for t in types) + note


def _graph_op_first(cat: Catalog, release: ReleaseInfo, op: str, rels: Sequence[str]) -> bool:
    """Whether ``release`` registers an acl_op kernel for ``op`` and the first release with
    the op registered it without aclnn (a graph op the aclnn function came after: its docs
    name the products of the new kernel only)."""
    facts = cat.kernel_facts(release.torch_npu, op)
    first = cat.kernel_facts(rels[0], op) if rels else None
    return bool(facts is not None and facts.acl_op and first is not None
                and first.status == "kernel" and not first.op_api)


def optimizer_tips(oplist: OpList, rules: Sequence[AdvisorRule],
                   skip: set[str]) -> list[dict[str, Any]]:
    """The fused torch_npu optimizer for each optimizer class the run created (not already
    fused: ``fused=True``/``foreach``-less torch fused kernels are their own tip)."""
    by_class = {r.pattern.removesuffix(".step"): r for r in rules if r.kind == OPTIMIZER}
    out: list[dict[str, Any]] = []
    for s in oplist.settings:
        if s.get("kind") != "optimizer" or s.get("fused"):
            continue
        rule = by_class.get(str(s.get("class", "")))
        if rule is None or rule.api in skip:
            continue
        skip.add(rule.api)
        out.append({
            "pattern": f"advisor: {rule.pattern}", "api": rule.api, "kernel": "",
            "why": f"torch_npu's fused {rule.pattern.removesuffix('.step')}: the update of "
                   "every parameter in a few fused kernels instead of one set of ops per "
                   "parameter",
            "replaces": [f"{s.get('module', 'torch.optim')}.{s.get('class')}"],
            "call_sites": [str(s.get("where", ""))] if s.get("where") else [],
            "where": [], "count": int(s.get("params", 0) or 0),
            "availability": "torch_npu.optim (Python; not checked per release: inferred)",
            "products": [], "inferred": True,
            "source": rule.url or f"{rule.path}:{rule.line}",
        })
    return out
