"""The catalog's read API: releases and operators in memory, kernel facts read per release or
per op. All SQL the checker needs goes through here.

Kernel facts are read for the ops asked about, not per release: a check, ``--all-releases``,
``opcheck op`` and a serve worker need a few hundred ops' rows, not the ~105k rows of every
release. :meth:`Catalog.kernel_facts` reads one op on every release on first use (the next
release's resolver asks for the same op); :meth:`Catalog.prefetch` reads a batch for one
release. :meth:`Catalog.kernels` still reads a whole release for callers that walk it."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar, get_type_hints

from sqlalchemy import Engine, text

from opcheck.core.errors import CatalogError
from opcheck.core.versions import torch_minor
from opcheck.core.vocab import KernelSource, Registration, Word
from opcheck.db.facts import KernelFacts

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

_T = TypeVar("_T", bound="DataclassInstance")


@dataclass(frozen=True)
class ReleaseInfo:
    torch_npu: str
    torch: str
    train: str
    cann: str
    pythons: str
    tag: str
    sort_key: int
    has_cpu_fallback: bool
    kernel_source: KernelSource
    date: str = ""
    cann_inferred: bool = False  # no table names cann: it is the CANN of the train hotfixed
    op_plugin_commit: str = ""  # the op-plugin commit the release tag pins
    kernel_source_note: str = ""  # what kernel_source is exactly, or why it is approximate

    @property
    def torch_minor(self) -> str:
        return torch_minor(self.torch)

    @property
    def has_kernels(self) -> bool:
        return self.kernel_source != KernelSource.NONE


@dataclass(frozen=True)
class OperatorInfo:
    op: str
    namespace: str
    kernel_kind: str
    structured_delegate: str
    dispatch: tuple[str, ...]
    schema: str = ""

    @property
    def sparse_only(self) -> bool:
        """Every backend kernel is a sparse one: sparse tensors never take the CPU fallback."""
        backend = [k for k in self.dispatch if not k.startswith("Composite")]
        return bool(backend) and all("Sparse" in k for k in backend)


def _row_reader(cls: type[_T]) -> tuple[str, Callable[[Sequence[Any]], _T]]:
    """A read model's fields as a SELECT list, and its constructor from a row of them.

    The fields are columns of the model's table (tests/db checks them against the spec), so a
    field added to the model is read with no other list to edit. SQLite stores booleans as 0/1.
    """
    names = [f.name for f in fields(cls)]
    hints = get_type_hints(cls)
    # A bool column or a vocabulary word (``status`` of the kernel facts is a Registration
    # in a field typed str: the records a sync builds hold plain strings).
    words = {"status": Registration} if cls is KernelFacts else {}
    convert: list[Callable[[Any], Any] | None] = [
        bool if hints[n] is bool
        else _word(hints[n]) if isinstance(hints[n], type) and issubclass(hints[n], Word)
        else _word(words[n]) if n in words else None
        for n in names
    ]

    def read(row: Sequence[Any]) -> _T:
        return cls(*[v if c is None else c(v) for v, c in zip(row, convert, strict=True)])

    return ", ".join(names), read


def _word(kind: type[Word]) -> Callable[[Any], Word]:
    members = {m.value: m for m in kind}  # a dict lookup: a release's 100k+ rows pass here
    return members.__getitem__


_RELEASE_COLS, _read_release = _row_reader(ReleaseInfo)
_FACT_COLS, _read_facts = _row_reader(KernelFacts)

# Past this many single-op reads on one release, its resolver is walking the op universe
# (``missing_in_release``): one read of the whole release is then cheaper.
_SINGLE_READS_BEFORE_FULL = 64
_CHUNK = 500  # bound parameters per query (SQLite's limit is 999 on old builds)

# `+status`: rows are looked up by op. Given hundreds of ops, the planner would otherwise walk
# the status index, which nearly every row matches (5x slower on the bundled catalog).
KERNEL_RELEASES_SQL = "SELECT op, release FROM npukernel WHERE +status = 'kernel' AND op IN ({marks})"


@dataclass
class Catalog:
    """A read-only view of one catalog: releases and operators in memory, kernels per release
    loaded on first use."""

    engine: Engine
    releases: list[ReleaseInfo] = field(default_factory=list)
    operators: dict[str, OperatorInfo] = field(default_factory=dict)
    meta: dict[str, str] = field(default_factory=dict)
    _kernels: dict[str, dict[str, KernelFacts]] = field(default_factory=dict)
    # Rows read per op: release → op → facts, complete for the ops in _known[release] (an op
    # known without facts has no row there). Facts are written before ops are marked known,
    # so a concurrent reader (serve: event loop and check thread) sees whole answers.
    _partial: dict[str, dict[str, KernelFacts]] = field(default_factory=dict)
    _known: dict[str, set[str]] = field(default_factory=dict)
    _single_reads: dict[str, int] = field(default_factory=dict)
    _batched: set[str] = field(default_factory=set)  # releases prefetch() has read for

    @classmethod
    def load(cls, engine: Engine) -> Catalog:
        cat = cls(engine)
        with engine.connect() as conn:
            rows = conn.execute(text(f"SELECT {_RELEASE_COLS} FROM release ORDER BY sort_key"))
            cat.releases.extend(_read_release(r) for r in rows)
            for r in conn.execute(text(
                "SELECT op, namespace, kernel_kind, structured_delegate, dispatch, schema "
                "FROM operator"
            )):
                cat.operators[r[0]] = OperatorInfo(
                    r[0], r[1], r[2], r[3], tuple(k for k in r[4].split(",") if k), r[5]
                )
            cat.meta = {k: v for k, v in conn.execute(text("SELECT key, value FROM meta"))}
        return cat

    def release(self, torch_npu: str) -> ReleaseInfo:
        for r in self.releases:
            if r.torch_npu == torch_npu:
                return r
        raise CatalogError(f"no torch_npu release {torch_npu!r} in the catalog")

    def kernels(self, release: str) -> dict[str, KernelFacts]:
        if release not in self._kernels:
            with self.engine.connect() as conn:
                rows = conn.execute(text(
                    f"SELECT op, {_FACT_COLS} FROM npukernel WHERE release = :r"
                ), {"r": release})
                self._kernels[release] = {r[0]: _read_facts(r[1:]) for r in rows}
        return self._kernels[release]

    def kernel_facts(self, release: str, op: str) -> KernelFacts | None:
        """``op``'s kernel facts on ``release`` (None: torch_npu registers nothing for it)."""
        full = self._kernels.get(release)
        if full is not None:
            return full.get(op)
        known = self._known.get(release)
        if known is None or op not in known:
            n = self._single_reads[release] = self._single_reads.get(release, 0) + 1
            if n > _SINGLE_READS_BEFORE_FULL:
                return self.kernels(release).get(op)
            self._read_ops([op], None)
        return self._partial.get(release, {}).get(op)

    def prefetch(self, release: str, ops: Iterable[str]) -> None:
        """Read the kernel rows of ``ops`` on ``release`` in one go, ahead of
        :meth:`kernel_facts` (which would read them one op at a time).

        From the second release asked for on, the rows are read for every release: the
        caller is walking releases (``--all-releases``), and the op index visits every
        release's rows of an op anyway, so one query serves them all."""
        if release in self._kernels:
            return
        known = self._known.get(release, set())
        wanted = {op for op in ops if op not in known}
        widen = bool(self._batched - {release})
        self._batched.add(release)
        if wanted:
            self._read_ops(wanted, None if widen else release)

    def _read_ops(self, ops: Iterable[str], release: str | None) -> None:
        """Rows of ``ops`` on ``release`` (None: on every release) into ``_partial``."""
        wanted = sorted(set(ops))
        got: dict[str, dict[str, KernelFacts]] = defaultdict(dict)
        where = " AND release = :r" if release is not None else ""
        with self.engine.connect() as conn:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                params: dict[str, str] = {f"o{i}": op for i, op in enumerate(chunk)}
                if release is not None:
                    params["r"] = release
                marks = ",".join(f":o{i}" for i in range(len(chunk)))
                rows = conn.execute(text(
                    f"SELECT release, op, {_FACT_COLS} FROM npukernel "
                    f"WHERE op IN ({marks}){where}"
                ), params)
                for r in rows:
                    got[r[0]][r[1]] = _read_facts(r[2:])
        for rel, facts in got.items():
            self._partial.setdefault(rel, {}).update(facts)
        for rel in [release] if release is not None else [r.torch_npu for r in self.releases]:
            self._known.setdefault(rel, set()).update(wanted)

    def registered_ops(self, *, except_source: str | None = None) -> set[str]:
        """Every op torch_npu registers in some release, with any status (one query:
        ``kernels()`` per release would load every release's rows); ``except_source``: not
        counting releases whose kernel facts come from that source."""
        with self.engine.connect() as conn:
            if except_source is None:
                rows = conn.execute(text("SELECT DISTINCT op FROM npukernel"))
            else:
                # a list subquery, not a join: SQLite then walks the op index once
                # (13 ms on the bundled catalog, the join 72 ms; every check asks this)
                rows = conn.execute(text(
                    "SELECT DISTINCT op FROM npukernel WHERE release IN "
                    "(SELECT torch_npu FROM release WHERE kernel_source != :src)"),
                    {"src": except_source})
            return {str(r[0]) for r in rows}

    def kernel_releases(self, ops: Iterable[str]) -> dict[str, list[str]]:
        """For each op, the releases (oldest first) in which it has an NPU kernel."""
        wanted = sorted(set(ops))
        out: dict[str, list[str]] = defaultdict(list)
        order = {r.torch_npu: r.sort_key for r in self.releases}
        with self.engine.connect() as conn:
            for start in range(0, len(wanted), 500):
                chunk = wanted[start:start + 500]
                marks = ",".join(f":o{i}" for i in range(len(chunk)))
                rows = conn.execute(text(KERNEL_RELEASES_SQL.format(marks=marks)),
                                    {f"o{i}": op for i, op in enumerate(chunk)})
                for op, rel in rows:
                    out[op].append(rel)
        for rels in out.values():
            rels.sort(key=lambda r: order.get(r, -1))
        return dict(out)
