"""The CANN operator pages (aclnn*.md): fixtures written for the tests, then the real pages."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.core.products import canonical_alias, product_aliases
from opcheck.scrapers.aclnn_docs import (
    AclnnPage,
    PageScan,
    dtype_tokens,
    html_tables,
    parse_page,
    scan_pages,
    skip_reason,
)
from opcheck.scrapers.rows import Origin

HICANN = "github/hicann"
TRANSFORMER = "c29bc1069d3252c641e2aa059ec88f392d3f05ac"  # ops-transformer has no tags


def _page(fixtures: Path, name: str) -> AclnnPage:
    path = fixtures / "aclnn" / name
    return parse_page(path.read_text(encoding="utf-8"),
                      origin=Origin(f"fixtures/aclnn/{name}"))


# --------------------------------------------------------------------------- products


@pytest.mark.parametrize(("name", "aliases"), [
    ("Atlas 训练系列产品", ("910A",)),
    ("Atlas 推理系列产品 ", ("310P",)),
    ("Atlas A2 训练系列产品/Atlas 800I A2 推理产品/A200I A2 Box 异构组件", ("910B",)),
    ("Atlas A3 训练系列产品/Atlas A3 推理系列产品", ("910C",)),
    ("Atlas 200I/500 A2 推理产品", ("310B",)),
    ("Atlas 200/300/500 推理产品", ("310",)),
    ("昇腾910_95 AI处理器", ("950",)),
    ("Ascend 950PR/Ascend 950DT", ("950",)),
    ("Atlas A3 训练系列产品/Atlas A3 推理系列产品/Ascend 950PR/Ascend 950DT", ("910C", "950")),
    ("Atlas A2训练系列产品/Atlas 800I A2推理产品/A200I A2 Box异构组件", ("910B",)),
    ("cubeMathType", None),
    ("", None),
])
def test_product_aliases(name: str, aliases: tuple[str, ...] | None) -> None:
    assert product_aliases(name) == aliases


def test_canonical_alias() -> None:
    assert canonical_alias("a2") == "910B"
    assert canonical_alias("910c") == "910C"
    assert canonical_alias("310P") == "310P"
    assert canonical_alias("H100") is None


def test_dtype_tokens_canonical_and_next_to_chinese() -> None:
    assert dtype_tokens("不支持BFLOAT16、INT4。") == ("BFLOAT16", "INT4")
    assert dtype_tokens("FLOAT32、FLOAT64、FP16、BF16、FLOAT") == (
        "FLOAT", "DOUBLE", "FLOAT16", "BFLOAT16")
    assert dtype_tokens("aclIntArray*、INT64_MAX") == ()


def test_html_table_spans() -> None:
    text = ("x\n<table><tr><th>a</th><th>b</th></tr>\n"
            "<tr><td rowspan=\"2\">1</td><td>2</td></tr>\n<tr><td>3</td></tr>\n"
            "<tr><td colspan=\"2\">4</td></tr></table>\n")
    [t] = html_tables(text)
    assert t.header == ("a", "b")
    assert t.rows == ((3, ("1", "2")), (4, ("1", "3")), (5, ("4", "4")))
    assert (t.line, t.end_line) == (2, 5)


# --------------------------------------------------------------------------- fixture pages


def test_html_page_products_and_params(fixtures: Path) -> None:
    page = _page(fixtures, "aclnnScaleRows.md")
    assert page.functions == ("aclnnScaleRows",)
    assert page.param_form == "html"
    assert [(p.products, p.supported, p.line) for p in page.products] == [
        (("950",), True, 7), (("910C",), True, 8), (("910B",), True, 9),
        (("310B",), False, 10), (("310P",), True, 11), (("910A",), True, 12)]
    assert page.supported_on() == ("950", "910C", "910B", "310P", "910A")
    rows = {p.param: p for p in page.params}
    # workspaceSize/executor/workspace/stream are plumbing, not parameters
    assert set(rows) == {"rows", "axis", "result"}
    # the bracketed remark is not read as a dtype list, INT8 stays (it is before the remark)
    assert rows["rows"].dtypes == ("FLOAT16", "FLOAT", "BFLOAT16", "INT8")
    assert rows["rows"].notes == "shape为[B,S]或[S]。"
    assert (rows["rows"].formats, rows["rows"].ranks, rows["rows"].non_contiguous) == (
        ("ND",), "1-8", True)
    assert (rows["rows"].line, rows["result"].line) == (39, 59)
    assert rows["axis"].non_contiguous is None and rows["axis"].direction == "属性"
    assert rows["result"].formats == ("ND", "NZ") and rows["result"].non_contiguous is False
    # per-product dtypes inside the cell: the union, and one exception per product run
    assert rows["result"].dtypes == ("FLOAT16", "BFLOAT16")


def test_html_page_exceptions(fixtures: Path) -> None:
    page = _page(fixtures, "aclnnScaleRows.md")
    got = [(e.products, e.kind, e.dtypes, e.params, e.conditional, e.line)
           for e in page.exceptions]
    assert got == [
        (("910A",), "supports", ("FLOAT16",), ("result",), False, 59),
        (("910B",), "supports", ("FLOAT16", "BFLOAT16"), ("result",), False, 59),
        (("910A", "310P"), "not", ("BFLOAT16",), (), False, 74),
        (("950",), "only", ("FLOAT16",), ("rows",), False, 76),
        (("950",), "note", (), ("axis",), True, 77),
        (("950",), "supports", ("FLOAT",), ("rows", "axis"), True, 78),
    ]
    assert page.exceptions[2].text == "不支持BFLOAT16。"


def test_html_page_return_codes_with_short_rowspan(fixtures: Path) -> None:
    page = _page(fixtures, "aclnnScaleRows.md")
    got = [(r.name, r.code, r.condition, r.line) for r in page.return_codes]
    assert got == [
        ("ACLNN_ERR_PARAM_NULLPTR", 161001, "rows或result为空指针。", 87),
        ("ACLNN_ERR_PARAM_INVALID", 161002, "rows的数据类型不在支持范围内。", 88),
        ("ACLNN_ERR_PARAM_INVALID", 161002, "axis超出rows的维度范围。", 89),
        # the rowspan says 2 but a third row follows: it continues the code above
        ("ACLNN_ERR_PARAM_INVALID", 161002, "rows的维度大于8。", 90),
    ]


def test_constraints(fixtures: Path) -> None:
    page = _page(fixtures, "aclnnScaleRows.md")
    got = [(c.line, c.kind, c.subject, c.value, c.products) for c in page.constraints]
    assert got == [
        (106, "rank_max", "rows", "8", ()),
        (107, "range", "axis", "-8,7", ()),
        (108, "size_max", "rows", "1024", ()),
        (109, "text", "", "", ("310P",)),
        (110, "only", "ND", "ND格式输入", ("310P",)),
        (111, "text", "", "", ()),
    ]
    assert page.constraints[0].text == "rows的维度不超过8维。"


def test_list_page_two_functions(fixtures: Path) -> None:
    page = _page(fixtures, "aclnnShift&aclnnInplaceShift.md")
    assert page.functions == ("aclnnShift", "aclnnInplaceShift")
    assert page.param_form == "list"
    got = [(p.function, p.param, p.direction, p.dtypes, p.formats, p.non_contiguous, p.line)
           for p in page.params]
    assert got == [
        ("aclnnShift", "self", "计算输入", ("INT32", "INT64"), ("ND",), True, 18),
        # no dtype of its own: the union of its per-product sub-bullets
        ("aclnnShift", "out", "计算输出", ("INT32", "INT64"), ("ND",), False, 19),
        ("aclnnInplaceShift", "selfRef", "计算输入", ("INT32",), (), None, 36),
    ]
    assert [(e.products, e.params, e.dtypes) for e in page.exceptions] == [
        (("910B",), ("out",), ("INT32",)), (("910C",), ("out",), ("INT32", "INT64"))]
    codes = [(r.function, r.code, r.condition, r.line) for r in page.return_codes]
    assert codes == [
        ("aclnnShift", 161001, "self或out是空指针。", 28),
        ("aclnnShift", 161002, "self的数据类型不在支持范围内。", 29),
        ("aclnnShift", 161002, "self与out的shape不一致。", 30),
        ("aclnnInplaceShift", 161001, "selfRef是空指针。", 40),
    ]


def test_pipe_page(fixtures: Path) -> None:
    page = _page(fixtures, "aclnnTilePipe.md")
    assert page.param_form == "pipe"
    assert [(p.param, p.dtypes, p.dtype_text) for p in page.params] == [
        ("self", ("FLOAT", "FLOAT16"), "FLOAT、FLOAT16"),
        ("multiples", (), "aclIntArray*"),
        ("out", ("FLOAT", "FLOAT16"), "FLOAT、FLOAT16")]
    assert [(r.code, r.condition) for r in page.return_codes] == [
        (161001, "self为空指针。"), (161002, "self的维度超过8。"),
        (161002, "multiples的长度小于self的维度。")]
    assert page.constraints == ()


def test_skip_reasons(fixtures: Path) -> None:
    pending = (fixtures / "aclnn" / "aclnnPending.md").read_text(encoding="utf-8")
    assert skip_reason("x/aclnnPending.md", pending) is not None
    assert "placeholder" in (skip_reason("x/aclnnPending.md", pending) or "")
    assert "return-code" in (skip_reason("x/docs/zh/context/aclnn返回码.md", "# x") or "")
    assert "English" in (skip_reason("x/aclnnFoo_en.md", "# x") or "")
    helper = "# aclnnSize\n\n## 产品支持情况\n\n## aclnnSize\n\naclnnStatus aclnnSize(int *n)\n"
    assert "helper" in (skip_reason("x/aclnnSize.md", helper) or "")
    page = (fixtures / "aclnn" / "aclnnScaleRows.md").read_text(encoding="utf-8")
    assert skip_reason("x/aclnnScaleRows.md", page) is None
    scan = scan_pages([(Origin("a/aclnnPending.md"), pending),
                       (Origin("a/aclnnScaleRows.md"), page)])
    assert [p.path for p in scan.pages] == ["a/aclnnScaleRows.md"]
    assert [path for path, _ in scan.skipped] == ["a/aclnnPending.md"]


def _broken(fixtures: Path, old: str, new: str) -> str:
    text = (fixtures / "aclnn" / "aclnnScaleRows.md").read_text(encoding="utf-8")
    assert old in text
    return text.replace(old, new, 1)


@pytest.mark.parametrize(("old", "new", "message", "line"), [
    ("<term>Atlas 200I/500 A2 推理产品</term> | ×", "<term>Atlas Z9 推理产品</term> | ×",
     "not a known product name", 10),
    ("| <term>Atlas 推理系列产品</term> | √ |", "| <term>Atlas 推理系列产品</term> | 部分 |",
     "product support mark", 11),
    ("<tr><td>ACLNN_ERR_PARAM_NULLPTR</td><td>161001</td>",
     "<tr><td>空指针</td><td>见下</td>", "return-code row without a code", 87),
    ("- <term>Atlas 训练系列产品</term>、", "- <term>Atlas X1 训练卡</term>、",
     "not a known product name", 74),
])
def test_unknown_structure_fails_with_file_and_line(fixtures: Path, old: str, new: str,
                                                    message: str, line: int) -> None:
    with pytest.raises(ScrapeError, match=message) as err:
        parse_page(_broken(fixtures, old, new), origin=Origin("fixtures/aclnnScaleRows.md"))
    assert (err.value.source, err.value.line) == ("fixtures/aclnnScaleRows.md", line)


def test_parameter_section_without_table_or_list_fails(fixtures: Path) -> None:
    text = (fixtures / "aclnn" / "aclnnScaleRows.md").read_text(encoding="utf-8")
    start = text.index("  <table><colgroup>")
    end = text.index("</tbody></table>") + len("</tbody></table>")
    with pytest.raises(ScrapeError, match="neither in a table nor a list"):
        parse_page(text[:start] + "  见上文。\n" + text[end:], origin=Origin("f.md"))


# --------------------------------------------------------------------------- real pages


def _lib_dir(upstream: Path, lib: str, version: str) -> Path:
    return upstream / HICANN / lib / version


@cache
def _scan(root: str, lib: str, version: str) -> PageScan:
    base = Path(root)
    d = _lib_dir(base, lib, version)
    paths = sorted(p for p in d.rglob("aclnn*.md") if "docs" in p.relative_to(d).parts)
    return scan_pages((Origin(str(p.relative_to(base))), p.read_text(encoding="utf-8"))
                      for p in paths)


def _real(upstream: Path, lib: str, version: str, name: str) -> AclnnPage:
    [page] = [p for p in _scan(str(upstream), lib, version).pages
              if p.path.endswith(f"/{name}") and "/experimental/" not in p.path]
    return page


# (parsed, skipped) per library and version: every aclnn*.md under a docs/ folder is one or
# the other (the return-code reference pages under docs/zh/context/ are the skipped 1 each)
COUNTS = {
    ("ops-cv", "v8.5.0"): (39, 3),
    ("ops-cv", "v9.0.0"): (46, 1),
    ("ops-cv", "v9.1.0"): (46, 1),
    ("ops-math", "v8.5.0"): (273, 10),
    ("ops-math", "v9.0.0"): (318, 4),
    ("ops-math", "v9.1.0"): (364, 6),
    ("ops-nn", "v8.5.0"): (354, 7),
    ("ops-nn", "v9.0.0"): (377, 3),
    ("ops-nn", "v9.1.0"): (443, 7),
    ("ops-transformer", TRANSFORMER): (78, 38),
}


@pytest.mark.upstream
@pytest.mark.parametrize(("lib", "version"), sorted(COUNTS))
def test_every_real_page_parsed_or_skipped(upstream: Path, lib: str, version: str) -> None:
    scan = _scan(str(upstream), lib, version)
    assert (len(scan.pages), len(scan.skipped)) == COUNTS[lib, version]
    assert all(reason for _, reason in scan.skipped)
    for page in scan.pages:  # a parsed page always has products and parameters
        assert page.products and page.params and page.functions, page.path


@pytest.mark.upstream
def test_cann_9_1_0_totals(upstream: Path) -> None:
    """The upstream README counts 983 pages at 9.1.0 (+ ops-transformer head)."""
    scans = [_scan(str(upstream), lib, v) for lib, v in COUNTS
             if v in ("v9.1.0", TRANSFORMER)]
    assert sum(len(s.pages) + len(s.skipped) for s in scans) == 983
    forms = Counter(p.param_form for s in scans for p in s.pages)
    assert forms == Counter({"html": 875, "list": 43, "pipe": 13})
    reasons = Counter(r.split(" (")[0].split(":")[0] for s in scans for _, r in s.skipped)
    assert reasons == Counter({
        "placeholder": 37,
        "no section for a GetWorkspaceSize function": 5,
        "return-code reference page, not a function": 4,
        "product section is not a 产品 | 是否支持 table": 4,
        "no aclnnXxxGetWorkspaceSize function": 1,
        "the GetWorkspaceSize heading is inside an unclosed code fence": 1,
    }), reasons


@pytest.mark.upstream
def test_real_cast_no_bfloat16_on_910a_310p(upstream: Path) -> None:
    page = _real(upstream, "ops-math", "v9.1.0", "aclnnCast.md")
    assert "310B" not in page.supported_on() and {"910A", "310P"} <= set(page.supported_on())
    self_ = next(p for p in page.params if p.param == "self")
    assert "BFLOAT16" in self_.dtypes and "INT4" not in self_.dtypes
    out = next(p for p in page.params if p.param == "out")
    assert out.dtypes[-1] == "INT4"  # "INT4（暂不支持非连续Tensor）"
    exc = page.exceptions[0]
    assert (exc.products, exc.kind, exc.dtypes, exc.line) == (
        ("910A", "310P"), "not", ("BFLOAT16", "INT4"), 119)
    tiling = [r for r in page.return_codes if r.code == 561002]
    assert [(r.name, r.line) for r in tiling] == [("ACLNN_ERR_INNER_TILING_ERROR", 163)]
    assert len([r for r in page.return_codes if r.code == 161002]) == 5


@pytest.mark.upstream
def test_real_cast_8_5_0_names_only_a2_a3(upstream: Path) -> None:
    """CANN 8.5.0 documents aclnnCast for A2/A3 only: 910A/310P facts start at 9.0.0."""
    page = _real(upstream, "ops-math", "v8.5.0", "aclnnCast.md")
    assert page.supported_on() == ("910C", "910B")
    assert [e.products for e in page.exceptions] == [("910B", "910C")]


@pytest.mark.upstream
def test_real_repeat_interleave_int_with_dim_no_double(upstream: Path) -> None:
    page = _real(upstream, "ops-nn", "v9.1.0", "aclnnRepeatInterleaveIntWithDim.md")
    assert page.supported_on() == ("950", "910C", "910B")
    params = {p.param: p for p in page.params}  # "self（aclTensor*）" → self
    assert set(params) == {"self", "repeats", "dim", "outputSize", "out"}
    assert "DOUBLE" not in params["self"].dtypes
    assert params["self"].dtypes == ("UINT8", "INT8", "INT16", "INT32", "INT64", "BOOL",
                                     "FLOAT16", "BFLOAT16", "FLOAT")
    assert (params["self"].ranks, params["self"].line) == ("1-8", 75)


@pytest.mark.upstream
def test_real_index_complex64(upstream: Path) -> None:
    page = _real(upstream, "ops-nn", "v9.1.0", "aclnnIndex.md")
    self_ = next(p for p in page.params if p.param == "self")
    assert "COMPLEX64" in self_.dtypes  # listed in the table …
    no_c64 = [(e.products, e.line) for e in page.exceptions
              if e.kind == "not" and "COMPLEX64" in e.dtypes]
    # … and excluded below it on every product but 950 and 310B
    assert no_c64 == [(("910A", "310P"), 124), (("910B", "910C"), 125)]


@pytest.mark.upstream
def test_real_flash_attention_score(upstream: Path) -> None:
    page = _real(upstream, "ops-transformer", TRANSFORMER, "aclnnFlashAttentionScore.md")
    # A2 training √ but 800I A2 / A200I A2 Box ×: the alias is supported when any row is
    assert [(p.name, p.supported) for p in page.products if p.products == ("910B",)] == [
        ("Atlas A2 训练系列产品", True), ("Atlas 800I A2 推理产品", False),
        ("A200I A2 Box 异构组件", False)]
    assert page.supported_on() == ("910B",)
    mask = next(p for p in page.params if p.param == "attenMaskOptional")
    assert mask.dtypes == ("BOOL", "UINT8")
    assert "[B,N,S,S]、[B,1,S,S]、[1,1,S,S]、[S,S]" in mask.notes
    assert mask.ranks == "0、2、4"
    ranges = {(c.subject, c.value, c.line) for c in page.constraints if c.kind == "range"}
    assert {("D", "1,768", 391), ("N", "1,256", 389), ("keepProb", "0,1", 396)} <= ranges
    assert any("attenMaskOptional" in c.text for c in page.constraints)


@pytest.mark.upstream
def test_real_grid_sampler_blocks_under_a_product(upstream: Path) -> None:
    page = _real(upstream, "ops-cv", "v9.1.0", "aclnnGridSampler2D.md")
    no_bf16 = [e for e in page.exceptions if e.kind == "not"]
    assert [(e.products, e.dtypes, e.params, e.line) for e in no_bf16] == [
        (("910A",), ("BFLOAT16",), ("input", "grid", "out"), 263)]
    ai_core = [e for e in page.exceptions if e.products == ("310P",) and e.dtypes]
    # "当接口运行在AI Core时…": FLOAT32 is a condition for the AI Core path, not a limit
    assert [(e.kind, e.dtypes, e.conditional) for e in ai_core] == [
        ("supports", ("FLOAT",), True)]


@pytest.mark.upstream
def test_real_list_form_pages(upstream: Path) -> None:
    digamma = _real(upstream, "ops-math", "v9.1.0", "aclnnDigamma.md")
    assert digamma.param_form == "list"
    assert [(p.param, p.dtypes) for p in digamma.params] == [
        ("self", ("FLOAT", "FLOAT16", "DOUBLE")), ("out", ("FLOAT", "FLOAT16", "DOUBLE"))]
    assert [(r.code, r.line) for r in digamma.return_codes] == [
        (161001, 45), (161002, 46), (161002, 47), (161002, 48)]
    nanmedian = _real(upstream, "ops-nn", "v8.5.0", "aclnnNanMedian.md")
    assert nanmedian.supported_on() == ("910C", "910B")
    self_ = next(p for p in nanmedian.params if p.param == "self")
    assert self_.dtypes == ("FLOAT", "FLOAT16", "BFLOAT16", "UINT8", "INT8", "INT16", "INT32",
                            "INT64")
    assert [e.params for e in nanmedian.exceptions] == [("self",), ("out",)]


@pytest.mark.upstream
def test_real_two_functions_on_one_page(upstream: Path) -> None:
    page = _real(upstream, "ops-math", "v9.1.0", "aclnnSub&aclnnInplaceSub.md")
    assert page.functions == ("aclnnSub", "aclnnInplaceSub")
    assert "310P" not in page.supported_on()
    assert [(e.function, e.products, e.dtypes) for e in page.exceptions] == [
        ("aclnnSub", ("910A", "310B"), ("BFLOAT16",)),
        ("aclnnInplaceSub", ("910A", "310B"), ("BFLOAT16",))]
    assert {p.param for p in page.params if p.function == "aclnnInplaceSub"} == {
        "selfRef", "other", "alpha"}


@pytest.mark.upstream
def test_real_pipe_and_rank_limits(upstream: Path) -> None:
    scan = _scan(str(upstream), "ops-nn", "v9.1.0")
    page = next(p for p in scan.pages if p.path.endswith("/aclnnIndexPutImpl.md"))
    assert [(c.subject, c.value, c.line) for c in page.constraints if c.kind == "rank_max"] == [
        ("indices", "8", 247), ("selfRef", "4", 256)]
    tile = next(p for p in _scan(str(upstream), "ops-math", "v9.1.0").pages
                if p.path.endswith("experimental/math/tile/docs/aclnnRepeat.md"))
    assert tile.param_form == "pipe"
    assert [p.param for p in tile.params] == ["self", "repeats", "out"]


def test_return_codes_as_markdown_bullets(fixtures: Path) -> None:
    text = (fixtures / "aclnn" / "aclnnShift&aclnnInplaceShift.md").read_text(encoding="utf-8")
    start, end = text.index("  ```text"), text.index("  ```\n") + len("  ```\n")
    bullets = ("* **161001 (ACLNN_ERR_PARAM_NULLPTR)**：\n"
               "  1. self是空指针。\n"
               "* **161002 (ACLNN_ERR_PARAM_INVALID)**：\n"
               "  1. self的数据类型不在支持范围内。\n"
               "  2. self的维度超过8。\n"
               "\n"
               "第二段接口无额外校验。\n")
    page = parse_page(text[:start] + bullets + text[end:], origin=Origin("f.md"))
    got = [(r.code, r.condition, r.line) for r in page.return_codes if r.function == "aclnnShift"]
    # a "**161002 (…)**：" line heads the numbered conditions; the plain paragraph ends them
    assert got == [(161001, "self是空指针。", 27), (161002, "self的数据类型不在支持范围内。", 29),
                   (161002, "self的维度超过8。", 30)]


# --------------------------------------------------------------------------- issue 26: 3, 4, 7


@pytest.mark.upstream
def test_real_gelu_per_product_list_is_exhaustive(upstream: Path) -> None:
    """aclnnGelu.md line 115: "<310B>、<310P>、<910A>：数据类型支持FLOAT、FLOAT16" limits those
    products (it was kept as a 'supports' note that nothing applied)."""
    page = _real(upstream, "ops-nn", "v9.1.0", "aclnnGelu.md")
    [e] = [e for e in page.exceptions if e.line == 115]
    assert (e.kind, e.dtypes, e.params, e.conditional) == ("only", ("FLOAT", "FLOAT16"), (),
                                                          False)
    assert set(e.products) == {"310B", "310P", "910A"}


@pytest.mark.upstream
def test_real_acos_extra_bfloat16_on_a3(upstream: Path) -> None:
    page = _real(upstream, "ops-math", "v9.1.0", "aclnnAcos&aclnnInplaceAcos.md")
    [e] = [e for e in page.exceptions if e.line == 132]
    assert (e.kind, e.products, e.dtypes) == ("extra", ("910C",), ("BFLOAT16",))
    assert e.params == ("input", "out")
    table = {p.param: p.dtypes for p in page.params if p.function == "aclnnAcos"}
    assert table and not any("BFLOAT16" in d for d in table.values())


@pytest.mark.upstream
def test_real_9_1_0_term_wrapped_dtype_cells_are_read(upstream: Path) -> None:
    """9.1.0 writes some dtype cells as ``<term> FLOAT、FLOAT16、DOUBLE、BFLOAT16</term>``: they
    were read as no dtype at all (46 parameters of 18 functions, never judged)."""
    page = _real(upstream, "ops-math", "v9.1.0", "aclnnLog1p&aclnnInplaceLog1p.md")
    got = {p.param: p.dtypes for p in page.params if p.function == "aclnnLog1p"}
    assert got["self"] == ("INT8", "INT16", "INT32", "INT64", "UINT8", "BOOL", "FLOAT",
                           "FLOAT16", "DOUBLE", "BFLOAT16")
    assert "COMPLEX64" not in got["out"] and "FLOAT" in got["out"]
    # no statement is made of a <term> that names no product
    assert all(e.products for e in page.exceptions)
    # every 9.1.0 page: a dtype cell holding dtype names inside a <term> yields them
    empty = [(p.function, p.param) for lib in ("ops-math", "ops-nn", "ops-cv")
             for page in _scan(str(upstream), lib, "v9.1.0").pages for p in page.params
             if "<term>" in p.dtype_text and dtype_tokens(p.dtype_text.replace("<term>", " ")
                                                          .replace("</term>", " "))
             and not p.dtypes]
    assert empty == []


@pytest.mark.upstream
def test_real_format_with_non_contiguous_note(upstream: Path) -> None:
    """``ND（支持非连续Tensor）`` in the format column is the format ND and non-contiguous
    support, not a format of its own."""
    [path] = [p for p in (upstream / HICANN / "ops-transformer").rglob(
        "aclnnMoeDistributeCombineV3.md")]
    page = parse_page(path.read_text(encoding="utf-8"),
                      origin=Origin(str(path.relative_to(upstream))))
    rows = [p for p in page.params if "非连续" in p.dtype_text + "".join(p.formats)]
    assert rows == []
    x = next(p for p in page.params if p.param == "expandX")
    assert x.formats == ("ND",) and x.non_contiguous is True
