from __future__ import annotations

import re
import time
from collections import Counter
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.apidocs import (
    ApiSupportRow,
    api_doc_paths,
    detect_generation,
    doc_version_from_path,
    parse_markdown,
)
from opcheck.scrapers.apidocs_dtypes import parse_dtypes
from opcheck.scrapers.rows import Origin

SECTIONS = (
    "github/Ascend/pytorch/master/docs/zh/api/native_api/pytorch_2-7-1/torch-nn-functional.md"
)
PIPE = "github/Ascend/pytorch/v2.7.1-7.3.0/docs/zh/native_apis/pytorch_2-8-0/torch-nn-functional.md"
OLD = "github/Ascend/pytorch/v2.1.0-7.2.0/docs/api/torch_npu_apis.md"
PRIVATE = "github/Ascend/pytorch/master/docs/zh/api/native_api/private_apis.md"
GRAPH = "github/Ascend/pytorch/master/docs/zh/api/native_api/graph_supported_apis.md"

A2, A3, DT, A1 = (
    "Atlas A2 训练系列产品",
    "Atlas A3 训练系列产品",
    "Ascend 950DT",
    "Atlas 训练系列产品",
)


def _fixture(fixtures: Path, name: str) -> str:
    return (fixtures / "apidocs" / name).read_text(encoding="utf-8")


def _brief(rows: list[ApiSupportRow]) -> list[tuple[object, ...]]:
    return [(r.api, r.hardware, r.supported, r.only_dtypes, r.unsupported_dtypes) for r in rows]


# --------------------------------------------------------------------------- fixtures


def test_sections_fixture(fixtures: Path) -> None:
    rows = parse_markdown(_fixture(fixtures, "sections.md"), origin=Origin(path=SECTIONS))
    assert _brief(rows) == [
        ("torch.nn.functional.max_pool3d", A2, True, ("bf16", "fp16", "fp32"), ()),
        ("torch.nn.functional.max_pool3d", A3, True, ("bf16", "fp16", "fp32"), ()),
        ("torch.nn.functional.max_pool3d", DT, False, ("bf16", "fp16", "fp32"), ()),
        ("torch.nn.functional.avg_pool3d", A2, False, None, ()),
        ("torch.nn.functional.avg_pool3d", A3, False, None, ()),
        ("torch.nn.functional.avg_pool3d", DT, False, None, ()),
        # product-specific lists win over the general one
        ("Tensor.addcdiv", A1, True, ("fp16", "fp32", "fp64"), ()),
        ("Tensor.addcdiv", A2, True, ("bf16", "fp16", "fp32", "fp64"), ()),
        ("Tensor.addcdiv", A3, True, ("bf16", "fp16", "fp32", "fp64"), ()),  # &#10004;
        ("Tensor.abs", A2, True, ("fp16", "fp32", "fp64"), ()),
        ("Tensor.abs", A3, True, ("fp16", "fp32", "fp64"), ()),
        ("Tensor.abs", DT, True, ("fp16", "fp32"), ("fp64",)),
    ]
    first = rows[0]
    assert first.doc_version == "2.7.1" and first.ref == "master" and first.generation == "sections"
    assert first.doc_url.endswith("torch.nn.functional.max_pool3d.html")
    assert first.line == 13
    assert [(a.arg, a.kind, a.values) for a in first.arg_limits] == [
        ("dilation", "only", ("1", "(1,1,1)"))
    ]
    assert first.restriction.splitlines() == [
        "- `input`仅支持bf16，fp16，fp32",
        "- `dilation`的值目前在NPU上仅支持设置为1或(1,1,1)",
    ]
    addcdiv = next(r for r in rows if r.api == "Tensor.addcdiv")
    assert addcdiv.npu_api == "torch_npu.addcdiv"
    assert rows[3].restriction == ""


def test_pipe_fixture(fixtures: Path) -> None:
    rows = parse_markdown(_fixture(fixtures, "pipe.md"), origin=Origin(path=PIPE))
    assert _brief(rows) == [
        ("torch.nn.functional.conv2d", "", True, ("bf16", "fp16", "fp32"), ()),
        ("torch.nn.functional.avg_pool3d", "", False, None, ()),
        ("torch.nn.functional.max_pool3d", "", True, ("bf16", "fp16", "fp32"), ()),
        # the API cell carries a note after <br>; the support cell names products
        (
            "torch.nn.functional.scaled_dot_product_attention",
            A2,
            True,
            ("bf16", "fp16", "fp32"),
            (),
        ),
        (
            "torch.nn.functional.scaled_dot_product_attention",
            A3,
            True,
            ("bf16", "fp16", "fp32"),
            (),
        ),
        ("torch.nn.ZeroPad2d", "", True, None, ()),  # upstream row ends in a stray "a"
        ("torch.optim.SparseAdam.step", "", None, None, ()),  # "-": the doc leaves it open
        ("torch.cuda.host_memory_stats_as_nested_dict", "", True, None, ()),
        ("torch.cuda.host_memory_stats_as_nested_dict", DT, False, None, ()),  # 是<br>暂不支持…
        ("torch.cuda.current_device", "", True, None, ()),
    ]
    assert {r.doc_version for r in rows} == {"2.8.0"}
    assert rows[1].restriction == ""  # "-" means no restriction
    assert rows[-1].npu_api == "torch_npu.npu.current_device" and rows[-1].section == "torch.cuda"
    assert [r.line for r in rows] == [8, 9, 10, 11, 11, 12, 13, 19, 19, 20]


def test_html_table_fixture(fixtures: Path) -> None:
    rows = parse_markdown(_fixture(fixtures, "html_table.md"), origin=Origin(path=OLD))
    assert _brief(rows) == [
        ("torch.default_generator", "", None, None, ()),  # blank = not tested
        ("torch.unique", "", True, ("bool", "fp16", "fp32", "int64"), ()),
        ("torch.cuda.current_device", "", True, None, ()),
    ]
    assert rows[1].arg_limits[0].arg == "sorted" and rows[1].arg_limits[0].values == ("False",)
    assert rows[2].npu_api == "torch.npu.current_device"
    assert {r.doc_version for r in rows} == {"2.1.0"} and rows[0].generation == "html-table"
    assert [r.section for r in rows] == ["torch", "torch", "torch.cuda"]


def test_list_fixture(fixtures: Path) -> None:
    rows = parse_markdown(_fixture(fixtures, "graph_supported_apis.md"), origin=Origin(path=GRAPH))
    assert [(r.api, r.feature, r.supported, r.restriction) for r in rows] == [
        ("Tensor.all", "graph_mode", True, ""),
        ("Tensor.bitwise_and", "graph_mode", True, ""),
        ("torch.ops.aten.upsample_bicubic2d", "graph_mode", True, "反向"),
    ]
    assert rows[0].doc_version == ""


@pytest.mark.parametrize(
    ("name", "generation"),
    [
        ("sections.md", "sections"),
        ("pipe.md", "pipe-table"),
        ("html_table.md", "html-table"),
        ("graph_supported_apis.md", "list"),
    ],
)
def test_detect_generation(fixtures: Path, name: str, generation: str) -> None:
    assert detect_generation(_fixture(fixtures, name)) == generation


def test_detect_generation_rejects_other_docs() -> None:
    assert detect_generation("# 概述\n\n介绍PyTorch2.7.1版本原生API接口。\n") is None
    with pytest.raises(ScrapeError, match="not a recognised API support doc"):
        parse_markdown("# 概述\n\ntext\n", origin=Origin(path="x/overview.md"))


@pytest.mark.parametrize(
    ("path", "version"),
    [
        ("github/Ascend/pytorch/master/docs/zh/api/native_api/pytorch_2-7-1/torch.md", "2.7.1"),
        ("github/Ascend/pytorch/v2.7.1-7.3.0/docs/zh/native_apis/pytorch_2-6-0/torch.md", "2.6.0"),
        (
            "github/Ascend/pytorch/v2.7.1-26.1.0/docs/zh/api/native_api/pytorch_2-12-0/torch.md",
            "2.12.0",
        ),
        (OLD, "2.1.0"),
        ("github/Ascend/pytorch/v7.2.0-pytorch2.1.0/docs/api/torch_npu_apis.md", "2.1.0"),
        (PRIVATE, ""),
    ],
)
def test_doc_version_from_path(path: str, version: str) -> None:
    assert doc_version_from_path(path) == version


def test_api_doc_paths_selects_api_docs_only() -> None:
    base = "github/Ascend/pytorch/master/docs/zh/api/native_api/"
    paths = [
        base + "pytorch_2-7-1/torch.md",
        base + "pytorch_2-7-1/overview.md",
        base + "pytorch_2-7-1/PyTorch-2-7-1.md",
        base + "graph_supported_apis.md",
        base + "dtensor_supported_apis.md",
        base + "private_apis.md",
        base + "_menu_pt_native_apis.md",
        base + "appendixes/inf_nan_difference_apis.md",
        base + "appendixes/example_of_adding_a_binary_blocklist.md",
        "github/Ascend/pytorch/v2.7.1-7.3.0/docs/zh/native_apis/pytorch_2-9-0/torch-nn.md",
        "github/Ascend/pytorch/v2.7.1-7.3.0/docs/zh/native_apis/menu_pt_native_apis.md",
        OLD,
        "github/Ascend/pytorch/master/README.md",
    ]
    assert api_doc_paths(paths) == sorted(
        [
            base + "pytorch_2-7-1/torch.md",
            base + "graph_supported_apis.md",
            base + "dtensor_supported_apis.md",
            base + "private_apis.md",
            base + "appendixes/inf_nan_difference_apis.md",
            "github/Ascend/pytorch/v2.7.1-7.3.0/docs/zh/native_apis/pytorch_2-9-0/torch-nn.md",
            OLD,
        ]
    )


# --------------------------------------------------------------------------- loud failures


def _line_of(text: str, needle: str) -> int:
    return next(i for i, ln in enumerate(text.split("\n"), 1) if needle in ln)


@pytest.mark.parametrize(
    ("name", "path", "old", "new", "at", "message"),
    [
        # a renamed column
        (
            "pipe.md",
            PIPE,
            "|API名称|是否支持|限制与说明|",
            "|API名称|是否兼容|限制与说明|",
            "|API名称|是否兼容|",
            "unexpected table header",
        ),
        (
            "pipe.md",
            PIPE,
            "|API名称|NPU形式名称|是否支持|限制与说明|",
            "|API名称|NPU形式名称|是否支持|说明|",
            "|API名称|NPU形式名称|",
            "unexpected table header",
        ),
        (
            "pipe.md",
            PIPE,
            "|torch.nn.functional.conv2d|是|",
            "|torch.nn.functional.conv2d|支持|",
            "conv2d|支持|",
            "unknown 是否支持 value",
        ),
        (
            "pipe.md",
            PIPE,
            "|torch.nn.functional.avg_pool3d|否|-|",
            "|torch.nn.functional.avg_pool3d|否|",
            "avg_pool3d|否|",
            "row has 2 cells",
        ),
        (
            "html_table.md",
            OLD,
            '<p id="p6">Y</p>',
            '<p id="p6">N</p>',
            'id="row2"',
            "unknown Compatibility mark 'N'",
        ),
        (
            "html_table.md",
            OLD,
            "Limitations</p>",
            "Restrictions</p>",
            "<table><thead",
            "unexpected table header",
        ),
        # a hardware table with an unknown mark
        (
            "sections.md",
            SECTIONS,
            "| <term>Ascend 950DT</term> | ✘ |",
            "| <term>Ascend 950DT</term> | ? |",
            "| <term>Ascend 950DT</term> | ? |",
            "unknown support mark '?'",
        ),
        (
            "sections.md",
            SECTIONS,
            "| 硬件 | 是否支持 |",
            "| 产品 | 是否支持 |",
            "| 产品 | 是否支持 |",
            "unexpected hardware table header",
        ),
    ],
)
def test_changed_layouts_fail_loudly(
    fixtures: Path, name: str, path: str, old: str, new: str, at: str, message: str
) -> None:
    text = _fixture(fixtures, name)
    assert old in text
    broken = text.replace(old, new, 1)
    with pytest.raises(ScrapeError, match=re.escape(message)) as exc:
        parse_markdown(broken, origin=Origin(path=path))
    assert exc.value.source == path
    assert exc.value.line == _line_of(broken, at)
    assert f"{path}:{exc.value.line}" in str(exc.value)


def test_renamed_column_in_a_single_table_doc_names_the_line() -> None:
    text = "# torch.fft\n\n|API名称|是否兼容|限制与说明|\n|--|--|--|\n|torch.fft.fft|是|支持fp32|\n"
    with pytest.raises(ScrapeError, match="unexpected table header") as exc:
        parse_markdown(text, origin=Origin(path=PIPE))
    assert (exc.value.source, exc.value.line) == (PIPE, 3)


def _avg_pool3d_table(text: str) -> str:
    start = text.index("### torch.nn.functional.avg_pool3d")
    end = text.index("## Tensor class reference")
    return text[start:end]


def test_section_missing_its_table_fails(fixtures: Path) -> None:
    text = _fixture(fixtures, "sections.md")
    block = _avg_pool3d_table(text)
    no_table = re.sub(r"(?m)^\|.*\|\n", "", block)
    broken = text.replace(block, no_table)
    with pytest.raises(ScrapeError, match="not followed by its hardware table") as exc:
        parse_markdown(broken, origin=Origin(path=SECTIONS))
    lines = broken.split("\n")
    entry = _line_of(broken, "avg_pool3d.html")
    # the </div> right after the dangling 支持情况 is where the table was expected
    assert exc.value.line == next(i for i in range(entry, len(lines)) if lines[i] == "</div>") + 1


def test_section_without_support_block_fails(fixtures: Path) -> None:
    text = _fixture(fixtures, "sections.md")
    block = _avg_pool3d_table(text)
    stripped = re.sub(r"(?m)^\|.*\|\n", "", block).replace("**支持情况**：\n", "")
    broken = text.replace(block, stripped)
    with pytest.raises(ScrapeError, match="has no 支持情况 hardware table") as exc:
        parse_markdown(broken, origin=Origin(path=SECTIONS))
    assert exc.value.line == _line_of(broken, "**原生文档**：[torch.nn.functional.avg_pool3d]")


# --------------------------------------------------------------------------- dtypes

# Real restriction strings from the snapshot (each is checked to occur there when the
# snapshot is present): text, product, allowed, not supported.
REAL_DTYPE_CASES: list[tuple[str, str, tuple[str, ...] | None, tuple[str, ...]]] = [
    ("支持bf16，fp16，fp32", "", ("bf16", "fp16", "fp32"), ()),
    ("`input`仅支持fp16，fp32", "", ("fp16", "fp32"), ()),
    (
        "Only support fp16，fp32，int64，bool；Don`t support 8-dimensional shape",
        "",
        ("bool", "fp16", "fp32", "int64"),
        (),
    ),
    (
        "- `self`仅支持fp16，fp32，fp64\n- Atlas A3 训练系列产品额外支持bf16",
        A3,
        ("bf16", "fp16", "fp32", "fp64"),
        (),
    ),
    (
        "- `self`仅支持fp16，fp32，fp64\n- Atlas A3 训练系列产品额外支持bf16",
        A2,
        ("fp16", "fp32", "fp64"),
        (),
    ),
    (
        "`input`仅支持bf16，fp16，fp32，不支持double，complex64，complex128数据类型",
        "",
        ("bf16", "fp16", "fp32"),
        ("complex128", "complex64", "fp64"),
    ),
    ("不支持double数据类型", "", None, ("fp64",)),
    ("支持torch.int64， torch.float， torch.complex128", "", ("complex128", "fp32", "int64"), ()),
    ("int64类型不支持三个tensor同时广播", "", None, ()),  # a feature limit of int64, not a ban
    ("带`dim`场景不支持fp16", "", None, ()),  # conditional: kept as a clause, not applied
    (
        "Ascend 950DT：不支持fp64，complex64，complex128",
        DT,
        None,
        ("complex128", "complex64", "fp64"),
    ),
    ("Ascend 950DT：不支持fp64，complex64，complex128", A2, None, ()),
    (
        "`query`、`key`、`value`仅支持bf16、fp16和fp32。所有参数输入均符合以下约束",
        "",
        ("bf16", "fp16", "fp32"),
        (),
    ),
    (
        "`input`仅支持fp8模式下ScalingType为rowwise，mxfp8模式的排布，mxfp8遵循aclnnGroupedMatmulV5要求（`scale_a`和`scale_b`详见约束说明）",
        "",
        None,
        (),
    ),
    (
        "支持bf16，fp16，fp32，fp64，uint8，int8，int16，int32，int64，bool可能回退至CPU执行",
        "",
        ("bf16", "bool", "fp16", "fp32", "fp64", "int16", "int32", "int64", "int8", "uint8"),
        (),
    ),
    ("`self`仅支持double", "", ("fp64",), ()),
]


@pytest.mark.parametrize(("text", "hardware", "allowed", "unsupported"), REAL_DTYPE_CASES)
def test_parse_dtypes(
    text: str, hardware: str, allowed: tuple[str, ...] | None, unsupported: tuple[str, ...]
) -> None:
    parsed = parse_dtypes(text)
    got = parsed.allowed(hardware)
    assert (tuple(sorted(got)) if got is not None else None) == allowed
    assert tuple(sorted(parsed.unsupported(hardware))) == unsupported


def test_parse_dtypes_keeps_conditions_and_args() -> None:
    text = "- 属性`mode`为constant时，`input`仅支持bf16，fp16，fp32，fp64\n- 属性`mode`非constant时，`input`仅支持fp16，fp32，fp64"
    parsed = parse_dtypes(text)
    assert [(c.kind, c.args, c.condition) for c in parsed.clauses] == [
        ("only", ("input",), "属性`mode`为constant时"),
        ("only", ("input",), "属性`mode`非constant时"),
    ]
    assert parsed.only() is None  # neither list holds unconditionally
    scoped = parse_dtypes(
        "- 针对Atlas A2 训练系列产品，当前版本“prod”操作不支持int16、bf16数据类型"
    )
    assert scoped.clauses[0].hardware == (A2,) and scoped.clauses[0].dtypes == ("int16", "bf16")
    assert scoped.clauses[0].condition == "当前版本“prod”操作"


# --------------------------------------------------------------------------- the real snapshot

_ROWS_CACHE: dict[str, list[ApiSupportRow]] = {}


def _all_rows(upstream: Path) -> dict[str, list[ApiSupportRow]]:
    if not _ROWS_CACHE:
        manifest = (upstream / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]
        for path in api_doc_paths({line.split("\t")[0] for line in manifest}):
            text = (upstream / path).read_text(encoding="utf-8")
            _ROWS_CACHE[path] = parse_markdown(text, origin=Origin(path=path))
    return _ROWS_CACHE


def _independent_counts(text: str, generation: str) -> tuple[int, int | None]:
    """(entries, rows) counted without the parser: raw line patterns per generation."""
    if generation == "html-table":
        return len(re.findall(r"<tr[^>]*>\s*<td", text)), None
    if generation == "sections":
        entries = len(re.findall(r"^\*\*支持情况\*\*", text, re.M))
        hw_rows = len(re.findall(r"^\| <term>[^|]*\| *(?:✔|✘|&#10004;) *\|$", text, re.M))
        return entries, hw_rows
    body = [
        ln
        for ln in text.split("\n")
        if ln.strip().startswith("|")
        and not re.fullmatch(r"\|[\s\-:|]*\|?", ln.strip())
        and not re.match(r"\|\s*(API名称|API)\s*\|", ln.strip())
    ]
    return len(body), None


@pytest.mark.upstream
def test_every_doc_parses_with_entry_counts_matching_the_files(upstream: Path) -> None:
    rows_by_path = _all_rows(upstream)
    assert len(rows_by_path) == 479
    for path, rows in rows_by_path.items():
        text = (upstream / path).read_text(encoding="utf-8")
        assert rows, path
        entries, hw_rows = _independent_counts(text, rows[0].generation)
        assert len({r.line for r in rows}) == entries, path
        if hw_rows is not None:
            assert len(rows) == hw_rows, path


# (ref, doc version, generation, feature) → (entries, rows); measured on the snapshot and
# equal to the raw-line counts checked per file above.
EXPECTED_COUNTS = {
    ("master", "", "list", "deterministic"): (68, 68),
    ("master", "", "list", "dtensor"): (185, 185),
    ("master", "", "list", "graph_mode"): (177, 177),
    ("master", "", "list", "inf_nan_difference"): (4, 4),
    ("master", "", "pipe-table", ""): (37, 55),  # private_apis.md
    ("master", "2.11.0", "sections", ""): (3247, 9742),
    ("master", "2.12.0", "sections", ""): (3249, 9748),
    ("master", "2.13.0", "sections", ""): (3249, 9748),
    ("master", "2.7.1", "sections", ""): (3388, 10165),
    ("v2.1.0-7.2.0", "2.1.0", "html-table", ""): (3782, 3782),
    ("v2.7.1-7.3.0", "2.6.0", "pipe-table", ""): (3230, 3233),
    ("v2.7.1-7.3.0", "2.7.1", "list", "deterministic"): (48, 48),
    ("v2.7.1-7.3.0", "2.7.1", "pipe-table", ""): (3218, 3221),
    ("v2.7.1-7.3.0", "2.8.0", "pipe-table", ""): (3206, 3209),
    ("v2.7.1-7.3.0", "2.9.0", "pipe-table", ""): (3148, 3151),
}


@pytest.mark.upstream
def test_counts_per_doc_version_and_format(upstream: Path) -> None:
    entries: Counter[tuple[str, str, str, str]] = Counter()
    rows_n: Counter[tuple[str, str, str, str]] = Counter()
    for path, rows in _all_rows(upstream).items():
        key = (rows[0].ref, rows[0].doc_version, rows[0].generation, rows[0].feature)
        entries[key] += len({r.line for r in rows})
        rows_n[key] += len(rows)
        assert {(r.ref, r.doc_version, r.generation, r.feature) for r in rows} == {key}, path
    got = {k: (entries[k], rows_n[k]) for k in entries}
    assert got == EXPECTED_COUNTS


@pytest.mark.upstream
def test_real_rows_spot_checks(upstream: Path) -> None:
    rows = _all_rows(upstream)
    sec = {(r.api, r.hardware): r for r in rows[SECTIONS]}
    conv3d = sec[("torch.nn.functional.conv3d", DT)]
    assert conv3d.supported is False
    assert sec[("torch.nn.functional.conv3d", A2)].only_dtypes == (
        "bf16",
        "complex64",
        "fp16",
        "fp32",
    )
    old = {r.api: r for r in rows[OLD]}
    assert (
        old["torch.SymInt"].supported is True and old["torch.default_generator"].supported is None
    )
    pipe = {r.api: r for r in rows[PIPE]}
    assert pipe["torch.nn.functional.avg_pool3d"].supported is False
    hw = Counter(r.hardware for rs in rows.values() for r in rs)
    assert set(hw) == {"", A1, A2, A3, DT}


@pytest.mark.upstream
def test_dtype_cases_are_real_strings(upstream: Path) -> None:
    corpus = "\n".join(r.restriction for rs in _all_rows(upstream).values() for r in rs)
    missing = [text for text, *_ in REAL_DTYPE_CASES if text not in corpus]
    assert missing == []


@pytest.mark.upstream
def test_dtype_parse_rate_on_real_restrictions(upstream: Path) -> None:
    texts = {r.restriction for rs in _all_rows(upstream).values() for r in rs if r.restriction}
    with_dtype_words = [
        t for t in texts if re.search(r"支持(?:bf16|fp16|fp32|fp64|int|uint|bool|complex)", t)
    ]
    parsed = [t for t in with_dtype_words if parse_dtypes(t).clauses]
    print(
        f"dtype statements parsed: {len(parsed)}/{len(with_dtype_words)} distinct restriction texts"
    )
    assert len(parsed) == len(with_dtype_words)


@pytest.mark.upstream
def test_parsing_all_docs_takes_seconds(upstream: Path) -> None:
    manifest = (upstream / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]
    paths = api_doc_paths({line.split("\t")[0] for line in manifest})
    texts = [(p, (upstream / p).read_text(encoding="utf-8")) for p in paths]
    parse_dtypes.cache_clear()
    start = time.perf_counter()
    n = sum(len(parse_markdown(t, origin=Origin(path=p))) for p, t in texts)
    elapsed = time.perf_counter() - start
    print(f"parsed {len(texts)} docs, {n} rows in {elapsed:.2f} s")
    assert elapsed < 10
