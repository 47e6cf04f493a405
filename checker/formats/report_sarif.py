"""``--format sarif``: SARIF 2.1.0, one result per problem op, for code-scanning dashboards."""

from __future__ import annotations

import json
import re
from typing import TYPE_CHECKING, Any

from opcheck import __version__
from opcheck.checker.formats.text import target_line
from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from collections.abc import Iterable

    from opcheck.checker.check import Finding, Report
    from opcheck.checker.formats.base import RenderContext

_LOC = re.compile(r"^(?P<file>.+?):(?P<line>\d+)$")
RESTRICTED = "restricted"
CAPTURE = "capture"
SLOW = "slow"
# The order dashboards list the rules in (texts: ``Status.rule``); a problem status not named
# here comes after these.
_FIRST = (Status.UNSUPPORTED, Status.CPU_FALLBACK, Status.UNKNOWN)


def rules(capture: bool = False) -> dict[str, str]:
    """The rules a report declares (``capture``: the report has a --capture section)."""
    out = {str(s): s.rule for s in _FIRST}
    out.update({str(s): s.rule for s in Status if s.is_problem and s not in _FIRST})
    out[RESTRICTED] = "A dtype seen in the trace is outside the op's documented restriction"
    if capture:
        out[CAPTURE] = "The call breaks ACL graph capture (torch.npu.NPUGraph) on the target release"
    return out


SLOW_RULE = ("Costs time every step: a host sync, an AI CPU call or a per-tensor foreach path "
             "(CPU round trips are the cpu_fallback results)")


def _speed_results(report: Report) -> list[dict[str, Any]]:
    """One note per speed finding (``--fail-on slow`` makes them fail a build); CPU round
    trips are already results of their own (cpu_fallback)."""
    from opcheck.checker.speed import speed_lines

    speed = report.speed or {}
    out = []
    for s, text in zip(speed.get("findings", []), speed_lines(speed), strict=True):
        if s["kind"] == "cpu_fallback":
            continue
        result: dict[str, Any] = {"ruleId": SLOW, "level": "note", "message": {"text": text},
                                  "properties": {"op": s["op"], "kind": s["kind"],
                                                 "per_step": s["per_step"]}}
        locs = _locations(s["locations"])
        if locs:
            result["locations"] = locs
        out.append(result)
    return out


def _level(f: Finding) -> str:
    return "error" if f.status is Status.UNSUPPORTED else "warning"


def _locations(where: Iterable[str]) -> list[dict[str, Any]]:
    """SARIF locations of ``file:line`` strings (others have no place in a file)."""
    return [{"physicalLocation": {"artifactLocation": {"uri": m["file"]},
                                  "region": {"startLine": int(m["line"])}}}
            for m in (_LOC.match(x) for x in where) if m]


def to_sarif(report: Report) -> str:
    results = []
    for f in report.problems:
        rule = str(f.status) if f.status.is_problem else RESTRICTED
        msg = f"{f.op}: {f.status}" + (" (restricted)" if f.restricted else "")
        msg += f", {f.count} call(s) on {target_line(report)}. {f.reason}"
        if f.workarounds:
            msg += " Workarounds: " + ", ".join(w.id for w in f.workarounds) + "."
        result: dict[str, Any] = {"ruleId": rule, "level": _level(f), "message": {"text": msg},
                                  "properties": {"op": f.op, "count": f.count}}
        locs = _locations(f.locations)
        if locs:
            result["locations"] = locs
        results.append(result)
    for b in (report.capture or {}).get("breaks", []):  # --capture
        if b["severity"] != "breaks":
            continue
        where = _locations(b["locations"])
        results.append({"ruleId": CAPTURE, "level": "warning",
                        "message": {"text": f"{b['op']}: {b['why']}"},
                        "properties": {"op": b["op"], "count": b["count"]},
                        **({"locations": where} if where else {})})
    results += _speed_results(report)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [{
            "tool": {"driver": {
                "name": "opcheck", "version": __version__,
                "rules": [{"id": k, "shortDescription": {"text": v}}
                          for k, v in rules(report.capture is not None).items()]
                + ([{"id": SLOW, "shortDescription": {"text": SLOW_RULE}}]
                   if any(r["ruleId"] == SLOW for r in results) else []),
            }},
            "results": results,
        }],
    }
    return json.dumps(doc, indent=2) + "\n"


def render(report: Report, ctx: RenderContext) -> str:
    return to_sarif(report)
