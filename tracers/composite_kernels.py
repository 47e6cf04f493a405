"""CompositeImplicitAutograd ops recorded at both levels: the recording kernels on
AutogradPrivateUse1 for the watched ops (the op, then its decomposition as its children), and
the backward of ops torch has a formula for (``BACKWARD_FORMULA``)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from opcheck.core.oplist import Signature
from opcheck.tracers.composites import BACKWARD_FORMULA
from opcheck.tracers.device import _dtype_name, _iter_tensors, op_name
from opcheck.tracers.recorder import _ACTIVE, Recorder

# A backend that registers a kernel for a CompositeImplicitAutograd op receives the op itself;
# one that does not receives its decomposition. Which one depends on the torch_npu release, so
# the trace records both levels: for each watched CIA op a kernel on AutogradPrivateUse1 (the
# key where the composite would otherwise decompose, so autograd of the decomposition keeps
# working) records the op, makes it the parent of every op recorded below it, and continues
# with the op's own decomposition. The watched set comes from the parent process (the catalog's
# CIA ops with an NPU kernel in some release); the worker never opens the catalog. In backward,
# the decomposition's autograd nodes run; where torch has a formula for the op itself (used once
# the backend has a kernel), they are recorded as children of the formula's op
# (_tag_formula_backward).
_COMPOSITE_LIB: list[Any] = []
_COMPOSITE_INSTALLED: set[str] = set()


def _overload(name: str) -> Any | None:
    """The OpOverload for ``ns::name.overload``, or None when this torch has no such op."""
    import torch

    ns, _, rest = name.partition("::")
    base, _, overload = rest.partition(".")
    try:
        packet = getattr(getattr(torch.ops, ns), base)
        return getattr(packet, overload or "default")
    except (AttributeError, RuntimeError):
        return None


# id(op) -> (op, answer): keyed by id because OpOverload.__hash__ is Python code, and this
# runs on every op call; the op kept in the value makes a reused id harmless
_CIA_CACHE: dict[int, tuple[Any, bool]] = {}


def is_composite_implicit(func: Any) -> bool:
    hit = _CIA_CACHE.get(id(func))
    if hit is not None and hit[0] is func:
        return hit[1]
    import torch

    try:
        known = bool(
            torch._C._dispatch_has_kernel_for_dispatch_key(func.name(), "CompositeImplicitAutograd")
        )
    except RuntimeError:  # prim:: ops registered only with the JIT, not the dispatcher
        known = False
    _CIA_CACHE[id(func)] = (func, known)
    return known


def install_composite_kernels(names: Any) -> list[str]:
    """Register the recording kernels for the CIA ops in ``names`` (idempotent, per process).
    Returns the names that are not CIA ops in this torch (not watched)."""
    import torch

    skipped: list[str] = []
    if not _COMPOSITE_LIB:
        _COMPOSITE_LIB.append(torch.library.Library("aten", "IMPL"))  # type: ignore[no-untyped-call]
    lib = _COMPOSITE_LIB[0]
    for name in sorted(set(names)):
        if name in _COMPOSITE_INSTALLED:
            continue
        func = _overload(name)
        # reshape already has the escape kernel, which also calls this module's hook
        if func is None or not is_composite_implicit(func) or name == "aten::reshape":
            skipped.append(name)
            continue
        _, _, base = func._schema.name.partition("::")
        overload = func._schema.overload_name
        key = f"{base}.{overload}" if overload else base
        lib.impl(key, _composite_kernel(func), "AutogradPrivateUse1")
        _COMPOSITE_INSTALLED.add(name)
    return skipped


def _composite_kernel(func: Any) -> Callable[..., Any]:
    formula = BACKWARD_FORMULA.get(op_name(func) or "")

    def kernel(*args: Any, **kwargs: Any) -> Any:
        rec = _ACTIVE[-1][1] if _ACTIVE else None
        with _as_parent(rec, func, args, kwargs) as result:
            result.append(decompose(func, args, kwargs))
            if formula and rec is not None and rec.parents[-1:] == [op_name(func)]:
                _tag_formula_backward(rec, formula, args, result[0])
            return result[0]

    return kernel


def _tag_formula_backward(rec: Recorder, formula: str, args: Any, out: Any) -> None:
    """Record the backward of a watched CIA op that torch has a formula for (BACKWARD_FORMULA)
    at both levels: when the autograd nodes its decomposition created run, the formula's op is
    recorded (as a composite, beside the op) and the ops they run become its children."""
    import torch

    func = _overload(formula)
    outs = [t for t in _iter_tensors(out, None) if getattr(t, "grad_fn", None) is not None]
    if func is None or not outs:
        return
    params = func._schema.arguments
    outer = list(rec.parents[:-1])
    chain = [*outer, formula]
    # nodes of the inputs and leaf accumulators belong to the caller, not the decomposition
    stop = {id(t.grad_fn) for t in _iter_tensors(args, None)
            if isinstance(t, torch.Tensor) and t.grad_fn is not None}  # fmt: skip
    saved: list[list[str]] = []

    def enter(*_: Any) -> None:
        saved.append(rec.parents)
        rec.parents = list(chain)

    def leave(*_: Any) -> None:
        rec.parents = saved.pop()

    def formula_call(grad_outputs: Any) -> None:
        grad = next((g for g in grad_outputs if g is not None), None)
        mine, rec.parents = rec.parents, list(outer)
        # torch's formulas call name(grad, *the forward's arguments[, bool[N] output mask])
        call = [grad, *args][: len(params)]
        if len(params) == len(call) + 1 and str(params[-1].type).startswith("bool["):
            call.append([True] * len(func._schema.returns))
        try:
            sig = rec.record(func, tuple(call), {}, composite=True)
            if sig is not None and not sig.outputs:  # gradients of the forward's tensors
                grads = list(_iter_tensors(args, None))[: len(func._schema.returns)]
                sig.outputs = [_dtype_name(t.dtype) for t in grads]
        finally:
            rec.parents = mine

    seen: set[int] = set()
    stack = [t.grad_fn for t in outs]
    for root in {id(n): n for n in stack}.values():
        root.register_prehook(formula_call)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen or id(node) in stop:
            continue
        seen.add(id(node))
        if type(node).__name__ == "AccumulateGrad":
            continue
        node.register_prehook(enter)
        node.register_hook(leave)
        stack.extend(fn for fn, _ in node.next_functions)


def decompose(func: Any, args: Any, kwargs: Any) -> Any:
    """Run the op's C++ CompositeImplicitAutograd kernel, as the dispatcher would. Not
    ``OpOverload.decompose``: that prefers Python decompositions registered for export
    (``torch._decomp``), which differ (an unfused LSTM cell where the C++ kernel takes the
    fused one on PrivateUse1)."""
    from torch._C import DispatchKey

    return func._op_dk(DispatchKey.CompositeImplicitAutograd, *args, **kwargs)


@contextlib.contextmanager
def _as_parent(
    rec: Recorder | None, func: Any, args: Any, kwargs: Any, *, always: bool = False,
    record: Callable[..., Signature | None] | None = None,
) -> Iterator[list[Any]]:
    """Record a watched CIA op (``always``: any composite op) and make it the parent of the
    ops recorded inside; the caller puts the op's result in the yielded list (for its output
    dtypes). ``record``: how to record the op itself (default ``rec.record``)."""
    result: list[Any] = []
    name = op_name(func)
    # kernels stay installed for the process: record only the ops this trace watches
    if rec is None or not rec.enabled or name is None or not (always or name in rec.watched):
        yield result
        return
    sig = (record or rec.record)(func, args, kwargs, composite=True)
    rec.parents.append(name)
    try:
        yield result
    finally:
        rec.parents.pop()
    if sig is not None and not sig.outputs and result:
        sig.outputs = [_dtype_name(t.dtype) for t in _iter_tensors(result[0], None)]
