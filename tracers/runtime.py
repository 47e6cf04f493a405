"""Runtime tracing: run a model on fake tensors that live on a renamed PrivateUse1 device.

The only tracer module that imports torch (lazily, inside functions). It runs inside the
sandboxed worker (``opcheck.tracers.worker``), never in the CLI process for untrusted files.

How it works: the model is built on the meta device (no weights allocated); parameters, buffers
and inputs are replaced by FakeTensors whose device is ``npu`` (PrivateUse1 renamed, with a
Python device guard and hooks registered so library code can create tensors on ``x.device``).
A recording TorchDispatchMode sits above the FakeTensorMode, so it sees exactly the ops that
leave autograd and CompositeImplicitAutograd decomposition, i.e. what a PrivateUse1 backend
receives, with the device-type-dependent choices (dropout, SDPA, RNN) made for PrivateUse1.

Per op it records the call count, input dtypes, the shape of the first tensor argument, the
nn.Module path (``backward``/``optimizer`` outside forward), the first source line outside
torch and the distinct call signatures (dtypes per argument name, output dtypes, ``dtype=``,
non-tensor arguments). Watched CompositeImplicitAutograd ops are recorded at two levels (the op
and, tagged with it as parent, its decomposition; see ``install_composite_kernels``). Only ops touching an ``npu`` tensor are kept: host-only work never reaches the backend.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import (
    MAX_APIS,
    MAX_CHILDREN,
    MAX_SAMPLES,
    MAX_SIGNATURES,
    OpList,
    OpUse,
    Signature,
)
from opcheck.tracers.composites import BACKWARD_FORMULA
from opcheck.tracers.inputs import InputSpec, TensorSpec

if TYPE_CHECKING:
    pass

DEVICE = "npu"
# Namespaces that are Python-level bookkeeping, not kernels a backend receives.
_SKIP_NAMESPACES = frozenset({"prim", "profiler"})
_TRACER_DIR = str(Path(__file__).resolve().parent)


def _torch_dirs() -> tuple[str, ...]:
    import torch

    root = str(Path(torch.__file__).resolve().parent)
    return (root, os.path.dirname(contextlib.__file__))


def setup_device() -> None:
    """Rename PrivateUse1 to ``npu`` and give it a device guard and hooks (idempotent)."""
    import torch

    current = torch._C._get_privateuse1_backend_name()
    if current == DEVICE and hasattr(torch, DEVICE):
        return
    if current not in ("privateuseone", DEVICE):
        raise TraceError(f"PrivateUse1 is already registered as {current!r} in this process")
    from torch.utils.backend_registration import _setup_privateuseone_for_python_backend

    _setup_privateuseone_for_python_backend(rename=DEVICE)


def op_name(func: Any) -> str | None:
    """Canonical ``ns::name.overload`` of an OpOverload, or None for bookkeeping ops."""
    schema = func._schema
    ns, _, name = schema.name.partition("::")
    if ns in _SKIP_NAMESPACES:
        return None
    overload = schema.overload_name
    return f"{ns}::{name}.{overload}" if overload else f"{ns}::{name}"


def _dtype_name(dtype: Any) -> str:
    return str(dtype).removeprefix("torch.")


def _shape(t: Any) -> list[int]:
    out: list[int] = []
    for s in t.shape:
        try:
            out.append(int(s))
        except Exception:  # unbacked / symbolic size: -1 marks "data-dependent"
            out.append(-1)
    return out


@contextlib.contextmanager
def in_context(rec: Recorder | None, name: str) -> Iterator[None]:
    """Mark ``rec`` as inside ``name``, a torch function whose ops a subclass sees differently
    (SUBCLASS_BRANCHES), while the block runs; nothing without a recorder or a name."""
    if rec is None or not name:
        yield
        return
    rec.context.append(name)
    try:
        yield
    finally:
        rec.context.pop()


class Recorder:
    """Collects OpUse rows; the dispatch mode and hooks feed it."""

    def __init__(self) -> None:
        self.ops: dict[tuple[str, tuple[str, ...]], OpUse] = {}
        # CIA ops whose decomposition is running (outermost first): the parents of new records
        self.parents: list[str] = []
        self.stream: Stream | None = None
        self.watched: frozenset[str] = frozenset()  # CIA ops recorded at both levels
        self.module_stack: list[str] = []
        self.enabled = True
        self.phase = ""  # "", "backward", "optimizer": shown in place of a module path
        self.context: list[str] = []  # enclosing watched torch functions (SUBCLASS_BRANCHES)
        self.in_node = 0  # >0 while an autograd node's backward formula runs
        self._torch_dirs = _torch_dirs()

    def user_frame(self) -> Any:
        """Innermost frame outside torch and opcheck's tracer: the user's call site."""
        f = sys._getframe(1)
        while f is not None:
            fn = f.f_code.co_filename
            if (
                not fn.startswith(self._torch_dirs)
                and not fn.startswith(_TRACER_DIR)
                and not fn.startswith("<")
            ):
                return f
            f = f.f_back  # type: ignore[assignment]
        return None

    def location(self) -> str:
        f = self.user_frame()
        return f"{_short_path(f.f_code.co_filename)}:{f.f_lineno}" if f is not None else ""

    def record(
        self, func: Any, args: Any, kwargs: Any, *, composite: bool = False, out: Any = None
    ) -> Signature | None:
        """Count one call; returns its signature (a composite's outputs are filled in by the
        caller once its decomposition has run)."""
        if not self.enabled:
            return None
        name = op_name(func)
        if name is None:
            return None
        if self.context:
            name = _renamed(self.context[-1], name, args)
        elif self.phase == "backward" and not self.in_node and name == "aten::add.Tensor":
            # The engine summing two gradients for one input (between nodes). On plain tensors
            # it accumulates in place when the buffer is not shared, which is the usual case;
            # on subclasses it never does.
            name = "aten::add_.Tensor"
        via = tuple(self.parents)
        key = (name, via)
        use = self.ops.get(key)
        new = use is None
        if use is None:
            use = self.ops[key] = OpUse(
                op=name, parent=via[-1] if via else "", via=list(via), composite=composite
            )
            if via:
                parent = self.ops.get((via[-1], via[:-1]))
                if parent is not None and len(parent.children) < MAX_CHILDREN:
                    parent.children.append(name)
        use.count += 1
        import torch

        first_shape: list[int] | None = None
        for a in _iter_tensors(args, kwargs):
            d = _dtype_name(a.dtype)
            if d not in use.dtypes and len(use.dtypes) < MAX_SAMPLES:
                use.dtypes.append(d)
            if first_shape is None and isinstance(a, torch.Tensor):
                first_shape = _shape(a)
        if (
            first_shape is not None
            and first_shape not in use.shapes
            and len(use.shapes) < MAX_SAMPLES
        ):
            use.shapes.append(first_shape)
        where = self.module_stack[-1] if self.module_stack else self.phase
        if where and where not in use.modules and len(use.modules) < MAX_SAMPLES:
            use.modules.append(where)
        frame = None
        if len(use.locations) < MAX_SAMPLES:
            frame = self.user_frame()
            if frame is not None:
                loc = f"{_short_path(frame.f_code.co_filename)}:{frame.f_lineno}"
                if loc not in use.locations:
                    use.locations.append(loc)
        sig = _signature(func, args, kwargs, out)
        got = next((x for x in use.signatures if x.key == sig.key), None)
        if got is None and len(use.signatures) < MAX_SIGNATURES:
            got = sig
            use.signatures.append(sig)
        if got is not None:
            got.count += 1
            if len(got.apis) < MAX_APIS and not self.phase:
                frame = frame or self.user_frame()
                api = _api_at(frame) if frame is not None else ""
                if api and api not in got.apis:
                    got.apis.append(api)
        if new and self.stream is not None:
            self.stream.op(use)
        return got

    def sorted_ops(self) -> list[OpUse]:
        return sorted(self.ops.values(), key=lambda u: (u.op, u.via))


class Stream:
    """Records as JSON lines, written as they are made: a crash, a timeout or a memory kill of
    the worker still leaves the parent the distinct ops seen so far (counts are only final in
    the result document)."""

    def __init__(self, path: str) -> None:
        # line-buffered: each record reaches the file before the next op runs
        self._f = open(path, "a", encoding="utf-8", buffering=1)  # noqa: SIM115

    def op(self, use: OpUse) -> None:
        self.event({"op": use.op, "via": use.via, "composite": use.composite,
                    "dtypes": use.dtypes, "shapes": use.shapes[:1], "modules": use.modules[:1],
                    "locations": use.locations[:1]})  # fmt: skip

    def event(self, doc: dict[str, Any]) -> None:
        import json

        # disk full / file closed: the final result document still has every record
        with contextlib.suppress(OSError, ValueError):
            self._f.write(json.dumps(doc) + "\n")

    def close(self) -> None:
        self._f.close()


_API_CACHE: dict[tuple[Any, int], str] = {}


def _api_at(frame: Any) -> str:
    """The public API the user's line calls at this instruction: the callee of the call being
    executed, read from the source span of the instruction (co_positions) and looked up in the
    frame (``F.max_pool3d`` -> ``torch.nn.functional.max_pool3d``, ``y.repeat_interleave`` ->
    ``Tensor.repeat_interleave``, ``self.proj`` -> ``torch.nn.Linear``). "" when unknown.

    Not a TorchFunctionMode: an active mode turns off fast paths (TransformerEncoderLayer) a
    real backend takes, which would change the op list.
    """
    key = (frame.f_code, frame.f_lasti)
    if key in _API_CACHE:
        return _API_CACHE[key]
    api = ""
    try:
        api = _resolve_callee(frame, _callee_text(frame))
    except Exception:  # provenance is best effort: never let it break a trace
        api = ""
    _API_CACHE[key] = api
    return api


def _callee_text(frame: Any) -> str:
    """The dotted callee of the call (or subscript) the frame is executing: ``F.max_pool3d``;
    a method on a computed receiver (``f(x).to(...)``) as ``?.to``; ``x[i]`` as ``?[]``."""
    import ast
    import linecache

    positions = list(frame.f_code.co_positions())
    index = frame.f_lasti // 2  # one position per 2-byte code unit
    if index >= len(positions):
        return ""
    line, end_line, col, end_col = positions[index]
    if line is None or col is None or end_line is None or end_col is None:
        return ""
    lines = [linecache.getline(frame.f_code.co_filename, n) for n in range(line, end_line + 1)]
    if end_line == line:
        text = lines[0][col:end_col]
    else:
        text = lines[0][col:] + "".join(lines[1:-1]) + lines[-1][:end_col]
    try:
        node = ast.parse(text.strip(), mode="eval").body
    except SyntaxError:
        return ""
    if isinstance(node, ast.Subscript):
        return "?[]"
    if not isinstance(node, ast.Call):
        return ""
    parts: list[str] = []
    fn = node.func
    while isinstance(fn, ast.Attribute):
        parts.append(fn.attr)
        fn = fn.value
    if isinstance(fn, ast.Name):
        parts.append(fn.id)
    else:
        parts.append("?")
    return ".".join(reversed(parts))


def _resolve_callee(frame: Any, text: str) -> str:
    import builtins

    import torch

    if not text:
        return ""
    if text == "?[]":
        return "Tensor.__getitem__"
    head, *rest = text.split(".")
    if head == "?":  # a method of a value computed on the line: a tensor's, if it has one
        name = rest[-1] if rest else ""
        return f"Tensor.{name}" if name and hasattr(torch.Tensor, name) else ""
    scope = {**vars(builtins), **frame.f_globals, **frame.f_locals}
    if head not in scope:
        return text
    obj = scope[head]
    for part in rest:
        obj = getattr(obj, part)
    if isinstance(obj, torch.nn.Module):
        cls = type(obj)
        mod = cls.__module__
        if mod.startswith("torch.nn.modules."):
            mod = "torch.nn"
        return f"{mod}.{cls.__qualname__}"
    owner = getattr(obj, "__self__", None)
    name = getattr(obj, "__name__", "") or (rest[-1] if rest else head)
    if isinstance(owner, torch.Tensor):
        return f"Tensor.{name}"
    if isinstance(owner, torch.nn.Module):
        return f"{type(owner).__qualname__}.{name}"
    mod = getattr(obj, "__module__", None) or ""
    if mod.startswith("torch._C"):
        return _public_name(obj, name) or text
    return f"{mod}.{name}" if mod else text


# Built-in functions live in torch._C submodules under prefixed names (torch._C._linalg.
# linalg_cholesky is torch.linalg.cholesky); the docs name the public spelling.
_PUBLIC_NAMESPACES = (("torch.nn.functional", ""), ("torch.linalg", "linalg_"),
                      ("torch.special", "special_"), ("torch.fft", "fft_"), ("torch", ""))


def _public_name(obj: Any, name: str) -> str:
    import importlib

    for namespace, prefix in _PUBLIC_NAMESPACES:
        public = name.removeprefix(prefix)
        try:
            module = importlib.import_module(namespace)
        except ImportError:
            continue
        if getattr(module, public, None) is obj:
            return f"{namespace}.{public}"
    return ""


_MAX_LIST = 8  # int lists longer than this are summarised by their length
# always the traced device / a host-side allocation detail: no backend limit depends on them
_NOISE_ARGS = frozenset({"device", "pin_memory"})


def _signature(func: Any, args: Any, kwargs: Any, out: Any) -> Signature:
    """Tensor dtypes per schema argument name, output dtypes, ``dtype=`` and the non-default
    non-tensor arguments, compactly (a list of tensors by its dtypes, a long list by its
    length)."""
    import torch

    sig = Signature()
    schema = func._schema
    for i, a in enumerate(schema.arguments):
        if not a.kwarg_only and i < len(args):
            v = args[i]
        elif a.name in kwargs:
            v = kwargs[a.name]
        else:
            continue
        if v is None or a.name in _NOISE_ARGS:
            continue
        if isinstance(v, torch.Tensor):
            sig.inputs[a.name] = _dtype_name(v.dtype)
            continue
        if isinstance(v, (list, tuple)) and any(isinstance(x, torch.Tensor) for x in v):
            dts = dict.fromkeys(_dtype_name(x.dtype) for x in v if isinstance(x, torch.Tensor))
            sig.inputs[a.name] = ",".join(dts)
            continue
        if isinstance(v, torch.dtype):
            if a.name == "dtype":
                sig.dtype = _dtype_name(v)
            else:
                sig.args[a.name] = _dtype_name(v)
            continue
        if a.has_default_value():
            try:
                if v == a.default_value:
                    continue
            except Exception:  # a SymInt or an object that does not compare: keep it
                pass
        sig.args[a.name] = _compact_arg(v)
    outs = [_dtype_name(t.dtype) for t in _iter_tensors(out, None)]
    sig.outputs = outs
    return sig


def _compact_arg(v: Any) -> Any:
    import torch

    if isinstance(v, (bool, str, int, float)):
        return v
    if isinstance(v, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        try:
            if isinstance(v, torch.SymInt):
                return int(v)
            return bool(v) if isinstance(v, torch.SymBool) else float(v)
        except Exception:  # unbacked: data-dependent
            return str(v)
    if isinstance(v, (list, tuple)):
        if len(v) > _MAX_LIST:
            return f"<{len(v)} values>"
        flat = (bool, int, float, str, torch.SymInt, torch.SymFloat)
        return [_compact_arg(x) if isinstance(x, flat) else str(x) for x in v]
    if isinstance(v, torch.device):
        return v.type
    return str(v).removeprefix("torch.")


def _short_path(fn: str) -> str:
    marker = "site-packages" + os.sep
    i = fn.rfind(marker)
    if i >= 0:
        return fn[i + len(marker) :]
    # the sandbox runs in a scratch directory: paths are shown relative to the caller's cwd
    base = os.environ.get("OPCHECK_TRACE_CWD") or os.getcwd()
    try:
        rel = os.path.relpath(fn, base)
    except ValueError:
        return fn
    return fn if rel.startswith("..") else rel


def _iter_tensors(args: Any, kwargs: Any) -> Iterator[Any]:
    import torch

    stack: list[Any] = [args, kwargs]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            yield x
        elif isinstance(x, (list, tuple)):
            stack.extend(reversed(x))
        elif isinstance(x, dict):
            stack.extend(x.values())


def _on_device(x: Any) -> bool:
    return any(t.device.type == DEVICE for t in _iter_tensors(x, None))


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
            except Exception:
                # the op the trace stopped at (data-dependent output shape, ...) was called:
                # keep it in the partial list
                if _on_device((args, kwargs)):
                    recorder.record(func, args, kwargs)
                raise
            # Ops on host tensors only (optimizer step counters, Python scalars lifted to
            # tensors) never reach the NPU backend.
            if _on_device((args, kwargs)) or _on_device(out):
                recorder.record(func, args, kwargs, out=out)
            return out

    return RecordingMode()  # type: ignore[no-untyped-call]


# Where C++ composite code branches on "is any tensor a subclass / is a dispatch mode on"
# (at::areAnyTensorSubclassLike), a real backend takes the other branch than a fake trace.
# Keyed by the enclosing torch function; maps what the fake trace sees to what the backend
# gets. Verified against a real PrivateUse1 backend in tests/test_tracers_backend.py.
SUBCLASS_BRANCHES: dict[str, dict[str, str]] = {
    # math SDPA: attn.add_(mask) on plain tensors, attn.add(mask) on subclasses
    "scaled_dot_product_attention": {"aten::add.Tensor": "aten::add_.Tensor"},
    # reshape of a non-contiguous but viewable tensor: _reshape_alias on plain tensors, view on
    # subclasses (contiguous inputs take view in both; see _renamed)
    "reshape": {"aten::view": "aten::_reshape_alias"},
}


def _renamed(context: str, name: str, args: Any) -> str:
    new = SUBCLASS_BRANCHES.get(context, {}).get(name, name)
    if context == "reshape" and new != name:
        first = args[0] if args else None
        if first is None or first.is_contiguous():
            return name
    return new


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
_ACTIVE: list[tuple[Any, Recorder]] = []  # (fake_mode, recorder) of the running trace
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


_CIA_CACHE: dict[Any, bool] = {}


def is_composite_implicit(func: Any) -> bool:
    known = _CIA_CACHE.get(func)
    if known is None:
        import torch

        try:
            known = bool(
                torch._C._dispatch_has_kernel_for_dispatch_key(
                    func.name(), "CompositeImplicitAutograd"
                )
            )
        except RuntimeError:  # prim:: ops registered only with the JIT, not the dispatcher
            known = False
        _CIA_CACHE[func] = known
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
    rec: Recorder | None, func: Any, args: Any, kwargs: Any
) -> Iterator[list[Any]]:
    """Record a watched CIA op and make it the parent of the ops recorded inside; the caller
    puts the op's result in the yielded list (for its output dtypes)."""
    result: list[Any] = []
    name = op_name(func)
    # kernels stay installed for the process: record only the ops this trace watches
    if rec is None or not rec.enabled or name is None or name not in rec.watched:
        yield result
        return
    sig = rec.record(func, args, kwargs, composite=True)
    rec.parents.append(name)
    try:
        yield result
    finally:
        rec.parents.pop()
    if sig is not None and not sig.outputs and result:
        sig.outputs = [_dtype_name(t.dtype) for t in _iter_tensors(result[0], None)]


# ---------------------------------------------------------------- model loading


def load_factory(spec: str) -> Callable[..., Any]:
    """``pkg.module:Name`` or ``path/to/file.py:Name`` -> the class, factory or nn.Module.

    A file is imported under its own module name, never as ``__main__``: its
    ``if __name__ == "__main__":`` block (training loops, downloads) does not run."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise TraceError(f"--model {spec!r}: expected pkg.module:ClassOrFactory or file.py:factory")
    try:
        if target.endswith(".py") or os.sep in target or "/" in target:
            path = Path(target)
            if not path.is_absolute():  # relative to the caller, not the sandbox's scratch dir
                path = Path(os.environ.get("OPCHECK_TRACE_CWD") or os.getcwd()) / path
            path = path.resolve()
            if not path.is_file():
                raise TraceError(f"--model {spec!r}: file {target} not found")
            mod_name = "opcheck_model_" + path.stem
            s = importlib.util.spec_from_file_location(mod_name, path)
            if s is None or s.loader is None:
                raise TraceError(f"--model {spec!r}: cannot import {target}")
            module = importlib.util.module_from_spec(s)
            sys.modules[mod_name] = module
            sys.path.insert(0, str(path.parent))
            s.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except (TraceError, MemoryError):
        raise
    except Exception as exc:
        raise TraceError(
            f"--model {spec!r}: importing {target} failed: {type(exc).__name__}: {exc}"
        ) from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TraceError(f"--model {spec!r}: {target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TraceError(f"--model {spec!r}: {attr} is not a class or function")
    return obj  # type: ignore[no-any-return,unused-ignore]


def build_from_factory(spec: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Call the factory on the meta device. It may return a module or (module, example_args)
    or (module, example_args, example_kwargs). ``NAME`` may also be a module-level nn.Module
    instance (built when the file was imported; its tensors are replaced by fakes)."""
    import torch

    factory = load_factory(spec)
    if isinstance(factory, torch.nn.Module):
        return factory, (), {}
    try:
        with torch.device("meta"):
            made = factory()
    except MemoryError:
        raise
    except Exception as exc:
        raise TraceError(
            f"--model {spec!r}: building the model failed: {type(exc).__name__}: {exc}"
        ) from None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if isinstance(made, tuple):
        model = made[0]
        if len(made) > 1:
            args = tuple(made[1]) if isinstance(made[1], (tuple, list)) else (made[1],)
        if len(made) > 2 and isinstance(made[2], dict):
            kwargs = dict(made[2])
    else:
        model = made
    if not isinstance(model, torch.nn.Module):
        raise TraceError(f"--model {spec!r}: returned {type(model).__name__}, not an nn.Module")
    return model, args, kwargs


# ---------------------------------------------------------------- fake conversion


def _fake_like(t: Any, *, requires_grad: bool | None = None) -> Any:
    import torch

    out = torch.empty_strided(tuple(t.shape), tuple(t.stride()), dtype=t.dtype, device=DEVICE)
    rg = t.requires_grad if requires_grad is None else requires_grad
    if rg and (out.is_floating_point() or out.is_complex()):
        out.requires_grad_(True)
    return out


def _fake_from_spec(spec: TensorSpec) -> Any:
    import torch

    dtype = getattr(torch, spec.dtype)
    return torch.empty(spec.shape, dtype=dtype, device=DEVICE)


def move_module(model: Any) -> None:
    """Replace every parameter and buffer by a fake tensor on the npu device (in place)."""
    import torch

    memo: dict[int, Any] = {}
    for mod in model.modules():
        for key, p in list(mod._parameters.items()):
            if p is None:
                continue
            if id(p) not in memo:
                memo[id(p)] = torch.nn.Parameter(
                    _fake_like(p, requires_grad=False), p.requires_grad
                )
            mod._parameters[key] = memo[id(p)]
        for key, b in list(mod._buffers.items()):
            if b is None:
                continue
            if id(b) not in memo:
                memo[id(b)] = _fake_like(b, requires_grad=False)
            mod._buffers[key] = memo[id(b)]
        # Plain tensor attributes (not registered as buffers) would stay on meta otherwise.
        for key, val in list(vars(mod).items()):
            if isinstance(val, torch.Tensor) and not key.startswith("_"):
                if id(val) not in memo:
                    memo[id(val)] = _fake_like(val, requires_grad=False)
                setattr(mod, key, memo[id(val)])


def _convert_example(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return _fake_like(x, requires_grad=False)
    if isinstance(x, (list, tuple)):
        return type(x)(_convert_example(v) for v in x)
    if isinstance(x, dict):
        return {k: _convert_example(v) for k, v in x.items()}
    return x


def _floating_outputs(out: Any) -> list[Any]:
    import torch

    found: list[Any] = []
    stack = [out]
    while stack:
        x = stack.pop()
        if isinstance(x, torch.Tensor):
            if x.requires_grad and (x.is_floating_point() or x.is_complex()):
                found.append(x)
        elif isinstance(x, (list, tuple)):
            stack.extend(x)
        elif isinstance(x, dict):
            stack.extend(x.values())
        elif hasattr(x, "to_tuple"):  # transformers ModelOutput
            stack.extend(x.to_tuple())
    return found


# ---------------------------------------------------------------- tracing


class DataDependent(Exception):
    """Control flow depended on tensor values the fake trace does not have."""


def _module_hooks(model: Any, recorder: Recorder) -> list[Any]:
    """Track the module path with *global* hooks: hooks on the modules themselves disable
    fast paths (TransformerEncoderLayer checks for them) and would change the op list."""
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    names = {id(m): n for n, m in model.named_modules()}

    def pre(mod: Any, _args: Any) -> None:
        recorder.module_stack.append(names.get(id(mod)) or type(mod).__name__)

    def post(mod: Any, _args: Any, _out: Any) -> None:
        if recorder.module_stack:
            recorder.module_stack.pop()

    return [
        register_module_forward_pre_hook(pre),
        register_module_forward_hook(post, always_call=True),
    ]


def trace_module(
    model: Any,
    inputs: InputSpec,
    *,
    example_args: tuple[Any, ...] = (),
    example_kwargs: dict[str, Any] | None = None,
    train: bool = False,
    label: str = "",
    method: str = "runtime",
    composites: Iterable[str] = (),
    stream: Stream | None = None,
) -> OpList:
    """Trace one forward (and, with ``train``, backward + optimizer step) of ``model``.

    ``composites``: CompositeImplicitAutograd ops to record at both levels (the op and its
    decomposition); ``stream``: where records go as they are made (crash-proof partial result).
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    setup_device()
    _install_escape_kernels()
    composites = frozenset(composites)
    install_composite_kernels(composites)
    recorder = Recorder()
    recorder.watched = composites & _COMPOSITE_INSTALLED
    recorder.stream = stream
    notes: list[str] = []
    fake_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    if inputs.empty and not example_args and not example_kwargs:
        raise TraceError(
            f"{label or 'model'}: no inputs: give --input-shape 1,3,224,224 or --input-spec "
            "(or a factory returning (model, example_args))"
        )
    with fake_mode:
        move_module(model)
        if not inputs.empty:
            args = tuple(_fake_from_spec(s) for s in inputs.args)
            # the factory's non-tensor options (use_cache=...) still apply
            kwargs = {
                k: v
                for k, v in (example_kwargs or {}).items()
                if not isinstance(v, torch.Tensor) and k not in inputs.kwargs
            }
            kwargs.update({k: _fake_from_spec(v) for k, v in inputs.kwargs.items()})
        else:
            args = tuple(_convert_example(a) for a in example_args)
            kwargs = {k: _convert_example(v) for k, v in (example_kwargs or {}).items()}
        try:
            model.train(train)
        except NotImplementedError:
            # torch.export's unlifted module refuses train()/eval(): it keeps export's mode
            notes.append("the exported program keeps the train/eval mode it was exported in")
        handles = _module_hooks(model, recorder)
        _ACTIVE.append((fake_mode, recorder))
        mode = _make_mode(recorder)
        try:
            grad = torch.enable_grad() if train else torch.no_grad()
            with grad, _watch_functions(recorder), mode:
                out = model(*args, **kwargs)
                if train:
                    recorder.enabled = False
                    outs = _floating_outputs(out)
                    if not outs:
                        raise TraceError(
                            f"{label}: --train: the model returned no differentiable tensor"
                        )
                    loss = sum(o.sum() for o in outs)
                    recorder.enabled = True
                    recorder.phase = "backward"
                    if stream is not None:
                        stream.event({"phase": "backward"})
                    _mark_nodes(loss.grad_fn, recorder)
                    loss.backward()
                    recorder.phase = "optimizer"
                    if stream is not None:
                        stream.event({"phase": "optimizer"})
                    params = [p for p in model.parameters() if p.requires_grad]
                    # FakeTensor parameters are not plain Tensors, so AdamW would pick its
                    # per-tensor loop; on npu (a foreach-capable device) it uses _foreach_ ops.
                    opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
                    opt.step()
                    notes.append(
                        "train: loss = sum of the outputs; backward and one AdamW step traced"
                    )
        except (TraceError, MemoryError):
            raise
        except Exception as exc:
            partial = _partial(recorder, label, method, inputs)
            raise _classify_failure(exc, partial) from None
        finally:
            _ACTIVE.pop()
            for h in handles:
                h.remove()
    ol = OpList(
        model=label,
        method=method,
        ir="runtime-dispatch",
        torch_version=torch.__version__.split("+")[0],
        mode="train" if train else "inference",
        notes=notes,
        ops=recorder.sorted_ops(),
    )
    if any(-1 in s for u in ol.ops for s in u.shapes):
        ol.notes.append(
            "data-dependent output shapes (e.g. nonzero, boolean masking) traced symbolically "
            "(shape -1): supported on NPU but slow on graph paths"
        )
    return ol


def _mark_nodes(root: Any, recorder: Recorder) -> None:
    """Hook every autograd node so the recorder knows when a backward formula is running:
    ops outside any node are the engine's own gradient accumulation."""
    seen: set[int] = set()
    stack = [root]

    def pre(*_: Any) -> None:
        recorder.in_node += 1

    def post(*_: Any) -> None:
        recorder.in_node -= 1

    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        node.register_prehook(pre)
        node.register_hook(post)
        stack.extend(fn for fn, _ in node.next_functions)


class PartialTrace(Exception):
    """A trace stopped early; carries what was recorded and why."""

    def __init__(self, message: str, partial: OpList) -> None:
        super().__init__(message)
        self.partial = partial


def _partial(recorder: Recorder, label: str, method: str, inputs: InputSpec) -> OpList:
    import torch

    return OpList(
        model=label,
        method=method,
        ir="runtime-dispatch",
        torch_version=torch.__version__.split("+")[0],
        ops=recorder.sorted_ops(),
    )


def _user_frame(tb: Any) -> str:
    """Innermost traceback frame outside torch: the line whose control flow failed."""
    dirs = _torch_dirs()
    where = ""
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not fn.startswith(dirs) and not fn.startswith(_TRACER_DIR):
            where = f"{_short_path(fn)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def _classify_failure(exc: Exception, partial: OpList) -> Exception:
    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    where = _user_frame(exc.__traceback__)
    if isinstance(exc, DataDependent):
        text = str(exc)
    data_dep = isinstance(exc, DataDependent) or name in (
        "GuardOnDataDependentSymNode", "DataDependentOutputException",
        "DynamicOutputShapeException", "UserError",
    ) or "data-dependent" in text.lower() or "data dependent" in text.lower()  # fmt: skip
    if data_dep:
        what = text if isinstance(exc, DataDependent) or text == name else f"{name}: {text}"
        msg = (
            f"data-dependent control flow at {where or 'an unknown line'}: the branch depends on "
            f"tensor values the fake trace does not have ({what})"
        )
        partial.complete, partial.stopped = False, msg
        return PartialTrace(msg, partial)
    msg = f"tracing failed at {where or '?'}: {name}: {text}"
    partial.complete, partial.stopped = False, msg
    return PartialTrace(msg, partial)


# ---------------------------------------------------------------- file loading (in the worker)


def load_model_file(
    path: str, kind: str, trust: bool
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Load a model file for a runtime trace. Only called in the sandbox; gated by ``trust``."""
    import torch

    if kind in ("pickled_module", "legacy_torch"):
        if not trust:
            raise TraceError(
                f"{path}: loading a pickled nn.Module runs arbitrary code: pass --trust"
            )
        try:
            obj = torch.load(path, map_location="meta", weights_only=False)
        except Exception as exc:
            raise TraceError(f"{path}: torch.load failed: {type(exc).__name__}: {exc}") from None
        if isinstance(obj, dict):
            # checkpoints often pickle the whole model under a key: {"model": model, "epoch": 3}
            found = [v for v in obj.values() if isinstance(v, torch.nn.Module)]
            if len(found) == 1:
                obj = found[0]
        if not isinstance(obj, torch.nn.Module):
            raise TraceError(f"{path}: holds a {type(obj).__name__}, not an nn.Module")
        return obj, (), {}
    if kind == "export_pt2":
        if not trust:
            raise TraceError(f"{path}: torch.export.load can unpickle code: pass --trust")
        try:
            ep = torch.export.load(path)
        except Exception as exc:
            raise TraceError(
                f"{path}: torch.export.load failed: {type(exc).__name__}: {exc}"
            ) from None
        ex_args: tuple[Any, ...] = ()
        ex_kwargs: dict[str, Any] = {}
        if ep.example_inputs is not None:
            ex_args, ex_kwargs = ep.example_inputs
        return ep.module(), tuple(ex_args), dict(ex_kwargs)
    raise TraceError(f"{path}: no runtime loader for {kind} files")
