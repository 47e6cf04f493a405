"""Which public Python API a user's line called (``F.max_pool3d`` ->
``torch.nn.functional.max_pool3d``), read from the source span of the instruction being
executed; best effort, cached per code position."""

from __future__ import annotations

from typing import Any

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
