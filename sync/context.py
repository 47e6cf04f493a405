"""What the upstreams of one sync share: the source, the data being built, provenance.

Every fetch that yields catalog facts goes through :meth:`SyncContext.fetch`, which registers
the file as a source row (scraper, path, URL, ref, commit, sha256) and returns its id, so each
fact can point at the file it came from.  Upstreams that run later read what earlier ones
found from the fields below (the release matrix, the published wheels, the op-plugin refs).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from opcheck.core.errors import ScrapeError
from opcheck.db.data import CatalogData, KernelFacts
from opcheck.scrapers.releases import MatrixResult
from opcheck.scrapers.rows import KernelRow, Origin
from opcheck.sync.sources import Fetched, Source
from opcheck.sync.universe import Universe

Progress = Callable[[str], None]
KernelParser = Callable[[str, Origin, str | None], list[KernelRow]]
# Kernel facts per op of one registry, and the id of the source they came from.
Kernels = tuple[dict[str, KernelFacts], int]


def _quiet(_message: str) -> None:
    pass


def canonical_url(path: str) -> str:
    """The public URL of a mirror-layout path (provenance, also for offline builds)."""
    if path.startswith("github/"):
        owner, repo, ref, rest = path.split("/", 4)[1:]
        return f"https://github.com/{owner}/{repo}/blob/{ref}/{rest}"
    # Wheels have no URL of our choosing: they come from whatever index the user's pip is
    # configured for (`pip download torch-npu==VERSION`); the path and sha256 identify them.
    return ""


@dataclass
class SyncContext:
    source: Source
    universe: Universe | None = None
    progress: Progress = _quiet
    # The torch-npu versions to read published wheels for; None: what the source lists.
    wanted_wheels: Iterable[str] | None = None
    data: CatalogData = field(init=False, default_factory=CatalogData)
    failures: list[str] = field(init=False, default_factory=list)
    notes: list[str] = field(init=False, default_factory=list)

    # Filled by the upstreams, in registry order.
    matrix: MatrixResult = field(init=False, default_factory=lambda: MatrixResult([]))
    releases_tsv_id: int = field(init=False, default=0)
    matrix_source_ids: dict[str, int] = field(init=False, default_factory=dict)  # path → id
    wheel_versions: set[str] = field(init=False, default_factory=set)
    extra_wheels: dict[str, str] = field(init=False, default_factory=dict)  # version → torch version
    native_by_tag: dict[str, Kernels] = field(init=False, default_factory=dict)
    native_by_line: dict[str, Kernels] = field(init=False, default_factory=dict)
    op_plugin_refs: set[str] = field(init=False, default_factory=set)

    _texts: dict[str, Fetched] = field(init=False, default_factory=dict)
    _parsed: dict[tuple[str, str | None], list[KernelRow]] = field(init=False, default_factory=dict)
    _row_counts: dict[int, int] = field(init=False, default_factory=dict)

    def fetch(self, path: str, scraper: str) -> tuple[Fetched, int]:
        """The text at ``path`` (fetched once per sync) and its source id under ``scraper``."""
        if path not in self._texts:
            self._texts[path] = self.source.fetch(path)
        got = self._texts[path]
        o = got.origin
        sid = self.data.add_source(scraper, path, url=o.url or canonical_url(path),
                                   ref=o.ref, commit=o.commit, sha256=o.sha256)
        return got, sid

    def count(self, sid: int, n: int) -> None:
        """Record how many rows a source gave (the most any parse of it gave)."""
        self._row_counts[sid] = max(self._row_counts.get(sid, 0), n)

    def row_count(self, sid: int) -> int:
        return self._row_counts.get(sid, 0)

    def ls(self, path: str) -> list[str]:
        """A directory's names; [] when missing or when the source cannot list."""
        try:
            return self.source.list_dir(path)
        except ScrapeError:
            return []

    def kernel_rows(self, path: str, scraper: str, torch: str | None,
                    parse: KernelParser) -> tuple[list[KernelRow], int]:
        """Kernel registrations of one registry file, parsed once per (path, torch)."""
        got, sid = self.fetch(path, scraper)
        key = (path, torch)
        if key not in self._parsed:
            rows = parse(got.text, got.origin, torch)
            self._parsed[key] = rows
            self.count(sid, len(rows))
        return self._parsed[key], sid

    def parsed_kernel_rows(self) -> Iterable[KernelRow]:
        """Every kernel row parsed so far, in parse order (schemas for registry-only ops)."""
        for rows in self._parsed.values():
            yield from rows
