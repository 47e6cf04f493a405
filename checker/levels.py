"""Which level of a two-level op list the NPU receives on one torch_npu release.

A runtime trace (OpList schema 2) records every CompositeImplicitAutograd (CIA) op the tracer
watched together with its decomposition (see ``opcheck.core.oplist``). The dispatcher sends a CIA
op to the backend itself when the backend registers a kernel for it, and decomposes it above
the backend otherwise. So, per release: for each top-level record, the outermost op torch_npu
registers a kernel for is received (whatever the registration does: an NPU kernel, or in 1.11
releases a CPU kernel or an "unsupported" error, which the resolver then reports); a CIA op without one is replaced by its children, which are
resolved the same way (recursively). Ops that are not CIA are received as recorded.

CompositeExplicitAutograd (CEA) ops are different: the dispatcher always hands them to the
backend, where a CEA op torch_npu has no kernel for runs its generic kernel, whose calls reach
the backend in turn. ``opcheck run`` records those calls as the op's children (composite
records). Such an op stays the row of the report (it is what the model called); on a release
without its kernel the resolver learns the ops its kernel sent there (``learn_callees``) and the
worst of them decides its status, with the chain shown (``aten::linalg_lstsq →
aten::linalg_lstsq.out``).

Training: a CIA op received whole runs backward as the NPU's own code (torch_npu built against
torch >= 2.3 registers its CIA kernels on the autograd key too), approximated by the backward
of the decomposition, except where torch has a formula for the op (``BACKWARD_FORMULA``): the
formula's op is recorded as a composite of the decomposition's backward ops and received whole
with its forward op. Releases built on torch < 2.3 register CIA kernels on the backend key
only; their backward is not modelled, and a train report says so.

Pure: no I/O, no torch. Schema 1 lists and static listings (no ``composite`` records) come out
unchanged.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from opcheck.checker.resolve import COMPOSITE_EXPLICIT, Resolver
from opcheck.core.oplist import OpList, OpUse
from opcheck.core.versions import minor_key
from opcheck.tracers.composites import BACKWARD_FORMULA

MAX_NAMED = 6  # ops named in one note before "and N more"
# a backward formula's op (recorded in train mode with the decomposition's backward as its
# children) -> the CIA op whose formula it is: received whole exactly when that op is
_FORMULA_OF = {backward: op for op, backward in BACKWARD_FORMULA.items()}


@dataclass
class Received:
    """What the NPU receives on one release."""

    release: str
    # merged by op name, sorted. ``parent``/``via`` name the CIA ops (outermost first) whose
    # decomposition produced the op on this release; empty when the model calls it directly
    # (at least once). CIA ops received whole keep ``composite=True`` and their ``children``.
    ops: list[OpUse] = field(default_factory=list)
    # CIA op -> the ops it runs as on this release (it has no kernel there), outermost only
    decomposed: dict[str, list[str]] = field(default_factory=dict)
    whole: list[str] = field(default_factory=list)  # CIA ops received whole (kernel there)
    notes: list[str] = field(default_factory=list)

    def by_op(self) -> dict[str, OpUse]:
        return {u.op: u for u in self.ops}


def has_kernel(resolver: Resolver, op: str) -> bool:
    """torch_npu registers ``op`` on the resolver's release, so the dispatcher hands the op
    itself to the backend. From torch_npu 2.0 on every such CIA registration is an NPU kernel
    (resolver status ``npu``); 1.11 releases also register some to run on the CPU or raise."""
    return op in resolver.kernels


def _before_autograd_registration(resolver: Resolver) -> bool:
    """Releases built on torch < 2.3 register CIA kernels on PrivateUse1 only."""
    try:
        return minor_key(resolver.release.torch) < (2, 3)
    except ValueError:  # no torch version in the release matrix
        return False


def _notes(oplist: OpList, resolver: Resolver, decomposed: dict[str, list[str]],
           empty: Sequence[str], whole: Sequence[str]) -> list[str]:
    """What ``received`` says about the ops that reach the NPU other than as called."""
    release = resolver.release.torch_npu
    notes: list[str] = []
    for op, names in sorted(decomposed.items()):
        if not names:
            continue
        shown = ", ".join(names[:MAX_NAMED])
        more = f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else ""
        notes.append(
            f"{op} has no NPU kernel in torch_npu {release}: the NPU receives its "
            f"decomposition ({shown}{more})"
        )
    for op in empty:
        notes.append(
            f"{op} has no NPU kernel in torch_npu {release}; its decomposition sends no op to "
            "the device"
        )
    unregistered = [op for op in whole if op not in BACKWARD_FORMULA]
    if oplist.mode == "train" and unregistered and _before_autograd_registration(resolver):
        shown = ", ".join(unregistered[:MAX_NAMED])
        more = (f" and {len(unregistered) - MAX_NAMED} more"
                if len(unregistered) > MAX_NAMED else "")
        notes.append(
            f"approximate: torch_npu {release} is built on torch "
            f"{resolver.release.torch_minor}, before torch_npu registered its kernels for "
            f"composite ops on the autograd key (torch 2.3), so the backward of {shown}{more} "
            "depends on how each kernel is written (torch may warn that no autograd kernel "
            "was registered, and gradients can be missing); the backward shown is their "
            "decomposition's"
        )
    return notes


def received(oplist: OpList, resolver: Resolver) -> Received:
    """The op list the NPU receives on ``resolver``'s release (see the module docstring)."""
    release = resolver.release.torch_npu
    resolver.prefetch(u.op for u in oplist.ops)  # one read, not one per has_kernel()
    children: dict[tuple[str, ...], list[OpUse]] = {}
    for use in oplist.ops:
        children.setdefault(tuple(use.via), []).append(use)

    out: dict[str, OpUse] = {}
    decomposed: dict[str, list[str]] = {}
    whole: list[str] = []
    empty: list[str] = []

    def emit(use: OpUse, chain: tuple[str, ...]) -> None:
        got = out.get(use.op)
        if got is None:
            got = out[use.op] = use.copy()
            got.via, got.parent = list(chain), chain[-1] if chain else ""
            got.count = 0
            got.dtypes, got.shapes, got.modules, got.locations = [], [], [], []
            got.signatures = []
            if not got.composite:
                got.children = []
        elif not chain:  # called directly somewhere: not only a decomposition's op
            got.via, got.parent = [], ""
        got.merge(use)

    operators = resolver.catalog.operators

    def is_explicit(use: OpUse) -> bool:
        info = operators.get(use.op)
        return (use.composite and use.op not in _FORMULA_OF
                and info is not None and info.kernel_kind in COMPOSITE_EXPLICIT)

    def is_whole(use: OpUse) -> bool:
        return (not use.composite or is_explicit(use)
                or has_kernel(resolver, _FORMULA_OF.get(use.op, use.op)))

    def walk(use: OpUse, chain: tuple[str, ...], shown: bool = True) -> list[str]:
        """Emit ``use`` or its decomposition (``shown``: else only name them); return the op
        names emitted."""
        inner = (*chain, use.op)
        if is_explicit(use):
            # The row of the op the model called: without a kernel here its generic kernel
            # runs and the resolver judges it by the ops that kernel sends (its callees).
            if not has_kernel(resolver, use.op):
                callees: list[str] = []
                for child in children.get((*use.via, use.op), []):
                    callees += walk(child, inner, shown=False)
                resolver.learn_callees(use.op, callees)
            if shown:
                emit(use, chain)
            return [use.op]
        if is_whole(use):
            if shown and use.composite and use.op not in whole and use.op not in _FORMULA_OF:
                whole.append(use.op)
            if shown:
                emit(use, chain)
            return [use.op]
        names: list[str] = []
        for child in children.get((*use.via, use.op), []):
            for name in walk(child, inner, shown):
                if name not in names:
                    names.append(name)
        if shown and not names and use.op not in empty and use.op not in _FORMULA_OF:
            empty.append(use.op)
        return names

    for top in children.get((), []):
        names = walk(top, ())
        # a formula's op is named by its forward op's note
        if not is_whole(top) and top.op not in _FORMULA_OF:
            mine = decomposed.setdefault(top.op, [])
            mine.extend(n for n in names if n not in mine)

    notes = _notes(oplist, resolver, decomposed, empty, whole)
    return Received(
        release=release,
        ops=sorted(out.values(), key=lambda u: u.op),
        decomposed=decomposed,
        whole=sorted(whole),
        notes=notes,
    )
