"""What people type, on the bundled catalog: Python API names (``F.grid_sample``,
``torch.nn.functional.grid_sample``, ``torch.isin``, ``Tensor.to``), bare names (the API's
last name), aclnn function names with or without their prefix. The API → op link is the
catalog's (torch_npu's per-API docs and data/api_overrides.yaml); a composite op is followed
to the per-rank backend ops of its name, labelled inferred."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.checker.names import Names
from opcheck.db.catalog import Catalog
from opcheck.db.engine import open_catalog


@pytest.fixture(scope="module")
def names(bundled_catalog: Path) -> Names:
    return Names(Catalog.load(open_catalog(bundled_catalog)))


@pytest.mark.parametrize("typed", ["grid_sample", "F.grid_sample",
                                   "torch.nn.functional.grid_sample"])
def test_grid_sample_reaches_grid_sampler_2d(names: Names, typed: str) -> None:
    m = names.match(typed)
    assert m.kind == "api" and m.name == "torch.nn.functional.grid_sample"
    # the API's composite op, then what the NPU receives where no kernel takes it whole
    assert m.ops[0] == "aten::grid_sampler" and "aten::grid_sampler_2d" in m.ops
    assert m.decomposed["aten::grid_sampler"] == ["aten::grid_sampler_2d", "aten::grid_sampler_3d"]
    assert "inferred" in m.describe()


def test_api_names_and_methods(names: Names) -> None:
    isin = names.match("torch.isin")
    assert isin.kind == "api" and "aten::isin.Tensor_Tensor" in isin.ops and not isin.decomposed
    to = names.match("Tensor.to")
    # no per-rank backend op is named after `to`: nothing is inferred
    assert to.kind == "api" and "aten::to.dtype" in to.ops and not to.decomposed
    assert names.match("torch.Tensor.to").ops == to.ops


def test_aclnn_names_with_and_without_prefix(names: Names) -> None:
    full = names.match("aclnnGridSampler2D")
    assert full.kind == "aclnn" and "aten::grid_sampler_2d" in full.ops
    assert names.match("GridSampler2D").ops == full.ops


def test_an_op_name_still_wins(names: Names) -> None:
    assert names.match("aten::grid_sampler_2d").ops == ["aten::grid_sampler_2d"]
    assert names.match("isin").kind == "overloads"
