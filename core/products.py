"""Ascend products under the short aliases users type (``--hardware 910A``).

CANN's operator docs name products by marketing series (``Atlas 训练系列产品``) and spell one
product several ways (``Atlas A2 训练系列产品/Atlas A2 推理系列产品`` and
``Atlas A2 训练系列产品/Atlas 800I A2 推理产品/A200I A2 Box 异构组件``); one ``<term>`` may also
name several products at once (``Atlas A3 训练系列产品/Atlas A3 推理系列产品/Ascend 950PR/...``).
:func:`product_aliases` turns such a name into aliases so facts from different pages and
versions line up.
"""

from __future__ import annotations

import re

__all__ = ["ALIASES", "PRODUCTS", "SYNONYMS", "canonical_alias", "product_aliases"]

# alias → what the docs call it (the first spelling is the usual one)
PRODUCTS: dict[str, str] = {
    "910A": "Atlas 训练系列产品 (Ascend 910)",
    "910B": "Atlas A2 训练系列产品 / Atlas A2 推理系列产品 / Atlas 800I A2 / A200I A2 Box",
    "910C": "Atlas A3 训练系列产品 / Atlas A3 推理系列产品",
    "310P": "Atlas 推理系列产品 (Ascend 310P)",
    "310B": "Atlas 200I/500 A2 推理产品",
    "310": "Atlas 200/300/500 推理产品 (Ascend 310)",
    "950": "Ascend 950PR / Ascend 950DT (昇腾910_95)",
    "Kirin": "Kirin X90 / Kirin 9030 处理器系列产品",
}
ALIASES: tuple[str, ...] = tuple(PRODUCTS)

# other names users give for the same product
SYNONYMS: dict[str, str] = {"A2": "910B", "A3": "910C", "950PR": "950", "950DT": "950",
                            "910": "910A", "910_95": "950"}

# Names containing "/" that are one product: protected before splitting a term on "/".
_WHOLE = (
    (re.compile(r"Atlas\s*200I\s*/\s*500\s*A2\s*推理产品"), "\x00310B\x00"),
    (re.compile(r"Atlas\s*200\s*/\s*300\s*/\s*500\s*推理产品"), "\x00310\x00"),
)
_PROTECTED = re.compile(r"\x00(\w+)\x00")


def canonical_alias(name: str) -> str | None:
    """``910B`` for ``910b``/``A2``; None for a name that is no known alias."""
    key = name.strip()
    for alias in ALIASES:
        if alias.lower() == key.lower():
            return alias
    for syn, alias in SYNONYMS.items():
        if syn.lower() == key.lower():
            return alias
    return None


def _piece_alias(piece: str) -> str | None:
    p = piece.replace(" ", "")
    if "950" in p or "910_95" in p or "910PR" in p:  # "Ascend 910PR/..." is a typo of 950PR
        return "950"
    if "A3" in p:
        return "910C"
    if "A2" in p:
        return "910B"
    if p.startswith("Kirin"):
        return "Kirin"
    if re.fullmatch(r"Atla?s推理系列(?:产品)?", p):
        return "310P"
    if re.fullmatch(r"Atla?s训练系列(?:产品)?", p):
        return "910A"
    return None


def product_aliases(name: str) -> tuple[str, ...] | None:
    """The aliases a product name of the CANN docs covers, in order, or None when a part of it
    is not a product (the caller decides whether that is an error)."""
    text = name.strip().strip("`").strip().rstrip("：:").strip()
    if not text:
        return None
    for pattern, token in _WHOLE:
        text = pattern.sub(token, text)
    out: list[str] = []
    for piece in re.split(r"[/、,，]", text):
        piece = piece.strip()
        if not piece:
            continue
        m = _PROTECTED.fullmatch(piece)
        alias = m.group(1) if m else _piece_alias(piece)
        if alias is None:
            return None
        if alias not in out:
            out.append(alias)
    return tuple(out) or None
