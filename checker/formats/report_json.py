"""``--format json``: the report document itself (schema in ``Report.to_json``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opcheck.checker.check import Report
    from opcheck.checker.formats.base import RenderContext


def to_json(report: Report) -> str:
    return json.dumps(report.to_json(), indent=2, ensure_ascii=False) + "\n"


def render(report: Report, ctx: RenderContext) -> str:
    return to_json(report)
