"""The catalog's read API: releases and operators in memory, kernel facts read per release or
per op. All SQL the checker needs goes through here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import Engine, text

from opcheck.core.errors import CatalogError
from opcheck.core.versions import torch_minor
from opcheck.db.data import KernelFacts

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
    kernel_source: str
    date: str = ""

    @property
    def torch_minor(self) -> str:
        return torch_minor(self.torch)

    @property
    def has_kernels(self) -> bool:
        return self.kernel_source != "none"


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
    flags = [f.type in ("bool", bool) for f in fields(cls)]

    def read(row: Sequence[Any]) -> _T:
        return cls(*[bool(v) if flag else v for v, flag in zip(row, flags, strict=True)])

    return ", ".join(names), read


_RELEASE_COLS, _read_release = _row_reader(ReleaseInfo)
_FACT_COLS, _read_facts = _row_reader(KernelFacts)

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

    def registered_ops(self) -> set[str]:
        """Every op torch_npu registers in some release, with any status (one query:
        ``kernels()`` per release would load every release's rows)."""
        with self.engine.connect() as conn:
            return {str(r[0]) for r in conn.execute(text("SELECT DISTINCT op FROM npukernel"))}

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
