"""Type classes of op-plugin's C++ kernel parameters and of ATen schema arguments, and the C++
name op-plugin gives an entry's kernel: what :mod:`opcheck.scrapers.opapi_sources` matches an
overload to its kernel by (``T`` a tensor, ``i[]`` an int list, ``?`` optional; ``?Foo`` a type
not classified). Pure."""

from __future__ import annotations

import re
from functools import cache

from opcheck.core.opname import split_top_level

__all__ = ["cpp_class", "cpp_kernel_name", "schema_arg_classes"]


_CPP_CLASSES = {
    "Tensor": "T", "TensorList": "T[]", "ITensorListRef": "T[]", "vector<Tensor>": "T[]",
    "List<optional<Tensor>>": "T?[]", "Scalar": "S", "int64_t": "i", "SymInt": "i",
    "IntArrayRef": "i[]", "SymIntArrayRef": "i[]", "OptionalIntArrayRef": "i[]?",
    "OptionalSymIntArrayRef": "i[]?", "OptionalArrayRef<int64_t>": "i[]?",
    "OptionalArrayRef<SymInt>": "i[]?", "double": "f", "ArrayRef<double>": "f[]",
    "bool": "b", "string_view": "s", "string": "s", "ScalarType": "dt", "Layout": "layout",
    "Device": "device", "Generator": "gen", "MemoryFormat": "mf", "Dimname": "dn",
    "DimnameList": "dn[]", "Stream": "stream", "Storage": "storage", "ArrayRef<Scalar>": "S[]",
}


@cache  # pure, and called for the same few strings over and over
def cpp_class(cpp_type: str) -> str:
    t = re.sub(r"\b(?:const|volatile|struct)\b|[&*]", " ", cpp_type)
    t = re.sub(r"\b(?:at|c10|std|torch)::", "", t)
    t = "".join(t.split())
    optional = False
    m = re.fullmatch(r"optional<(.*)>", t)
    if m:
        t, optional = m.group(1), True
    cls = "b[]" if re.fullmatch(r"array<bool,\d+>", t) else _CPP_CLASSES.get(t, "?" + t)
    return cls + "?" if optional and not cls.endswith("?") else cls


_SCHEMA_CLASSES = {
    "Tensor": "T", "Scalar": "S", "int": "i", "SymInt": "i", "float": "f", "bool": "b",
    "str": "s", "ScalarType": "dt", "Layout": "layout", "Device": "device", "Generator": "gen",
    "MemoryFormat": "mf", "Dimname": "dn", "Stream": "stream", "Storage": "storage",
}


def _schema_class(arg_type: str) -> str:
    t = re.sub(r"\([a-z]!?\)", "", arg_type.strip())  # Tensor(a!) → Tensor
    optional_list = t.endswith("[]?") or bool(re.search(r"\[\d+\]\?$", t))
    if optional_list:
        t = re.sub(r"\[\d*\]\?$", "", t)
        return _SCHEMA_CLASSES.get(t, "?" + t) + "[]?"
    is_list = bool(re.search(r"\[\d*\]$", t))
    if is_list:
        t = re.sub(r"\[\d*\]$", "", t)
        elem_optional = t.endswith("?")
        t = t.rstrip("?")
        base = _SCHEMA_CLASSES.get(t, "?" + t)
        return base + ("?[]" if elem_optional else "[]")
    optional = t.endswith("?")
    t = t.rstrip("?")
    return _SCHEMA_CLASSES.get(t, "?" + t) + ("?" if optional else "")


@cache  # pure, and called for the same few strings over and over
def schema_arg_classes(schema: str) -> tuple[str, ...]:
    """Type class of each argument of an ATen schema, in order (``*`` dropped)."""
    m = re.match(r"\s*[\w.]+\((.*)\)\s*->", schema, re.S)
    if not m:
        raise ValueError(f"not a schema: {schema!r}")
    out: list[str] = []
    for arg in split_top_level(m.group(1)):
        if arg == "*":
            continue
        arg = arg.split("=", 1)[0].strip()
        out.append(_schema_class(arg.rsplit(" ", 1)[0]))
    return tuple(out)


def _is_out(schema: str) -> bool:
    m = re.match(r"\s*[\w.]+\((.*)\)\s*->", schema, re.S)
    if not m or "*" not in split_top_level(m.group(1)):
        return False
    kw = split_top_level(m.group(1))
    star = kw.index("*")
    return any(re.search(r"\([a-z]!\)", a) for a in kw[star + 1:])


@cache  # pure, and called for the same few strings over and over
def cpp_kernel_name(schema: str, section: str) -> str:
    """The C++ function name op-plugin gives the kernel of a YAML entry (torchgen's rule)."""
    base = re.match(r"\s*([\w]+)", schema)
    if not base:
        raise ValueError(f"not a schema: {schema!r}")
    name = base.group(1)
    if _is_out(schema):
        name += "_out"
    if section == "symint":
        name += "_symint"
    return name
