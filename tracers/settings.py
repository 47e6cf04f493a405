"""What a run's script sets that decides its speed on an NPU, recorded at the user's line
(worker side of ``opcheck run``; the checker turns them into findings and the profiling
advisor's optimizer tips):

- ``optimizer``: each optimizer constructed (class, module, ``fused``/``foreach``, parameters);
- ``dataloader``: each ``DataLoader`` (``pin_memory``, ``num_workers``);
- ``to``: host-to-device copies without ``non_blocking`` (``x.to(device)``, ``x.cuda()``), with
  their count per line;
- ``anomaly``: ``torch.autograd.set_detect_anomaly(True)`` / ``detect_anomaly()``;
- ``sync_batchnorm``: ``nn.SyncBatchNorm`` layers (``convert_sync_batchnorm``), counted;
- ``grad_scaler``: an AMP ``GradScaler``;
- ``ddp``: each ``DistributedDataParallel`` (``bucket_cap_mb``, ``gradient_as_bucket_view``,
  ``find_unused_parameters``, ``broadcast_buffers``), recorded from its arguments before it is
  made (``built`` false when torch's wrapper was not made: ``opcheck run`` stands a
  one-process passthrough in for it, see ``redirect``), with the ``no_sync()`` blocks entered
  on it and the forward calls made inside them (DDP arms its all-reduce in forward: a block
  around the backward alone syncs all the same); ``steps`` (after a run with one): its backward passes, optimizer steps and
  ``accumulated`` backward passes (one right after another with no step between: gradient
  accumulation);
- ``compile_mode``: ``torch.npu.set_compile_mode(jit_compile=…)``;
- ``env``: the Ascend environment variables the script starts with and the ones it writes
  (``os.environ[...] = ...``).

Each wrapper calls the original first and records after; recording never raises into the
script.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator
from typing import Any

# the environment variables the profiling advisor and torch_npu's docs tie to speed
ENV_PREFIXES = ("ASCEND_", "TASK_QUEUE_ENABLE", "PYTORCH_NPU_ALLOC_CONF", "ACLNN_CACHE_LIMIT",
                "HOST_CACHE_CAPACITY", "HCCL_", "COMBINED_ENABLE", "INF_NAN_MODE_ENABLE",
                "CPU_AFFINITY_CONF", "MULTI_STREAM_MEMORY_REUSE")


class Settings:
    """The settings recorded in one run, in order (``rows`` for the op list)."""

    def __init__(self, where: Callable[[], str]) -> None:
        self.where = where  # the user's line calling now ("" when none)
        self.rows: list[dict[str, Any]] = []
        self._counted: dict[tuple[str, str], dict[str, Any]] = {}

    def add(self, kind: str, **facts: Any) -> None:
        self.rows.append({"kind": kind, "where": self.where(), **facts})

    def count(self, kind: str, **facts: Any) -> None:
        """One row per kind and line, with the number of times it ran."""
        where = self.where()
        row = self._counted.get((kind, where))
        if row is None:
            row = self._counted[(kind, where)] = {"kind": kind, "where": where, "count": 0,
                                                  **facts}
            self.rows.append(row)
        row["count"] += 1


def _safe(record: Callable[[], None]) -> None:
    with contextlib.suppress(Exception):  # provenance is best effort: never break the script
        record()


def _wrap_init(cls: Any, record: Callable[[Any, tuple[Any, ...], dict[str, Any]], None]
               ) -> Callable[[], None]:
    original = cls.__init__

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        _safe(lambda: record(self, args, kwargs))

    cls.__init__ = init

    def undo() -> None:
        cls.__init__ = original

    return undo


def _device_target(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    target = kwargs.get("device", args[0] if args else None)
    text = str(getattr(target, "type", target) or "")
    return text.startswith(("npu", "cuda"))


# DistributedDataParallel's parameters the advice reads, with torch's defaults
DDP_ARGS = {"bucket_cap_mb": None, "find_unused_parameters": False, "broadcast_buffers": True,
            "gradient_as_bucket_view": False}

# DistributedDataParallel's leading parameters in torch's order (positional calls name them)
DDP_POSITIONAL = ("module", "device_ids", "output_device", "dim", "broadcast_buffers",
                  "process_group", "bucket_cap_mb", "find_unused_parameters", "check_reduction",
                  "gradient_as_bucket_view")


def _ddp_row(settings: Settings, args: tuple[Any, ...], kwargs: dict[str, Any]
             ) -> dict[str, Any]:
    bound = {**dict(zip(DDP_POSITIONAL, args, strict=False)), **kwargs}
    row = {"kind": "ddp", "where": settings.where(), "built": False, "no_sync": 0,
           "no_sync_forward": 0,
           **{k: bound.get(k, default) for k, default in DDP_ARGS.items()}}
    settings.rows.append(row)
    return row


def _ddp(settings: Settings, torch: Any) -> list[Callable[[], None]]:
    """Record each DistributedDataParallel before it is made (its arguments are what the advice
    reads, whether or not the wrapper can be made), its ``no_sync()`` uses, and the run's
    backward passes and optimizer steps."""
    ddp = torch.nn.parallel.DistributedDataParallel
    init, no_sync, backward = ddp.__init__, ddp.no_sync, torch.autograd.backward
    # accumulated: backward passes right after another with no optimizer step between (a
    # sequence, so loops the budget shortens do not blur it as totals would)
    counts = {"backward": 0, "optimizer_step": 0, "accumulated": 0}
    last = [""]

    def ddp_init(self: Any, *args: Any, **kwargs: Any) -> None:
        row: dict[str, Any] | None = None
        with contextlib.suppress(Exception):  # never break the script
            row = self.__dict__["_opcheck_row"] = _ddp_row(settings, args, kwargs)
        init(self, *args, **kwargs)
        if row is not None:
            # the trace's device redirection stands a one-process passthrough in for torch's
            # class: then no wrapper was made, and the arguments are all there is
            row["built"] = ddp.__module__.startswith("torch.")
            _safe(lambda: self.register_forward_pre_hook(forward_seen))

    inside: set[int] = set()  # the wrappers inside their no_sync() block now

    def forward_seen(module: Any, args: Any) -> None:
        row = module.__dict__.get("_opcheck_row")
        if row is not None and id(module) in inside:
            row["no_sync_forward"] += 1

    @contextlib.contextmanager
    def ddp_no_sync(self: Any) -> Iterator[Any]:
        row = self.__dict__.get("_opcheck_row")
        if row is not None:
            row["no_sync"] += 1
        inside.add(id(self))
        try:
            with no_sync(self) as got:
                yield got
        finally:
            inside.discard(id(self))

    def counted_backward(*args: Any, **kwargs: Any) -> Any:
        out = backward(*args, **kwargs)
        counts["backward"] += 1
        counts["accumulated"] += last[0] == "backward"
        last[0] = "backward"
        return out

    def stepped(opt: Any, args: Any, kwargs: Any) -> None:
        counts["optimizer_step"] += 1
        last[0] = "step"

    from torch.optim.optimizer import register_optimizer_step_post_hook

    handle = register_optimizer_step_post_hook(stepped)
    ddp.__init__, ddp.no_sync = ddp_init, ddp_no_sync
    torch.autograd.backward = counted_backward

    def undo() -> None:
        ddp.__init__, ddp.no_sync = init, no_sync
        torch.autograd.backward = backward
        handle.remove()
        if any(r.get("kind") == "ddp" for r in settings.rows):
            settings.rows.append({"kind": "steps", "where": "", **counts})

    return [undo]


@contextlib.contextmanager
def recording(settings: Settings) -> Iterator[Settings]:
    """Record into ``settings`` while the block runs (the wrappers are removed after)."""
    import torch

    undo: list[Callable[[], None]] = []

    def optimizer(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        defaults = getattr(self, "defaults", {}) or {}
        settings.add("optimizer", **{
            "class": type(self).__name__, "module": type(self).__module__,
            "fused": bool(defaults.get("fused")), "foreach": defaults.get("foreach"),
            "params": sum(len(g["params"]) for g in self.param_groups)})

    def loader(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        settings.add("dataloader", pin_memory=bool(self.pin_memory),
                     num_workers=int(self.num_workers))

    def anomaly(self: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        if bool(args[0] if args else kwargs.get("mode", True)):
            settings.count("anomaly", api="torch.autograd." + type(self).__name__)

    undo.append(_wrap_init(torch.optim.Optimizer, optimizer))
    undo.append(_wrap_init(torch.utils.data.DataLoader, loader))
    undo.append(_wrap_init(torch.autograd.anomaly_mode.set_detect_anomaly, anomaly))
    undo.append(_wrap_init(torch.autograd.anomaly_mode.detect_anomaly,
                           lambda s, a, k: settings.count("anomaly",
                                                          api="torch.autograd.detect_anomaly")))
    undo += _ddp(settings, torch)
    undo.append(_wrap_init(torch.nn.SyncBatchNorm,
                           lambda s, a, k: settings.count("sync_batchnorm")))
    for scaler in {getattr(torch.amp, "GradScaler", None),
                   getattr(torch.cuda.amp, "GradScaler", None)} - {None}:
        undo.append(_wrap_init(scaler, lambda s, a, k: settings.add("grad_scaler")))

    to, module_to = torch.Tensor.to, torch.nn.Module.to
    moving = [0]  # inside Module.to: moving parameters once is no per-step copy

    def tensor_to(self: Any, *args: Any, **kwargs: Any) -> Any:
        out = to(self, *args, **kwargs)
        if not (moving[0] or kwargs.get("non_blocking") or True in args[1:]):
            _safe(lambda: settings.count("to", non_blocking=False)
                  if self.device.type == "cpu" and _device_target(args, kwargs)
                  and settings.where() else None)
        return out

    def modules_to(self: Any, *args: Any, **kwargs: Any) -> Any:
        moving[0] += 1
        try:
            return module_to(self, *args, **kwargs)
        finally:
            moving[0] -= 1

    torch.Tensor.to = tensor_to  # type: ignore[method-assign]
    torch.nn.Module.to = modules_to  # type: ignore[method-assign]
    undo.append(lambda: setattr(torch.Tensor, "to", to))
    undo.append(lambda: setattr(torch.nn.Module, "to", module_to))
    npu = getattr(torch, "npu", None)
    compile_mode = getattr(npu, "set_compile_mode", None)
    if npu is not None:
        # the recorded device has no compile modes: the call is recorded (the check then
        # judges kernel paths with it) and answered
        def set_compile_mode(*args: Any, **kwargs: Any) -> Any:
            _safe(lambda: settings.add("compile_mode", jit_compile=kwargs.get(
                "jit_compile", args[0] if args else None)))
            return compile_mode(*args, **kwargs) if compile_mode is not None else None

        with contextlib.suppress(AttributeError, TypeError):
            npu.set_compile_mode = set_compile_mode
            undo.append(lambda: setattr(npu, "set_compile_mode", compile_mode)
                        if compile_mode is not None else delattr(npu, "set_compile_mode"))
    environ = type(os.environ)
    setitem = environ.__setitem__
    for name, value in sorted(os.environ.items()):
        if name.startswith(ENV_PREFIXES):
            settings.rows.append({"kind": "env", "where": "environment", "name": name,
                                  "value": value})

    def env_set(self: Any, key: str, value: str) -> None:
        setitem(self, key, value)
        if self is os.environ and str(key).startswith(ENV_PREFIXES):
            _safe(lambda: settings.add("env", name=str(key), value=str(value)))

    environ.__setitem__ = env_set  # type: ignore[method-assign]
    undo.append(lambda: setattr(environ, "__setitem__", setitem))
    try:
        yield settings
    finally:
        for fn in reversed(undo):
            fn()
