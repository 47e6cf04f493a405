"""The canonical operator string ``namespace::name.overload`` used everywhere.

``aten::add.Tensor``, ``aten::relu`` (no overload), ``npu::npu_gelu``. Parsing and printing
round-trip: ``str(OpName.parse(s)) == s`` for every canonical ``s``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opcheck.core.errors import UsageError

_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_CANONICAL = re.compile(rf"^(?P<ns>{_IDENT})::(?P<name>{_IDENT})(?:\.(?P<overload>{_IDENT}))?$")
_BARE = re.compile(rf"^(?P<name>{_IDENT})(?:\.(?P<overload>{_IDENT}))?$")


@dataclass(frozen=True, order=True)
class OpName:
    namespace: str
    name: str
    overload: str = ""

    @classmethod
    def parse(cls, text: str, *, default_namespace: str | None = None) -> OpName:
        """Parse ``ns::name.overload``; a bare ``name.overload`` needs ``default_namespace``.

        ``.default`` (how torch prints an op without overload) is folded to no overload.
        """
        s = text.strip()
        m = _CANONICAL.match(s)
        if m:
            ns = m["ns"]
        else:
            m = _BARE.match(s)
            if not m or default_namespace is None:
                raise UsageError(f"not an operator name: {text!r} (expected e.g. aten::add.Tensor)")
            ns = default_namespace
        overload = m["overload"] or ""
        if overload == "default":
            overload = ""
        return cls(ns, m["name"], overload)

    @classmethod
    def from_schema(cls, func: str, namespace: str) -> OpName:
        """The name part of a native_functions-style schema ``name.overload(args) -> ret``."""
        head = func.split("(", 1)[0].strip()
        return cls.parse(head, default_namespace=namespace)

    @property
    def base(self) -> str:
        """``name.overload`` without the namespace (how the YAML registries spell it)."""
        return f"{self.name}.{self.overload}" if self.overload else self.name

    def __str__(self) -> str:
        return f"{self.namespace}::{self.base}"


def canonical(text: str, *, default_namespace: str | None = "aten") -> str:
    """Normalise any accepted spelling to the canonical string."""
    return str(OpName.parse(text, default_namespace=default_namespace))


def split_top_level(text: str, *, angles: bool = True) -> list[str]:
    """The comma-separated items of an argument list (a schema's, a C++ signature's) outside
    any brackets (``<>``, ``()``, ``[]``, ``{}``), stripped; empty items dropped.
    ``angles=False`` for the arguments of a C++ call, where ``<`` and ``>`` are comparisons as
    often as template brackets."""
    opening, closing = ("<([{", ">)]}") if angles else ("([{", ")]}")
    out: list[str] = []
    depth = 0
    buf: list[str] = []
    for ch in text:
        if ch in opening:
            depth += 1
        elif ch in closing:
            depth -= 1
        if ch == "," and depth == 0:
            out.append("".join(buf))
            buf = []
        else:
            buf.append(ch)
    out.append("".join(buf))
    return [p.strip() for p in out if p.strip()]
