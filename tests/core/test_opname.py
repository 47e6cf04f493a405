from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from opcheck.core.errors import UsageError
from opcheck.core.opname import OpName, canonical

IDENT = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,12}", fullmatch=True)


@given(ns=IDENT, name=IDENT, overload=st.one_of(st.just(""), IDENT.filter(lambda s: s != "default")))
def test_round_trip(ns: str, name: str, overload: str) -> None:
    text = f"{ns}::{name}.{overload}" if overload else f"{ns}::{name}"
    assert str(OpName.parse(text)) == text


def test_bare_and_default_overload() -> None:
    assert canonical("add.Tensor") == "aten::add.Tensor"
    assert canonical("aten::relu.default") == "aten::relu"
    assert OpName.from_schema("npu_gelu(Tensor self, *, str approximate='none') -> Tensor", "npu").base == "npu_gelu"


@pytest.mark.parametrize("bad", ["", "aten::", "::x", "aten::add.", "a b", "aten::add.Tensor.out"])
def test_rejects(bad: str) -> None:
    with pytest.raises(UsageError):
        OpName.parse(bad, default_namespace="aten")
