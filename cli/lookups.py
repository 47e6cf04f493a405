"""Adapters from catalog data to the checker's workaround and restriction lookups."""

from __future__ import annotations

import json
from collections import defaultdict

from sqlalchemy import text

from opcheck.db.check import RestrictionLookup, WorkaroundLookup, WorkaroundRef
from opcheck.db.resolve import Catalog, ReleaseInfo
from opcheck.db.workarounds import ReleaseRange


def workaround_lookup(cat: Catalog) -> WorkaroundLookup | None:
    by_op: dict[str, list[tuple[WorkaroundRef, list[ReleaseRange]]]] = defaultdict(list)
    with cat.engine.connect() as conn:
        rows = conn.execute(text(
            "SELECT o.op, w.id, w.title, w.kind, w.path, w.releases FROM workaround_op o "
            "JOIN workaround w ON w.id = o.workaround_id ORDER BY w.id"
        ))
        for op, wid, title, kind, path, releases in rows:
            ranges = [ReleaseRange(**r) for r in json.loads(releases or "[]")]
            by_op[op].append((WorkaroundRef(wid, title, kind, path), ranges))

    def lookup(op: str, release: ReleaseInfo) -> list[WorkaroundRef]:
        return [ref for ref, ranges in by_op.get(op, [])
                if not ranges or any(r.contains(release.torch_npu) for r in ranges)]

    return lookup


def restriction_lookup(cat: Catalog, hardware: str | None) -> RestrictionLookup | None:
    from opcheck.db.restrictions import restriction_lookup as lookup

    return lookup(cat, hardware)
