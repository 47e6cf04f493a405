"""The resolver: the only place that decides an op's status on a release.

Order follows the dispatcher (README: "What the statuses mean"): an NPU kernel registered by torch_npu wins;
otherwise CompositeImplicitAutograd ops decompose above the backend, composite-explicit and
structured ops run generic code whose callees are resolved recursively; otherwise the boxed
CPU fallback (torch ≥ 2.1) or an error (older releases, sparse ops, fallback disabled).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass

from opcheck.checker.hccl_facts import COLLECTIVES, HcclRelease, for_release
from opcheck.core.errors import CatalogError
from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog, OperatorInfo
from opcheck.db.facts import KernelFacts

COMPOSITE_IMPLICIT = "CompositeImplicitAutograd"
COMPOSITE_EXPLICIT = ("CompositeExplicitAutograd", "CompositeExplicitAutogradNonFunctional")
MAX_CALLEES_SHOWN = 4  # callees named in a composite op's reason before "and N more"


@dataclass(frozen=True)
class Resolution:
    op: str
    status: Status
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


class ReleaseKernels:
    """One release's kernel facts, read from the catalog per op as they are asked for."""

    def __init__(self, catalog: Catalog, release: str) -> None:
        self.catalog = catalog
        self.release = release

    def get(self, op: str) -> KernelFacts | None:
        return self.catalog.kernel_facts(self.release, op)

    def __contains__(self, op: object) -> bool:
        return isinstance(op, str) and self.get(op) is not None

    def __getitem__(self, op: str) -> KernelFacts:
        facts = self.get(op)
        if facts is None:
            raise KeyError(op)
        return facts

    def __iter__(self) -> Iterator[str]:
        return iter(self.catalog.kernels(self.release))

    def __len__(self) -> int:
        return len(self.catalog.kernels(self.release))


class Resolver:
    """Resolves ops for one target release, reading the kernel rows of the ops it resolves
    (and of the ops their chains lead to), not the whole release."""

    def __init__(self, catalog: Catalog, release: str, *, cpu_fallback: bool = True) -> None:
        self.catalog = catalog
        self.release = catalog.release(release)
        if not self.release.has_kernels:
            raise CatalogError(
                f"torch_npu {release} is in the release matrix but the catalog has no kernel "
                "list for it (no wheel or op-plugin pin was available); pick another release"
            )
        self.kernels = ReleaseKernels(catalog, release)
        self.cpu_fallback = cpu_fallback and self.release.has_cpu_fallback
        self._cache: dict[str, Resolution] = {}
        # composite op -> the ops a run recorded its kernel sending to the device on this
        # release (checker.levels learns them from the op list)
        self.callees: dict[str, list[str]] = {}
        self._hccl: HcclRelease | None = None  # read on the first c10d collective

    def learn_callees(self, op: str, callees: Iterable[str]) -> None:
        """Record that ``op``'s generic kernel was seen calling ``callees`` (the level the
        device receives on this release); resolutions made before are recomputed."""
        mine = self.callees.setdefault(op, [])
        new = [c for c in callees if c != op and c not in mine]
        if new:
            mine.extend(new)
            self._cache.clear()

    def prefetch(self, ops: Iterable[str]) -> None:
        """Read the kernel rows every resolution of ``ops`` needs in one query: the ops, their
        structured delegates and private twins, transitively."""
        todo = list(ops)
        need: set[str] = set()
        operators = self.catalog.operators
        while todo:
            op = todo.pop()
            if op in need:
                continue
            need.add(op)
            info = operators.get(op)
            if info is None:
                continue
            if info.structured_delegate:
                todo.append(info.structured_delegate)
            if info.kernel_kind in COMPOSITE_EXPLICIT:
                twin = self._private_twin(op)
                if twin:
                    todo.append(twin)
        self.catalog.prefetch(self.release.torch_npu, need)

    def resolve(self, op: str) -> Resolution:
        if op not in self._cache:
            self._cache[op] = self._resolve(op, ())
        return self._cache[op]

    def resolve_many(self, ops: Iterable[str], *, with_history: bool = True) -> list[Resolution]:
        ops = list(ops)
        self.prefetch(op for op in ops if op not in self._cache)
        results = [self.resolve(op) for op in ops]
        if not with_history:
            return results
        # The op that lacks a kernel is the end of the chain (a structured op's .out variant).
        problems = [r.via[-1] for r in results if not r.status.runs_on_npu and r.via]
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
            return Resolution(op, Status.UNSUPPORTED, via=via,
                              reason="sparse op without NPU kernel: sparse tensors never fall back")
        if self.cpu_fallback:
            return Resolution(op, Status.CPU_FALLBACK, via=via,
                              reason="no NPU kernel: runs on the CPU via torch_npu's fallback "
                                     "(host↔device copies per call)")
        if not self.release.has_cpu_fallback:
            why = f"no NPU kernel and torch_npu {self.release.torch_npu} has no CPU fallback"
        else:
            why = "no NPU kernel and the CPU fallback is disabled (TORCH_NPU_FALLBACK_CPU_DISABLE=1)"
        return Resolution(op, Status.UNSUPPORTED, via=via, reason=why)

    def _private_twin(self, op: str) -> str:
        """``aten::logcumsumexp`` → ``aten::_logcumsumexp``: composite wrappers whose whole
        work is the underscore op of the same name (the dispatcher cannot tell us callees; this
        pattern covers the wrappers that matter: logcumsumexp, values, indices)."""
        ns, _, base = op.partition("::")
        twin = f"{ns}::_{base}"
        info = self.catalog.operators.get(twin)
        return twin if info is not None and info.kernel_kind == "backend" else ""

    def _through_callees(self, op: str, kind: str, via: tuple[str, ...]) -> Resolution | None:
        """A composite op whose calls a run recorded: the worst callee decides (the first of
        equal ones, in call order), and the chain to it is shown."""
        names = [n for n in self.callees.get(op, ()) if n not in via]
        if not names:
            return None
        inner = [self._resolve(n, via) for n in names]
        worst = max(inner, key=lambda r: r.status.severity)  # max keeps the first of equals
        chain = " → ".join(worst.via[len(via) - 1:])
        if worst.status.is_problem:
            return Resolution(op, worst.status, worst.kernel, worst.aclnn, worst.via,
                              reason=f"{kind} kernel calling {chain}: {worst.reason}")
        shown = ", ".join(names[:MAX_CALLEES_SHOWN])
        more = f" and {len(names) - MAX_CALLEES_SHOWN} more" if len(names) > MAX_CALLEES_SHOWN else ""
        return Resolution(op, Status.COMPOSITE, via=via,
                          reason=f"{kind} kernel calling {shown}{more} (recorded), which run "
                                 "on the NPU")

    def _resolve(self, op: str, seen: tuple[str, ...]) -> Resolution:
        via = (*seen, op)
        facts = self.kernels.get(op)
        if facts is not None and facts.status == "sparse":
            # A sparse-only registration serves an op whose every kernel is a sparse one
            # (_coalesce); an op with dense kernels gets none for dense tensors from it.
            sinfo = self.catalog.operators.get(op)
            if sinfo is None or sinfo.sparse_only:
                return Resolution(op, Status.NPU, f"{kernel_label(facts) or 'torch_npu'} (sparse)",
                                  facts.aclnn, via,
                                  reason="NPU kernel for sparse tensors registered by torch_npu")
            facts = None
        if facts is not None:
            if facts.status == "kernel":
                return Resolution(op, Status.NPU, kernel_label(facts), facts.aclnn, via,
                                  reason="NPU kernel registered by torch_npu")
            if facts.status == "tocpu":
                return Resolution(op, Status.CPU_FALLBACK, via=via,
                                  reason="registered by torch_npu to run on the CPU")
            return Resolution(op, Status.UNSUPPORTED, via=via,
                              reason="registered by torch_npu as unsupported (raises)")
        info = self.catalog.operators.get(op)
        if info is None and op in COLLECTIVES:
            if self._hccl is None:
                self._hccl = for_release(self.catalog, self.release)
            decided = self._hccl.decide(op)
            if decided is not None:
                return Resolution(op, decided[0], "HCCL", via=via, reason=decided[1])
        if info is None:
            ns = op.split("::", 1)[0]
            where = "a custom or third-party op" if ns != "aten" else "not in this catalog's ATen list"
            return Resolution(op, Status.UNKNOWN, via=via,
                              reason=f"namespace {ns!r}: {where}; no facts to decide")
        if info.structured_delegate and info.structured_delegate not in seen:
            inner = self._resolve(info.structured_delegate, via)
            # A problem at the end of the chain is the op's problem; else the op runs composite.
            if inner.status.is_problem:
                return Resolution(op, inner.status, inner.kernel, inner.aclnn, inner.via,
                                  reason=f"structured op delegating to {inner.op}: {inner.reason}")
            return Resolution(op, Status.COMPOSITE, inner.kernel, inner.aclnn, inner.via,
                              reason=f"structured op: runs {inner.op} ({inner.status})")
        called = self._through_callees(op, info.kernel_kind, via)
        if called is not None:
            return called
        if info.kernel_kind == COMPOSITE_IMPLICIT:
            return Resolution(op, Status.COMPOSITE, via=via,
                              reason="CompositeImplicitAutograd: decomposes into other ops "
                                     "above the backend")
        if info.kernel_kind in COMPOSITE_EXPLICIT:
            inner_op = self._private_twin(op)
            if inner_op and inner_op not in seen:
                inner = self._resolve(inner_op, via)
                if inner.status.is_problem:
                    return Resolution(op, inner.status, inner.kernel, inner.aclnn, inner.via,
                                      reason=f"{info.kernel_kind} wrapper around {inner_op}: "
                                             f"{inner.reason}")
            return Resolution(op, Status.COMPOSITE, via=via,
                              reason=f"{info.kernel_kind}: generic kernel calling other ops "
                                     "(which ones, and whether they run on the NPU, a run "
                                     "records: `opcheck run`)")
        return self._no_kernel(op, info, via)
