"""The profiling advisor's AI CPU dtype rules (``aicpu_rules.yaml``, synced into
``advisor_rule`` as ``aicpu_dtype`` rows) decided on the recorded calls: an op called with an
input dtype its rule does not list runs on the AI CPU there, a finding with the cast that keeps
it on the AI Core.

The advisor reads CANN op types from a profile; a trace has ATen ops, so the named op types are
matched on the ATen ops that launch them (``_OP_TYPES``), every other op that reaches the device
on the ``__all__`` rule. The rule set is the one whose CANN versions list the release's CANN, or
else the newest one before it (labelled inferred).
"""

from __future__ import annotations

from collections.abc import Sequence

from opcheck.checker.speed import SpeedFinding
from opcheck.core.oplist import OpList
from opcheck.core.versions import cann_key
from opcheck.db.advisor import AdvisorRule

# the CANN op types the advisor names → the ATen ops (without overload) that launch them
_OP_TYPES = {"cast": ("_to_copy", "to"), "nonzero": ("nonzero",), "equal": ("eq",),
             "tensorequal": ("equal",), "mul": ("mul",)}
# trace dtype names → the advisor's
_NAMES = {"bfloat16": "dt_bf16", "bool": "bool"}
_FLOATS = ("float32", "float16", "dt_bf16")


def _key(version: str) -> tuple[tuple[int, int], ...] | None:
    try:
        return cann_key(version)
    except ValueError:
        return None


def rule_set(rules: Sequence[AdvisorRule], cann: str) -> tuple[list[AdvisorRule], bool]:
    """The ``aicpu_dtype`` rows for ``cann`` and whether the choice is inferred."""
    sets: dict[str, list[AdvisorRule]] = {}
    for r in rules:
        if r.kind == "aicpu_dtype":
            sets.setdefault(r.cann, []).append(r)
    for versions, rows in sets.items():
        if cann in versions.split(","):
            return rows, False
    want = _key(cann)
    if want is None:
        return [], False
    # a set applies from the oldest version it lists on
    older = []
    for versions, rows in sets.items():
        keys = [k for k in map(_key, versions.split(",")) if k is not None]
        if keys and min(keys) <= want:
            older.append((min(keys), rows))
    return (max(older, key=lambda kr: kr[0])[1], True) if older else ([], False)


def _allowed(rule: AdvisorRule) -> tuple[set[str], set[str]]:
    parts = dict(p.split("=", 1) for p in rule.pattern.split(";"))
    return set(parts.get("in", "").split(",")), set(parts.get("ignore", "").split(",")) - {""}


def aicpu_dtype_findings(oplist: OpList, rules: Sequence[AdvisorRule], cann: str,
                         steps: int) -> list[SpeedFinding]:
    """One finding per op and input dtype its advisor rule sends to the AI CPU."""
    chosen, inferred = rule_set(rules, cann)
    if not chosen:
        return []
    by_type = {r.api: r for r in chosen}
    every = by_type.get("__all__")
    ignored = _allowed(every)[1] if every else set()
    aten = {name: by_type[t] for t, names in _OP_TYPES.items() if t in by_type for name in names}
    out: list[SpeedFinding] = []
    for use in oplist.ops:
        if use.composite or not use.op.startswith("aten::"):
            continue
        base = use.op.removeprefix("aten::").split(".")[0]
        rule = aten.get(base) or (None if any(base in aten_names for t, aten_names
                                              in _OP_TYPES.items() if t in ignored) else every)
        if rule is None:
            continue
        allowed = _allowed(rule)[0]
        bad = sorted({_NAMES.get(d, d) for sig in use.signatures for d in sig.inputs.values()
                      if d} - allowed)
        if not bad:
            continue
        per = round(use.count / steps, 2) if steps > 1 else float(use.count)
        cast = "float32" if any(d.startswith(("float", "complex")) for d in bad) else "int32"
        out.append(SpeedFinding(
            "aicpu", use.op, use.count, per, list(use.locations[:8]), [],
            why=f"runs on the AI CPU for dtype {', '.join(bad)} (the profiling advisor's AI CPU "
                f"rule for op type {rule.api} on CANN {rule.cann.replace(',', '/')}"
                + (f", the newest set before CANN {cann}: inferred" if inferred else "") + ")",
            instead=f"cast the inputs to {cast} (or another dtype the rule lists: "
                    f"{', '.join(d for d in _FLOATS if d in allowed) or 'see the rule'}) "
                    "before the call",
            source=f"profiling advisor rule {rule.path}:{rule.line}", link=rule.url,
            inferred=True))
    return out
