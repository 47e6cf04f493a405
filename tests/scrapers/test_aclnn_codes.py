"""aclnn return codes from the CANN operator docs: small pages written here, then the real ones."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.aclnn_codes import (
    ReturnCodeRow,
    is_code_page,
    is_function_page,
    page_function,
    parse_return_codes,
)
from opcheck.scrapers.rows import Origin

PAGE = "github/hicann/ops-x/v1.0.0/math/thing/docs/aclnnThing.md"
SHARED = "github/hicann/ops-x/v1.0.0/docs/zh/context/aclnn返回码.md"

FUNCTION_PAGE = """# aclnnThing

- **返回值：**

  aclnnStatus：返回状态码。
  <table>
  <thead>
    <tr>
      <th>返回码</th>
      <th>错误码</th>
      <th>描述</th>
    </tr>
  </thead>
  <tbody>
    <tr>
      <td>ACLNN_ERR_PARAM_NULLPTR</td>
      <td>161001</td>
      <td>传入的self、out是空指针。</td>
    </tr>
    <tr>
      <td rowspan="2">ACLNN_ERR_PARAM_INVALID</td>
      <td rowspan="2">161002</td>
      <td>self的数据类型不在支持的范围之内。</td>
    </tr>
    <tr>
      <td>self和out的shape不一致。</td>
    </tr>
    <tr>
      <td>ACLNN_ERR_INNER_TILING_ERROR</td>
      <td>561002</td>
      <td>在Atlas 推理系列产品上，self的取值超过255。</td>
    </tr>
  </tbody>
  </table>

  <table><tr><th>参数名</th><th>输入/输出</th><th>描述</th></tr>
  <tr><td>self</td><td>输入</td><td>not a code table</td></tr></table>
"""


def parse(text: str, path: str = PAGE) -> list[ReturnCodeRow]:
    return parse_return_codes(text, origin=Origin(path))


def test_function_page_rows_with_rowspan_triggers_and_lines() -> None:
    rows = parse(FUNCTION_PAGE)
    assert [(r.function, r.name, r.code, r.line) for r in rows] == [
        ("aclnnThing", "ACLNN_ERR_PARAM_NULLPTR", "161001", 18),
        ("aclnnThing", "ACLNN_ERR_PARAM_INVALID", "161002", 23),
        ("aclnnThing", "ACLNN_ERR_PARAM_INVALID", "161002", 26),
        ("aclnnThing", "ACLNN_ERR_INNER_TILING_ERROR", "561002", 31),
    ]
    lines = FUNCTION_PAGE.splitlines()
    assert all(r.description in lines[r.line - 1] for r in rows)
    assert [r.triggers for r in rows] == [("nullptr",), ("dtype",), ("shape",), ("product", "value")]
    assert rows[0].params == ("self", "out") and rows[3].params == ("self",)
    assert rows[1].description == "self的数据类型不在支持的范围之内。"


def test_shared_page_has_no_function_and_keeps_families() -> None:
    text = """# aclnn返回码
<table><thead><tr><th>状态码名称</th><th>状态码值</th><th>状态码说明</th></tr></thead>
<tbody><tr><td><p>ACLNN_SUCCESS</p></td><td><p>0</p></td><td><p>成功。</p></td></tr>
<tr><td><p>ACLNN_ERR_INNER_XXX</p></td><td><p>561xxx</p></td><td><p>API内部发生异常。</p></td></tr>
<tr><td><p>ACLNN_ERR_INNER_NULLPTR</p></td>
<td><p>561103</p></td>
<td><p>内部异常：出现了nullptr。</p></td></tr></tbody></table>
"""
    rows = parse(text, SHARED)
    assert [(r.function, r.name, r.code, r.line) for r in rows] == [
        ("", "ACLNN_SUCCESS", "0", 3), ("", "ACLNN_ERR_INNER_XXX", "561xxx", 4),
        ("", "ACLNN_ERR_INNER_NULLPTR", "561103", 7)]
    assert rows[2].params == ()  # the shared table names no function's parameters


def test_upstream_layout_slips_read_as_the_page_shows_them() -> None:
    # a missing </tr>, rowspan="0" (to the end), a span opener row without a description,
    # a description row past a span counted too short, two codes in one cell
    text = """<table><tr><th>返回值</th><th>错误码</th><th>描述</th></tr>
<tr><td>ACLNN_ERR_PARAM_NULLPTR</td><td>161001</td><td>a是空指针。</td>
<tr><td rowspan="3">ACLNN_ERR_PARAM_INVALID</td><td rowspan="3">161002</td></tr>
<tr><td>x的数据类型不支持。</td></tr>
<tr><td>y的shape不支持。</td></tr>
<tr><td>z的format不支持。</td></tr>
<tr><td rowspan="0">ACLNN_ERR_PARAM_INVALID</td><td rowspan="0">161002/561103</td><td>w的shape不对。</td></tr>
<tr><td>v的dtype不对。</td></tr>
</table>"""
    rows = parse(text)
    assert [(r.code, r.line) for r in rows] == [
        ("161001", 2), ("161002", 4), ("161002", 5), ("161002", 6),
        ("161002", 7), ("561103", 7), ("161002", 8), ("561103", 8)]


def test_pipe_table_with_blank_continuation_rows() -> None:
    text = """| 返回码 | 错误码 | 描述 |
| --- | --- | --- |
| ACLNN_ERR_PARAM_NULLPTR | 161001 | 传入的 tensor 是空指针。 |
| ACLNN_ERR_PARAM_INVALID | 161002 | self 数据类型不在支持范围内。 |
|     |     | self 数据维度超过 8 维。 |
"""
    rows = parse(text)
    assert [(r.code, r.line, r.triggers) for r in rows] == [
        ("161001", 3, ("nullptr",)), ("161002", 4, ("dtype",)), ("161002", 5, ("shape", "value"))]


@pytest.mark.parametrize(("text", "message", "line"), [
    ("<table><tr><th>返回码</th><th>错误码</th><th>描述</th></tr>\n"
     "<tr><td>ACLNN_ERR_PARAM_INVALID</td><td>ERR</td><td>x</td></tr></table>",
     "return code 'ERR' is not 0, six digits or NNNxxx", 2),
    ("<table><tr><th>返回码</th><th>错误码</th><th>描述</th></tr>\n"
     "<tr><td>ACLNN_ERR_PARAM_INVALID</td><td>161002</td></tr></table>",
     "return-code row has 2 cells, the header 3", 2),
])
def test_unknown_layouts_fail_with_the_line(text: str, message: str, line: int) -> None:
    with pytest.raises(ScrapeError) as exc:
        parse(text)
    assert exc.value.line == line and message in str(exc.value)
    assert str(exc.value).startswith(f"{PAGE}:{line}: ")


def test_pages_without_code_tables_give_nothing() -> None:
    assert parse("# aclnnX\n\nno tables here\n") == []
    assert parse("<table><tr><th>a</th><th>b</th></tr><tr><td>1</td><td>2</td></tr></table>") == []


def test_page_kinds_and_function_names() -> None:
    assert is_code_page(SHARED) and not is_function_page(SHARED)
    assert is_code_page("x/docs/context/aclnn_return_code.md")
    assert is_function_page(PAGE) and not is_function_page("x/docs/README.md")
    assert page_function(PAGE, "") == "aclnnThing"
    assert page_function("x/aclnnFloor&aclnnInplaceFloor.md", "# aclnnFloor\n") == "aclnnFloor"


@pytest.mark.upstream
def test_every_real_page_parses(upstream: Path) -> None:
    pages = [p for p in (upstream / "github" / "hicann").glob("**/*.md")
             if is_code_page(str(p)) or is_function_page(str(p))]
    assert len(pages) > 1000
    rows: list[ReturnCodeRow] = []
    for p in pages:
        rows += parse_return_codes(p.read_text(encoding="utf-8"),
                                   origin=Origin(str(p.relative_to(upstream))))
    assert len(rows) > 10_000
    assert all(r.line > 0 and r.name for r in rows)
    fa = [r for r in rows if r.function == "aclnnFlashAttentionScore"]
    assert {r.code for r in fa} >= {"161001", "161002"}
    assert any("attenMaskOptional" in r.params for r in fa)
    shared = {(r.name, r.code) for r in rows if not r.function}
    assert ("ACLNN_ERR_INNER_NULLPTR", "561103") in shared
    assert ("ACLNN_ERR_PARAM_INVALID", "161002") in shared
    cast = [r for r in rows if r.function == "aclnnCast" and r.code == "161002"]
    assert cast and all(r.triggers for r in cast)
