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
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["ALIASES", "HARDWARE_HELP", "PRODUCTS", "PRODUCT_LIST", "SYNONYMS", "Product",
           "canonical_alias", "hardware_matches", "product_aliases", "slug_product",
           "soc_product"]


@dataclass(frozen=True)
class Product:
    """One Ascend product under every name it goes by.

    ``socs``: SoC version names as ``npu-smi``, logs and ``soc_version`` spell them (patterns,
    matched whole; ``Ascend910B`` without a digit is a first-generation 910, ``Ascend910B1`` an
    A2 chip). ``soc_dirs``: the lower-case names of CANN's per-SoC binary folders and
    ``AddConfig("ascend910b")`` (there ``ascend910b`` is the A2 family). ``slugs``: the
    hardware names contributed workarounds use (``data/workarounds``)."""

    alias: str
    doc_name: str  # what CANN's operator docs call it (the usual spelling)
    synonyms: tuple[str, ...] = ()
    socs: tuple[str, ...] = ()
    soc_dirs: tuple[str, ...] = ()
    slugs: tuple[str, ...] = ()

    @property
    def help_name(self) -> str:
        """``910B (A2)``: the alias, and the series name users type for it."""
        series = [s for s in self.synonyms if s[:1].isalpha()]
        return f"{self.alias} ({series[0]})" if series else self.alias


PRODUCT_LIST: tuple[Product, ...] = (
    Product("910A", "Atlas 训练系列产品 (Ascend 910)", ("910",),
            (r"Ascend910(?:A|B|ProA|ProB|PremiumA)?",), ("ascend910",), ("atlas-training",)),
    Product("910B",
            "Atlas A2 训练系列产品 / Atlas A2 推理系列产品 / Atlas 800I A2 / A200I A2 Box",
            ("A2",), (r"Ascend910B\d(?:-\d)?",), ("ascend910b",),
            ("atlas-a2-training", "atlas-a2-inference")),
    Product("910C", "Atlas A3 训练系列产品 / Atlas A3 推理系列产品", ("A3",),
            (r"Ascend910_93\d*",), ("ascend910_93",),
            ("atlas-a3-training", "atlas-a3-inference")),
    Product("310P", "Atlas 推理系列产品 (Ascend 310P)", (), (r"Ascend310P\d*",), ("ascend310p",),
            ("atlas-inference",)),
    Product("310B", "Atlas 200I/500 A2 推理产品", (), (r"Ascend310B\d*",), ("ascend310b",),
            ("atlas-200i-a2",)),
    Product("310", "Atlas 200/300/500 推理产品 (Ascend 310)", (), (r"Ascend310",),
            ("ascend310",)),
    Product("950", "Ascend 950PR / Ascend 950DT (昇腾910_95)", ("950PR", "950DT", "910_95"),
            (r"Ascend950\w*", r"Ascend910_95\d*"), ("ascend950", "ascend910_95"),
            ("ascend-950",)),
    Product("Kirin", "Kirin X90 / Kirin 9030 处理器系列产品"),
)

# alias → what the docs call it (the first spelling is the usual one)
PRODUCTS: dict[str, str] = {p.alias: p.doc_name for p in PRODUCT_LIST}
ALIASES: tuple[str, ...] = tuple(PRODUCTS)

# other names users give for the same product
SYNONYMS: dict[str, str] = {syn: p.alias for p in PRODUCT_LIST for syn in p.synonyms}

# The --hardware help, from the product list (every product, with its usual synonym).
HARDWARE_HELP = ("Target product: " + ", ".join(p.help_name for p in PRODUCT_LIST)
                 + "; default: every product the docs name")

_BY_ALIAS = {p.alias: p for p in PRODUCT_LIST}
_SOC_PATTERNS = [(re.compile(pat), p.alias) for p in PRODUCT_LIST for pat in p.socs]
_SOC_DIRS = {d: p.alias for p in PRODUCT_LIST for d in p.soc_dirs}
_SLUGS = {s: p.alias for p in PRODUCT_LIST for s in p.slugs}


def soc_product(name: str) -> str | None:
    """The product alias of a SoC name: ``Ascend910B1`` → 910B, ``Ascend910_9391`` → 910C,
    ``ascend910b`` (a binary folder) → 910B, ``Ascend910B`` (a first-generation SoC) → 910A."""
    text = name.strip()
    if text in _SOC_DIRS:
        return _SOC_DIRS[text]
    for pattern, alias in _SOC_PATTERNS:
        if pattern.fullmatch(text):
            return alias
    return None


def slug_product(slug: str) -> str | None:
    """The product alias of a workaround's hardware slug (None for ``all`` or an unknown one)."""
    return _SLUGS.get(slug)


def hardware_matches(slugs: Iterable[str], wanted: str | None) -> bool:
    """Whether an entry written for ``slugs`` applies to the ``--hardware`` a user named.
    No product named, ``all``, or a name that is no product alias: it applies (never hide an
    entry on a guess)."""
    listed = list(slugs)
    if wanted is None or not listed or "all" in listed:
        return True
    alias = canonical_alias(wanted)
    if alias is None:
        return True
    return any(slug_product(s) in (alias, None) for s in listed)


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


def product_rank(product: str) -> int:
    """A product's place in the product list (unknown names last): the order reports use."""
    return ALIASES.index(product) if product in ALIASES else len(ALIASES)


def product_names(products: Iterable[str]) -> str:
    return ", ".join(sorted(products, key=product_rank))
