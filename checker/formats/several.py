"""The reports of several models checked in one invocation (``opcheck a.pt2 b.pt2``).

Each model gets its own report, in the order given; a model whose op list could not be made
(its trace crashed, timed out, ...) gets its one-line reason instead. ``json`` is one document
(kind ``opcheck.reports``) holding the report documents; ``markdown`` is the migration
reports one after another; ``table`` is drawn by the CLI. Formats whose consumers expect one
document per model run (SARIF, JUnit, CSV) take one model.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Union

from opcheck.core.errors import UsageError

if TYPE_CHECKING:
    from opcheck.checker.check import Report
    from opcheck.checker.formats.base import RenderContext

# (the model as given, its report or why it has none)
Outcome = tuple[str, Union["Report", str]]

FORMATS = ("table", "markdown", "json")
REPORTS_KIND = "opcheck.reports"


def check_format(fmt: str) -> None:
    """A usage error for a format that takes one model."""
    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt} takes one model: check several models with "
                         f"{', '.join(FORMATS)}, or one at a time")


def render(fmt: str, outcomes: Sequence[Outcome], ctx: RenderContext) -> str:
    check_format(fmt)
    if fmt == "json":
        return to_json(outcomes)
    if fmt == "markdown":
        return to_markdown(outcomes, ctx)
    raise UsageError(f"--format {fmt} is drawn on a terminal, not rendered to text")


def to_json(outcomes: Sequence[Outcome]) -> str:
    """``models`` in the order given; ``reports`` the report documents (kind opcheck.report)
    of those that were checked; ``errors`` the others with their reason."""
    from opcheck.checker.check import REPORT_SCHEMA_VERSION

    doc = {
        "schema_version": REPORT_SCHEMA_VERSION, "kind": REPORTS_KIND,
        "models": [m for m, _ in outcomes],
        "reports": [o.to_json() for _, o in outcomes if not isinstance(o, str)],
        "errors": [{"model": m, "error": o} for m, o in outcomes if isinstance(o, str)],
    }  # fmt: skip
    return json.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def to_markdown(outcomes: Sequence[Outcome], ctx: RenderContext) -> str:
    from opcheck.checker.formats.report_markdown import render as one
    from opcheck.checker.formats.text import md_escape

    parts = []
    for model, outcome in outcomes:
        if isinstance(outcome, str):
            parts.append(f"# NPU migration report: {md_escape(model)}\n\n"
                         f"**Not checked: {md_escape(outcome)}**\n")
        else:
            parts.append(one(outcome, ctx))
    return "\n---\n\n".join(parts)
