"""One vocabulary for products: aliases, SoC names, doc names and workaround slugs."""

from __future__ import annotations

import pytest

from opcheck.contrib.workarounds import HARDWARE
from opcheck.core.products import (
    ALIASES,
    HARDWARE_HELP,
    PRODUCT_LIST,
    canonical_alias,
    hardware_matches,
    product_aliases,
    slug_product,
    soc_product,
)


def test_the_hardware_help_names_every_product() -> None:
    named = HARDWARE_HELP.split(":", 1)[1].split(";")[0]
    assert [w.split(" (")[0].strip() for w in named.split(",")] == list(ALIASES)
    assert "910B (A2)" in HARDWARE_HELP and "910C (A3)" in HARDWARE_HELP


@pytest.mark.parametrize(("soc", "alias"), [
    ("Ascend910B1", "910B"), ("Ascend910B4-1", "910B"), ("ascend910b", "910B"),
    ("Ascend910B", "910A"),  # a first-generation 910 bin, not an A2 chip
    ("Ascend910ProB", "910A"), ("ascend910", "910A"),
    ("Ascend910_9391", "910C"), ("ascend910_93", "910C"),
    ("Ascend310P3", "310P"), ("ascend310p", "310P"), ("Ascend310B4", "310B"),
    ("Ascend310", "310"), ("Ascend950PR_9579", "950"), ("ascend910_95", "950"),
])
def test_soc_names_name_their_product(soc: str, alias: str) -> None:
    assert soc_product(soc) == alias


def test_unknown_soc_is_none() -> None:
    assert soc_product("Ascend999") is None and soc_product("gpu") is None


def test_every_workaround_slug_is_a_products_slug() -> None:
    slugs = {s for p in PRODUCT_LIST for s in p.slugs}
    assert set(HARDWARE) - {"all"} == slugs
    assert all(slug_product(s) is not None for s in slugs)


def test_doc_names_and_synonyms_come_back_to_their_alias() -> None:
    for p in PRODUCT_LIST:
        assert canonical_alias(p.alias.lower()) == p.alias
        assert all(canonical_alias(s) == p.alias for s in p.synonyms)
        assert product_aliases(p.doc_name.split(" (")[0].split(" / ")[0]) == (p.alias,)


def test_workaround_hardware_against_the_named_product() -> None:
    assert hardware_matches(["atlas-a2-training"], "A2")
    assert hardware_matches(["atlas-a2-training"], "910b")
    assert not hardware_matches(["atlas-a2-training"], "910A")
    assert hardware_matches(["all"], "910A") and hardware_matches(["atlas-training"], None)
    assert hardware_matches(["atlas-a2-training"], "Atlas")  # no alias: never hidden on a guess
