"""What the upstreams of one sync share: the source, the data being built, provenance.

Every fetch that yields catalog facts goes through :meth:`SyncContext.fetch`, which registers
the file as a source row (scraper, path, URL, ref, commit, sha256) and returns its id, so each
fact can point at the file it came from.  Upstreams that run later read what earlier ones
found from the fields below (the release matrix, the published wheels, the op-plugin refs).

Parsing each distinct file once
-------------------------------
Upstream files repeat: one op-plugin YAML sits unchanged at dozens of commits, one aclnn page
at every CANN tag.  Parse through :meth:`SyncContext.parsed` instead of calling the scraper::

    got, sid = ctx.fetch(path, "op_plugin")            # or ctx.source.fetch(path), or a path
    rows = ctx.parsed(got, opplugin.parse_functions, torch="2.1")

It calls ``parser(text, origin=origin, **options)`` once per (parser, options, sha256 of the
text) in a sync, and, when the sync has a ``parse_cache`` directory (``opcheck sync`` uses
``<cache dir>/parsed``), once across syncs.  Rules for callers:

* ``parser`` is a module-level function (its ``module.qualname`` is part of the key; lambdas
  and closures are refused) and ``options`` are plain values (str, int, bool, None).
* The result is shared between callers and across files: treat it as read-only.
* A parser whose result depends on where the text came from (it records ``origin.path``, or
  reads a version or ref off it) must pass ``by_origin=True``, which adds the origin (path,
  URL, ref, commit) to the key: otherwise a second file with the same content would get the
  first file's facts.  Such a parse is then only reused across syncs.  Errors are never cached,
  so they always name the file being parsed.
* Cross-run entries are keyed on the code too: a hash of every module under ``opcheck.core``
  and ``opcheck.scrapers``, the parser's own module, the Python version and the versions of
  PyYAML, Beautiful Soup and lxml.
  Any edit to a parser (or what it imports from there) invalidates its entries, and entries of
  older code are removed on the first write.  A parser that depends on other code must live
  in those packages (or its own module) for this to hold.

Parsing in parallel
-------------------
An upstream that knows its files up front hands them to :meth:`SyncContext.prefetch` (or
:meth:`~SyncContext.prefetch_paths`) with the parser and options it will use: the distinct
files neither this sync nor the cache has are parsed in forked worker processes (one per core,
none on a busy machine: :func:`default_workers`), which also write the cache, while the sync
goes on; the later :meth:`~SyncContext.parsed` calls wait for their result.  Results and
errors are the same as parsing in process: a parse that fails in a worker is parsed again by
``parsed()``, which raises.  A result several files make together (one op-plugin pin's
aclnn links) is kept across syncs with :meth:`~SyncContext.combined`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
import json
import multiprocessing
import multiprocessing.context
import os
import shutil
import sys
from collections.abc import Callable, Iterable
from concurrent.futures import Future, ProcessPoolExecutor
from concurrent.futures.process import BrokenProcessPool
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from opcheck.core.errors import OpcheckError, ScrapeError
from opcheck.db.data import CatalogData, KernelFacts
from opcheck.scrapers.releases import MatrixResult
from opcheck.scrapers.rows import KernelRow, Origin
from opcheck.sync import cachecodec
from opcheck.sync.sources import Fetched, MirrorSource, MirrorsSource, Source
from opcheck.sync.universe import Universe

Progress = Callable[[str], None]
T = TypeVar("T")
# A scraper entry point: ``parser(text, origin=origin, **options)``.
Parser = Callable[..., T]
# Kernel facts per op of one registry, and the id of the source they came from.
Kernels = tuple[dict[str, KernelFacts], int]


def _quiet(_message: str) -> None:
    pass


# Bump when the layout or the encoded form of cache entries changes (2: JSON, no pickle).
_CACHE_FORMAT = "2"
# Parsers are pure functions of code in these packages (plus their own module).
_PARSER_PACKAGES = ("core", "scrapers")


@cache
def _packages_digest() -> str:
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(f"{_CACHE_FORMAT}\0{sys.version}\0".encode())
    try:
        import yaml  # the line-numbered YAML loader's behaviour is part of what a parse yields

        h.update(str(getattr(yaml, "__version__", "")).encode())
    except ImportError:
        pass
    # so are the HTML parsers' (scrapers/html.py: Beautiful Soup on lxml)
    for dist in ("beautifulsoup4", "lxml"):
        h.update(f"\0{dist}={importlib.metadata.version(dist)}".encode())
    for package in _PARSER_PACKAGES:
        for f in sorted((root / package).rglob("*.py")):
            h.update(f"\0{f.relative_to(root).as_posix()}\0".encode())
            h.update(f.read_bytes())
    return h.hexdigest()


@cache
def parser_version(parser: Callable[..., Any]) -> str:
    """A hash of the code a parse depends on: changes whenever that code changes."""
    h = hashlib.sha256(_packages_digest().encode())
    try:
        source = inspect.getsourcefile(parser)
    except TypeError:
        source = None
    if source is None:
        raise TypeError(f"{parser!r}: a parser must be a Python function with a source file")
    h.update(Path(source).read_bytes())
    return h.hexdigest()


def parser_id(parser: Callable[..., Any]) -> str:
    name = f"{getattr(parser, '__module__', '')}.{getattr(parser, '__qualname__', '')}"
    if "<" in name or name.startswith("."):
        # a lambda or closure has no stable name: two of them would share cache entries
        raise TypeError(f"{parser!r}: a parser must be a module-level function")
    return name


class ParseCache:
    """Parsed results on disk, one JSON entry per (parser, code version, options, content).

    Entries are read back with :mod:`opcheck.sync.cachecodec`, which rebuilds only opcheck's own
    row classes: a file swapped into the cache directory is a miss, never code that runs."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._pruned: set[str] = set()
        self._made: set[Path] = set()  # folders this process created or found

    def _file(self, pid: str, version: str, key: str) -> Path:
        return self.root / pid / version[:32] / f"{key}.json"

    def load(self, pid: str, version: str, key: str) -> tuple[bool, Any]:
        f = self._file(pid, version, key)
        try:
            data = f.read_bytes()
        except OSError:  # absent, or not a readable file
            return False, None
        try:
            return True, cachecodec.decode(f"{pid}/{version}/{key}", data)
        except cachecodec.CodecError:  # truncated, foreign or tampered: parse again
            return False, None

    def has(self, pid: str, version: str, key: str) -> bool:
        return self._file(pid, version, key).is_file()

    def store(self, pid: str, version: str, key: str, value: Any) -> None:
        f = self._file(pid, version, key)
        try:
            data = cachecodec.encode(f"{pid}/{version}/{key}", value)
            if f.parent not in self._made:  # thousands of entries share a folder
                self._prune(pid, f.parent.name)
                f.parent.mkdir(parents=True, exist_ok=True)
                self._made.add(f.parent)
            # one writer per process and key: the name needs no randomness
            tmp = f.with_name(f".tmp-{os.getpid()}-{key}")
            try:
                with open(tmp, "wb") as fh:
                    fh.write(data)
                os.replace(tmp, f)  # readers see a whole entry or none
            except BaseException:
                tmp.unlink(missing_ok=True)
                raise
        except (OSError, cachecodec.CodecError):
            pass  # a cache that cannot be written only costs time

    def _prune(self, pid: str, current: str) -> None:
        """Drop the entries older code wrote for this parser (once per parser and run)."""
        if pid in self._pruned:
            return
        self._pruned.add(pid)
        folder = self.root / pid
        if folder.is_dir():
            for old in folder.iterdir():
                if old.name != current:
                    shutil.rmtree(old, ignore_errors=True)


# prefetch() leaves a lone file to parsed(): a worker would only add a round trip.
PREFETCH_MIN = 2

# (parser, text, origin, options, cache, parser id, code version, key) of one prefetch parse;
# text None: the worker reads the file from the mirror itself (see _FORKED_SOURCE)
_Job = tuple[Callable[..., Any], "str | None", Origin, dict[str, Any], "ParseCache | None",
             str, str, str]
# The mirror of the sync whose pool is being started: forked workers inherit it and read
# their files from it, so file texts do not travel through the pool's pipe.
_FORKED_SOURCE: Source | None = None


def default_workers() -> int:
    """Worker processes for prefetch(): one per core, or none when every core is busy.

    Workers pay with a core to spare (a cold ``sync --mirror`` on 2 cores with one other
    job running: 13.5 s instead of 21.2 s); on a saturated machine they only compete with
    the other jobs, and results travel back pickled, so the sync parses alone."""
    cores = os.cpu_count() or 1
    try:
        busy = os.getloadavg()[0]
    except OSError:  # not available on this platform
        busy = 0.0
    return min(cores, 4) if cores > 1 and busy < cores else 0


def _fork_context() -> multiprocessing.context.BaseContext:
    # fork: workers start in milliseconds with every parser already imported (a spawned
    # worker re-imports opcheck first); forkserver/spawn where fork does not exist
    methods = multiprocessing.get_all_start_methods()
    return multiprocessing.get_context("fork" if "fork" in methods else methods[0])


def _parse_jobs(jobs: list[_Job]) -> list[tuple[bool, Any]]:
    return [_parse_job(job) for job in jobs]


def _parse_job(job: _Job) -> tuple[bool, Any]:
    """One prefetch parse in a worker; the result also goes to the parse cache from here."""
    parser, text, origin, options, disk, pid, version, key = job
    try:
        if text is None:
            if _FORKED_SOURCE is None:
                return False, None
            got = _FORKED_SOURCE.fetch(origin.path)
            if got.origin != origin:  # the file changed since the sync read it
                return False, None
            text = got.text
        value = parser(text, origin=origin, **options)
    except Exception:  # parsed() parses it again in the sync's process and raises there
        return False, None
    if disk is not None:
        disk.store(pid, version, key, value)
    return True, value


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

    # Where parsed results persist across syncs; None: within this sync only.
    parse_cache: Path | None = None
    # What parsed() did: distinct parses, within-sync reuses, results read from parse_cache.
    parse_stats: dict[str, int] = field(
        init=False, default_factory=lambda: {"parsed": 0, "reused": 0, "cached": 0})

    _texts: dict[str, Fetched] = field(init=False, default_factory=dict)
    _parsed: dict[tuple[str, str | None], list[KernelRow]] = field(init=False, default_factory=dict)
    _memo: dict[tuple[str, str], Any] = field(init=False, default_factory=dict)
    _disk: ParseCache | None = field(init=False, default=None)
    _row_counts: dict[int, int] = field(init=False, default_factory=dict)
    # Worker processes prefetch() may parse in (0: never); the pool starts on first use.
    workers: int = field(default_factory=default_workers)
    # memo key → (future of a chunk of prefetch parses, index in it)
    _pending: dict[tuple[str, str], tuple[Future[list[tuple[bool, Any]]], int]] = field(
        init=False, default_factory=dict)
    _digests: dict[int, tuple[str, str]] = field(init=False, default_factory=dict)
    _pool: ProcessPoolExecutor | None = field(init=False, default=None)

    def __post_init__(self) -> None:
        if self.parse_cache is not None:
            self._disk = ParseCache(self.parse_cache)

    def close(self) -> None:
        """Stop the worker processes, if prefetch() started any."""
        global _FORKED_SOURCE
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None
            _FORKED_SOURCE = None
        self._pending.clear()
        self._digests.clear()

    def prefetch(self, gots: Iterable[Fetched], parser: Parser[Any], *, by_origin: bool = False,
                 **options: str | int | bool | None) -> None:
        """Start parsing, in worker processes, the files of ``gots`` that later :meth:`parsed`
        calls with the same parser and options will ask for and that neither this sync nor
        the parse cache has: distinct files parse in parallel, and alongside this process's
        own work, instead of one after another.  Returns at once; :meth:`parsed` waits for
        the result it needs.  Ask for them in the order given: results come back in it.

        With no workers, or fewer than ``PREFETCH_MIN`` distinct files to parse, it does
        nothing.  A file whose parse fails in a worker is parsed again by :meth:`parsed`, so
        the error is raised where it always was."""
        if self.workers < 1:
            return
        pid = parser_id(parser)
        version = parser_version(parser) if self._disk is not None else ""
        jobs: list[_Job] = []
        context = _fork_context()
        by_path = isinstance(self.source, (MirrorSource, MirrorsSource)) and context.get_start_method() == "fork"
        keys: list[tuple[str, str]] = []
        queued: set[tuple[str, str]] = set()
        for got in gots:
            memo_key = (pid, self._key(got, by_origin, options, keep=True))
            if memo_key in self._memo or memo_key in self._pending or memo_key in queued:
                continue
            if self._disk is not None and self._disk.has(pid, version, memo_key[1]):
                continue
            keys.append(memo_key)
            queued.add(memo_key)
            reread = by_path and bool(got.origin.sha256)
            jobs.append((parser, None if reread else got.text, got.origin, options,
                         self._disk, pid, version, memo_key[1]))
        if len(jobs) < PREFETCH_MIN:
            return
        try:
            if self._pool is None:
                global _FORKED_SOURCE  # what the forked workers inherit
                _FORKED_SOURCE = self.source if by_path else None
                self._pool = ProcessPoolExecutor(self.workers, mp_context=context)
                self._pool.submit(int).result()  # the workers fork now, with that source
            # results come back by the chunk, as parsed() asks for them (in the same order):
            # this process goes on with its own work meanwhile
            chunk = max(1, min(16, len(jobs) // (self.workers * 4)))
            for i in range(0, len(jobs), chunk):
                future = self._pool.submit(_parse_jobs, jobs[i:i + chunk])
                for n, memo_key in enumerate(keys[i:i + chunk]):
                    self._pending[memo_key] = (future, n)
        except (BrokenProcessPool, OSError, RuntimeError):
            self.close()  # parsed() does the work in this process instead
            self.workers = 0

    def _prefetched(self, memo_key: tuple[str, str]) -> tuple[bool, Any]:
        """(True, value) when a prefetch worker parsed ``memo_key``, else (False, None)."""
        future, n = self._pending.pop(memo_key)
        try:
            ok, value = future.result()[n]
        except Exception:  # a worker died, or its result did not pickle: parse it here
            return False, None
        return ok, value

    def text(self, path: str) -> Fetched:
        """The text at ``path``, fetched once per sync, without registering a source."""
        if path not in self._texts:
            self._texts[path] = self.source.fetch(path)
        return self._texts[path]

    def fetch(self, path: str, scraper: str) -> tuple[Fetched, int]:
        """The text at ``path`` (fetched once per sync) and its source id under ``scraper``."""
        got = self.text(path)
        o = got.origin
        sid = self.data.add_source(scraper, path, url=o.url or canonical_url(path),
                                   ref=o.ref, commit=o.commit, sha256=o.sha256)
        return got, sid

    def parsed(self, got: Fetched | str, parser: Parser[T], *, by_origin: bool = False,
               **options: str | int | bool | None) -> T:
        """``parser(text, origin=origin, **options)``, once per distinct content (see the
        module docstring).  ``got``: fetched text, or a path to fetch (no source row)."""
        return self._parse(got, parser, by_origin, options)

    def _parse(self, got: Fetched | str, parser: Parser[T], by_origin: bool,
               options: dict[str, str | int | bool | None]) -> T:
        if isinstance(got, str):
            got = self.text(got)
        pid = parser_id(parser)
        key = self._key(got, by_origin, options)
        memo_key = (pid, key)
        if memo_key in self._memo:
            self.parse_stats["reused"] += 1
            return self._memo[memo_key]  # type: ignore[no-any-return]
        if memo_key in self._pending:
            ok, value = self._prefetched(memo_key)
            if ok:  # parsed (and stored in the parse cache) by a prefetch worker
                self._memo[memo_key] = value
                self.parse_stats["parsed"] += 1
                return value  # type: ignore[no-any-return]
        disk, version = self._disk, ""
        if disk is not None:
            version = parser_version(parser)
            hit, value = disk.load(pid, version, key)
            if hit:
                self.parse_stats["cached"] += 1
                self._memo[memo_key] = value
                return value  # type: ignore[no-any-return]
        value = parser(got.text, origin=got.origin, **options)
        self.parse_stats["parsed"] += 1
        self._memo[memo_key] = value
        if disk is not None:
            disk.store(pid, version, key, value)
        return value

    def combined(self, gots: Iterable[Fetched], fn: Callable[..., Any],
                 compute: Callable[[], T]) -> T:
        """``compute()``, a result that ``fn`` makes of several files (``gots``, typically from
        their :meth:`parsed` results), kept in the parse cache across syncs: keyed on ``fn``
        and its code version (as for a parser) and on every file's origin and content.
        Without a parse cache it is simply ``compute()``."""
        disk = self._disk
        if disk is None:
            return compute()
        pid, version = parser_id(fn), parser_version(fn)
        key = hashlib.sha256(json.dumps(
            [[g.origin.path, g.origin.url, g.origin.ref, g.origin.commit, self._digest(g.text)]
             for g in gots]).encode()).hexdigest()
        hit, value = disk.load(pid, version, key)
        if hit:
            self.parse_stats["cached"] += 1
            return value  # type: ignore[no-any-return]
        value = compute()
        disk.store(pid, version, key, value)
        return value

    def prefetch_paths(self, paths: Iterable[str], parser: Parser[Any], *,
                       by_origin: bool = False, kept: bool = False,
                       **options: str | int | bool | None) -> dict[str, Fetched]:
        """:meth:`prefetch` for the files at ``paths``; returns what was fetched, by path, for
        the caller's own loop (a file that cannot be fetched is left out: the caller's fetch
        of it fails there, as it would have).  ``kept``: fetch through :meth:`text` (for a
        caller that reads them with :meth:`fetch` or :meth:`text`)."""
        got: dict[str, Fetched] = {}
        if self.workers < 1:
            return got  # nothing to prefetch: the caller fetches one file at a time
        for path in paths:
            try:
                got[path] = self.text(path) if kept else self.source.fetch(path)
            except OpcheckError:
                continue
        self.prefetch(got.values(), parser, by_origin=by_origin, **options)
        return got

    def _key(self, got: Fetched, by_origin: bool, options: dict[str, str | int | bool | None],
             keep: bool = False) -> str:
        digest = self._digest(got.text, keep)
        o = got.origin
        where = [o.path, o.url, o.ref, o.commit] if by_origin else None
        return hashlib.sha256(json.dumps([sorted(options.items()), where, digest]).encode()
                              ).hexdigest()

    def _digest(self, text: str, keep: bool = False) -> str:
        # prefetch() (keep=True) and then parsed() hash the same text object: once is enough
        # (the text is kept with its digest so its id cannot be reused meanwhile)
        kept = self._digests.pop(id(text), None)
        if kept is not None and kept[0] is text:
            return kept[1]
        digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()
        if keep:
            self._digests[id(text)] = (text, digest)
        return digest

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
                    parser: Parser[list[KernelRow]], options: dict[str, str] | None = None
                    ) -> tuple[list[KernelRow], int]:
        """Kernel registrations of one registry file for torch ``torch`` (None: the file's
        rows as they are): ``parser`` runs through :meth:`parsed` with ``options``, and rows
        for another torch version are dropped."""
        got, sid = self.fetch(path, scraper)
        key = (path, torch)
        if key not in self._parsed:
            rows = self._parse(got, parser, False, dict(options or {}))
            if torch is not None:
                rows = [r for r in rows if r.torch is None or r.torch == torch]
            self._parsed[key] = rows
            self.count(sid, len(rows))
        return self._parsed[key], sid

    def parsed_kernel_rows(self) -> Iterable[KernelRow]:
        """Every kernel row parsed so far, in parse order (schemas for registry-only ops)."""
        for rows in self._parsed.values():
            yield from rows
