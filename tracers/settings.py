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
