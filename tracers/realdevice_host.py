"""CPU kernels, for the real-data ``npu`` device, of the ops torch registers only for
accelerators.

Composite kernels branch on the device: on an accelerator (``is_privateuseone()``) an LSTM or
GRU cell ends in ``_thnn_fused_lstm_cell`` / ``_thnn_fused_gru_cell``, which torch implements
for CUDA only. The real-data device runs every op on the CPU tensor behind its ``npu`` one, so
without a CPU kernel for these the recording stops where a real backend would not (codec
encoders, table-structure decoders: any ``nn.LSTM``/``nn.GRU``/cell). The kernels here compute
what the CUDA kernels compute, in the same layout (the workspace the backward reads), so a
forward and a backward both run; the recorder still records the fused op the device received.

Registered on the CPU key with the device's other kernels (``realdevice.install``) and gone
with them (``realdevice.uninstall``). The same functions are the Meta kernels of the ops
torch gives none (the GRU cell's), for the fake-tensor trace (``install_meta``): without one,
FakeTensor's fallback runs the op on real zeros made on the fake device and stops at
``aten::zero_``. Only imported in the sandboxed worker; torch lazily.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any


def _gates(gates: Any, bias: Any) -> Any:
    return gates if bias is None else gates + bias


def lstm_cell(
    input_gates: Any, hidden_gates: Any, cx: Any, input_bias: Any = None,
    hidden_bias: Any = None,
) -> tuple[Any, Any, Any]:  # fmt: skip
    """``(hy, cy, workspace)``; the workspace holds the activated gates i, f, g, o (CUDA's
    layout, read by the backward)."""
    import torch

    gates = _gates(input_gates, input_bias) + _gates(hidden_gates, hidden_bias)
    i, f, g, o = gates.chunk(4, -1)
    i, f, g, o = i.sigmoid(), f.sigmoid(), g.tanh(), o.sigmoid()
    cy = f * cx + i * g
    hy = o * cy.tanh()
    return hy, cy, torch.cat([i, f, g, o], -1)


def lstm_cell_backward(
    grad_hy: Any, grad_cy: Any, cx: Any, cy: Any, workspace: Any, has_bias: bool
) -> tuple[Any, Any, Any]:
    """``(grad_gates, grad_cx, grad_bias)`` from the forward's workspace (either gradient may
    be undefined: the output was not used)."""
    import torch

    i, f, g, o = workspace.chunk(4, -1)
    tanh_cy = cy.tanh()
    go = torch.zeros_like(cy) if grad_hy is None else grad_hy
    gc = go * o * (1 - tanh_cy * tanh_cy)
    if grad_cy is not None:
        gc = gc + grad_cy
    grad_gates = torch.cat([gc * g * (1 - i) * i, gc * cx * (1 - f) * f,
                            gc * i * (1 - g * g), go * tanh_cy * (1 - o) * o], -1)  # fmt: skip
    grad_bias = grad_gates.sum(0) if has_bias else torch.empty(0, dtype=cy.dtype)
    return grad_gates, gc * f, grad_bias


def gru_cell(
    input_gates: Any, hidden_gates: Any, hx: Any, input_bias: Any = None,
    hidden_bias: Any = None,
) -> tuple[Any, Any]:  # fmt: skip
    """``(hy, workspace)``; the workspace holds r, z, n, hx and the hidden gate's n part
    (CUDA's layout, read by the backward)."""
    import torch

    ir, iz, in_ = _gates(input_gates, input_bias).chunk(3, -1)
    hr, hz, hn = _gates(hidden_gates, hidden_bias).chunk(3, -1)
    r, z = (ir + hr).sigmoid(), (iz + hz).sigmoid()
    n = (in_ + r * hn).tanh()
    hy = n + z * (hx - n)
    return hy, torch.cat([r, z, n, hx, hn], -1)


def gru_cell_backward(grad_hy: Any, workspace: Any, has_bias: bool) -> tuple[Any, ...]:
    """``(grad_input_gates, grad_hidden_gates, grad_hx, grad_input_bias, grad_hidden_bias)``."""
    import torch

    r, z, n, hx, hn = workspace.chunk(5, -1)
    gz = grad_hy * (hx - n) * (1 - z) * z
    gn = grad_hy * (1 - z) * (1 - n * n)
    gr = gn * hn * (1 - r) * r
    grad_input = torch.cat([gr, gz, gn], -1)
    grad_hidden = torch.cat([gr, gz, gn * r], -1)
    if has_bias:
        return grad_input, grad_hidden, grad_hy * z, grad_input.sum(0), grad_hidden.sum(0)
    none = torch.empty(0, dtype=grad_hy.dtype)
    return grad_input, grad_hidden, grad_hy * z, none, none


# op -> its CPU kernel (torch has none: the CUDA kernel is the only one)
KERNELS: dict[str, Callable[..., Any]] = {
    "_thnn_fused_lstm_cell": lstm_cell,
    "_thnn_fused_lstm_cell_backward_impl": lstm_cell_backward,
    "_thnn_fused_gru_cell": gru_cell,
    "_thnn_fused_gru_cell_backward": gru_cell_backward,
}


_META: list[Any] = []  # the Meta kernels' library, kept for the process's life


def _library(key: str) -> Any:
    """A library registering the kernels on ``key`` where torch has none (a later torch that
    ships its own keeps it)."""
    import torch

    lib = torch.library.Library("aten", "IMPL")  # type: ignore[no-untyped-call]
    for name, kernel in KERNELS.items():
        if not torch._C._dispatch_has_kernel_for_dispatch_key(f"aten::{name}", key):
            with contextlib.suppress(RuntimeError):
                lib.impl(name, kernel, key)  # type: ignore[no-untyped-call]
    return lib


def install_meta() -> None:
    """Register the kernels on the Meta key (once per process): they compute with ordinary
    ops, which meta tensors run."""
    if not _META:
        _META.append(_library("Meta"))


def install(installed: list[Any]) -> None:
    """Register the kernels on the CPU key; the library object goes on ``installed``,
    destroyed with the device's."""
    installed.append(_library("CPU"))
