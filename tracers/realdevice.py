"""The recorded ``npu`` device with real data: what ``opcheck run`` executes a script on.

The fake-tensor trace (:mod:`opcheck.tracers.runtime`) stops where control flow reads tensor
values. Here every ``npu`` tensor is a wrapper subclass on the renamed PrivateUse1 device that
holds a real CPU tensor: its ``__torch_dispatch__`` unwraps the arguments, runs the CPU kernel,
wraps the results and records the op with the runtime tracer's :class:`Recorder` (same records,
same stream). ``.item()``, ``nonzero``, data-dependent loops and shapes simply run.

What reaches ``__torch_dispatch__`` is what a PrivateUse1 backend receives: the op left
autograd and (for ops without a kernel of their own) CompositeImplicitAutograd decomposition,
with the device-type choices (dropout, SDPA, fast paths, foreach optimizers) made for an
accelerator. Ops that reach the device key with no ``npu`` tensor argument (factory functions
with ``device=npu``, ``_to_copy`` to the device, copies made with the Python key switched off)
get real PrivateUse1 kernels registered here: allocation and copies, every
CompositeExplicitAutograd op without a kernel of its own (recorded whole, as a backend receives
it), and a boxed fallback for anything else. Autocast on the device uses Python
AutocastPrivateUse1 kernels (torch core registers none). Checked against a real C++
PrivateUse1 backend on whole scripts in tests/tracers/test_run_backend.py.

This module holds the session and the kernels registered on the device keys; the wrapper
tensor and its dispatch (the hot path every op runs through) are in
:mod:`opcheck.tracers.realdevice_dispatch`.

Only imported in the sandboxed worker; torch is imported lazily.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.tracers import realdevice_host
from opcheck.tracers.composite_kernels import _overload, decompose
from opcheck.tracers.device import DEVICE, setup_device
from opcheck.tracers.dispatch import _watch_functions
from opcheck.tracers.realdevice_dispatch import (  # noqa: F401 (realdevice.wrap, ._split)
    _CLASS,
    _EXPLICIT,
    _INSTALLED,
    _SESSION,
    DEVICE_SPECIFIC,
    _record,
    _split,
    dispatch,
    tensor_class,
    wrap,
)
from opcheck.tracers.recorder import _ACTIVE, Recorder, in_context

# Lower-precision autocast policy on the device. torch core registers no AutocastPrivateUse1
# kernels (torch_npu does, in C++); these are the CUDA cast lists of torch's AMP documentation,
# which torch_npu's lists follow for the aten ops it shares with CUDA.
AUTOCAST_LOWER = (
    "_convolution", "conv1d", "conv2d", "conv3d", "conv_tbc", "conv_transpose1d",
    "conv_transpose2d", "conv_transpose3d", "convolution", "prelu", "addmm", "addmv", "addr",
    "matmul", "einsum", "mm", "mv", "linear", "addbmm", "baddbmm", "bmm", "chain_matmul",
    "linalg_multi_dot", "_thnn_fused_lstm_cell", "_thnn_fused_gru_cell", "lstm_cell",
    "gru_cell", "rnn_tanh_cell", "rnn_relu_cell", "scaled_dot_product_attention",
)  # fmt: skip
AUTOCAST_FP32 = (
    "acos", "asin", "cosh", "erfinv", "exp", "expm1", "log", "log10", "log2", "log1p",
    "reciprocal", "rsqrt", "sinh", "tan", "pow", "softplus", "layer_norm", "group_norm",
    "frobenius_norm", "nuclear_norm", "cosine_similarity", "poisson_nll_loss",
    "cosine_embedding_loss", "nll_loss", "nll_loss2d", "hinge_embedding_loss", "kl_div",
    "l1_loss", "smooth_l1_loss", "huber_loss", "mse_loss", "margin_ranking_loss",
    "multilabel_margin_loss", "soft_margin_loss", "triplet_margin_loss", "multi_margin_loss",
    "binary_cross_entropy_with_logits", "dist", "pdist", "cdist", "renorm", "logsumexp",
    "sum", "prod", "cumprod", "cumsum", "softmax", "log_softmax", "cross_entropy_loss", "norm",
)  # fmt: skip


class Session:
    """One recorded run: the recorder, where the script is (module path, phase) and the
    callbacks the step budget listens to. Only one is active per process."""

    def __init__(self, recorder: Recorder) -> None:
        self.recorder = recorder
        self.notes: list[str] = []
        self.on_forward_start: Callable[[Any], None] | None = None
        self.on_optimizer_step: Callable[[Any], None] | None = None
        self._names: dict[int, dict[int, str]] = {}  # top module id -> {module id: path}
        self._tops: list[Any] = []  # the top modules of the running forward calls
        self._main = threading.main_thread()

    # ------------------------------------------------------------ module paths

    def _pre(self, mod: Any, _args: Any) -> None:
        rec = self.recorder
        if not self._tops:
            self._tops.append(mod)
            if self.on_forward_start is not None:
                self.on_forward_start(mod)
            names = self._names.get(id(mod))
            if names is None:
                names = self._names[id(mod)] = {id(m): n for n, m in mod.named_modules()}
        else:
            self._tops.append(self._tops[-1])
            names = self._names.get(id(self._tops[0]), {})
        rec.enter_module(names.get(id(mod)), type(mod).__name__)

    def _post(self, mod: Any, _args: Any, _out: Any) -> None:
        if self._tops:
            self._tops.pop()
        if self.recorder.module_stack:
            self.recorder.module_stack.pop()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        rec = self.recorder
        before = rec.phase
        if before == name:
            yield
            return
        rec.phase = name
        if rec.stream is not None:
            rec.stream.event({"phase": name or "forward"})
        try:
            yield
        finally:
            rec.phase = before
            if rec.stream is not None:
                rec.stream.event({"phase": before or "forward"})

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Hooks that track where the script is: global module hooks (hooks on the modules
        would turn off fast paths), autograd and optimizer-step phases."""
        import torch
        from torch.nn.modules.module import (
            register_module_forward_hook,
            register_module_forward_pre_hook,
        )
        from torch.optim.optimizer import (
            register_optimizer_step_post_hook,
            register_optimizer_step_pre_hook,
        )

        if _SESSION:
            raise TraceError("a recorded device session is already running in this process")
        install()
        steps: list[contextlib.ExitStack] = []

        def opt_pre(*_: Any) -> None:
            stack = contextlib.ExitStack()
            stack.enter_context(self.phase("optimizer"))
            steps.append(stack)

        def opt_post(optimizer: Any, *_: Any) -> None:
            if steps:
                steps.pop().close()
            if self.on_optimizer_step is not None and not steps:
                self.on_optimizer_step(optimizer)

        backward, grad = torch.autograd.backward, torch.autograd.grad

        def run_backward(*args: Any, **kwargs: Any) -> Any:
            with self.phase("backward"):
                return backward(*args, **kwargs)

        def run_grad(*args: Any, **kwargs: Any) -> Any:
            with self.phase("backward"):
                return grad(*args, **kwargs)

        handles = [
            register_module_forward_pre_hook(self._pre),
            register_module_forward_hook(self._post, always_call=True),
            register_optimizer_step_pre_hook(opt_pre),
            register_optimizer_step_post_hook(opt_post),
        ]
        torch.autograd.backward, torch.autograd.grad = run_backward, run_grad
        tensor_fn = torch.tensor

        def host_tensor(data: Any, *args: Any, **kwargs: Any) -> Any:
            # torch.tensor([t, ...]) of device tensors reads each value in C++ past the
            # wrapper's dispatch (INTERNAL ASSERT func != nullptr): their host copies instead
            return tensor_fn(_host_values(data), *args, **kwargs)

        torch.tensor = host_tensor
        _SESSION.append(self)
        _ACTIVE.append((None, self.recorder))  # the composite kernels' recorder
        try:
            with _watch_functions(self.recorder):
                yield
        finally:
            _ACTIVE.pop()
            _SESSION.pop()
            torch.autograd.backward, torch.autograd.grad = backward, grad
            torch.tensor = tensor_fn
            for h in handles:
                h.remove()
            for stack in steps:
                stack.close()



def _host_values(data: Any) -> Any:
    """``data`` with the device tensors inside its lists and tuples as their CPU tensors."""
    if isinstance(data, (list, tuple)):
        return type(data)(_host_values(x) for x in data)
    return data.elem if isinstance(data, tensor_class()) else data


# ---------------------------------------------------------------- kernels on the device key


def uninstall() -> None:
    """Unregister the device's kernels (``install`` registers them again): a fake-tensor trace
    later in the same process (the atlas's text-path retry after a real-data fallback) would
    otherwise reach them with fake ``npu`` tensors, which they hand back to the same device
    key until the recursion limit."""
    while _INSTALLED:
        _INSTALLED.pop()._destroy()


def install() -> None:
    """Rename PrivateUse1 to ``npu`` and register the device's kernels (once per process, or
    again after ``uninstall``)."""
    if _INSTALLED:
        return
    import torch

    setup_device()
    _device_module(getattr(torch, DEVICE))
    cls = tensor_class()
    lib = torch.library.Library("aten", "IMPL")  # type: ignore[no-untyped-call]

    def record(func: Any, args: Any, out: Any = None) -> None:
        if _SESSION:
            _record(_SESSION[-1].recorder, func, args, {}, out)

    def empty_memory_format(size: Any, dtype: Any = None, layout: Any = None,
                            device: Any = None, pin_memory: Any = None,
                            memory_format: Any = None) -> Any:  # fmt: skip
        out = wrap(torch.empty(size, dtype=dtype, memory_format=memory_format))
        record(torch.ops.aten.empty.memory_format, (), out)
        return out

    def empty_strided(size: Any, stride: Any, dtype: Any = None, layout: Any = None,
                      device: Any = None, pin_memory: Any = None) -> Any:  # fmt: skip
        out = wrap(torch.empty_strided(size, stride, dtype=dtype))
        record(torch.ops.aten.empty_strided.default, (), out)
        return out

    def copy_(self: Any, src: Any, non_blocking: bool = False) -> Any:
        # reached with the Python key excluded (torch.tensor(data, device=npu))
        _plain(self).copy_(_plain(src))
        record(torch.ops.aten.copy_.default, (self, src), self)
        return self

    def copy_from(self: Any, dst: Any, non_blocking: bool = False) -> Any:
        _plain(dst).copy_(_plain(self))
        return dst

    def local_scalar_dense(self: Any) -> Any:
        # reached with the Python key excluded (torch.as_tensor over a sequence of device
        # scalars, as indexing with zip(*t) makes): the Python fallback cannot take it
        record(torch.ops.aten._local_scalar_dense.default, (self,))
        return _plain(self).item()

    def reshape(self: Any, shape: Any) -> Any:
        # reshape's own composite kernel, in the context that renames the view a subclass
        # takes to the _reshape_alias a real backend receives (SUBCLASS_BRANCHES)
        with in_context(_SESSION[-1].recorder if _SESSION else None, "reshape"):
            return decompose(torch.ops.aten.reshape.default, (self, shape), {})

    lib.impl("empty.memory_format", empty_memory_format, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("empty_strided", empty_strided, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("copy_", copy_, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("_copy_from", copy_from, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("_local_scalar_dense", local_scalar_dense, "PrivateUse1")  # type: ignore[no-untyped-call]
    lib.impl("reshape", reshape, "AutogradPrivateUse1")  # type: ignore[no-untyped-call]
    _INSTALLED.append(lib)

    fallback = torch.library.Library("_", "IMPL")  # type: ignore[no-untyped-call]

    def device_fallback(op: Any, *args: Any, **kwargs: Any) -> Any:
        # any other op reaching PrivateUse1 with the Python key off: same path as dispatch
        return dispatch(op, args, kwargs)

    try:
        fallback.fallback(device_fallback, "PrivateUse1")  # type: ignore[no-untyped-call]
        _INSTALLED.append(fallback)
    except (RuntimeError, AttributeError):  # an older torch without Python fallbacks
        pass
    _install_explicit_kernels(lib)
    _install_autocast()
    # the CPU kernels of ops torch implements for accelerators only (fused RNN cells)
    realdevice_host.install(_INSTALLED)
    # Optimizers pick the foreach path only for plain Tensor/Parameter types on a foreach
    # device; an npu parameter is this subclass, which a real backend's tensors are not.
    from torch.optim import optimizer as _opt

    if cls not in _opt._foreach_supported_types:
        _opt._foreach_supported_types.append(cls)
    from torch.utils import _foreach_utils

    supported = getattr(_foreach_utils, "_foreach_supported_types", None)
    if isinstance(supported, list) and cls not in supported:
        supported.append(cls)


def _install_explicit_kernels(lib: Any) -> None:
    """Kernels on the device key for the CompositeExplicitAutograd ops that have none.

    Factory functions (``randn(..., device=npu)``, ``arange``, ``full``) and ``_to_copy`` to the
    device reach PrivateUse1 through BackendSelect with no ``npu`` tensor argument, so the
    wrapper's ``__torch_dispatch__`` never sees them: without these kernels they would run
    their composite kernel and be recorded as ``empty`` + ``normal_``. A backend receives
    them whole (torch_npu registers many; the C++ reference backend records them too).
    """
    import torch

    def has(name: str, key: str) -> bool:
        return bool(torch._C._dispatch_has_kernel_for_dispatch_key(name, key))

    from torch._C import DispatchKey

    for full in torch._C._dispatch_get_all_op_names():
        if not full.startswith("aten::") or has(full, "CompositeImplicitAutograd"):
            continue
        if has(full, "PrivateUse1") or full == "aten::as_strided_":
            # as_strided_'s generic kernel restrides the wrapper itself (_sync_metadata)
            continue
        explicit = has(full, "CompositeExplicitAutograd")
        if not (explicit or has(full, "CompositeExplicitAutogradNonFunctional")):
            continue
        func = _overload(full)
        if func is None:
            continue
        with contextlib.suppress(RuntimeError):
            lib.impl(full.removeprefix("aten::"), _explicit_kernel(func), "PrivateUse1")
            # Recorded whole: views (expand, transpose, select...), which end in as_strided or
            # alias, every backend's; the NonFunctional kernels torchgen makes for structured
            # ops (add.Tensor -> add.out), whose delegate the resolver follows itself.
            view = any(r.alias_info is not None and not r.alias_info.is_write
                       for r in func._schema.returns)  # fmt: skip
            if explicit and not view and full not in DEVICE_SPECIFIC:
                _EXPLICIT[func] = DispatchKey.CompositeExplicitAutograd


def _explicit_kernel(func: Any) -> Callable[..., Any]:
    def kernel(*args: Any, **kwargs: Any) -> Any:
        return dispatch(func, args, kwargs)

    return kernel


def _device_module(module: Any) -> None:
    """What ``torch.npu`` answers (torch_npu's module, one device): autocast asks for the
    supported dtypes, scripts for availability and counts."""
    import torch

    def nothing(*_: Any, **__: Any) -> None:
        return None

    answers: dict[str, Any] = {
        "get_amp_supported_dtype": lambda: [torch.float16, torch.bfloat16],
        "is_available": lambda: True,
        "device_count": lambda: 1,
        "current_device": lambda: 0,
        "is_bf16_supported": lambda *_, **__: True,
        "is_initialized": lambda: True,
        "set_device": nothing,
        "synchronize": nothing,
        "empty_cache": nothing,
        "manual_seed": lambda seed: torch.manual_seed(seed),
        "manual_seed_all": lambda seed: torch.manual_seed(seed),
        "seed": nothing,
        "seed_all": nothing,
        "get_device_name": lambda *_: "Ascend NPU (opcheck recorded device)",
        "get_device_capability": lambda *_: (8, 0),
        "memory_allocated": lambda *_: 0,
        "max_memory_allocated": lambda *_: 0,
        "memory_reserved": lambda *_: 0,
        "max_memory_reserved": lambda *_: 0,
        "reset_peak_memory_stats": nothing,
        "reset_max_memory_allocated": nothing,
    }
    for name, fn in answers.items():
        if not hasattr(module, name):
            setattr(module, name, fn)


def _plain(x: Any) -> Any:
    cls = _CLASS[0]
    return x.elem if type(x) is cls else x


def _install_autocast() -> None:
    """AutocastPrivateUse1 kernels: cast floating ``npu`` arguments as autocast would."""
    import torch

    # torch core registers no AutocastPrivateUse1 fallthrough: without it every op fails
    # under autocast("npu")
    through = torch.library.Library("_", "IMPL")  # type: ignore[no-untyped-call]
    with contextlib.suppress(RuntimeError):
        through.fallback(torch.library.fallthrough_kernel, "AutocastPrivateUse1")  # type: ignore[no-untyped-call]
        _INSTALLED.append(through)
    lib = torch.library.Library("aten", "IMPL")  # type: ignore[no-untyped-call]
    exclude = torch._C.DispatchKeySet(torch._C.DispatchKey.AutocastPrivateUse1)  # type: ignore[attr-defined]

    def make(packet: Any, overload: str, lower: bool) -> Callable[..., Any]:
        func = getattr(packet, overload)

        def kernel(*args: Any, **kwargs: Any) -> Any:
            target = torch.get_autocast_dtype(DEVICE) if lower else torch.float32
            with torch._C._ExcludeDispatchKeyGuard(exclude):
                args, kwargs = _cast((args, kwargs), target)
                return func(*args, **kwargs)

        return kernel

    for names, lower in ((AUTOCAST_LOWER, True), (AUTOCAST_FP32, False)):
        for name in names:
            packet = getattr(torch.ops.aten, name, None)
            if packet is None:
                continue
            for overload in packet.overloads():
                full = f"aten::{name}" + (f".{overload}" if overload != "default" else "")
                fn = getattr(packet, overload)
                if any(a.alias_info is not None and a.alias_info.is_write
                       for a in fn._schema.arguments):  # fmt: skip
                    continue  # out= and in-place variants are not autocast
                if not torch._C._dispatch_has_kernel(full):
                    continue
                with contextlib.suppress(RuntimeError):
                    lib.impl(  # type: ignore[no-untyped-call]
                        name + (f".{overload}" if overload != "default" else ""),
                        make(packet, overload, lower), "AutocastPrivateUse1",
                    )  # fmt: skip
    _INSTALLED.append(lib)


def _cast(x: Any, dtype: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        # float64 is left alone, as autocast does
        eligible = x.device.type == DEVICE and x.is_floating_point()
        if eligible and x.dtype not in (torch.float64, dtype):
            return x.to(dtype)
        return x
    if isinstance(x, (list, tuple)):
        return type(x)(_cast(v, dtype) for v in x)
    if isinstance(x, dict):
        return {k: _cast(v, dtype) for k, v in x.items()}
    return x


# CPU kernels that lack a dtype a device kernel has (histc on int32: transformers' MoE routing
# on an accelerator): the op runs on a wider dtype and its outputs are cast back, so the run
# goes on; the record keeps the dtypes the device received.
