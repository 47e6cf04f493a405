"""``--format markdown``: a migration report to hand over (or paste into an issue)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from opcheck.checker.formats.text import md_escape, summary_line, target_line
from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from opcheck.checker.check import Report
    from opcheck.checker.formats.base import RenderContext


def to_markdown(report: Report, *, environment: Mapping[str, str] | None = None) -> str:
    out = [f"# NPU migration report: {report.model or 'model'}", ""]
    out += [f"**Verdict: {summary_line(report)}**", "", f"Target: {target_line(report)}", ""]
    if environment:
        out += ["## Environment", "", "| component | version |", "|---|---|"]
        out += [f"| {k} | {md_escape(v)} |" for k, v in environment.items()]
        out.append("")
    out += ["## Coverage", "", "| status | ops | calls |", "|---|---|---|"]
    for status in Status:
        calls = sum(f.count for f in report.ops if f.status == status)
        out.append(f"| {status} | {report.counts[status.value]} | {calls} |")
    out.append("")
    out.append(f"Listing: {report.method} ({report.ir}), mode {report.mode}.")
    for warning in report.warnings:
        out.append(f"> Warning: {warning}")
    out.append("")
    problems = report.problems
    out += ["## Problems", ""]
    if not problems:
        out.append("None: every op runs on the NPU.")
    else:
        out += ["| op | status | calls | dtypes | where | first NPU release | workarounds |",
                "|---|---|---|---|---|---|---|"]
        for f in problems:
            shown = f.status + (" (restricted)" if f.restricted else "")
            where = ", ".join((f.locations or f.modules)[:2])
            first = f.first_npu_release or (f"{f.first_npu_release_any} (other torch line)"
                                            if f.first_npu_release_any else "none yet")
            wa = ", ".join(w.id for w in f.workarounds) or "-"
            out.append(f"| `{f.op}` | {shown} | {f.count} | {', '.join(f.dtypes)} | "
                       f"{md_escape(where)} | {first} | {wa} |")
        out.append("")
        out += ["### Details", ""]
        for f in problems:
            out.append(f"- `{f.op}`: {md_escape(f.reason)}")
            if len(f.via) > 1:
                out.append(f"  - via: {' → '.join(f.via)}")
            for r in f.restrictions:
                out.append(f"  - restriction ({r.api}): {r.text}")
            for w in f.workarounds:
                out.append(f"  - workaround `{w.id}`: {w.title}")
    if report.notes:
        out += ["", "## Notes", ""] + [f"- {n}" for n in report.notes]
    return "\n".join(out) + "\n"


def render(report: Report, ctx: RenderContext) -> str:
    return to_markdown(report, environment=ctx.environment)
