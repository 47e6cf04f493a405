"""``opcheck atlas --format markdown``: one line per architecture (its newest release's
verdict, the release from which it runs on the NPU whole, its problem ops)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from opcheck.checker.atlas import summary

if TYPE_CHECKING:
    from opcheck.checker.atlas import AtlasResult
    from opcheck.checker.formats.base import RenderContext

HEADER = ["library", "architecture", "task", "recorder", "newest", "YES since", "round trips",
          "problem ops or reason"]


def _cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def render(result: AtlasResult, ctx: RenderContext) -> str:
    lines = [f"# opcheck atlas: {len({(r.library, r.architecture) for r in result.rows})} "
             f"architectures × {len(result.releases)} releases", "",
             "| " + " | ".join(HEADER) + " |", "|" + "---|" * len(HEADER)]
    for s in summary(result):
        lines.append("| " + " | ".join(_cell(str(c)) for c in s) + " |")
    return "\n".join(lines) + "\n"
