"""Reads of the ``advisor_rule`` table (the vendor profiling advisor's affinity-API rules).
A catalog built before the table, or from a source without the rule file, reads as no rules."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, text

from opcheck.db.reads import has_rows


@dataclass(frozen=True)
class AdvisorRule:
    kind: str  # aten | optimizer
    api: str
    pattern: str
    cann: str
    torch: str
    path: str
    line: int
    url: str


def advisor_rules(engine: Engine) -> list[AdvisorRule]:
    """Every advisor rule, in file order."""
    if not has_rows(engine, ("advisor_rule",)):
        return []
    with engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT kind, api, pattern, cann, torch, path, line, url FROM advisor_rule "
            "ORDER BY line, id"))
        return [AdvisorRule(str(k), str(a), str(p), str(c or ""), str(t or ""), str(pa or ""),
                            int(li or 0), str(u or "")) for k, a, p, c, t, pa, li, u in rows]
