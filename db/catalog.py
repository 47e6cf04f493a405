"""The catalog's read API: releases and operators in memory, kernel facts read per release or
per op. All SQL the checker needs goes through here."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import Engine, text

from opcheck.core.errors import CatalogError
from opcheck.core.versions import torch_minor
from opcheck.db.data import KernelFacts


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
            for r in conn.execute(text(
                "SELECT torch_npu, torch, train, cann, pythons, tag, sort_key, "
                "has_cpu_fallback, kernel_source, date FROM release ORDER BY sort_key"
            )):
                cat.releases.append(ReleaseInfo(
                    r[0], r[1], r[2], r[3], r[4], r[5], r[6], bool(r[7]), r[8], r[9]
                ))
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
                    "SELECT op, status, op_api, acl_op, native, aclnn FROM npukernel "
                    "WHERE release = :r"
                ), {"r": release})
                self._kernels[release] = {
                    r[0]: KernelFacts(r[1], bool(r[2]), bool(r[3]), bool(r[4]), r[5]) for r in rows
                }
        return self._kernels[release]

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
