"""The renamed device the runtime trace runs on, and what every part of the trace reads off a
call: op names, dtypes, shapes, the tensors of an argument list, short source paths.

Split out of ``opcheck.tracers.runtime`` (which re-exports the public names). torch is imported
inside functions only."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError

DEVICE = "npu"
# Namespaces that are Python-level bookkeeping, not kernels a backend receives.
_SKIP_NAMESPACES = frozenset({"prim", "profiler"})
# The tracer's own folder as its code runs from it (a strict editable install runs it through
# links, and co_filename keeps the link's path) and as it is on disk: frames in either are the
# tracer's, never the user's. A tuple, for str.startswith.
_TRACER_DIR = tuple(dict.fromkeys((str(Path(os.path.abspath(__file__)).parent),
                                   str(Path(__file__).resolve().parent))))


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
