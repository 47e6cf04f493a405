"""Fake tensors on the ``npu`` device in place of a model's parameters, buffers and example
inputs, and the differentiable outputs a ``--train`` trace sums into its loss."""

from __future__ import annotations

from typing import Any

from opcheck.tracers.device import DEVICE
from opcheck.tracers.inputs import TensorSpec


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
