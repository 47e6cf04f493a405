"""CUDA → ``npu`` redirection for ``opcheck run``, as torch_npu's ``transfer_to_npu`` does on
real hardware, so a script written for CUDA runs unchanged on the recorded device.

Redirected: ``torch.cuda.is_available()`` and the ``torch.cuda`` helpers scripts call,
``.cuda()`` on tensors and modules, a ``cuda`` device given to ``.to()``, factory functions,
``new_*`` methods, ``torch.load(map_location=...)`` (and checkpoints saved on CUDA),
``torch.Generator``, ``autocast``/``GradScaler`` and ``with torch.device(...)``.

What needs real hardware is reported as a finding with the script's line instead of crashing
the run: NCCL process groups and collectives (HCCL on the NPU; one process here), DDP /
DataParallel wrappers, CUDA-only extensions (flash-attn, apex, bitsandbytes, triton, ...),
``torch.compile``. Only imported in the sandboxed worker; patches are process-wide and made
once (the worker runs one script).
"""

from __future__ import annotations

import contextlib
import functools
import importlib.abc
import os
import sys
from collections.abc import Callable, Iterator, Sequence
from types import SimpleNamespace
from typing import Any

from opcheck.tracers.collectives import OPS, Collectives, stub
from opcheck.tracers.device import _TRACER_DIR, DEVICE, _short_path, _torch_dirs

# extension packages with CUDA-only kernels: what each is on the NPU
CUDA_ONLY: dict[str, str] = {
    "flash_attn": "CUDA-only; on the NPU use torch_npu.npu_fusion_attention or SDPA",
    "apex": "CUDA build of NVIDIA apex; Ascend ships its own apex port (fused optimizers, amp)",
    "bitsandbytes": "CUDA-only quantisation kernels; no NPU build",
    "triton": "Triton kernels need a GPU backend (triton-ascend is separate)",
    "xformers": "CUDA-only attention kernels; use SDPA or torch_npu fusion attention",
    "mamba_ssm": "CUDA-only selective-scan kernels",
    "causal_conv1d": "CUDA-only kernels",
    "pycuda": "CUDA driver bindings",
    "cupy": "CUDA arrays",
}
_DEVICE_KWARGS = ("device", "device_type", "map_location", "device_id")
_FACTORIES = (
    "tensor", "as_tensor", "empty", "empty_strided", "empty_like", "zeros", "zeros_like",
    "ones", "ones_like", "full", "full_like", "rand", "rand_like", "randn", "randn_like",
    "randint", "randint_like", "randperm", "arange", "range", "linspace", "logspace", "eye",
    "normal", "scalar_tensor", "tril_indices", "triu_indices", "hann_window",
    "hamming_window", "bartlett_window", "blackman_window", "kaiser_window", "frombuffer",
    "sparse_coo_tensor", "set_default_device", "autocast",
)  # fmt: skip
_TENSOR_METHODS = ("new_empty", "new_empty_strided", "new_full", "new_ones", "new_tensor",
                   "new_zeros", "to")  # fmt: skip


class Findings:
    """What the script does that the recorded device cannot run, one line each, in order."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self._torch_dirs: tuple[str, ...] = ()
        self.collectives = Collectives()

    def add(self, what: str, *, depth: int = 2) -> None:
        where = self.user_line(depth + 1)
        line = f"{where}: {what}" if where else what
        if line not in self.lines:
            self.lines.append(line)

    def user_line(self, depth: int = 1) -> str:
        if not self._torch_dirs:
            self._torch_dirs = _torch_dirs()
        f: Any = sys._getframe(depth)
        while f is not None:
            fn = f.f_code.co_filename
            if not (fn.startswith(self._torch_dirs) or fn.startswith(_TRACER_DIR)
                    or fn.startswith("<") or "importlib" in fn):  # fmt: skip
                return f"{_short_path(fn)}:{f.f_lineno}"
            f = f.f_back
        return ""

    def from_user_code(self, depth: int = 1) -> bool:
        """Whether the import statement running is in the user's own file (not in torch or
        an installed library probing what is available)."""
        if not self._torch_dirs:
            self._torch_dirs = _torch_dirs()
        f: Any = sys._getframe(depth)
        while f is not None and (f.f_code.co_filename.startswith("<frozen importlib")
                                 or "importlib" in f.f_code.co_filename):  # fmt: skip
            f = f.f_back
        if f is None:
            return False
        fn = f.f_code.co_filename
        return not (fn.startswith(self._torch_dirs) or fn.startswith(_TRACER_DIR)
                    or fn.startswith("<") or "site-packages" in fn
                    or "dist-packages" in fn)  # fmt: skip


def _swap(x: Any, *, ints: bool = False) -> Any:
    import torch

    if isinstance(x, str) and "cuda" in x:
        return x.replace("cuda", DEVICE)
    if isinstance(x, torch.device) and x.type == "cuda":
        return torch.device(DEVICE, x.index) if x.index is not None else torch.device(DEVICE)
    if ints and isinstance(x, int) and not isinstance(x, bool):
        return torch.device(DEVICE, x)
    if isinstance(x, dict):
        return {_swap(k): _swap(v) for k, v in x.items()}
    return x


def _redirected(fn: Callable[..., Any], *, ints: bool = False) -> Callable[..., Any]:
    """``fn`` with every CUDA device in its arguments replaced by ``npu``."""

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        args = tuple(_swap(a, ints=ints) for a in args)
        for key in _DEVICE_KWARGS:
            if key in kwargs:
                kwargs[key] = _swap(kwargs[key], ints=True)
        return fn(*args, **kwargs)

    call.__opcheck_redirected__ = True  # type: ignore[attr-defined]
    return call


_DONE: list[Findings] = []


def install(findings: Findings) -> Findings:
    """Apply the redirection (once per process); later calls return the first Findings."""
    if _DONE:
        return _DONE[0]
    _DONE.append(findings)
    import torch

    for name in _FACTORIES:
        fn = getattr(torch, name, None)
        if fn is not None:
            setattr(torch, name, _redirected(fn))
    for name in _TENSOR_METHODS:
        setattr(torch.Tensor, name, _redirected(getattr(torch.Tensor, name), ints=name == "to"))
    torch.nn.Module.to = _redirected(torch.nn.Module.to, ints=True)  # type: ignore[method-assign]
    torch.nn.Module.to_empty = _redirected(torch.nn.Module.to_empty)  # type: ignore[method-assign]

    def tensor_cuda(self: Any, device: Any = None, non_blocking: bool = False, **_: Any) -> Any:
        return self.to(DEVICE, non_blocking=non_blocking)

    def module_cuda(self: Any, device: Any = None) -> Any:
        return self.to(DEVICE)

    torch.Tensor.cuda = tensor_cuda  # type: ignore[method-assign,assignment]
    torch.nn.Module.cuda = module_cuda  # type: ignore[method-assign]
    torch.Tensor.is_cuda = property(lambda self: self.device.type in ("cuda", DEVICE))  # type: ignore[assignment]

    def pin_memory(self: Any, device: Any = None) -> Any:
        # host memory is all there is here: pinning changes transfer speed, not the ops
        return self

    torch.Tensor.pin_memory = pin_memory  # type: ignore[method-assign]
    _patch_cuda_module(torch, findings)
    _patch_load(torch)
    _patch_generator(torch)
    _patch_amp(torch)
    _patch_distributed(torch, findings)
    _patch_compile(torch, findings)
    from torch.utils import _device

    _device.DeviceContext.__init__ = _redirected(_device.DeviceContext.__init__)  # type: ignore[method-assign]
    sys.meta_path.insert(0, _CudaOnlyBlocker(findings))
    with contextlib.suppress(ImportError, AttributeError):
        import torch.utils._triton as _triton

        _triton.has_triton = lambda: False  # type: ignore[assignment]
    return findings


def _patch_cuda_module(torch: Any, findings: Findings) -> None:
    npu = getattr(torch, DEVICE)
    cuda = torch.cuda

    def properties(*_: Any) -> Any:
        return SimpleNamespace(name=npu.get_device_name(), total_memory=64 * 1024**3,
                               major=8, minor=0, multi_processor_count=32)  # fmt: skip

    same = ("is_available", "device_count", "current_device", "set_device", "synchronize",
            "empty_cache", "manual_seed", "manual_seed_all", "seed", "seed_all",
            "get_device_name", "get_device_capability", "is_bf16_supported", "is_initialized",
            "memory_allocated", "max_memory_allocated", "memory_reserved",
            "max_memory_reserved", "reset_peak_memory_stats", "reset_max_memory_allocated")  # fmt: skip
    for name in same:
        # one function object per name: torch._dynamo's rules reject one object under two
        setattr(cuda, name, _forward(npu, name))
    cuda.get_device_properties = properties
    cuda.mem_get_info = lambda *_: (48 * 1024**3, 64 * 1024**3)
    cuda.init = lambda: None
    cuda.memory_summary = lambda *_, **__: ""
    cuda.memory_stats = lambda *_, **__: {}

    @contextlib.contextmanager
    def nothing(*_: Any, **__: Any) -> Iterator[None]:
        yield

    cuda.device = nothing
    cuda.stream = nothing

    class Event:
        def __init__(self, *_: Any, **__: Any) -> None:
            import time

            self._t = time.perf_counter()

        def record(self, *_: Any) -> None:
            import time

            self._t = time.perf_counter()

        def synchronize(self) -> None:
            return None

        def wait(self, *_: Any) -> None:
            return None

        def query(self) -> bool:
            return True

        def elapsed_time(self, other: Any) -> float:
            return float((other._t - self._t) * 1000.0)

    class Stream:
        def __init__(self, *_: Any, **__: Any) -> None:
            pass

        def synchronize(self) -> None:
            return None

        def wait_stream(self, *_: Any) -> None:
            return None

        def wait_event(self, *_: Any) -> None:
            return None

        def record_event(self, *_: Any) -> Event:
            return Event()

    cuda.Event = Event
    cuda.Stream = Stream
    cuda.current_stream = lambda *_: Stream()
    cuda.default_stream = lambda *_: Stream()
    if hasattr(cuda, "amp"):

        def cuda_autocast(enabled: bool = True, dtype: Any = torch.float16,
                          cache_enabled: bool = True) -> Any:  # fmt: skip
            return torch.autocast(DEVICE, dtype=dtype, enabled=enabled,
                                  cache_enabled=cache_enabled)  # fmt: skip

        cuda.amp.autocast = cuda_autocast
        cuda.amp.GradScaler = functools.partial(torch.amp.GradScaler, DEVICE)
    with contextlib.suppress(ImportError):
        import torch.distributed as dist

        dist.is_nccl_available = lambda: True


def _forward(module: Any, name: str) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        return getattr(module, name)(*args, **kwargs)

    call.__name__ = call.__qualname__ = name
    return call


def _patch_load(torch: Any) -> None:
    original = torch.load

    @functools.wraps(original)
    def load(f: Any, map_location: Any = None, *args: Any, **kwargs: Any) -> Any:
        wanted = _swap(map_location, ints=True)
        seen: set[str] = set()

        def host(storage: Any, location: str) -> Any:
            seen.add(str(location))
            return storage

        moved = wanted is not None and not callable(wanted) and DEVICE in str(wanted)
        if wanted is None or moved:
            # Storages are restored on the host, then the tensors move to the device: the
            # recorded device keeps tensors, not storages.
            obj = original(f, *args, map_location=host, **kwargs)
            if moved or any(loc.startswith(("cuda", DEVICE)) for loc in seen):
                obj = _to_device(obj)
            return obj
        return original(f, *args, map_location=wanted, **kwargs)

    torch.load = load


def _to_device(obj: Any) -> Any:
    import torch

    if isinstance(obj, torch.nn.Module):
        return obj.to(DEVICE)
    if isinstance(obj, torch.Tensor):
        return obj.to(DEVICE)
    if isinstance(obj, dict):
        return type(obj)((k, _to_device(v)) for k, v in obj.items())
    if isinstance(obj, (list, tuple)) and not hasattr(obj, "_fields"):
        return type(obj)(_to_device(v) for v in obj)
    return obj


def _patch_generator(torch: Any) -> None:
    original = torch.Generator

    class GeneratorMeta(type):
        def __instancecheck__(cls, inst: Any) -> bool:
            return isinstance(inst, original)

        def __call__(cls, device: Any = "cpu") -> Any:
            # a device generator draws on the host here: the data is host data
            dev = _swap(device)
            if DEVICE in str(dev):
                dev = "cpu"
            return original(dev)

    class Generator(metaclass=GeneratorMeta):
        pass

    torch.Generator = Generator


def _patch_amp(torch: Any) -> None:
    amp = torch.amp
    amp.autocast = _redirected(amp.autocast)
    original = amp.GradScaler

    class GradScalerMeta(type):
        def __instancecheck__(cls, inst: Any) -> bool:
            return isinstance(inst, original)

        def __call__(cls, device: str = "cuda", *args: Any, **kwargs: Any) -> Any:
            return original(_swap(device), *args, **kwargs)

    class GradScaler(metaclass=GradScalerMeta):
        pass

    amp.GradScaler = GradScaler
    with contextlib.suppress(AttributeError):
        torch.amp.grad_scaler.GradScaler = GradScaler


def _patch_distributed(torch: Any, findings: Findings) -> None:
    try:
        import torch.distributed as dist
    except ImportError:
        return
    if not dist.is_available():
        return
    init = dist.init_process_group

    @functools.wraps(init)
    def init_process_group(backend: Any = None, *args: Any, **kwargs: Any) -> Any:
        name = backend or kwargs.get("backend") or "default"
        with contextlib.suppress(TypeError, ValueError):
            findings.collectives.world_size = int(kwargs.get("world_size") or
                                                  (args[2] if len(args) > 2 else 0) or 0)
        findings.add(
            f"distributed: init_process_group(backend={name!r}): on the NPU the backend is HCCL "
            "(nccl is redirected to hccl); run here as one process, collectives not executed"
        )
        kwargs.pop("backend", None)
        for key in ("init_method", "world_size", "rank", "store", "device_id"):
            kwargs.pop(key, None)
        store = dist.HashStore()  # type: ignore[attr-defined]
        return init("gloo", store=store, rank=0, world_size=1)

    dist.init_process_group = init_process_group
    for name in OPS:
        fn = getattr(dist, name, None)
        if fn is not None:
            setattr(dist, name, _collective(name, findings))

    class Passthrough(torch.nn.Module):  # type: ignore[misc]
        """DDP / DataParallel of one process: the wrapped module itself."""

        def __init__(self, module: Any, *_: Any, **__: Any) -> None:
            super().__init__()
            findings.add(
                f"{type(self).__name__}: model replication and gradient all-reduce run on HCCL "
                "on the NPU; recorded here as a single process", depth=2,
            )  # fmt: skip
            self.module = module

        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return self.module(*args, **kwargs)

        @contextlib.contextmanager
        def no_sync(self) -> Iterator[None]:
            yield

    import torch.multiprocessing as mp

    def spawn(fn: Callable[..., Any], args: tuple[Any, ...] = (), nprocs: int = 1,
              *_: Any, **__: Any) -> None:  # fmt: skip
        findings.add(
            f"torch.multiprocessing.spawn(nprocs={nprocs}): one process per NPU on real "
            "hardware; run here as rank 0 only"
        )
        fn(0, *args)

    mp.spawn = spawn  # type: ignore[attr-defined]
    ddp = type("DistributedDataParallel", (Passthrough,), {})
    dp = type("DataParallel", (Passthrough,), {})
    torch.nn.parallel.DistributedDataParallel = ddp
    torch.nn.parallel.DataParallel = dp
    torch.nn.DataParallel = dp
    with contextlib.suppress(AttributeError, ImportError):
        import torch.nn.parallel.distributed as _d

        _d.DistributedDataParallel = ddp  # type: ignore[misc,assignment]


def _collective(name: str, findings: Findings) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        findings.add(f"distributed: {name}: an HCCL collective on the NPU; not executed here "
                     "(recorded as a c10d op and checked)")
        findings.collectives.record(name, args, kwargs, findings.user_line(2))
        stub(name, args, kwargs)
        if name in ("isend", "irecv") or kwargs.get("async_op"):
            return _DoneWork()
        return None

    return call


class _DoneWork:
    """The work handle of an asynchronous collective that was not run: already complete."""

    def wait(self, *_: Any, **__: Any) -> bool:
        return True

    def is_completed(self) -> bool:
        return True


def _patch_compile(torch: Any, findings: Findings) -> None:
    def compile(model: Any = None, *args: Any, **kwargs: Any) -> Any:
        findings.add(
            "torch.compile: runs eagerly here; on the NPU compiled graphs go through "
            "torch_npu's backends (torchair), whose op coverage this run does not check"
        )
        if model is None:
            return lambda m: m
        return model

    torch.compile = compile


class _CudaOnlyBlocker(importlib.abc.MetaPathFinder):
    """Imports of CUDA-only extensions from the user's code fail as not installed (scripts
    usually fall back), with a finding at the import line."""

    def __init__(self, findings: Findings) -> None:
        self.findings = findings

    def find_spec(
        self, fullname: str, path: Sequence[str] | None = None, target: Any = None
    ) -> Any:
        top = fullname.partition(".")[0]
        why = CUDA_ONLY.get(top)
        if why is None or os.environ.get("OPCHECK_RUN_ALLOW_CUDA_EXT"):
            return None
        if not self.findings.from_user_code(2):
            return None  # a library probing for it: answered by the real environment
        self.findings.add(f"imports {top}: {why}", depth=2)
        raise ModuleNotFoundError(
            f"No module named {top!r} (opcheck run: CUDA-only extension)", name=top
        )
