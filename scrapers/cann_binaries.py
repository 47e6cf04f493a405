"""Which SoCs CANN's open operator libraries ship a kernel for, per op type.

Two sources per library version:

* ``op_host/config/<soc>/<op>_binary.json``: the compiled binaries shipped for that SoC
  (:func:`parse_binary_list`: the op type, how many binaries, the dtypes of each binary's
  first input);
* ``op_host/<op>_def.cpp``: the OpDef registration (:func:`parse_opdef`: per op type the SoCs
  its AI Core kernel is configured for, ``this->AICore().AddConfig("ascend910b", …)``).

Op types not defined in these libraries are CANN's closed built-in ones: nothing is known of
them here. Pure: text in, rows out; a binary list that is not the documented shape fails with
its file.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.rows import Origin

__all__ = ["BinaryList", "OpDefRow", "parse_binary_list", "parse_opdef", "soc_of_path"]

# the SoCs of the 950 family: an op type configured only there is a re-implementation of a
# built-in one for that architecture, not a sign the others lack it
SOC_950 = frozenset({"ascend950", "ascend910_95"})


@dataclass(frozen=True)
class BinaryList:
    op_type: str
    soc: str
    binaries: int
    dtypes: tuple[str, ...]  # dtypes of the first input across the binaries, in order


@dataclass(frozen=True)
class OpDefRow:
    op_type: str
    socs: tuple[str, ...]  # AddConfig("<soc>") in the class body
    line: int


def soc_of_path(path: str) -> str:
    """``…/op_host/config/ascend910b/x_binary.json`` → ``ascend910b``."""
    parts = path.split("/")
    if len(parts) < 3 or parts[-3] != "config":
        raise ScrapeError(f"{path}: not an op_host/config/<soc>/ binary list")
    return parts[-2]


def parse_binary_list(text: str, *, origin: Origin) -> BinaryList:
    try:
        doc = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ScrapeError(f"{origin.path}:{exc.lineno}: not JSON ({exc.msg})") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("op_type"), str) \
            or not isinstance(doc.get("op_list"), list):
        raise ScrapeError(f"{origin.path}: a binary list has op_type and op_list")
    unknown = set(doc) - {"op_type", "op_list", "optional_input_mode", "optional_output_mode"}
    if unknown:
        raise ScrapeError(f"{origin.path}: unknown binary-list fields {sorted(unknown)}")
    dtypes: list[str] = []
    for k, b in enumerate(doc["op_list"]):
        if not isinstance(b, dict):
            raise ScrapeError(f"{origin.path}: op_list[{k}] is not an object")
        inputs = b.get("inputs") or []
        first = inputs[0] if inputs else None
        if isinstance(first, list):  # a dynamic input: one entry per tensor
            first = first[0] if first else None
        dt = first.get("dtype") if isinstance(first, dict) else None
        if isinstance(dt, str) and dt not in dtypes:
            dtypes.append(dt)
    return BinaryList(doc["op_type"], soc_of_path(origin.path), len(doc["op_list"]),
                      tuple(dtypes))


_CLASS = re.compile(r"^\s*class\s+(\w+)\s*:\s*public\s+(?:ops::)?OpDef\b", re.M)
_CONFIG = re.compile(r'AddConfig\(\s*"(\w+)"')


def parse_opdef(text: str, *, origin: Origin) -> list[OpDefRow]:
    """Every ``class X : public OpDef`` of a ``*_def.cpp`` with the SoCs it configures (up to
    the next class)."""
    heads = list(_CLASS.finditer(text))
    rows = []
    for k, m in enumerate(heads):
        end = heads[k + 1].start() if k + 1 < len(heads) else len(text)
        socs = tuple(dict.fromkeys(_CONFIG.findall(text, m.end(), end)))
        rows.append(OpDefRow(m.group(1), socs, text.count("\n", 0, m.start()) + 1))
    if not rows and "OpDef" in text and "OP_ADD" in text:
        raise ScrapeError(f"{origin.path}: OP_ADD without a class deriving from OpDef")
    return rows
