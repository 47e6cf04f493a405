"""``opcheck zoo``: well-known architectures checked against every release.

Each model in ``data/zoo/models.py`` is traced once (the sandboxed runtime trace, as
``opcheck --model`` does) and its op list is resolved against every release that has a kernel
list. The result is a coverage table, model × release → verdict and counts, rendered by
``opcheck.checker.formats`` (``ZOO_FORMATS``) and stored in the snapshot's ``zoo.tsv`` (the catalog's ``zoo_result`` table is
built from it). A model whose trace fails becomes one ``ERROR`` row; the others still run.

The verdicts are kernel coverage: the per-API restrictions of the docs (dtype and argument
limits per product), which ``opcheck check`` adds, depend on the hardware and the dtypes a user
runs and are left out of a table meant to compare releases.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opcheck.checker.check import Finding, check
from opcheck.core.errors import OpcheckError, UsageError
from opcheck.core.oplist import OpList
from opcheck.core.paths import data_dir
from opcheck.core.versions import release_key
from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.data import CatalogData, ZooRec

ZOO_SCHEMA_VERSION = 1
# name -> factory in data/zoo/models.py, in the order the table lists them. Kept here (not
# imported from models.py) so listing the zoo never imports torch.
MODELS: dict[str, str] = {
    "conv_classifier": "conv_classifier",
    "vit": "vit",
    "bert": "bert",
    "gpt2": "gpt2",
    "llama": "llama",
    "whisper": "whisper",
    "lstm": "lstm",
    "unet_block": "unet_block",
    "yolo": "yolo",
}
ERROR = "ERROR"  # the verdict cell of a model whose trace failed
# Imported once by the tracer template when a zoo model builds on it (~2 s per model
# otherwise, ~2.4 s once); without transformers installed the template skips it.
ZOO_PRELOAD = ("transformers.modeling_utils",)
# The zoo models that import transformers (the others are plain torch).
USES_TRANSFORMERS = frozenset({"vit", "bert", "gpt2", "llama", "whisper"})

Progress = Callable[[str], None]


def models_file() -> Path:
    return data_dir() / "zoo" / "models.py"


@dataclass
class ZooResult:
    models: list[str]
    releases: list[str]  # oldest first
    rows: list[ZooRec]
    # per model, the findings on the newest release (problem ops with their first NPU release);
    # absent for results read back from zoo.tsv
    newest: dict[str, list[Finding]] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)  # trace time per model

    def row(self, model: str, torch_npu: str) -> ZooRec | None:
        for r in self.rows:
            if r.model == model and (r.torch_npu == torch_npu or r.verdict == ERROR):
                return r
        return None

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": ZOO_SCHEMA_VERSION, "kind": "opcheck.zoo",
            "models": self.models, "releases": self.releases,
            "rows": [asdict(r) for r in self.rows],
        }  # fmt: skip


def specs(models: Sequence[str] | None) -> list[tuple[str, str]]:
    """(name, --model spec) for zoo names; ``file.py:factory`` entries are taken as given."""
    names = list(models) if models else list(MODELS)
    out: list[tuple[str, str]] = []
    for name in names:
        if ":" in name:
            out.append((name, name))
        elif name in MODELS:
            out.append((name, f"{models_file()}:{MODELS[name]}"))
        else:
            raise UsageError(
                f"no zoo model {name!r} (choose from {', '.join(MODELS)}, or give file.py:factory)"
            )
    if len({n for n, _ in out}) != len(out):
        raise UsageError("a zoo model is named twice")
    return out


def preload(models: Sequence[str] | None) -> tuple[str, ...]:
    """What the tracer template imports for these models: torch, and transformers' model base
    when one of them uses it (a ``file.py:factory`` spec whose file mentions it counts)."""
    from opcheck.tracers import sandbox

    for name, spec in specs(models):
        if name in USES_TRANSFORMERS or (":" in name and _mentions_transformers(spec)):
            return (*sandbox.PRELOAD, *ZOO_PRELOAD)
    return sandbox.PRELOAD


def _mentions_transformers(spec: str) -> bool:
    where = spec.rsplit(":", 1)[0]
    if not where.endswith(".py"):
        return True  # pkg.module:factory: unknown without importing it, so assume it does
    try:
        return "transformers" in Path(where).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False  # its trace reports the missing file


# a row's error: one line (tracers.atlas_trace clips the fake-trace and real-data reasons to
# fit both in it)
ERROR_CHARS = 500


def _one_line(text: str) -> str:
    return " ".join(text.split())[:ERROR_CHARS]


def run_zoo(
    cat: Catalog,
    models: Sequence[str] | None = None,
    *,
    timeout: float = 300.0,
    memory_mb: int = 4096,
    jobs: int = 2,
    progress: Progress | None = None,
) -> ZooResult:
    """Trace each model once and check it against every release with a kernel list."""
    from opcheck.tracers import sandbox
    from opcheck.tracers.api import trace
    from opcheck.tracers.composites import composites_with_kernels

    wanted = specs(models)
    releases = [r for r in cat.releases if r.has_kernels]
    if not releases:
        raise UsageError("the catalog has no release with a kernel list")
    say = progress or (lambda _m: None)
    watch = composites_with_kernels(cat)

    def one(item: tuple[str, str]) -> tuple[str, OpList | str, float]:
        name, spec = item
        start = time.perf_counter()
        ol: OpList | str
        try:
            listing = trace(None, model_spec=spec, timeout=timeout, memory_mb=memory_mb,
                            composites=watch)
        except OpcheckError as exc:
            ol = _one_line(str(exc)) or type(exc).__name__
        else:
            # a trace cut short by data-dependent control flow lists only part of the model:
            # its coverage would look better than it is
            ol = listing if listing.complete else _one_line(f"INCOMPLETE: {listing.stopped}")
        took = time.perf_counter() - start
        say(f"traced {name} ({took:.1f} s)")
        return name, ol, took

    say(f"tracing {len(wanted)} model(s)")
    result = ZooResult(models=[n for n, _ in wanted], releases=[r.torch_npu for r in releases],
                       rows=[])
    # Each trace is its own sandboxed process, forked from one template that imported torch
    # (and transformers' model base when a model needs it) once; the caller may have started
    # it before loading the catalog. The pool's threads only wait for the children, while
    # this thread checks each op list as it arrives.
    template = nullcontext() if sandbox.sharing() else sandbox.shared_imports(preload(models))
    pool = ThreadPoolExecutor(max_workers=max(1, jobs))
    try:
        with template:
            for traced in pool.map(one, wanted):
                _check_one(cat, releases, result, *traced, say)
    finally:
        # Not waiting (an interrupt must not wait for the traces under way): closing the
        # template kills its children, and the threads waiting for them end.
        pool.shutdown(wait=False, cancel_futures=True)
    return result


def _check_one(cat: Catalog, releases: Sequence[ReleaseInfo], result: ZooResult, name: str,
               ol: OpList | str, took: float, say: Progress) -> None:
    """One model's rows: an ERROR row, or one row per release."""
    result.seconds[name] = took
    if isinstance(ol, str):
        result.rows.append(ZooRec(model=name, torch_npu="", verdict=ERROR, error=ol))
        return
    say(f"checking {name} against {len(releases)} releases")
    for rel in releases:
        rep = check(cat, ol, rel)
        problems = [f for f in rep.ops if f.status.is_problem]
        # one count column per status (ZooRec and the zoo_result table name them alike)
        counts: dict[str, Any] = {s.value: rep.counts[s.value] for s in Status}
        result.rows.append(ZooRec(
            model=name, torch_npu=rel.torch_npu, verdict=rep.verdict.value, **counts,
            fallback_calls=rep.fallback_calls,
            problem_ops=",".join(f"{f.op}={f.status}" for f in problems),
            traced_with=ol.torch_version,
        ))
        if rel is releases[-1]:
            result.newest[name] = problems


def catalog_from_snapshot(
    folder: Path, path: Path, *, attach: Callable[[CatalogData], None] | None = None
) -> Path:
    """Build the catalog of the snapshot in ``folder`` into ``path``: zoo rows stored in a
    snapshot must come from that snapshot's facts, not from whatever catalog is in use.

    ``attach`` adds the contributed facts a user's catalog holds (the CLI hands in
    ``opcheck.contrib``'s workarounds, a layer the checker does not import); the zoo's verdicts
    do not depend on them."""
    from opcheck.db.build import write_catalog
    from opcheck.db.snapshot import read_snapshot

    data = read_snapshot(folder)
    if attach is not None:
        attach(data)
    return write_catalog(data, path)


def merge_rows(old: Sequence[ZooRec], new: ZooResult) -> list[ZooRec]:
    """``old`` with the rows of the models in ``new`` replaced by ``new``'s rows.

    A model whose trace failed this time keeps the rows it had (a timeout on a busy machine
    must not wipe good results from a committed snapshot); without any, its ERROR row is kept.
    """
    had = {r.model for r in old}
    failed = {r.model for r in new.rows if r.verdict == ERROR and r.model in had}
    replaced = set(new.models) - failed
    return ([r for r in old if r.model not in replaced]
            + [r for r in new.rows if r.model not in failed])


def from_rows(rows: Sequence[ZooRec]) -> ZooResult:
    """A result read back from zoo.tsv or the catalog (no per-op details)."""
    models = list(dict.fromkeys(r.model for r in rows))
    order = {n: i for i, n in enumerate(MODELS)}
    models.sort(key=lambda n: (order.get(n, len(order)), n))
    releases = sorted({r.torch_npu for r in rows if r.torch_npu}, key=release_key)
    return ZooResult(models=models, releases=releases, rows=list(rows))


# ------------------------------------------ the table every view shows (formats, the CLI)


def cell(row: ZooRec | None) -> str:
    """``YES``, ``MAYBE (2)``, ``NO (1)``: the verdict and how many ops are the problem."""
    if row is None:
        return "–"
    if row.verdict == ERROR:
        return ERROR
    bad = sum(getattr(row, s.value) for s in Status if s.is_problem)
    return f"{row.verdict} ({bad})" if bad else row.verdict


def grouped(result: ZooResult) -> list[tuple[str, str, list[str]]]:
    """Consecutive releases with the same cells, as (first, last, cells)."""
    out: list[tuple[str, str, list[str]]] = []
    for rel in result.releases:
        cells = [cell(result.row(m, rel)) for m in result.models]
        if out and out[-1][2] == cells:
            out[-1] = (out[-1][0], rel, cells)
        else:
            out.append((rel, rel, cells))
    return out
