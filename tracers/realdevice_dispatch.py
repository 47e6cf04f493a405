"""The real-data ``npu`` device's hot path (:mod:`opcheck.tracers.realdevice` holds the
session and the kernels it registers on the device keys): the wrapper subclass holding a real
CPU tensor, its ``__torch_dispatch__`` (unwrap, run the CPU kernel, wrap, record), and the
state the two modules share. Every op of a recorded script runs through :func:`dispatch`, so
its helpers stay module-level functions bound once (``_FACTS``, the cached torch names).

Only imported in the sandboxed worker; torch is imported lazily.
"""

from __future__ import annotations

import threading
from typing import Any

from opcheck.core.oplist import Signature
from opcheck.tracers.composite_kernels import _as_parent, decompose, is_composite_implicit
from opcheck.tracers.device import DEVICE
from opcheck.tracers.recorder import Recorder, in_context

_WRAPPER_STORAGE_BYTES = 1 << 46
# Generic kernels that pick a device-specific implementation and end in *_overrideable on a
# backend without its own kernel (torch_npu registers these): recorded whole, run on the CPU.
DEVICE_SPECIFIC = frozenset({"aten::convolution", "aten::_convolution",
                             "aten::_convolution.deprecated", "aten::convolution_backward",
                             # a view made without the dispatcher (no alias annotation)
                             "aten::_unsafe_view"})

# the active realdevice.Session objects, innermost last (their recorder and phase)
_SESSION: list[Any] = []
# CompositeExplicitAutograd[NonFunctional] ops without a PrivateUse1 kernel in torch (views
# aside) -> the key of their generic kernel: recorded with the ops that kernel calls
_EXPLICIT: dict[Any, Any] = {}
_INSTALLED: list[Any] = []  # torch.library.Library objects kept alive
_CLASS: list[Any] = []


def tensor_class() -> Any:
    """The wrapper subclass (built once, on first use: torch is imported lazily)."""
    if _CLASS:
        return _CLASS[0]
    import torch

    class NpuTensor(torch.Tensor):
        """An ``npu`` tensor holding a real CPU tensor (``elem``)."""

        elem: torch.Tensor
        # No __torch_function__ override: has_torch_function() stays false, so fast paths
        # (TransformerEncoderLayer) are taken as they would be on a real backend.
        __torch_function__ = torch._C._disabled_torch_function_impl  # type: ignore[assignment]

        @staticmethod
        def __new__(cls, elem: torch.Tensor) -> Any:
            return _new_wrapper(cls, elem)

        def __repr__(self, *, tensor_contents: Any = None) -> str:  # type: ignore[override]
            return f"{self.elem!r}".replace("tensor(", "npu_tensor(", 1)

        # the body itself, not a method calling it: one Python call less on every op call
        __torch_dispatch__ = classmethod(_torch_dispatch)  # type: ignore[assignment]

        def __format__(self, spec: str) -> str:
            # Tensor.__format__ formats a 0-dim tensor as its number for the Tensor class
            # only (a subclass gets its repr): a real device's tensor is a Tensor, so
            # f"expert_{index}" names a module key as it would there (a host read, recorded)
            if self.dim() == 0:
                return format(self.detach().item(), spec)
            return object.__format__(self, spec)

        def tolist(self) -> Any:
            # the C++ method refuses subclasses; on a device, tolist copies to the host first
            return self.to("cpu").tolist()

        def __reduce_ex__(self, protocol: Any) -> Any:
            # torch.save of an npu tensor stores its data as a CPU tensor: loadable with
            # weights_only, and torch.load(map_location="cuda"/"npu") moves it back
            return self.elem.__reduce_ex__(protocol)  # type: ignore[no-untyped-call]

    global _Tensor, _Device, _DEVICE_0, _CPU_DEVICE, _make_wrapper, _autograd_node
    _Tensor, _Device = torch.Tensor, torch.device
    _DEVICE_0, _CPU_DEVICE = torch.device(DEVICE, 0), torch.device("cpu")
    _make_wrapper = torch.Tensor._make_wrapper_subclass
    _autograd_node = torch._C._current_autograd_node
    _VALUE_TYPES.update((torch.dtype, torch.memory_format, torch.layout))
    _CLASS.append(NpuTensor)
    return NpuTensor


def _new_wrapper(cls: Any, elem: Any) -> Any:
    # The wrapper's storage is never read (it has no data); its declared size only bounds the
    # sizes _sync_metadata may give the wrapper when an out= or in-place op resizes the CPU
    # tensor behind it. Arguments at their default are left out: each keyword costs a parse
    # (the layout is strided: the strides are read; requires_grad is False: autograd lives on
    # the wrapper, the CPU tensor is detached).
    if elem.requires_grad:
        elem = elem.detach()
    offset = elem.storage_offset()
    if offset:
        r = _make_wrapper(cls, elem.size(), strides=elem.stride(), storage_offset=offset,
                          dtype=elem.dtype, device=_DEVICE_0,
                          storage_size=_WRAPPER_STORAGE_BYTES)  # fmt: skip
    else:
        r = _make_wrapper(cls, elem.size(), strides=elem.stride(), dtype=elem.dtype,
                          device=_DEVICE_0, storage_size=_WRAPPER_STORAGE_BYTES)  # fmt: skip
    r.elem = elem
    return r


def wrap(t: Any) -> Any:
    """An ``npu`` tensor holding the CPU tensor ``t`` (autograd lives on the wrapper)."""
    return _new_wrapper(_CLASS[0] if _CLASS else tensor_class(), t)


def _is_device(x: Any) -> bool:
    t = getattr(x, "type", None)
    return t == DEVICE and type(x).__name__ == "device"


def _rewrap(out: Any, inputs: dict[int, Any], on_device: bool) -> Any:
    tensor = _Tensor
    if type(out) is tensor and id(out) not in inputs:  # the common case: a new tensor
        return _new_wrapper(_CLASS[0], out) if on_device else out
    if isinstance(out, tensor):
        same = inputs.get(id(out))
        if same is not None:  # in-place / out= ops return their argument itself
            return same
        return wrap(out) if on_device else out
    if isinstance(out, (list, tuple)):
        return type(out)([_rewrap(v, inputs, on_device) for v in out])
    return out


def _split(
    args: Any, kwargs: dict[str, Any]
) -> tuple[list[Any], dict[str, Any], dict[int, Any], bool, Any, Any]:
    """One pass over a call's arguments: the arguments with CPU tensors in place of ``npu``
    ones (and the CPU device in place of ``npu``), the tensor arguments by the id of the CPU
    tensor behind them, whether any is an ``npu`` tensor, and what the recorder keys the call
    by: its first tensor (the CPU tensor behind it: same shape) and a hashable key (the
    tensors' dtypes, the other arguments' values and types), the tensor and the key
    ``recorder._scan`` finds, or None when an argument is not a plain value."""
    cls = _CLASS[0]
    inputs: dict[int, Any] = {}
    touches = False
    plain: list[Any] = []
    parts: list[Any] | None = []
    first = None
    for x in args:  # flat arguments inline: this runs on every op call
        tx = type(x)
        if tx is cls:
            touches = True
            e = x.elem
            inputs[id(e)] = x
            plain.append(e)
            if parts is not None:
                parts.append(e.dtype)
            if first is None:
                first = e  # its shape is the wrapper's, and reads faster
        elif tx in _SIMPLE_TYPES:
            plain.append(x)
            if parts is not None:
                parts.append((tx, x))  # 1, 1.0 and True are equal keys, not equal arguments
        elif tx is _Tensor:  # a host tensor, e.g. the wrapped scalar of ``a * 0.5``
            inputs[id(x)] = x
            plain.append(x)
            if parts is not None:
                parts.append(x.dtype)
            if first is None:
                first = x
        else:
            v, t, part, first = _arg(x, inputs, first)
            plain.append(v)
            if t:
                touches = True
            if parts is not None:
                if part is _UNKEYED:
                    parts = None
                else:
                    parts.append(part)
    plain_kwargs: dict[str, Any] = {}
    if kwargs:
        for k, x in kwargs.items():
            v, t, part, first = _arg(x, inputs, first)
            plain_kwargs[k] = v
            if t:
                touches = True
            if parts is not None:
                if part is _UNKEYED:
                    parts = None
                else:
                    parts.append(part)
        if parts is not None:
            parts.append(tuple(kwargs))
    return plain, plain_kwargs, inputs, touches, first, tuple(parts) if parts is not None else None


_SIMPLE = (int, float, bool, str, type(None))
_SIMPLE_TYPES = frozenset(_SIMPLE)
_NO_KWARGS: dict[str, Any] = {}
_UNKEYED = object()


def _arg(x: Any, inputs: dict[int, Any], first: Any) -> tuple[Any, bool, Any, Any]:
    """One argument of ``_split`` other than an ``npu`` tensor or a Python scalar: its value
    with CPU tensors in place of ``npu`` ones, whether it holds an ``npu`` tensor, its part of
    the call's key (``_UNKEYED``: none) and the call's first tensor so far."""
    cls = _CLASS[0]
    if type(x) is cls:
        e = x.elem
        inputs[id(e)] = x
        return e, True, e.dtype, e if first is None else first
    if isinstance(x, _Tensor):  # a host tensor, e.g. the wrapped scalar of ``a * 0.5``
        inputs[id(x)] = x
        return x, False, x.dtype, x if first is None else first
    if isinstance(x, (list, tuple)):
        touched = False
        out: list[Any] = []
        inner: list[Any] | None = []
        for v in x:
            if type(v) is cls:
                touched = True
                e = v.elem
                inputs[id(e)] = v
                out.append(e)
                if inner is not None:
                    inner.append(e.dtype)
                if first is None:
                    first = e
            elif isinstance(v, _SIMPLE):
                out.append(v)
                if inner is not None:
                    inner.append((type(v), v))
            else:
                p, t, part, first = _arg(v, inputs, first)
                touched = touched or t
                out.append(p)
                if inner is not None and isinstance(v, _Tensor):
                    inner.append(part)
                else:  # nested deeper than one list: not keyed, as _scan
                    inner = None
        return type(x)(out), touched, tuple(inner) if inner is not None else _UNKEYED, first
    if type(x) is _Device and x.type == DEVICE:
        return _CPU_DEVICE, False, (_Device, x), first
    if isinstance(x, (*_SIMPLE, _Device)) or type(x) in _VALUE_TYPES:
        return x, False, (type(x), x), first
    if isinstance(x, dict):
        touched = False
        out_dict: dict[Any, Any] = {}
        for k, v in x.items():
            out_dict[k], t, _, first = _arg(v, inputs, first)
            touched = touched or t
        return out_dict, touched, _UNKEYED, first
    return x, False, _UNKEYED, first


# id(op) -> (op, CompositeImplicitAutograd, _EXPLICIT key, mutable, the C++ callable): per-op
# facts dispatch needs on every call (by id: OpOverload.__hash__ is Python code; the op kept
# in the value makes a reused id harmless)
_FACTS: dict[int, tuple[Any, bool, Any, bool, Any]] = {}
_MAIN_THREAD = threading.main_thread().ident
_get_ident = threading.get_ident
# What every op call reads of torch, set with the wrapper class (torch is imported lazily)
_Tensor: Any = None
_Device: Any = None
_DEVICE_0: Any = None  # torch.device("npu", 0)
_CPU_DEVICE: Any = None  # torch.device("cpu")
_make_wrapper: Any = None  # torch.Tensor._make_wrapper_subclass
_autograd_node: Any = None  # torch._C._current_autograd_node
# hashable argument values keyed by value: torch.dtype, torch.memory_format, torch.layout
_VALUE_TYPES: set[type] = set()


def dispatch(func: Any, args: Any, kwargs: dict[str, Any]) -> Any:
    """Run ``func`` on the CPU tensors behind its ``npu`` arguments and record it."""
    return _torch_dispatch(None, func, None, args, kwargs)


def _torch_dispatch(
    cls: Any, func: Any, types: Any, args: Any = (), kwargs: dict[str, Any] | None = None
) -> Any:
    """The wrapper's ``__torch_dispatch__`` and ``dispatch``. Runs on every op call of a run:
    one pass over the arguments, per-op facts cached, the common case inline."""
    if not kwargs:
        kwargs = _NO_KWARGS
    rec = _SESSION[-1].recorder if _SESSION else None
    plain, plain_kwargs, inputs, touches, first, key = _split(args, kwargs)
    dev = kwargs.get("device") if kwargs else None
    # where the outputs live: the ``device`` argument when there is one, else the inputs'
    on_device = _is_device(dev) if dev is not None else touches
    facts = _FACTS.get(id(func))
    if facts is None or facts[0] is not func:
        facts = _FACTS[id(func)] = (func, is_composite_implicit(func), _EXPLICIT.get(func),
                                    bool(func._schema.is_mutable),
                                    getattr(func, "_op", func))  # fmt: skip
    _, implicit, explicit_key, mutable, op = facts
    if on_device and implicit:
        # Inference mode skips the autograd keys, so composite ops arrive here whole; a backend
        # without a kernel for them decomposes them at its own key.
        context = "reshape" if func.name() == "aten::reshape" else ""
        with in_context(rec, context), _as_parent(rec, func, args, kwargs):
            return decompose(func, args, kwargs)
    if (on_device or touches) and explicit_key is not None and rec is not None and rec.enabled:
        # also a copy to the host (``.cpu()``: _to_copy with device=cpu), whose generic kernel
        # sends the backend a copy_ from the device: a host sync the report counts
        return _run_explicit(rec, func, explicit_key, args, kwargs)
    try:
        # the C++ op itself (OpOverload.__call__ is Python)
        raw = op(*plain, **plain_kwargs) if plain_kwargs else op(*plain)
    except BaseException as exc:
        raw = None if mutable else cpu_dtype_gap(op, plain, plain_kwargs, exc)
        if raw is None and not mutable:
            raw = scalar_operands(func, plain, plain_kwargs, exc)
        if raw is None:
            if rec is not None and on_device:
                _record(rec, func, args, kwargs)  # the op the script failed in is still listed
            raise
    if mutable:
        _sync_metadata(inputs)
    if type(raw) is _Tensor and id(raw) not in inputs:  # the common case: a new tensor
        out = _new_wrapper(_CLASS[0], raw) if on_device else raw
    elif on_device and type(raw) is tuple:  # values and indices (topk, max.dim, sort...)
        out = tuple([_new_wrapper(_CLASS[0], v) if type(v) is _Tensor and id(v) not in inputs
                     else _rewrap(v, inputs, on_device) for v in raw])  # fmt: skip
    else:
        out = _rewrap(raw, inputs, on_device)
    if rec is not None and on_device:
        if not rec.phase and _get_ident() == _MAIN_THREAD:
            rec.record_keyed(func, args, kwargs, out, first, key)
        else:
            _record(rec, func, args, kwargs, out, scanned=(first, key))
    return out


def _run_explicit(rec: Recorder, func: Any, key: Any, args: Any, kwargs: Any) -> Any:
    """A CompositeExplicitAutograd op with no kernel of the device's own: recorded, then its
    generic kernel runs on the ``npu`` tensors, so the ops it calls reach the device and are
    recorded as its children, as a backend without a kernel for the op receives them (the
    checker decides per release which level the NPU gets: torch_npu registers kernels for
    some of these ops)."""
    import torch

    def record(f: Any, a: Any, k: Any, *, composite: bool = False) -> Signature | None:
        return _record(rec, f, a, k, composite=composite)

    # below autograd, as the kernel runs at the backend key (the Python key restores the TLS
    # the op entered the dispatcher with)
    with _as_parent(rec, func, args, kwargs, always=True, record=record) as result, \
            torch._C._AutoDispatchBelowADInplaceOrView():
        result.append(func._op_dk(key, *args, **kwargs))
        return result[0]


def _record(
    rec: Recorder, func: Any, args: Any, kwargs: Any, out: Any = None, *,
    composite: bool = False, scanned: tuple[Any, Any] | None = None,
) -> Signature | None:  # fmt: skip
    """Record a call on the device; ``scanned``: its first tensor and key (``_split``)."""
    if rec.phase == "" and _get_ident() != _MAIN_THREAD:
        # the autograd engine's device thread outside a patched backward() call
        with _SESSION[-1].phase("backward"):
            return _record(rec, func, args, kwargs, out, composite=composite, scanned=scanned)
    if rec.phase == "backward":  # where the recorder reads it (the engine's sums between nodes)
        rec.in_node = 1 if _autograd_node() is not None else 0
    if scanned is None:
        return rec.record(func, args, kwargs, out=out, composite=composite)
    return rec.record_keyed(func, args, kwargs, out, scanned[0], scanned[1], composite)


def _sync_metadata(inputs: dict[int, Any]) -> None:
    """Give wrappers the sizes their CPU tensor now has (out= ops resize their output;
    ``unsqueeze_`` and friends restride in place): a metadata-only ``as_strided_`` on the
    wrapper itself, below autograd and Python dispatch."""
    import torch

    cls = _CLASS[0]
    for w in inputs.values():
        if type(w) is not cls:
            continue
        e = w.elem
        if (w.shape, w.stride(), w.storage_offset()) == (e.shape, e.stride(), e.storage_offset()):
            continue
        with torch._C._DisableTorchDispatch(), torch._C._AutoDispatchBelowADInplaceOrView():
            torch.ops.aten.as_strided_.default(w, e.size(), e.stride(), e.storage_offset())


_WIDER = {"Int": "float64", "Long": "float64", "Short": "float64", "Char": "float64",
          "Byte": "float64", "Half": "float32", "BFloat16": "float32"}  # fmt: skip


def cpu_dtype_gap(op: Any, args: Any, kwargs: Any, exc: BaseException) -> Any:
    """``op`` rerun with the tensors of the dtype the CPU kernel refused widened, outputs cast
    back; None when ``exc`` is not such a refusal (or the rerun fails too)."""
    import torch

    text = str(exc)
    at = text.find(" not implemented for '")
    if at < 0 or not isinstance(exc, (NotImplementedError, RuntimeError)):
        return None
    name = text[at + len(" not implemented for '"):].split("'")[0]
    wider = _WIDER.get(name)
    dtypes = {str(getattr(torch, d)).removeprefix("torch."): getattr(torch, d)
              for d in ("int32", "int64", "int16", "int8", "uint8", "float16", "bfloat16")}
    torch_name = {"Int": "int32", "Long": "int64", "Short": "int16", "Char": "int8",
                  "Byte": "uint8", "Half": "float16", "BFloat16": "bfloat16"}.get(name)
    if wider is None or torch_name is None:
        return None
    narrow, wide = dtypes[torch_name], getattr(torch, wider)

    def widen(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dtype == narrow:
            return x.to(wide)
        if isinstance(x, (list, tuple)):
            return type(x)(widen(v) for v in x)
        return x

    def back(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dtype == wide:
            return x.to(narrow)
        if isinstance(x, (list, tuple)):
            return type(x)(back(v) for v in x)
        return x

    try:
        return back(op(*widen(args), **{k: widen(v) for k, v in kwargs.items()}))
    except Exception:
        return None


def scalar_operands(func: Any, args: Any, kwargs: Any, exc: BaseException) -> Any:
    """``func`` rerun with the Python numbers it was handed where its schema takes a Tensor
    made 0-dim tensors: a composite kernel's wrapped scalar (``remainder.Scalar`` calling
    ``remainder.Tensor`` for ``idx % n``) reaches Python dispatch as a plain number, which the
    op's own binding then refuses. None when ``exc`` is not that refusal (or the rerun fails)."""
    import torch

    if not isinstance(exc, RuntimeError) or "Expected a value of type 'Tensor'" not in str(exc):
        return None
    schema = {a.name: a for a in func._schema.arguments}
    names = list(schema)

    def tensor(name: str | None, x: Any) -> Any:
        arg = schema.get(name) if name else None
        if arg is not None and isinstance(x, (bool, int, float)) and str(arg.type) == "Tensor":
            return torch.tensor(x)
        return x

    fixed = [tensor(names[i] if i < len(names) else None, x) for i, x in enumerate(args)]
    try:
        return func(*fixed, **{k: tensor(k, v) for k, v in kwargs.items()})
    except Exception:
        return None
