"""``opcheck atlas --format json``: the atlas document (kind ``opcheck.atlas``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opcheck.checker.atlas import AtlasResult
    from opcheck.checker.formats.base import RenderContext


def render(result: AtlasResult, ctx: RenderContext) -> str:
    return json.dumps(result.to_json(), indent=2, ensure_ascii=False) + "\n"
