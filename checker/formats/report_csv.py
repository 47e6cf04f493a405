"""``--format csv``: one line per op (every op, not only problems), for spreadsheets."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from opcheck.checker.formats.text import relative_location, report_root

if TYPE_CHECKING:
    from opcheck.checker.check import Report
    from opcheck.checker.formats.base import RenderContext

COLUMNS = ("op", "status", "restricted", "calls", "dtypes", "kernel", "via", "where",
           "first_npu_release", "first_npu_release_any", "workarounds", "target")


def render(report: Report, ctx: RenderContext) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    root = report_root(report)
    target = report.target.get("torch_npu", "")
    for f in report.ops:
        w.writerow([
            f.op, f.status.value, "yes" if f.restricted else "", f.count, " ".join(f.dtypes),
            f.kernel, " → ".join(f.via[1:]),
            "; ".join(relative_location(x, root) for x in (f.locations or f.modules)),
            f.first_npu_release, f.first_npu_release_any,
            " ".join(ref.id for ref in f.workarounds), target,
        ])
    return buf.getvalue()
