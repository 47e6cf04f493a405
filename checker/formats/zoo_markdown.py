"""``opcheck zoo --format markdown``: the coverage table and the newest release's problems."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opcheck.checker.formats.text import md_escape
from opcheck.checker.zoo import ERROR, ZooResult, grouped

if TYPE_CHECKING:
    from opcheck.checker.formats.base import RenderContext


def to_markdown(result: ZooResult) -> str:
    traced = sorted({r.traced_with for r in result.rows if r.traced_with})
    lines = [
        "# opcheck zoo: well-known architectures on torch_npu releases",
        "",
        f"{len(result.models)} models × {len(result.releases)} releases with a kernel list"
        + (f"; traced with torch {', '.join(traced)}" if traced else "") + ".",
        "",
        "A cell is the verdict on that release and, in brackets, how many ops fall back to the "
        "CPU, are unsupported or unknown. `YES`: every op runs on the NPU; `MAYBE`: some fall "
        "back to the CPU (or are unknown); `NO`: some are unsupported; `ERROR`: the trace failed. "
        "Kernel coverage only: documented per-API restrictions (dtype limits per product) are "
        "left out (`opcheck check` reports them). Releases built for an older torch may receive "
        "op names that differ from this trace's.",
        "",
        "| torch_npu | " + " | ".join(md_escape(m) for m in result.models) + " |",
        "|---|" + "---|" * len(result.models),
    ]
    # consecutive releases with the same results share a line: 77 releases fold into ~20
    for first, last, cells in grouped(result):
        label = first if first == last else f"{first} – {last}"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    newest = result.releases[-1] if result.releases else ""
    lines += ["", f"## Problem ops on the default target, the newest release ({newest})", ""]
    for m in result.models:
        row = result.row(m, newest)
        if row is None:
            continue
        if row.verdict == ERROR:
            lines.append(f"- **{md_escape(m)}**: ERROR: {md_escape(row.error)}")
            continue
        findings = result.newest.get(m)
        if findings is not None:
            items = [
                f"`{f.op}` {f.status} ({f.count} call{'s' if f.count != 1 else ''}"
                + (f"; NPU kernel from {f.first_npu_release_any}" if f.first_npu_release_any
                   else "") + ")"
                for f in findings
            ]
        else:
            items = [f"`{op}` {status}" for op, _, status in
                     (p.partition("=") for p in row.problem_ops.split(",") if p)]
        lines.append(f"- **{md_escape(m)}**: {row.verdict}: " + ("; ".join(items) if items else
                                                        "every op runs on the NPU"))
    return "\n".join(lines) + "\n"


def render(result: ZooResult, ctx: RenderContext) -> str:
    return to_markdown(result)
