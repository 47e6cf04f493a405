"""``opcheck zoo --format json``: the zoo document (schema in ``ZooResult.to_json``)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from opcheck.checker.formats.base import RenderContext
    from opcheck.checker.zoo import ZooResult


def to_json(result: ZooResult) -> str:
    return json.dumps(result.to_json(), indent=2) + "\n"


def render(result: ZooResult, ctx: RenderContext) -> str:
    return to_json(result)
