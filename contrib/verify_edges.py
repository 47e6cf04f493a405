"""The edge cases ``opcheck.contrib.verify`` derives from a rewrite's inputs (large values,
negatives, empty tensors, non-contiguous views, NaN and infinities): each a copy of a case with
its tensors changed. torch is imported inside functions only (this module is in the
sandboxed verifier's room, like ``verify``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from opcheck.contrib.workarounds import EDGE_CASES, EdgeCase

__all__ = ["Case", "edge_cases"]

Case = tuple[tuple[Any, ...], dict[str, Any]]


def _map_tensors(value: Any, fn: Callable[[Any], Any]) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return fn(value)
    if isinstance(value, (list, tuple)):
        return type(value)(_map_tensors(v, fn) for v in value)
    if isinstance(value, dict):
        return {k: _map_tensors(v, fn) for k, v in value.items()}
    return value


def _tensors(value: Any) -> list[Any]:
    found: list[Any] = []

    def keep(t: Any) -> Any:
        found.append(t)
        return t

    _map_tensors(value, keep)
    return found


def _large(t: Any) -> Any:
    import torch

    if not t.is_floating_point():
        return t
    # large, yet with room for a product or a square before the dtype overflows
    return t * min(1e4, float(torch.finfo(t.dtype).max) ** 0.25)


def _negative(t: Any) -> Any:
    return -t.abs() - 1 if t.is_floating_point() else t


def _emptied(case: Case) -> Case | None:
    """The case with every tensor whose first dimension is the first tensor's (the batch, the
    boxes of ``nms`` and their scores) cut to length 0 there; None when there is none."""
    tensors = [t for t in _tensors(case) if t.dim() >= 1]
    if not tensors or tensors[0].shape[0] == 0:
        return None
    n = tensors[0].shape[0]
    return _map_tensors(  # type: ignore[no-any-return]
        case, lambda t: t.narrow(0, 0, 0) if t.dim() >= 1 and t.shape[0] == n else t)


def _noncontiguous(t: Any) -> Any:
    import torch

    if t.dim() == 0 or t.numel() < 2:
        return t
    # same shape and values, every stride doubled
    wide = torch.empty((*t.shape, 2), dtype=t.dtype)
    wide[..., 0] = t
    return wide[..., 0]


def _with_value(case: Case, value: float) -> Case:
    """The case with ``value`` as the first element of its first non-empty floating tensor."""
    import torch

    done: list[bool] = []

    def one(t: Any) -> Any:
        if done or not t.is_floating_point() or t.numel() == 0:
            return t
        done.append(True)
        out = t.clone(memory_format=torch.contiguous_format)
        out.view(-1)[0] = value
        return out

    return _map_tensors(case, one)  # type: ignore[no-any-return]


def edge_cases(cases: Sequence[Case], kinds: Iterable[EdgeCase] = EDGE_CASES) -> list[tuple[str, Case]]:
    """(label, case) for the edge cases derived from each case, in ``kinds`` (see the module
    docstring); a kind that changes nothing in a case (no floating tensor, no tensor with a
    first dimension) yields no case for it."""
    wanted = set(kinds)
    out: list[tuple[str, Case]] = []
    for i, case in enumerate(cases):
        tensors = _tensors(case)
        floats = [t for t in tensors if t.is_floating_point() and t.numel() > 0]
        derived: list[tuple[str, Case]] = []
        if floats and "large" in wanted:
            derived.append(("large", _map_tensors(case, _large)))
        if floats and "negative" in wanted:
            derived.append(("negative", _map_tensors(case, _negative)))
        if floats and "nonfinite" in wanted:
            for name, v in (("inf", float("inf")), ("-inf", float("-inf")), ("nan", float("nan"))):
                derived.append((name, _with_value(case, v)))
        emptied = _emptied(case) if "empty" in wanted else None
        if emptied is not None:
            derived.append(("empty", emptied))
        if any(t.dim() >= 1 and t.numel() >= 2 for t in tensors) and "noncontiguous" in wanted:
            derived.append(("non-contiguous", _map_tensors(case, _noncontiguous)))
        out += [(f"case {i} {label}", (tuple(c[0]), dict(c[1]))) for label, c in derived]
    return out
