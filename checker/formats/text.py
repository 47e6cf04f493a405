"""Sentences every view of a Report shares (Markdown, SARIF, the terminal table)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from opcheck.checker.check import Report


def target_line(report: Report) -> str:
    t = report.target
    cann = f"CANN {t['cann']}" if t.get("cann") else "CANN unknown (not in the compatibility tables)"
    return f"torch_npu {t['torch_npu']} (torch {t['torch']}, {cann})"


def summary_line(report: Report) -> str:
    """``MAYBE: 2 on NPU, 1 composite, 1 CPU fallback (3 CPU round-trips per forward), …``."""
    c = report.counts
    parts = []
    for status in Status:
        part = f"{c[status.value]} {status.tally}"
        if status is Status.CPU_FALLBACK:
            part += (f" ({report.fallback_calls} CPU round-trips per "
                     f"{'step' if report.mode == 'train' else 'forward'})")
        parts.append(part)
    restricted = sum(1 for f in report.ops if f.restricted)
    return (f"{report.verdict}: " + ", ".join(parts)
            + (f", {restricted} restricted" if restricted else ""))


def md_escape(text: str) -> str:
    """Text safe inside a Markdown table cell."""
    return text.replace("|", "\\|")
