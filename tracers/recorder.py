"""The recorder of a runtime trace: per op and call path the count, dtypes, shapes, module
paths, source lines and call signatures (``Recorder``), streamed as JSON lines as they are made
(``Stream``), and the torch functions whose ops a real backend receives under another name
(``SUBCLASS_BRANCHES``)."""

from __future__ import annotations

import contextlib
import functools
import sys
from collections.abc import Iterator
from typing import Any, cast

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
        # per-call work done once (record() runs on every op call of a run)
        # id(code object) -> (code, torch's or the tracer's): by id, as a code object hashes
        # its contents on every lookup; the code kept in the value keeps its id unique
        self._own_code: dict[int, tuple[Any, bool]] = {}
        self._locations: dict[tuple[Any, int], str] = {}
        self._signatures: dict[Any, Signature | None] = {}  # (record, _scan key) -> signature
        self._sig_index: dict[tuple[str, tuple[str, ...]], dict[str, Signature]] = {}
        self._api_seen: set[tuple[int, Any, int]] = set()
        self._sizes: set[tuple[Any, Any]] = set()  # (record, first tensor's size) seen
        # a call exactly like one recorded before (same op, _scan key, parents, module path,
        # phase, and the same instruction of the same user frame) adds nothing but counts:
        # memo key -> (op, user code, record key, record, signature); the op and the code are
        # kept in the value, so an id reused after they are freed never matches
        self._memo: dict[tuple[Any, ...], tuple[Any, Any, Any, OpUse, Signature | None]] = {}

    def enter_module(self, name: str | None, kind: str) -> None:
        """Push the module path of a module's forward: its name in the traced model, else (a
        module made outside the model's tree, e.g. the ``kernels`` hub wrapping a function in
        a module of its own) its class under the module that called it, so its ops stay
        inside the caller's path."""
        stack = self.module_stack
        stack.append(name or (f"{stack[-1]}.{kind}" if stack else kind))

    def user_frame(self) -> Any:
        """Innermost frame outside torch and opcheck's tracer: the user's call site."""
        return self._user_frame(sys._getframe(1))

    def _user_frame(self, f: Any) -> Any:
        own = self._own_code
        while f is not None:
            code = f.f_code
            hit = own.get(id(code))
            if hit is None:
                fn = code.co_filename
                hit = own[id(code)] = (code, fn.startswith(self._torch_dirs)
                                       or fn.startswith(_TRACER_DIR) or fn.startswith("<"))
            if not hit[1]:
                return f
            f = f.f_back
        return None

    def location(self) -> str:
        f = self.user_frame()
        return self._where(f) if f is not None else ""

    def _where(self, frame: Any) -> str:
        key = (frame.f_code, frame.f_lineno)
        loc = self._locations.get(key)
        if loc is None:
            loc = self._locations[key] = f"{_path(frame.f_code.co_filename)}:{frame.f_lineno}"
        return loc

    def record(
        self, func: Any, args: Any, kwargs: Any, *, composite: bool = False, out: Any = None
    ) -> Signature | None:
        """Count one call; returns its signature (a composite's outputs are filled in by the
        caller once its decomposition has run)."""
        tensors, fast = _scan(args, kwargs)
        return self.record_keyed(func, args, kwargs, out, tensors[0] if tensors else None,
                                 fast, composite, tensors)  # fmt: skip

    def record_keyed(
        self, func: Any, args: Any, kwargs: Any, out: Any, first: Any, fast: Any,
        composite: bool = False, tensors: list[Any] | None = None,
    ) -> Signature | None:  # fmt: skip
        """``record`` of a call whose arguments the caller has walked already: ``first`` is
        its first tensor, ``fast`` a hashable key of it (the tensors' dtypes, the other
        arguments' types and values, as ``_scan`` makes it; None when an argument is not a
        plain value).

        Runs on every op call of a run: what can be is computed once per op and per distinct
        call (op names, dtype names, signatures, source locations are cached), and a call like
        one recorded before only counts."""
        if not self.enabled:
            return None
        memo: tuple[Any, ...] | None = None
        frame = None
        if fast is not None and not self.context:
            # What a call adds besides its counts (dtypes, module path, location, API,
            # signature; the shape is checked below) is a function of this key: a call like one
            # recorded before only counts. The user frame is found by the walk every time, never
            # cached by the torch frame below it (one torch line is reached from many user lines).
            frame = sys._getframe(1)  # the walk of _user_frame, inline
            own = self._own_code
            while frame is not None:
                known = own.get(id(frame.f_code))
                if known is None:
                    frame = self._user_frame(frame)
                    break
                if not known[1]:
                    break
                frame = frame.f_back
            phase = self.phase
            code = frame.f_code if frame is not None else None
            memo = (id(func), fast, tuple(self.parents) if self.parents else (), composite,
                    self.module_stack[-1] if self.module_stack else phase, phase,
                    phase == "backward" and not self.in_node, id(code),
                    frame.f_lasti if frame is not None else -1)  # fmt: skip
            try:
                seen = self._memo.get(memo)
            except TypeError:  # an argument value that does not hash
                seen, memo = None, None
            if seen is not None and seen[0] is func and seen[1] is code:
                use, got = seen[3], seen[4]
                use.count += 1
                if got is not None:
                    got.count += 1
                if first is not None and len(use.shapes) < MAX_SAMPLES:  # not in the key
                    try:
                        if (seen[2], first.shape) in self._sizes:
                            return got
                    except TypeError:  # symbolic sizes do not hash
                        pass
                    self._add_shape(use, seen[2], first)
                return got
        hit = _NAMES.get(id(func))
        if hit is not None and hit[0] is func:
            name = hit[1]
        else:
            name = op_name(func)
            _NAMES[id(func)] = (func, name)
        if name is None:
            return None
        if tensors is None:  # the caller's key is the memo's; the signature cache keys by _scan
            tensors, fast = _scan(args, kwargs)
        key, use, got = self._record_new(name, func, args, kwargs, composite, out, tensors,
                                         fast, frame)  # fmt: skip
        if memo is not None and len(self._memo) < MAX_CACHED_CALLS:
            self._memo[memo] = (func, frame.f_code if frame is not None else None, key, use, got)
        return got

    def _record_new(
        self, name: str, func: Any, args: Any, kwargs: Any, composite: bool, out: Any,
        tensors: list[Any], fast: Any, frame: Any,
    ) -> tuple[tuple[str, tuple[str, ...]], OpUse, Signature | None]:  # fmt: skip
        """``record`` of a call unlike any recorded before (or not keyed): the record key, the
        record and the signature the call counts under."""
        if self.context:
            name = _renamed(self.context[-1], name, args)
        elif self.phase == "backward" and not self.in_node and name == "aten::add.Tensor":
            # The engine summing two gradients for one input (between nodes). On plain tensors
            # it accumulates in place when the buffer is not shared, which is the usual case;
            # on subclasses it never does.
            name = "aten::add_.Tensor"
        via = tuple(self.parents) if self.parents else ()
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
        cache_key = (key, fast) if fast is not None else None
        known = self._signatures.get(cache_key, _UNSEEN) if cache_key is not None else _UNSEEN
        # a call like one seen before (same dtypes and arguments) adds no dtype
        if known is _UNSEEN and len(use.dtypes) < MAX_SAMPLES:
            for t in tensors:
                d = _dtype_name(t.dtype)
                if d not in use.dtypes and len(use.dtypes) < MAX_SAMPLES:
                    use.dtypes.append(d)
        if tensors and len(use.shapes) < MAX_SAMPLES:
            self._add_shape(use, key, tensors[0])
        where = self.module_stack[-1] if self.module_stack else self.phase
        if where and len(use.modules) < MAX_SAMPLES and where not in use.modules:
            use.modules.append(where)
        if len(use.locations) < MAX_SAMPLES:
            frame = frame or self.user_frame()
            if frame is not None:
                loc = self._where(frame)
                if loc not in use.locations:
                    use.locations.append(loc)
        if known is _UNSEEN:
            got = self._signature_of(use, key, func, args, kwargs, out, cache_key)
        else:
            got = cast("Signature | None", known)
        if got is not None:
            got.count += 1
            if len(got.apis) < MAX_APIS and not self.phase:
                frame = frame or self.user_frame()
                if frame is not None:
                    at = (id(got), frame.f_code, frame.f_lasti)
                    if at not in self._api_seen:
                        self._api_seen.add(at)
                        api = _api_at(frame)
                        if api and api not in got.apis:
                            got.apis.append(api)
        if new and self.stream is not None:
            self.stream.op(use)
        return key, use, got

    def _add_shape(self, use: OpUse, key: tuple[str, tuple[str, ...]], first: Any) -> None:
        size = first.shape
        try:
            seen = (key, size) in self._sizes
        except TypeError:  # symbolic sizes do not hash
            seen = False
        if not seen:
            first_shape = _shape(first)
            if first_shape not in use.shapes:
                use.shapes.append(first_shape)
            with contextlib.suppress(TypeError):
                self._sizes.add((key, size))

    def _signature_of(self, use: OpUse, key: tuple[str, tuple[str, ...]], func: Any, args: Any,
                      kwargs: Any, out: Any, cache_key: Any) -> Signature | None:  # fmt: skip
        """The stored signature this call counts under (None when the record already keeps
        MAX_SIGNATURES others), remembered for calls that look the same (``cache_key``)."""
        sig = _signature(func, args, kwargs, out)
        sk = sig.key
        index = self._sig_index.setdefault(key, {})
        got = index.get(sk)
        if got is None and len(use.signatures) < MAX_SIGNATURES:
            got = index[sk] = sig
            use.signatures.append(sig)
        if cache_key is not None and len(self._signatures) < MAX_CACHED_CALLS:
            with contextlib.suppress(TypeError):
                self._signatures[cache_key] = got
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


MAX_CACHED_CALLS = 50_000  # distinct (op, call) keys whose signature is remembered
_UNSEEN = object()
# id(op) -> (op, op_name): by id, as OpOverload.__hash__ is Python code
_NAMES: dict[int, tuple[Any, str | None]] = {}
_SCALARS = (bool, int, float, str, type(None))


@functools.lru_cache(maxsize=4096)
def _path(filename: str) -> str:
    return _short_path(filename)


def _scan(args: Any, kwargs: Any) -> tuple[list[Any], Any]:
    """The tensors of a call (nested lists included, in order) and a hashable key of how it
    was called: the tensors' dtypes and the other arguments' values, so calls with equal keys
    have equal signatures. The key is None when an argument is not a plain value."""
    import torch

    tensors: list[Any] = []
    parts: list[Any] = []
    ok = True
    for v in (*args, *kwargs.values()) if kwargs else args:
        if isinstance(v, torch.Tensor):
            tensors.append(v)
            parts.append(v.dtype)
        # the value types realdevice._split keys too: both find the same key and first tensor
        elif isinstance(v, (*_SCALARS, torch.dtype, torch.device, torch.memory_format,
                            torch.layout)):  # fmt: skip
            parts.append((type(v), v))  # 1, 1.0 and True are equal keys, not equal arguments
        elif isinstance(v, (list, tuple)):
            inner: list[Any] = []
            for x in v:
                if isinstance(x, torch.Tensor):
                    tensors.append(x)
                    inner.append(x.dtype)
                elif isinstance(x, _SCALARS):
                    inner.append((type(x), x))
                else:
                    ok = False
            parts.append(tuple(inner))
        else:
            ok = False
    if not ok:
        return list(_iter_tensors(args, kwargs)), None
    if kwargs:
        parts.append(tuple(kwargs))
    return tensors, tuple(parts)


# The recorder of the running trace, with its fake mode: the kernels registered for the
# device (dispatch.py's escape kernels, composite_kernels.py) find it here.
_ACTIVE: list[tuple[Any, Recorder]] = []  # (fake_mode, recorder) of the running trace
