"""The resolver: the only place that decides an op's status on a release.

Order follows the dispatcher (see DOMAIN.md): an NPU kernel registered by torch_npu wins;
otherwise CompositeImplicitAutograd ops decompose above the backend, composite-explicit and
structured ops run generic code whose callees are resolved recursively; otherwise the boxed
CPU fallback (torch ≥ 2.1) or an error (older releases, sparse ops, fallback disabled).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field

from sqlalchemy import Engine, text

from opcheck.core.errors import CatalogError
from opcheck.core.versions import torch_minor
from opcheck.db.data import KernelFacts

STATUSES = ("npu", "composite", "cpu_fallback", "unsupported", "unknown")
# Worst first: the order problems are reported in and how composite chains combine.
SEVERITY = {"unsupported": 4, "unknown": 3, "cpu_fallback": 2, "composite": 1, "npu": 0}

COMPOSITE_IMPLICIT = "CompositeImplicitAutograd"
COMPOSITE_EXPLICIT = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")


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


@dataclass(frozen=True)
class Resolution:
    op: str
    status: str
    kernel: str = ""  # aclnn+acl_op | aclnn | acl_op | torch_npu | ""
    aclnn: str = ""
    via: tuple[str, ...] = ()  # chain of ops followed, starting with op itself
    reason: str = ""
    first_npu: str = ""  # first release of the same torch line with an NPU kernel
    first_npu_any: str = ""  # first release of any torch line with an NPU kernel


def kernel_label(f: KernelFacts) -> str:
    if f.op_api and f.acl_op:
        return "aclnn+acl_op"
    if f.op_api:
        return "aclnn"
    if f.acl_op:
        return "acl_op"
    return "torch_npu" if f.native else ""


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


class Resolver:
    """Resolves ops for one target release."""

    def __init__(self, catalog: Catalog, release: str, *, cpu_fallback: bool = True) -> None:
        self.catalog = catalog
        self.release = catalog.release(release)
        if not self.release.has_kernels:
            raise CatalogError(
                f"torch_npu {release} is in the release matrix but the catalog has no kernel "
                "list for it (no wheel or op-plugin pin was available); pick another release"
            )
        self.kernels = catalog.kernels(release)
        self.cpu_fallback = cpu_fallback and self.release.has_cpu_fallback
        self._cache: dict[str, Resolution] = {}

    def resolve(self, op: str) -> Resolution:
        if op not in self._cache:
            self._cache[op] = self._resolve(op, ())
        return self._cache[op]

    def resolve_many(self, ops: Iterable[str], *, with_history: bool = True) -> list[Resolution]:
        results = [self.resolve(op) for op in ops]
        if not with_history:
            return results
        # The op that lacks a kernel is the end of the chain (a structured op's .out variant).
        problems = [r.via[-1] for r in results if r.status not in ("npu", "composite") and r.via]
        history = self.catalog.kernel_releases(problems) if problems else {}
        minor = self.release.torch_minor
        by_name = {r.torch_npu: r for r in self.catalog.releases}
        out = []
        for r in results:
            rels = history.get(r.via[-1], []) if r.via else []
            if rels:
                same = [x for x in rels if by_name[x].torch_minor == minor]
                r = Resolution(r.op, r.status, r.kernel, r.aclnn, r.via, r.reason,
                               same[0] if same else "", rels[0])
            out.append(r)
        return out

    def _no_kernel(self, op: str, info: OperatorInfo | None, via: tuple[str, ...]) -> Resolution:
        if info is not None and info.sparse_only:
            return Resolution(op, "unsupported", via=via,
                              reason="sparse op without NPU kernel: sparse tensors never fall back")
        if self.cpu_fallback:
            return Resolution(op, "cpu_fallback", via=via,
                              reason="no NPU kernel: runs on the CPU via torch_npu's fallback "
                                     "(host↔device copies per call)")
        if not self.release.has_cpu_fallback:
            why = f"no NPU kernel and torch_npu {self.release.torch_npu} has no CPU fallback"
        else:
            why = "no NPU kernel and the CPU fallback is disabled (TORCH_NPU_FALLBACK_CPU_DISABLE=1)"
        return Resolution(op, "unsupported", via=via, reason=why)

    def _private_twin(self, op: str) -> str:
        """``aten::logcumsumexp`` → ``aten::_logcumsumexp``: composite wrappers whose whole
        work is the underscore op of the same name (the dispatcher cannot tell us callees; this
        pattern covers the wrappers that matter: logcumsumexp, values, indices)."""
        ns, _, base = op.partition("::")
        twin = f"{ns}::_{base}"
        info = self.catalog.operators.get(twin)
        return twin if info is not None and info.kernel_kind == "backend" else ""

    def _resolve(self, op: str, seen: tuple[str, ...]) -> Resolution:
        via = (*seen, op)
        facts = self.kernels.get(op)
        if facts is not None:
            if facts.status == "kernel":
                return Resolution(op, "npu", kernel_label(facts), facts.aclnn, via,
                                  reason="NPU kernel registered by torch_npu")
            if facts.status == "tocpu":
                return Resolution(op, "cpu_fallback", via=via,
                                  reason="registered by torch_npu to run on the CPU")
            return Resolution(op, "unsupported", via=via,
                              reason="registered by torch_npu as unsupported (raises)")
        info = self.catalog.operators.get(op)
        if info is None:
            ns = op.split("::", 1)[0]
            where = "a custom or third-party op" if ns != "aten" else "not in this catalog's ATen list"
            return Resolution(op, "unknown", via=via,
                              reason=f"namespace {ns!r}: {where}; no facts to decide")
        if info.structured_delegate and info.structured_delegate not in seen:
            inner = self._resolve(info.structured_delegate, via)
            if SEVERITY[inner.status] > SEVERITY["composite"]:
                return Resolution(op, inner.status, inner.kernel, inner.aclnn, inner.via,
                                  reason=f"structured op delegating to {inner.op}: {inner.reason}")
            return Resolution(op, "composite", inner.kernel, inner.aclnn, inner.via,
                              reason=f"structured op: runs {inner.op} ({inner.status})")
        if info.kernel_kind == COMPOSITE_IMPLICIT:
            return Resolution(op, "composite", via=via,
                              reason="CompositeImplicitAutograd: decomposes into other ops "
                                     "above the backend")
        if info.kernel_kind in COMPOSITE_EXPLICIT:
            inner_op = self._private_twin(op)
            if inner_op and inner_op not in seen:
                inner = self._resolve(inner_op, via)
                if SEVERITY[inner.status] > SEVERITY["composite"]:
                    return Resolution(op, inner.status, inner.kernel, inner.aclnn, inner.via,
                                      reason=f"{info.kernel_kind} wrapper around {inner_op}: "
                                             f"{inner.reason}")
            return Resolution(op, "composite", via=via,
                              reason=f"{info.kernel_kind}: generic kernel calling other ops")
        return self._no_kernel(op, info, via)
