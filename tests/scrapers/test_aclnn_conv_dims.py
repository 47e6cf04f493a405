"""Convolution dimensionality in aclnn pages' 约束说明: which of 1D/2D/3D a product's column
supports (``dims``) and the dtypes a dimensionality is limited to (``dims_dtype``)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.aclnn_docs import parse_page
from opcheck.scrapers.aclnn_page import AclnnPage
from opcheck.scrapers.rows import Origin

HICANN = Path("github/hicann/ops-nn")


def _page(text: str, name: str) -> AclnnPage:
    return parse_page(text, origin=Origin(name))


def _dims(page: AclnnPage) -> list[tuple[int, str, str, str, tuple[str, ...]]]:
    return [(c.line, c.kind, c.subject, c.value, c.products) for c in page.constraints
            if c.kind.startswith("dims")]


def test_per_product_columns_and_dims(fixtures: Path) -> None:
    name = "aclnnConvToy.md"
    page = _page((fixtures / "aclnn" / name).read_text(encoding="utf-8"), name)
    assert _dims(page) == [
        # the bias row of the 310P column, then the "其他约束" row of each column
        (123, "dims_dtype", "3D", "FLOAT16", ("310P",)),
        (134, "dims", "", "2", ("310B",)),  # 仅支持2D卷积…暂不支持1D、3D卷积
        (139, "dims_dtype", "3D", "FLOAT16", ("310P",)),
        # a bullet outside the table names no product: kept, applied to none
        (149, "dims", "", "1,2", ()),
    ]
    by_line = {c.line: c for c in page.constraints}
    # the 950 column names what works and limits nothing: plain text, with its product
    assert (by_line[143].kind, by_line[143].products) == ("text", ("950",))
    # a cell spanning two columns belongs to both products
    assert by_line[119].products == ("910B", "910C", "310B")
    # other kinds in a column keep working, and now carry the column's product
    assert (by_line[130].kind, by_line[130].products) == ("rank_max", ("910B", "910C"))


def test_a_dims_dtype_line_without_a_dtype_fails_loudly(fixtures: Path) -> None:
    text = (fixtures / "aclnn" / "aclnnConvToy.md").read_text(encoding="utf-8")
    bad = text.replace("3D卷积正向场景仅支持FLOAT16", "3D卷积正向场景仅支持NCDHW")
    with pytest.raises(ScrapeError, match="no dtype"):
        _page(bad, "aclnnConvToy.md")


@pytest.mark.upstream
@pytest.mark.parametrize("version", ["v9.0.0", "v9.1.0"])
def test_real_convolution_pages(upstream: Path, version: str) -> None:
    base = upstream / HICANN / version / "conv"
    fwd = base / "convolution_forward" / "docs" / "aclnnConvolution.md"
    bwd = base / "convolution_backward" / "docs" / "aclnnConvolutionBackward.md"
    got = {(k, s, v, p) for _, k, s, v, p in
           _dims(_page(fwd.read_text(encoding="utf-8"), str(fwd)))}
    # 310B: "当前仅支持2D卷积…暂不支持1D、3D卷积"; 310P: "3D卷积正向场景仅支持FLOAT16"
    assert got == {("dims", "", "2", ("310B",)), ("dims_dtype", "3D", "FLOAT16", ("310P",))}
    back = {(k, v, p) for _, k, _, v, p in
            _dims(_page(bwd.read_text(encoding="utf-8"), str(bwd)))}
    # "当前仅支持1D和2D卷积的反向传播，暂不支持3D卷积的反向传播" in the 310P/910A column
    assert back == {("dims", "1,2", ("310P", "910A"))}


@pytest.mark.upstream
def test_8_5_0_states_no_dimensionality_limit(upstream: Path) -> None:
    """8.5.0's page documents only A2/A3 and 950: nothing limits 3-D there."""
    fwd = upstream / HICANN / "v8.5.0" / "conv" / "convolution_forward" / "docs" / \
        "aclnnConvolution.md"
    assert _dims(_page(fwd.read_text(encoding="utf-8"), str(fwd))) == []
