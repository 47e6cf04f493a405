"""``opcheck atlas``: every architecture of a model library × every release, incrementally.

Flow: list the library's architectures (a subprocess: listing imports the library, and torch,
which only the tracers may), trace each in the sandbox (``atlas:LIBRARY/NAME`` specs; the zoo's
factories for the ``zoo`` library), check its op list against one release of each group of
releases with identical kernel facts, fold consecutive releases with the same result into one
row, and write the rows through the store's one writer (:class:`opcheck.db.atlas.AtlasStore`).

Incremental: an architecture is traced again only when its trace key (library, library
version, architecture, train, opcheck's trace code) has no cached op list, and checked again
only when its check key (the catalog's kernel facts per release group, the operators, the
product) changed; otherwise its rows stand.

Cost: checking is per release group (the bundled catalog's 101 releases with kernel lists form
48 groups), a few ms each, against seconds per trace.
"""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from functools import cache
from importlib import metadata, util
from pathlib import Path
from typing import Any

from opcheck.checker.check import Report, check
from opcheck.core.errors import OpcheckError, TraceError, UsageError
from opcheck.core.oplist import OpList
from opcheck.core.vocab import Status
from opcheck.db.atlas import AtlasStore, CachedTrace, State
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.data import CoverageRec

LIBRARIES = ("transformers", "timm", "torchvision", "diffusers")
ZOO = "zoo"  # opcheck's own nine well-known models (data/zoo/models.py)
ERROR = "ERROR"
SKIPPED = "SKIPPED"
LIST_TIMEOUT = 600.0

Progress = Callable[[str], None]


@dataclass(frozen=True)
class Architecture:
    library: str
    name: str
    spec: str  # the --model spec the sandboxed trace takes
    model_class: str = ""
    task: str = ""
    skip: str = ""  # a reason about the model not to trace it (needs weights, a tokenizer file)


@dataclass
class AtlasResult:
    releases: list[str]  # oldest first
    rows: list[CoverageRec]
    traced: int = 0  # traced in this run
    rechecked: int = 0  # op list from the cache, checked again
    current: int = 0  # nothing changed: rows kept
    failed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        from dataclasses import asdict

        return {"schema_version": 1, "kind": "opcheck.atlas", "releases": self.releases,
                "traced": self.traced, "rechecked": self.rechecked, "current": self.current,
                "failed": self.failed, "skipped": self.skipped,
                "rows": [asdict(r) for r in self.rows]}


# ------------------------------------------------------------------ what there is to trace


def installed(libraries: Sequence[str] | None = None) -> list[str]:
    """The libraries asked for (each must be known and installed), or every installed one."""
    if libraries:
        unknown = [x for x in libraries if x not in (*LIBRARIES, ZOO)]
        if unknown:
            raise UsageError(f"no atlas library {unknown[0]!r} (choose from "
                             f"{', '.join((*LIBRARIES, ZOO))})")
        missing = [x for x in libraries if x != ZOO and not _installed(x)]
        if missing:
            how = ("make install" if missing[0] in ("timm", "torchvision")
                   else f"pip install {missing[0]}")
            raise UsageError(f"{missing[0]} is not installed ({how})")
        return list(dict.fromkeys(libraries))
    return [x for x in LIBRARIES if _installed(x)]


def _installed(library: str) -> bool:
    # torchvision and timm may lie off the interpreter's path, importable in the atlas only
    from opcheck.tracers.atlas_tvops import installed as in_atlas_site

    return in_atlas_site(library)


def library_version(library: str) -> str:
    if library == ZOO:
        from opcheck.checker.zoo import models_file

        return "zoo-" + hashlib.sha256(models_file().read_bytes()).hexdigest()[:12]
    from opcheck.tracers.atlas_tvops import version

    return version(library) or metadata.version(library)


@cache
def trace_code_version() -> str:
    """opcheck's tracing code: a new tracer may record other ops, so its op lists are stale."""
    folder = Path(__file__).resolve().parent.parent / "tracers"
    h = hashlib.sha256()
    for p in sorted(folder.glob("*.py")):
        h.update(p.name.encode())
        h.update(p.read_bytes())
    return h.hexdigest()[:16]


def architectures(library: str, timeout: float = LIST_TIMEOUT,
                  store: AtlasStore | None = None) -> list[Architecture]:
    """The library's architectures; with a store, the listing is kept there per library
    version and trace code (listing transformers imports every model module: ~1 min)."""
    if library == ZOO:
        from opcheck.checker.zoo import MODELS, models_file

        return [Architecture(ZOO, n, f"{models_file()}:{f}", task="zoo") for n, f in MODELS.items()]
    if util.find_spec("opcheck.tracers.atlas_build") is None:
        raise UsageError("this opcheck cannot list architectures yet (opcheck.tracers.atlas_build "
                         "missing): use the zoo library")
    key = f"listing:{library}:{library_version(library)}:{trace_code_version()}"
    kept = store.meta(key) if store is not None else None
    if kept is not None:
        return parse_listing(library, kept)
    cmd = [sys.executable, "-m", "opcheck.tracers.atlas_build", "list", library]
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise TraceError(f"listing {library}'s architectures took over {timeout:.0f} s") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise TraceError(f"listing {library}'s architectures failed: {last[:300]}")
    found = parse_listing(library, done.stdout)
    if store is not None:
        store.set_meta(key, done.stdout)
    return found


def parse_listing(library: str, text: str) -> list[Architecture]:
    """The builder's JSON listing: names, or objects with ``name`` (and ``model_class``,
    ``task``, ``skip``)."""
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{library}'s architecture listing is not JSON: {exc}") from None
    items = doc.get("architectures", doc) if isinstance(doc, dict) else doc
    if not isinstance(items, list):
        raise TraceError(f"{library}'s architecture listing is not a list")
    out = []
    for it in items:
        d = {"name": it} if isinstance(it, str) else dict(it)
        name = str(d["name"])
        out.append(Architecture(library, name, f"atlas:{library}/{name}",
                                model_class=str(d.get("model_class") or ""),
                                task=str(d.get("task") or ""),
                                skip=str(d.get("skip") or d.get("reason") or "")))
    return out


def select(archs: Sequence[Architecture], only: Sequence[str] | None) -> list[Architecture]:
    if not only:
        return list(archs)
    names = {a.name for a in archs}
    unknown = [n for n in only if n not in names]
    if unknown:
        raise UsageError(f"no architecture {unknown[0]!r} in "
                         f"{', '.join(sorted({a.library for a in archs})) or 'the atlas'}")
    wanted = set(only)
    return [a for a in archs if a.name in wanted]


# ------------------------------------------------------------------ releases and the check


@dataclass(frozen=True)
class ReleaseGroup:
    digest: str
    releases: tuple[ReleaseInfo, ...]  # oldest first; the first is checked for all


def release_groups(cat: Catalog) -> list[ReleaseGroup]:
    """Releases with kernel lists grouped by identical kernel facts (and the release facts the
    resolver reads): one check answers for the whole group."""
    groups: dict[str, list[ReleaseInfo]] = {}
    for rel in cat.releases:
        if not rel.has_kernels:
            continue
        facts = sorted(cat.kernels(rel.torch_npu).items())
        key = repr((facts, rel.torch, rel.has_cpu_fallback, str(rel.kernel_source)))
        groups.setdefault(hashlib.sha256(key.encode()).hexdigest()[:16], []).append(rel)
    return [ReleaseGroup(d, tuple(rels)) for d, rels in groups.items()]


def check_key(cat: Catalog, groups: Sequence[ReleaseGroup], product: str) -> str:
    h = hashlib.sha256(product.encode())
    for g in groups:
        h.update(f"{g.digest}:{','.join(r.torch_npu for r in g.releases)}\n".encode())
    h.update(repr(sorted(cat.operators.items())).encode())
    return h.hexdigest()[:16]


def trace_key(arch: Architecture, version: str, train: bool) -> str:
    text = f"{arch.library}\n{version}\n{arch.name}\n{arch.spec}\n{train}\n{trace_code_version()}"
    return hashlib.sha256(text.encode()).hexdigest()[:24]


def coverage_rows(cat: Catalog, groups: Sequence[ReleaseGroup], oplist: OpList,
                  base: CoverageRec, speed: Callable[[Report, OpList], int]) -> list[CoverageRec]:
    """One op list checked per release group, rows folded over consecutive releases."""
    per_release: dict[str, tuple[Any, ...]] = {}
    newest: Report | None = None
    newest_key = -1
    for g in groups:
        rep = check(cat, oplist, g.releases[0])
        problems = [f for f in rep.ops if f.status.is_problem]
        cells = (rep.verdict.value, *(rep.counts[s.value] for s in Status), rep.fallback_calls,
                 ",".join(f"{f.op}={f.status}" for f in problems))
        for member in g.releases:
            per_release[member.torch_npu] = cells
        if g.releases[-1].sort_key > newest_key:
            newest, newest_key = rep, g.releases[-1].sort_key
    order = [r.torch_npu for r in cat.releases if r.torch_npu in per_release]
    n_speed = speed(newest, oplist) if newest is not None else 0
    rows: list[CoverageRec] = []
    for rel in order:
        cells = per_release[rel]
        if rows and _cells(rows[-1]) == cells:
            rows[-1].last_release = rel
            continue
        verdict, npu, comp, cpu, unsup, unk, trips, problem = cells
        rows.append(_with(base, first_release=rel, last_release=rel, verdict=verdict, npu=npu,
                          composite=comp, cpu_fallback=cpu, unsupported=unsup, unknown=unk,
                          round_trips=trips, problem_ops=problem, speed_findings=n_speed))
    return rows


def _cells(r: CoverageRec) -> tuple[Any, ...]:
    return (r.verdict, r.npu, r.composite, r.cpu_fallback, r.unsupported, r.unknown,
            r.round_trips, r.problem_ops)


def _with(base: CoverageRec, **changes: Any) -> CoverageRec:
    from dataclasses import replace

    return replace(base, **changes)


def _speed_counter(cat: Catalog, product: str) -> Callable[[Report, OpList], int]:
    from opcheck.checker.speed import SYNC_TAGS, speed_findings
    from opcheck.db.reads import ops_tagged

    tagged = ops_tagged(cat.engine, SYNC_TAGS)

    def count(report: Report, oplist: OpList) -> int:
        findings, _meta = speed_findings(report, oplist, tagged, product or None)
        return len(findings)

    return count


def _one_line(text: str) -> str:
    return " ".join(text.split())[:500]


# ------------------------------------------------------------------------------ the run


Traced = tuple[Architecture, CachedTrace]
Tracer = Callable[[Sequence[Architecture]], Iterator[Traced]]


def trace_one(spec: str, train: bool, timeout: float, memory_mb: int,
              composites: Iterable[str] | None) -> tuple[str, str, float, str, bool]:
    """One sandboxed trace → (op list JSON or "", error, seconds, recorder, skipped). Runs in
    a pool thread or a Ray task: it returns plain values that cross a process boundary.
    ``skipped``: the error is a reason about the model (the builder's ModelSkip)."""
    from opcheck.tracers.api import trace
    from opcheck.tracers.atlas_build import ModelSkip

    start = time.perf_counter()
    try:
        ol = trace(None, model_spec=spec, train=train, timeout=timeout, memory_mb=memory_mb,
                   composites=composites)
    except ModelSkip as exc:
        return "", _one_line(str(exc)), time.perf_counter() - start, "", True
    except OpcheckError as exc:
        why = _one_line(str(exc)) or type(exc).__name__
        return "", why, time.perf_counter() - start, "", False
    took = time.perf_counter() - start
    if not ol.complete:
        # a trace cut short lists only part of the model: its coverage would look better
        return "", _one_line(f"INCOMPLETE: {ol.stopped}"), took, ol.recorder, False
    return json.dumps(ol.to_json()), "", took, ol.recorder, False


def preload(libraries: Iterable[str]) -> tuple[str, ...]:
    """What the tracer template imports once for these libraries' architectures."""
    from opcheck.tracers import atlas_build, sandbox

    names: dict[str, None] = dict.fromkeys(sandbox.PRELOAD)
    for lib in libraries:
        if lib in atlas_build.LIBRARIES:
            names.update(dict.fromkeys(atlas_build.preload(lib)))
    return tuple(names)


def local_tracer(jobs: int, train: bool, timeout: float, memory_mb: int,
                 composites: Iterable[str] | None) -> Tracer:
    """Traces in sandboxed children forked from one template that imported torch and the
    libraries once; the pool's threads only wait for them."""
    watch = None if composites is None else list(composites)

    def run(todo: Sequence[Architecture]) -> Iterator[Traced]:
        from opcheck.tracers import sandbox

        def one(a: Architecture) -> Traced:
            text, err, took, rec, skipped = trace_one(a.spec, train, timeout, memory_mb, watch)
            return a, CachedTrace(text, err, took, rec, a.model_class, a.task, skipped)

        pool = ThreadPoolExecutor(max_workers=max(1, jobs))
        try:
            with sandbox.shared_imports(preload({a.library for a in todo})):
                yield from pool.map(one, todo)
        finally:
            pool.shutdown(wait=False, cancel_futures=True)

    return run


@dataclass(frozen=True)
class Settings:
    train: bool = False
    product: str = ""
    jobs: int = 2
    timeout: float = 300.0
    memory_mb: int = 4096


def run_atlas(cat: Catalog, store: AtlasStore, archs: Sequence[Architecture],
              settings: Settings, *, tracer: Tracer | None = None,
              progress: Progress | None = None) -> AtlasResult:
    """Trace what is stale, check what the catalog changed, write each architecture's rows
    as it completes (the one writer: this thread)."""
    from opcheck.tracers.composites import composites_with_kernels

    say = progress or (lambda _m: None)
    start = time.monotonic()
    groups = release_groups(cat)
    if not groups:
        raise UsageError("the catalog has no release with a kernel list")
    ckey = check_key(cat, groups, settings.product)
    versions = {lib: library_version(lib) for lib in {a.library for a in archs}}
    states = store.states()
    speed = _speed_counter(cat, settings.product)
    result = AtlasResult(releases=[r.torch_npu for g in groups for r in g.releases], rows=[])
    result.releases.sort(key=lambda r: cat.release(r).sort_key)
    todo: list[Architecture] = []
    current: set[tuple[str, str]] = set()
    done = 0

    def finish(a: Architecture, tkey: str, traced: CachedTrace, fresh: bool) -> None:
        nonlocal done
        base = CoverageRec(library=a.library, library_version=versions[a.library], architecture=a.name, model_class=a.model_class,
                           task=a.task, recorder=traced.recorder, product=settings.product,
                           train=settings.train, trace_ms=round(traced.seconds * 1000),
                           traced=traced_label(a.library, settings.train))
        if traced.oplist_json:
            ol = OpList.from_json(json.loads(traced.oplist_json))
            rows = coverage_rows(cat, groups, ol, _with(
                base, traced_with=ol.torch_version,
                forward=str(getattr(ol, "forward", "") or "")), speed)
        elif traced.skipped:
            rows = [_with(base, verdict=SKIPPED, error=traced.error)]
            result.skipped.append(f"{a.library}/{a.name}: {traced.error}")
        else:
            rows = [_with(base, verdict=ERROR, error=traced.error)]
            result.failed.append(f"{a.library}/{a.name}: {traced.error}")
        state = State(a.library, a.name, settings.train, settings.product, versions[a.library],
                      tkey, ckey)
        store.write(state, rows, (tkey, traced) if fresh else None)
        result.rows.extend(rows)
        done += 1
        _report(say, done, len(archs), start, a)

    for a in archs:
        tkey = trace_key(a, versions[a.library], settings.train)
        st = states.get((a.library, a.name, settings.train, settings.product))
        if a.skip:
            row = CoverageRec(library=a.library, library_version=versions[a.library], architecture=a.name, model_class=a.model_class,
                              task=a.task, product=settings.product, train=settings.train,
                              verdict=SKIPPED, error=a.skip,
                              traced=traced_label(a.library, settings.train))
            store.write(State(a.library, a.name, settings.train, settings.product,
                              versions[a.library], tkey, ckey), [row])
            result.rows.append(row)
            result.skipped.append(f"{a.library}/{a.name}: {a.skip}")
            done += 1
        elif st is not None and st.trace_key == tkey and st.check_key == ckey:
            result.current += 1
            current.add((a.library, a.name))
            done += 1
        elif (cached := store.trace(tkey)) is not None:
            result.rechecked += 1
            finish(a, tkey, cached, fresh=False)
        else:
            todo.append(a)
    if current:
        _keep_current(result, store.rows(sorted(versions)), current, settings)
    if todo:
        say(f"tracing {len(todo)} of {len(archs)} architecture(s)")
        run = tracer or local_tracer(settings.jobs, settings.train, settings.timeout,
                                     settings.memory_mb, composites_with_kernels(cat))
        for a, traced in run(todo):
            result.traced += 1
            finish(a, trace_key(a, versions[a.library], settings.train), traced, fresh=True)
    result.rows.sort(key=lambda r: (r.library, r.architecture, cat_order(cat, r.first_release)))
    result.seconds = time.monotonic() - start
    return result


def _keep_current(result: AtlasResult, stored: Iterable[CoverageRec],
                  current: set[tuple[str, str]], settings: Settings) -> None:
    """The stored rows of the architectures nothing changed for, counted as they stand: a
    failure still current is a failure of this run too (its exit code and summary say so)."""
    for r in stored:
        if ((r.library, r.architecture) not in current or r.train != settings.train
                or r.product != settings.product):
            continue
        result.rows.append(r)
        if r.verdict == ERROR:
            result.failed.append(f"{r.library}/{r.architecture}: {r.error}")
        elif r.verdict == SKIPPED:
            result.skipped.append(f"{r.library}/{r.architecture}: {r.error}")


def traced_label(library: str, train: bool) -> str:
    """What a row's trace ran: forward only or forward+backward, and how the library was made
    to run where that differs from a plain install."""
    from opcheck.tracers.atlas_tvops import LABEL, shimmed

    what = "forward+backward" if train else "forward only"
    if library in ("torchvision", "timm") and shimmed():
        what += f"; {LABEL}"
    return what


def cat_order(cat: Catalog, release: str) -> int:
    try:
        return cat.release(release).sort_key if release else -1
    except OpcheckError:
        return -1


def _report(say: Progress, done: int, total: int, start: float, a: Architecture) -> None:
    took = max(time.monotonic() - start, 1e-6)
    rate = done / took
    eta = (total - done) / rate if rate else 0.0
    say(f"{done}/{total} ({rate * 60:.1f}/min, ETA {eta:.0f} s) {a.library}/{a.name}")


def summary(result: AtlasResult) -> list[tuple[str, str, str, str, str, str, int, str]]:
    """Per architecture: library, name, task, recorder, newest verdict, the release from which
    every later one is YES ("" never), round trips and problem ops on the newest release (or
    the reason it has no verdict)."""
    by: dict[tuple[str, str], list[CoverageRec]] = {}
    for r in result.rows:
        by.setdefault((r.library, r.architecture), []).append(r)
    out = []
    for (lib, name), rows in by.items():
        last = rows[-1]
        if last.verdict in (ERROR, SKIPPED):
            out.append((lib, name, last.task, last.recorder, last.verdict, "", 0, last.error))
            continue
        since = ""
        for r in reversed(rows):
            if r.verdict != "YES":
                break
            since = r.first_release
        out.append((lib, name, last.task, last.recorder, last.verdict, since, last.round_trips,
                    last.problem_ops.replace("=", " ").replace(",", ", ")))
    return out
