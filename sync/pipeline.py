"""The sync: collect every upstream's facts into CatalogData, then (``run_sync``) write them.

:func:`collect` runs the upstreams of :data:`opcheck.sync.upstreams.UPSTREAMS` in order over
one source (mirror directory, HTTP, pip-downloaded wheels).  A failing file is recorded and
collection goes on; the caller decides (``opcheck sync`` refuses to replace the catalog when
anything failed).  Only an unreadable release list stops it: nothing works without it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from opcheck.core.errors import UsageError
from opcheck.core.versions import release_key
from opcheck.db.data import CatalogData
from opcheck.sync.context import Progress, SyncContext, default_workers
from opcheck.sync.http_source import HttpSource
from opcheck.sync.pip_source import PipWheelSource
from opcheck.sync.sources import MirrorSource, MirrorsSource, SavingSource, Source
from opcheck.sync.universe import Universe, installed_universe
from opcheck.sync.upstreams import UPSTREAMS, Upstream, load_matrix

__all__ = [
    "SyncOptions",
    "SyncOutcome",
    "SyncResult",
    "Universe",
    "collect",
    "installed_universe",
    "run_sync",
]


@dataclass
class SyncResult:
    data: CatalogData
    failures: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def collect(
    source: Source,
    *,
    universe: Universe | None,
    progress: Progress | None = None,
    wheels: Iterable[str] | None = None,
    upstreams: Iterable[Upstream] = UPSTREAMS,
    parse_cache: Path | None = None,
    workers: int | None = None,
) -> SyncResult:
    """Everything the catalog needs from ``source``; failures are collected, not raised,
    except when the release list itself cannot be read.

    ``wheels``: the torch-npu versions to read published wheels for; ``None`` lists what the
    source has (a mirror's ``pypi/torch-npu/``). A wheel that cannot be had (not on the
    user's index) is noted and the release falls back to op-plugin at its pinned commit.
    ``parse_cache``: a directory where parsed files persist across syncs, keyed on their
    content and the parser's code (:meth:`SyncContext.parsed`); None: this sync only.
    ``workers``: processes that parse distinct files in parallel (:meth:`SyncContext.prefetch`);
    None: one per core when the machine is idle (``default_workers``), 0: none.
    """
    ctx = SyncContext(source, universe=universe, wanted_wheels=wheels, parse_cache=parse_cache,
                      workers=default_workers() if workers is None else workers)
    if progress is not None:
        ctx.progress = progress
    try:
        for upstream in upstreams:
            upstream.collect(ctx)
    finally:
        ctx.close()
    data = ctx.data
    stamp = now()  # catalogs record when; the snapshot leaves it out to stay reproducible
    for s in data.sources:
        s.rows = max(s.rows, ctx.row_count(s.id))
        s.fetched_at = stamp
    data.meta.update({
        "torch_version": universe.torch_version if universe else "",
        # The kind of source, not its location: the snapshot must not depend on where the
        # mirror sits on the building machine.
        "built_from": str(getattr(source, "name", "source")).split(" ", 1)[0],
    })
    return SyncResult(data, ctx.failures, [str(c) for c in ctx.matrix.conflicts], ctx.notes)


def now() -> str:
    return datetime.now(timezone.utc).isoformat(timespec="seconds")


# --- `opcheck sync` -------------------------------------------------------------------------


@dataclass(frozen=True)
class SyncOptions:
    """What ``opcheck sync`` was asked for (see its --help)."""

    # mirror directories, resolved per upstream repository (see MirrorsSource)
    mirror: tuple[Path, ...] = ()
    live: bool = False
    host: str = "github"
    wheels: str = "all"  # live: all | none | V1,V2
    save_mirror: Path | None = None
    snapshot: Path | None = None
    catalog: Path | None = None
    # Reuse parses of unchanged files from earlier syncs (<cache dir>/parsed).
    parse_cache: bool = True


@dataclass
class SyncOutcome:
    result: SyncResult
    catalog: Path | None = None  # None: something failed and nothing was written
    snapshot: Path | None = None


def _source(opts: SyncOptions) -> tuple[Source, list[str] | None]:
    from opcheck.core.paths import cache_dir

    if bool(opts.mirror) == opts.live:
        raise UsageError("give --mirror DIR (one or more) or --live")
    wanted: list[str] | None = None
    source: Source
    if opts.mirror:
        for d in opts.mirror:
            if not d.is_dir():
                raise UsageError(f"mirror directory {d} does not exist")
        source = (MirrorSource(opts.mirror[0]) if len(opts.mirror) == 1
                  else MirrorsSource(opts.mirror))
    else:
        pip = PipWheelSource(cache_dir() / "wheels")
        source = HttpSource(host=opts.host, cache_dir=cache_dir() / "http", wheels=pip)
        w = opts.wheels
        wanted = None if w == "all" else [] if w == "none" else w.split(",")
    if opts.save_mirror is not None:
        source = SavingSource(source, opts.save_mirror)
    return source, wanted


def live_wheels(source: Source, wanted: list[str] | None) -> list[str]:
    """Live mode cannot list a package index: ask for every release from the matrix."""
    if wanted is not None:
        return wanted
    matrix, _tags, _tables = load_matrix(source)
    # torch-npu wheels are published on the package index from 2.1.0.post8 on.
    return [r.torch_npu_version for r in matrix.rows
            if release_key(r.torch_npu_version) >= release_key("2.1.0.post8")]


def run_sync(
    opts: SyncOptions,
    *,
    progress: Progress | None = None,
    before_write: Callable[[CatalogData], Any] | None = None,
) -> SyncOutcome:
    """Collect from the source ``opts`` names and, when nothing failed, write the catalog
    atomically (and the snapshot when asked).  ``before_write`` lets a higher layer add its
    own records first (the CLI attaches the contributed workarounds)."""
    from opcheck.core.paths import cache_dir
    from opcheck.db.build import write_catalog
    from opcheck.db.engine import remove_stale_temp_files, synced_catalog_path
    from opcheck.db.snapshot import write_snapshot

    target = opts.catalog or synced_catalog_path()
    # a sync killed while writing (SIGKILL, OOM killer) leaves its temp file and journal
    remove_stale_temp_files(target)
    source, wanted = _source(opts)
    universe = installed_universe()
    if universe is None:
        raise UsageError("the ATen op list comes from the installed torch: "
                         "pip install 'opcheck[trace]' (or torch) first")
    result = collect(source, universe=universe, progress=progress,
                     wheels=live_wheels(source, wanted) if opts.live else None,
                     parse_cache=cache_dir() / "parsed" if opts.parse_cache else None)
    if result.failures:
        return SyncOutcome(result)
    if before_write is not None:
        before_write(result.data)
    write_catalog(result.data, target)
    if opts.snapshot is not None:
        write_snapshot(result.data, opts.snapshot)
    return SyncOutcome(result, target, opts.snapshot)
