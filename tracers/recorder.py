"""The recorder of a runtime trace: per op and call path the count, dtypes, shapes, module
paths, source lines and call signatures (``Recorder``), streamed as JSON lines as they are made
(``Stream``), and the torch functions whose ops a real backend receives under another name
(``SUBCLASS_BRANCHES``)."""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator
from typing import Any

from opcheck.core.oplist import (
    MAX_APIS,
    MAX_CHILDREN,
    MAX_SAMPLES,
    MAX_SIGNATURES,
    OpUse,
    Signature,
)
from opcheck.tracers.callsite import _api_at
from opcheck.tracers.device import (
    _TRACER_DIR,
    _dtype_name,
    _iter_tensors,
    _shape,
    _short_path,
    _torch_dirs,
    op_name,
)
from opcheck.tracers.signature import _signature


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


# The recorder of the running trace, with its fake mode: the kernels registered for the
# device (dispatch.py's escape kernels, composite_kernels.py) find it here.
_ACTIVE: list[tuple[Any, Recorder]] = []  # (fake_mode, recorder) of the running trace
