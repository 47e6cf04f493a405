"""How the runtime trace sees the ops a backend receives: the recording TorchDispatchMode
(above the FakeTensorMode), the wrapper marking SUBCLASS_BRANCHES functions, and the escape
kernels for calls made with Python dispatch switched off."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator
from typing import Any

from opcheck.tracers.composite_kernels import _as_parent, decompose, is_composite_implicit
from opcheck.tracers.device import DEVICE, _on_device
from opcheck.tracers.recorder import _ACTIVE, Recorder, in_context


class DataDependent(Exception):
    """Control flow depended on tensor values the fake trace does not have."""


def _make_mode(recorder: Recorder) -> Any:
    from torch._ops import HigherOrderOperator
    from torch.utils._python_dispatch import TorchDispatchMode

    class RecordingMode(TorchDispatchMode):  # type: ignore[no-untyped-call]
        supports_higher_order_operators = True

        def __torch_dispatch__(
            self, func: Any, types: Any, args: Any = (), kwargs: Any = None
        ) -> Any:
            kwargs = kwargs or {}
            if isinstance(func, HigherOrderOperator):
                # torch.cond / while_loop pick a branch from tensor values: not followable
                raise DataDependent(f"control-flow operator {func.name()}")  # type: ignore[no-untyped-call]
            if is_composite_implicit(func) and _on_device((args, kwargs)):
                # Inference mode skips the autograd keys, so composite ops arrive here whole;
                # a backend without a kernel for them decomposes them at its own key.
                context = "reshape" if func.name() == "aten::reshape" else ""
                with in_context(recorder, context), self, \
                        _as_parent(recorder, func, args, kwargs) as result:
                    result.append(decompose(func, args, kwargs))
                    return result[0]
            try:
                out = func(*args, **kwargs)
            except Exception as exc:
                out = bf16_only_retry(func, args, kwargs, exc)
                if out is None:
                    # the op the trace stopped at (data-dependent output shape, ...) was
                    # called: keep it in the partial list
                    if _on_device((args, kwargs)):
                        recorder.record(func, args, kwargs)
                    raise
            # Ops on host tensors only (optimizer step counters, Python scalars lifted to
            # tensors) never reach the NPU backend.
            if _on_device((args, kwargs)) or _on_device(out):
                recorder.record(func, args, kwargs, out=out)
            return out

    return RecordingMode()  # type: ignore[no-untyped-call]


@contextlib.contextmanager
def _watch_functions(recorder: Recorder) -> Iterator[None]:
    """Mark calls of the SUBCLASS_BRANCHES functions by wrapping them in torch.nn.functional.

    Not a TorchFunctionMode: an active mode makes has_torch_function() true, which turns off
    fast paths (TransformerEncoderLayer) a real backend takes.
    """
    import torch.nn.functional as F

    original = F.scaled_dot_product_attention

    @functools.wraps(original)
    def sdpa(*args: Any, **kwargs: Any) -> Any:
        with in_context(recorder, "scaled_dot_product_attention"):
            return original(*args, **kwargs)

    F.scaled_dot_product_attention = sdpa
    try:
        yield
    finally:
        F.scaled_dot_product_attention = original


# Library code sometimes creates tensors with Python dispatch switched off: torch.tensor(data,
# device=x.device) builds on the host and copies with the Python key excluded (transformers'
# DynamicCache does this on its lazy initialisation). Those calls skip the fake mode and reach
# the PrivateUse1 kernels themselves, which a renamed backend does not have. These kernels
# answer them with FakeTensors of the active trace, and record the calls: a real backend
# receives the same top-level ops (_to_copy via BackendSelect, or empty_strided + copy_).
_ESCAPE_LIB: list[Any] = []


def _install_escape_kernels() -> None:
    if _ESCAPE_LIB:
        return
    import torch
    from torch._subclasses.fake_tensor import FakeTensor

    lib = torch.library.Library("aten", "IMPL")  # type: ignore[no-untyped-call]

    def active() -> tuple[Any, Recorder]:
        if not _ACTIVE:
            raise RuntimeError(f"{DEVICE} tensors exist only inside an opcheck trace")
        return _ACTIVE[-1]

    def fake_empty(size: Any, stride: Any | None, dtype: Any) -> Any:
        mode, _ = active()
        dtype = dtype or torch.get_default_dtype()
        if stride is None:
            meta = torch.empty(size, dtype=dtype, device="meta")
        else:
            meta = torch.empty_strided(size, stride, dtype=dtype, device="meta")
        return FakeTensor(mode, meta, torch.device(DEVICE, 0))

    def empty_strided(size: Any, stride: Any, dtype: Any = None, layout: Any = None,
                      device: Any = None, pin_memory: Any = None) -> Any:  # fmt: skip
        out = fake_empty(size, stride, dtype)
        active()[1].record(torch.ops.aten.empty_strided.default, (size, stride),
                           {"dtype": dtype}, out=out)  # fmt: skip
        return out

    def empty_memory_format(size: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                            pin_memory: Any = None, memory_format: Any = None) -> Any:  # fmt: skip
        out = fake_empty(size, None, dtype)
        active()[1].record(torch.ops.aten.empty.memory_format, (size,), {"dtype": dtype},
                           out=out)  # fmt: skip
        return out

    def copy_(self: Any, src: Any, non_blocking: bool = False) -> Any:
        active()[1].record(torch.ops.aten.copy_.default, (self, src), {})
        return self

    def copy_from(self: Any, dst: Any, non_blocking: bool = False) -> Any:
        return dst

    def to_copy(self: Any, dtype: Any = None, layout: Any = None, device: Any = None,
                pin_memory: Any = None, non_blocking: bool = False,
                memory_format: Any = None) -> Any:  # fmt: skip
        # BackendSelect routes _to_copy(host tensor, device=npu) here as one top-level op.
        out = fake_empty(tuple(self.shape), None, dtype or self.dtype)
        active()[1].record(torch.ops.aten._to_copy.default, (self,), {"dtype": dtype},
                           out=out)  # fmt: skip
        return out

    def reshape(self: Any, shape: Any) -> Any:
        # Runs reshape's own CompositeImplicit kernel, only marking the context so the view it
        # takes on a subclass is recorded as the _reshape_alias a real backend receives. Every
        # reshape of an npu tensor passes here (Python calls and C++ composites alike).
        with in_context(_ACTIVE[-1][1] if _ACTIVE else None, "reshape"):
            return torch.ops.aten.reshape.default.decompose(self, shape)

    lib.impl("reshape", reshape, "AutogradPrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("empty_strided", empty_strided, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("empty.memory_format", empty_memory_format, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("copy_", copy_, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("_copy_from", copy_from, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("_to_copy", to_copy, "PrivateUse1")  # type: ignore[no-untyped-call]
    _ESCAPE_LIB.append(lib)


def bf16_only_retry(func: Any, args: Any, kwargs: Any, exc: Exception) -> Any:
    """A fake kernel whose dtype check was written for one device's kernel (grouped matmul's
    meta function insists on bfloat16, as CUDA's kernel does; a backend has its own rules):
    the op's output shape is computed on bfloat16 copies and cast back to the input dtype, so
    the trace goes on, and the op is recorded with the dtypes the model really sent. None when
    ``exc`` is not such a check or the retry fails too."""
    import torch

    text = str(exc)
    if "BF16" not in text and "bfloat16" not in text:
        return None
    if func._schema.is_mutable:
        return None
    found: list[Any] = []

    def cast(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.bfloat16:
            found.append(x.dtype)
            return x.to(torch.bfloat16)
        if isinstance(x, (list, tuple)):
            return type(x)(cast(v) for v in x)
        return x

    low_args = cast(args)
    low_kwargs = {k: cast(v) for k, v in kwargs.items()}
    if not found:
        return None
    back_to = found[0]

    def back(x: Any) -> Any:
        if isinstance(x, torch.Tensor) and x.dtype == torch.bfloat16:
            return x.to(back_to)
        if isinstance(x, (list, tuple)):
            return type(x)(back(v) for v in x)
        return x

    try:
        return back(func(*low_args, **low_kwargs))
    except Exception:
        return None
