"""``opcheck atlas --format csv``: one line per architecture and run of releases (the
atlas.tsv columns)."""

from __future__ import annotations

import csv
import io
from dataclasses import astuple, fields
from typing import TYPE_CHECKING

from opcheck.db.data import CoverageRec

if TYPE_CHECKING:
    from opcheck.checker.atlas import AtlasResult
    from opcheck.checker.formats.base import RenderContext


def render(result: AtlasResult, ctx: RenderContext) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow([f.name for f in fields(CoverageRec)])
    for r in result.rows:
        w.writerow(astuple(r))
    return buf.getvalue()
