"""C++ source text that more than one scraper reads (torch_npu's capture rules, its HCCL
process group): the message a call's string literals spell. Pure."""

from __future__ import annotations

import re

__all__ = ["string_literals"]

_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"')


def string_literals(args: str, limit: int) -> str:
    """The string literals of a call's arguments, joined (C++ concatenates adjacent ones), white
    space folded, at most ``limit`` characters; a value between two shows as <…>."""
    parts, end = [], None
    for m in _STRING.finditer(args):
        if end is not None and re.search(r"\w", args[end:m.start()]):
            parts.append("<…>")
        parts.append(m.group(1))
        end = m.end()
    text = "".join(parts).replace('\\"', '"').replace("\\n", " ")
    return re.sub(r"\s+", " ", text).strip()[:limit]
