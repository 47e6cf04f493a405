"""``opcheck zoo --format csv``: one line per model and release (the zoo.tsv columns)."""

from __future__ import annotations

import csv
import io
from typing import TYPE_CHECKING

from opcheck.core.vocab import Status

if TYPE_CHECKING:
    from opcheck.checker.formats.base import RenderContext
    from opcheck.checker.zoo import ZooResult

COLUMNS = ["model", "torch_npu", "verdict", *(s.value for s in Status), "fallback_calls",
           "problem_ops", "error", "traced_with"]


def to_csv(result: ZooResult) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for r in result.rows:
        w.writerow([getattr(r, c) for c in COLUMNS])
    return buf.getvalue()


def render(result: ZooResult, ctx: RenderContext) -> str:
    return to_csv(result)
