"""The vendor's profiling advisor (msprof-analyze ``advisor``, public Ascend/mstt repository):
its affinity-API rules, ``profiler/msprof_analyze/advisor/rules/timeline_fusion_ops.yaml``.

The file is a list of rule sets, one per CANN version (``cann_version``, ``torch_version``: one
version or a ``[min, max]`` range, ``unique_id``, ``inherit_unique_id``: the set it extends),
each adding ``operator_rules``: under ``aten``, a torch_npu (or torch, or MindSpeed) API and the
op-name chains it replaces (``"(slice|chunk)-gelu-mul"``: ``-`` separated op names, a group
``(a|b)`` with an optional ``{m,n}`` count); under ``Optimizer``, a fused optimizer and the
optimizer step it replaces (``SGD.step``). One row per API and chain, with the CANN version of
the first set that adds it and the line of the chain; an API or chain listed again by a later
set keeps its first row. Unknown keys, a non-list chain list or a chain that is not of that
shape fail with file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opcheck.scrapers import yamlines as yl
from opcheck.scrapers.rows import Origin

PATH = "profiler/msprof_analyze/advisor/rules/timeline_fusion_ops.yaml"
ATEN, OPTIMIZER = "aten", "optimizer"
_SET_KEYS = frozenset({"cann_version", "torch_version", "unique_id", "inherit_unique_id",
                       "operator_rules"})
_KINDS = {"aten": ATEN, "Optimizer": OPTIMIZER}
_ELEMENT = re.compile(r"^(?:\(\s*\w+(?:\s*\|\s*\w+)*\s*\)(?:\{\d+,\d+\}|[*+?])?|\w+)$")
_STEP = re.compile(r"^\w+\.step$")


@dataclass(frozen=True)
class AdvisorRow:
    kind: str  # aten (a chain of ops) | optimizer (an optimizer's step)
    api: str  # "torch_npu.npu_geglu", "torch_npu.optim.NpuFusedSGD", "mindspeed.ops.…"
    pattern: str  # "(slice|chunk)-gelu-mul", "SGD.step"
    cann: str  # the CANN version of the first rule set that adds it
    torch: str  # that set's torch versions: "1.11.0" or "1.11.0,2.1.0" (a range)
    line: int


def split_chain(pattern: str) -> list[str]:
    """Split a chain on the ``-`` between elements (never inside a group)."""
    out, depth, cur = [], 0, ""
    for ch in pattern:
        depth += ch == "("
        depth -= ch == ")"
        if ch == "-" and depth == 0:
            out.append(cur.strip())
            cur = ""
        else:
            cur += ch
    return [*out, cur.strip()]


def check_pattern(pattern: str, kind: str) -> bool:
    if kind == OPTIMIZER:
        return bool(_STEP.match(pattern))
    return all(_ELEMENT.match(e) for e in split_chain(pattern))


def _torch(ctx: yl.YamlCtx, value: object, line: int) -> str:
    if isinstance(value, (str, float, int)) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, list) and len(value) == 2 and all(isinstance(v, str) for v in value):
        return ",".join(str(v) for v in value)
    raise ctx.error(f"torch_version: expected a version or [min, max], got {value!r}", line)


def parse(text: str, origin: Origin) -> list[AdvisorRow]:
    """The rows of one ``timeline_fusion_ops.yaml`` (see the module doc)."""
    ctx = yl.YamlCtx(origin)
    data = yl.load(text, origin)
    if not isinstance(data, list):
        raise ctx.error("expected a list of rule sets at top level", yl.line_of(data, default=1))
    rows: dict[tuple[str, str, str], AdvisorRow] = {}
    for set_line, rule_set in yl.items(data):
        if not isinstance(rule_set, yl.LineDict):
            raise ctx.error("a rule set is not a mapping", set_line)
        yl.check_keys(ctx, rule_set, _SET_KEYS, "rule set")
        if "cann_version" not in rule_set or "operator_rules" not in rule_set:
            raise ctx.error("a rule set without cann_version or operator_rules", set_line)
        cann = str(rule_set["cann_version"])
        torch = _torch(ctx, rule_set.get("torch_version", ""),
                       yl.line_of(rule_set, "torch_version", set_line))
        rules = rule_set["operator_rules"]
        rules_line = yl.line_of(rule_set, "operator_rules", set_line)
        yl.check_keys(ctx, yl.expect_mapping(ctx, rules, "operator_rules"), frozenset(_KINDS),
                      "operator_rules")
        for section, body in rules.items():
            kind = _KINDS[section]
            body_line = yl.line_of(rules, section, rules_line)
            if not isinstance(body, yl.LineDict):
                raise ctx.error(f"{section}: expected a mapping", body_line)
            yl.check_keys(ctx, body, frozenset({"add"}), section)
            added = body["add"]
            if not isinstance(added, yl.LineDict):
                raise ctx.error(f"{section}.add: expected a mapping", yl.line_of(body, "add"))
            for api, chains in added.items():
                api_line = yl.line_of(added, api)
                yl.expect_list(ctx, chains, api_line, str(api))
                for line, chain in yl.items(chains):
                    if not isinstance(chain, str) or not check_pattern(chain, kind):
                        raise ctx.error(f"{api}: not an op chain of the advisor's form: "
                                        f"{chain!r}", line)
                    rows.setdefault((kind, str(api), chain),
                                    AdvisorRow(kind, str(api), chain, cann, torch, line))
    if not rows:
        raise ctx.error("no rules", 1)
    return list(rows.values())

