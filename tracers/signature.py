"""A call's signature as the report keeps it: tensor dtypes per schema argument, output
dtypes, ``dtype=`` and the non-default non-tensor arguments, compactly."""

from __future__ import annotations

from typing import Any

from opcheck.core.oplist import Signature
from opcheck.tracers.device import _dtype_name, _iter_tensors

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
        if a.name == "device" and isinstance(v, torch.device) and v.type == "cpu":
            sig.args["device"] = "cpu"  # a copy to the host: a sync (opcheck.checker.speed)
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
