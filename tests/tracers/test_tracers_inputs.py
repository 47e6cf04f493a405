from __future__ import annotations

import json
from pathlib import Path

import pytest

from opcheck.core.errors import UsageError
from opcheck.tracers.inputs import (
    InputSpec,
    TensorSpec,
    parse_input_shape,
    parse_input_spec,
    resolve,
)


def test_input_shape_single_and_several() -> None:
    assert parse_input_shape("1,3,224,224") == InputSpec((TensorSpec((1, 3, 224, 224)),))
    spec = parse_input_shape("1,3;2")
    assert [a.shape for a in spec.args] == [(1, 3), (2,)]
    assert all(a.dtype == "float32" for a in spec.args)


def test_compact_spec_names_become_kwargs_and_dtypes_normalise() -> None:
    spec = parse_input_spec("x:1,3,224,224:half;mask:1,128:bool")
    assert spec.args == ()
    assert spec.kwargs == {
        "x": TensorSpec((1, 3, 224, 224), "float16"),
        "mask": TensorSpec((1, 128), "bool"),
    }
    pos = parse_input_spec("1,8:long;scalar:float64")
    assert pos.args == (TensorSpec((1, 8), "int64"), TensorSpec((), "float64"))


def test_json_spec_inline_and_file(tmp_path: Path) -> None:
    doc = {"args": [{"shape": [2, 4]}], "kwargs": {"m": {"shape": [2], "dtype": "int64"}}}
    spec = parse_input_spec(json.dumps(doc))
    assert spec == InputSpec((TensorSpec((2, 4)),), {"m": TensorSpec((2,), "int64")})
    f = tmp_path / "spec.json"
    f.write_text(json.dumps([[1, 2]]))
    assert parse_input_spec(f"@{f}").args == (TensorSpec((1, 2)),)
    assert InputSpec.from_json(spec.to_json()) == spec


@pytest.mark.parametrize(
    "bad",
    ["x:1,a", "x:1,2:floaty", "x:1:float32:extra", "", "x:1;x:2", "x:1;3", "{not json"],
)
def test_bad_specs_are_usage_errors(bad: str) -> None:
    with pytest.raises(UsageError):
        parse_input_spec(bad)


def test_resolve_rejects_both() -> None:
    with pytest.raises(UsageError):
        resolve("1,2", "x:1,2")
    assert resolve(None, None).empty
