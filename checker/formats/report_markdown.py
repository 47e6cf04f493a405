"""``--format markdown``: a migration report to hand over (or paste into an issue)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from opcheck.checker.formats.text import (
    first_full_npu,
    fix_hints,
    matrix_cell,
    matrix_groups,
    matrix_rows,
    md_escape,
    relative_location,
    report_root,
    summary_line,
    target_line,
)
from opcheck.checker.kernel_path import brief
from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from opcheck.checker.check import Finding, Report
    from opcheck.checker.formats.base import RenderContext


def to_markdown(report: Report, *, environment: Mapping[str, str] | None = None,
                all_ops: bool = False) -> str:
    root = report_root(report)
    model = relative_location(report.model, root) if root else report.model
    out = [f"# NPU migration report: {model or 'model'}", ""]
    out += [f"**Verdict: {summary_line(report)}**", ""]
    t = report.target
    out += ["## Target", "", "| component | version |", "|---|---|",
            f"| torch_npu | {t.get('torch_npu', '')} |", f"| torch | {t.get('torch', '')} |",
            f"| CANN | {t.get('cann') or 'unknown (not in the compatibility tables)'} |",
            f"| Ascend Extension for PyTorch (train) | {t.get('train', '')} |",
            f"| Python | {md_escape((t.get('pythons') or '?').replace(',', ', '))} |", ""]
    out.append(f"Checked as: {target_line(report)}.")
    out.append("")
    out += ["## Model", "", f"- model: `{model or '?'}`",
            f"- listing: {report.method} ({report.ir}), mode {report.mode}",
            f"- ops: {len(report.ops)} distinct, {sum(f.count for f in report.ops)} calls",
            f"- complete: {'yes' if report.complete else 'no (' + report.stopped + ')'}"]
    if root:
        out.append("- paths are relative to the model's project folder")
    out.append("")
    for warning in report.warnings:
        out.append(f"> Warning: {warning}")
    if report.warnings:
        out.append("")
    out += ["## Coverage", "", "| status | ops | calls |", "|---|---|---|"]
    for status in Status:
        calls = sum(f.count for f in report.ops if f.status == status)
        out.append(f"| {status} | {report.counts[status.value]} | {calls} |")
    out.append("")
    problems = report.problems
    out += _op_table("Problems", problems, root,
                     empty="None: every op runs on the NPU.")
    if problems:
        out += ["### Details", ""]
        for f in problems:
            out.append(f"- `{f.op}`: {md_escape(f.reason)}")
            if len(f.via) > 1:
                out.append(f"  - via: {' → '.join(f.via)}")
            for r in f.restrictions:
                out.append(f"  - restriction ({r.api}): {r.text}")
            for w in f.workarounds:
                out.append(f"  - workaround `{w.id}`: {w.title}")
        out.append("")
        out += _fixes(report)
    out += _engine(report.ops)
    if report.speed is not None:
        out += _speed(report.speed, root)
    if all_ops:
        out += _op_table("All ops", report.ops, root, empty="The op list is empty.")
    if report.matrix:
        out += _matrix(report.matrix)
    if report.graph is not None:
        from opcheck.checker.graph import graph_markdown

        out += [*graph_markdown(report.graph), ""]
    if report.capture is not None:
        from opcheck.checker.capture import capture_markdown

        out += [*capture_markdown(report.capture), ""]
    if report.notes:
        out += ["## Notes", ""] + [f"- {n}" for n in report.notes] + [""]
    if environment:
        out += ["## Appendix: the machine that ran opcheck", "",
                "Where the report was made, which need not be the target above.", "",
                "| component | version |", "|---|---|"]
        out += [f"| {k} | {md_escape(v)} |" for k, v in environment.items()]
        out.append("")
    return "\n".join(out).rstrip("\n") + "\n"


def _op_table(title: str, ops: Sequence[Finding], root: str, *, empty: str) -> list[str]:
    out = [f"## {title}", ""]
    if not ops:
        return [*out, empty, ""]
    out += ["| op | status | calls | dtypes | where | first NPU release | workarounds |",
            "|---|---|---|---|---|---|---|"]
    for f in ops:
        shown = f.status + (" (restricted)" if f.restricted else "") + (
            f" · {brief(f.path)}" if f.path else "")  # the kernel path per product
        where = ", ".join(relative_location(x, root) for x in (f.locations or f.modules)[:2])
        first = f.first_npu_release or (f"{f.first_npu_release_any} (other torch line)"
                                        if f.first_npu_release_any else "none yet")
        if f.status.runs_on_npu and not f.restricted:
            first = ""
        wa = ", ".join(w.id for w in f.workarounds) or "-"
        out.append(f"| `{f.op}` | {shown} | {f.count} | {', '.join(f.dtypes)} | "
                   f"{md_escape(where)} | {first} | {wa} |")
    out.append("")
    return out


def _fixes(report: Report) -> list[str]:
    """Each workaround the problems name, with its fix whole: the report travels without
    opcheck, so the reader must not need ``opcheck workaround show`` to act on it."""
    hints = fix_hints(report)
    if not hints:
        return []
    out = ["### Fixes", ""]
    for h in hints:
        out += [f"#### `{h.id}`: {h.title}", "",
                f"For {', '.join(f'`{o}`' for o in h.ops)}.", "",
                _demote_headings(h.fix.strip()), "",
                f"The whole entry (verification, sources, rewrite code): `{h.command}`.", ""]
    return out


def _demote_headings(markdown: str) -> str:
    """An entry's own headings sit below the report's ``####``."""
    out, fence = [], False
    for line in markdown.splitlines():
        if line.lstrip().startswith("```"):
            fence = not fence
        out.append("##### " + line.lstrip("#").lstrip() if not fence and line.startswith("#")
                   else line)
    return "\n".join(out)


def _engine(ops: Sequence[Finding]) -> list[str]:
    """Calls that run on the AI CPU or need a host sync (opcheck.checker.engine)."""
    rows = []
    for f in ops:
        for call in (f.engine or {}).get("calls", []):
            before = " after a host sync (nonzero)" if call.get("before") else ""
            if call["engine"] in ("aicpu", "maybe_aicpu") or before:
                cites = [c for a in call["aclnn"] if a["engine"] != "aicore"
                         for c in a.get("because", []) or a.get("aicpu_when", [])[:2]]
                why = "; ".join(f"{c['text']} ({c['at']})" for c in cites[:3])
                inputs = ", ".join(f"{k}={v}" for k, v in call["inputs"].items())
                rows.append(f"| `{f.op}` | {md_escape(inputs)} | {call['count']} | "
                            f"{call['label']}{before} | {md_escape(why)} |")
    if not rows:
        return []
    return ["## Slow paths inside CANN", "", "| op | call | calls | engine | source |",
            "|---|---|---|---|---|", *rows, ""]


def _speed(speed: Mapping[str, Any], root: str) -> list[str]:
    """Host syncs, AI CPU calls, CPU round trips, per-tensor foreach paths; fused-op tips."""
    from opcheck.checker.speed import KIND_LABELS

    unit = speed.get("unit", "forward")
    out = ["## Speed", ""]
    findings = speed.get("findings", [])
    if not findings:
        out += ["No host syncs, AI CPU calls, CPU round trips or per-tensor foreach paths "
                "found.", ""]
    else:
        judged = speed.get("judged_on", "")
        out += [f"Counts per {unit} ({speed.get('steps', 1)} recorded); slow paths judged on "
                f"{judged}.", "",
                f"| kind | op | per {unit} | where | why | instead |", "|---|---|---|---|---|---|"]
        for s in findings:
            where = ", ".join(relative_location(x, root) for x in s["locations"][:3]) or "?"
            op = f"`{s['op']}`" if s["op"] else "a tensor value"
            if s["apis"]:
                op += " via " + ", ".join(f"`{a}`" for a in s["apis"][:2])
            mark = " (the trace stopped here)" if s.get("stopped_here") else ""
            mark += " (inferred)" if s.get("inferred") else ""
            out.append(f"| {KIND_LABELS.get(s['kind'], s['kind'])} | {op} | {s['per_step']:g} | "
                       f"{md_escape(where)}{mark} | {md_escape(s['why'])} | "
                       f"{md_escape(s['instead'])} |")
        out.append("")
    tips = speed.get("tips", [])
    if tips:
        out += ["### Fused NPU ops", "", "| pattern | use | replaces | call sites | where it "
                "exists | source |", "|---|---|---|---|---|---|"]
        for t in tips:
            sites = ", ".join(relative_location(x, root) for x in t["call_sites"][:3]) or "?"
            label = " (inferred)" if t.get("inferred") else ""
            out.append(f"| {t['pattern']} | `{t['api']}` | "
                       f"{md_escape(', '.join(t['replaces'][:6]))} | {md_escape(sites)} | "
                       f"{md_escape(t['availability'])}{label} | {md_escape(t['source'])} |")
        out.append("")
    return out


def _matrix(matrix: Mapping[str, Any]) -> list[str]:
    """ops × release groups; the first group running the whole model on the NPU in bold."""
    groups = matrix_groups(matrix)
    shown, clean = matrix_rows(groups)
    star = first_full_npu(groups)
    out = ["## Every release", ""]
    oldest = matrix.get("oldest_full_npu_release") or ""
    out.append(f"Oldest release running the whole model on the NPU: **{oldest or 'none'}**.")
    out.append("")
    if not groups:
        return out
    heads = [f"**{g.label}** ★" if i == star else g.label for i, g in enumerate(groups)]
    out += ["| op | " + " | ".join(md_escape(h) for h in heads) + " |",
            "|---|" + "---|" * len(groups)]
    for op in shown:
        cells = [matrix_cell(g.statuses[op]) for g in groups]
        cells = [f"**{c}**" if i == star else c for i, c in enumerate(cells)]
        out.append(f"| `{op}` | " + " | ".join(cells) + " |")
    out += ["", f"Columns are runs of consecutive releases with the same statuses; {clean} other "
            "ops run on the NPU in every release that receives them. Cells: npu, comp "
            "(composite), cpu (CPU fallback), NO (unsupported), ? (unknown), – (the release "
            "does not receive the op). ★: the first group running the whole model on the NPU.",
            ""]
    return out


def render(report: Report, ctx: RenderContext) -> str:
    return to_markdown(report, environment=ctx.environment, all_ops=ctx.all_ops)
