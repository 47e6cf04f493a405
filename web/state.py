"""What the pages of one served catalog share, loaded once per worker process."""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from opcheck.checker.history import HistoryFacts
from opcheck.db import reads
from opcheck.db.catalog import Catalog, ReleaseInfo


@dataclass
class ServeState:
    """Per-catalog objects the pages share, read from the event loop thread and from the
    op-list check thread. Both only read, except the catalog's lazy per-release kernel
    lists, which start-up fills (the op page's ``warm``); a list filled twice concurrently is
    the same list assigned twice."""

    path: str
    facts: HistoryFacts  # the catalog, its workaround lookup, deprecations
    sources: dict[int, dict[str, str]]
    workarounds: dict[str, dict[str, str]]  # workaround rows by id, in id order
    products: list[str] = field(default_factory=list)  # hardware named by the API docs

    @property
    def catalog(self) -> Catalog:
        return self.facts.cat

    @property
    def has_api_docs(self) -> bool:
        return self.facts.has_api_docs

    @property
    def usable_releases(self) -> list[ReleaseInfo]:
        """Releases with a kernel list, newest first (what the op-list page offers)."""
        return [r for r in reversed(self.catalog.releases) if r.has_kernels]


@lru_cache(maxsize=4)
def state_for(path: str) -> ServeState:
    from opcheck.contrib.workaround_catalog import workaround_lookup
    from opcheck.db.engine import make_engine

    cat = Catalog.load(make_engine(Path(path)))
    facts = HistoryFacts.load(cat, workaround_lookup(cat))
    sources = {s.id: {k: str(v or "") for k, v in s.model_dump().items()}
               for s in reads.sources(cat.engine)}
    workarounds = {w.id: {k: str(v or "") for k, v in w.model_dump().items()}
                   for w in reads.workarounds(cat.engine)}
    products = reads.api_products(cat.engine) if facts.has_api_docs else []
    return ServeState(path, facts, sources, workarounds, products)
