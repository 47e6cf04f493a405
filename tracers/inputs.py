"""Model input specifications: what to feed a model whose inputs a file does not describe.

Three spellings, all parsed without torch into the same JSON-able :class:`InputSpec`:

``--input-shape 1,3,224,224``
    One positional float32 tensor. Several shapes: ``1,3,224,224;1,10`` (positional, in order).

``--input-spec 'x:1,3,224,224:float16;mask:1,128:bool'``
    ``;``-separated entries ``[NAME:]SHAPE[:DTYPE]``. Entries without a name are positional
    arguments in order; named entries are keyword arguments (``forward(x=..., mask=...)``).
    SHAPE is comma-separated ints; ``scalar`` (or empty) is a 0-d tensor. DTYPE defaults to
    float32 and accepts torch names and the usual aliases (``half``, ``long``, ``int``, ...).

JSON (``--input-spec '{...}'`` or ``--input-spec @spec.json``)::

    {"args": [{"shape": [1, 3, 224, 224], "dtype": "float16"}],
     "kwargs": {"mask": {"shape": [1, 128], "dtype": "bool"}}}

    A bare list is taken as ``args``.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opcheck.core.errors import UsageError

# Canonical dtype names are torch's attribute names; aliases map onto them.
DTYPES = frozenset(
    {
        "float32", "float16", "bfloat16", "float64", "int64", "int32", "int16", "int8",
        "uint8", "bool", "complex64", "complex128",
        "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64",
    }
)  # fmt: skip
_ALIASES = {
    "float": "float32", "fp32": "float32", "f32": "float32",
    "half": "float16", "fp16": "float16", "f16": "float16",
    "bf16": "bfloat16", "double": "float64", "fp64": "float64", "f64": "float64",
    "long": "int64", "i64": "int64", "int": "int32", "i32": "int32", "short": "int16",
    "i8": "int8", "u8": "uint8", "byte": "uint8", "bool_": "bool",
    "cfloat": "complex64", "cdouble": "complex128",
}  # fmt: skip
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_SHAPE = re.compile(r"^\s*(\d+\s*(,\s*\d+\s*)*)?,?\s*$")


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: str = "float32"

    def to_json(self) -> dict[str, Any]:
        return {"shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class InputSpec:
    args: tuple[TensorSpec, ...] = ()
    kwargs: dict[str, TensorSpec] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not self.args and not self.kwargs

    def to_json(self) -> dict[str, Any]:
        return {
            "args": [a.to_json() for a in self.args],
            "kwargs": {k: v.to_json() for k, v in self.kwargs.items()},
        }

    @classmethod
    def from_json(cls, doc: Any) -> InputSpec:
        if isinstance(doc, list):
            doc = {"args": doc}
        if not isinstance(doc, dict) or set(doc) - {"args", "kwargs"}:
            raise UsageError('input spec JSON must be {"args": [...], "kwargs": {...}} or a list')
        args = doc.get("args", [])
        kwargs = doc.get("kwargs", {})
        if not isinstance(args, list) or not isinstance(kwargs, dict):
            raise UsageError('input spec JSON: "args" must be a list and "kwargs" an object')
        return cls(
            tuple(_tensor_from_json(a) for a in args),
            {str(k): _tensor_from_json(v) for k, v in kwargs.items()},
        )

    def describe(self) -> str:
        parts = [f"{list(a.shape)}:{a.dtype}" for a in self.args]
        parts += [f"{k}={list(v.shape)}:{v.dtype}" for k, v in self.kwargs.items()]
        return ", ".join(parts) or "(no inputs)"


def normalize_dtype(text: str) -> str:
    d = text.strip().lower().removeprefix("torch.")
    d = _ALIASES.get(d, d)
    if d not in DTYPES:
        raise UsageError(
            f"unknown dtype {text!r} (use e.g. float32, float16, bfloat16, int64, bool)"
        )
    return d


def parse_shape(text: str) -> tuple[int, ...]:
    t = text.strip()
    if t in ("", "scalar", "()", "[]"):
        return ()
    t = t.strip("()[]")
    if not _SHAPE.match(t):
        raise UsageError(f"bad shape {text!r} (expected comma-separated sizes like 1,3,224,224)")
    return tuple(int(x) for x in t.split(",") if x.strip())


def _tensor_from_json(raw: Any) -> TensorSpec:
    if isinstance(raw, list):
        raw = {"shape": raw}
    if not isinstance(raw, dict) or "shape" not in raw:
        raise UsageError(f'input spec entry {raw!r}: needs a "shape"')
    shape = raw["shape"]
    if not isinstance(shape, list) or not all(isinstance(x, int) and x >= 0 for x in shape):
        raise UsageError(f'input spec entry {raw!r}: "shape" must be a list of sizes')
    return TensorSpec(tuple(shape), normalize_dtype(str(raw.get("dtype", "float32"))))


def parse_input_shape(text: str) -> InputSpec:
    """``--input-shape``: ``;``-separated shapes, positional float32 tensors."""
    shapes = [s for s in text.split(";") if s.strip()]
    if not shapes:
        raise UsageError("--input-shape is empty (expected e.g. 1,3,224,224)")
    return InputSpec(tuple(TensorSpec(parse_shape(s)) for s in shapes))


def parse_input_spec(text: str) -> InputSpec:
    """``--input-spec``: compact ``[NAME:]SHAPE[:DTYPE];...``, inline JSON or ``@file.json``."""
    t = text.strip()
    if t.startswith("@"):
        try:
            t = Path(t[1:]).read_text(encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot read input spec {t[1:]}: {exc.strerror}") from None
        except ValueError as exc:  # a NUL in the path; a file that is not UTF-8 text
            raise UsageError(f"cannot read input spec {t[1:]!r}: {exc}") from None
    if t.lstrip().startswith(("{", "[")):
        try:
            return InputSpec.from_json(json.loads(t))
        except json.JSONDecodeError as exc:
            raise UsageError(f"input spec is not valid JSON: {exc.msg}") from None
        except RecursionError:
            raise UsageError("input spec JSON is nested too deeply") from None
    args: list[TensorSpec] = []
    kwargs: dict[str, TensorSpec] = {}
    for entry in (e.strip() for e in t.split(";")):
        if not entry:
            continue
        parts = [p.strip() for p in entry.split(":")]
        name = ""
        if parts and _NAME.match(parts[0]) and parts[0] != "scalar":
            name = parts.pop(0)
        if not parts or len(parts) > 2:
            raise UsageError(f"bad input spec entry {entry!r} (expected [NAME:]SHAPE[:DTYPE])")
        spec = TensorSpec(
            parse_shape(parts[0]), normalize_dtype(parts[1] if len(parts) > 1 else "float32")
        )
        if name:
            if name in kwargs:
                raise UsageError(f"input {name!r} given twice")
            kwargs[name] = spec
        else:
            if kwargs:
                raise UsageError(f"positional input {entry!r} after named ones")
            args.append(spec)
    if not args and not kwargs:
        raise UsageError("--input-spec is empty")
    return InputSpec(tuple(args), kwargs)


def resolve(input_shape: str | None = None, input_spec: str | None = None) -> InputSpec:
    """Combine the two CLI options (they are alternatives)."""
    if input_shape and input_spec:
        raise UsageError("give --input-shape or --input-spec, not both")
    if input_spec:
        return parse_input_spec(input_spec)
    if input_shape:
        return parse_input_shape(input_shape)
    return InputSpec()
