"""Adapters from catalog data to the checker's workaround and restriction lookups."""

from __future__ import annotations

from opcheck.db.check import RestrictionLookup, WorkaroundLookup
from opcheck.db.resolve import Catalog


def workaround_lookup(cat: Catalog) -> WorkaroundLookup | None:
    return None


def restriction_lookup(cat: Catalog, hardware: str | None) -> RestrictionLookup | None:
    return None
