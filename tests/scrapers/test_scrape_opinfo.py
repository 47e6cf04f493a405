from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
import yaml

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.opinfo import (
    api_from_opinfo,
    opinfo_paths,
    parse_unsupported_ops_info,
    torch_from_path,
)
from opcheck.scrapers.rows import Origin

BASE = "github/Ascend/op-plugin/master/test/unsupported_ops_info_base.yaml"
V212 = "github/Ascend/op-plugin/master/test/test_v2r12_ops/unsupported_ops_info.yaml"


def test_sample(fixtures: Path) -> None:
    text = (fixtures / "apidocs" / "unsupported_ops_info_sample.yaml").read_text(encoding="utf-8")
    rows = parse_unsupported_ops_info(text, origin=Origin(path=BASE))
    assert [(r.opinfo, r.test, r.dtype, r.dtype_short, r.api, r.line) for r in rows] == [
        ("__rmul__", "test_compare_cpu", "float32", "fp32", "torch.Tensor.__rmul__", 4),
        ("__rmul__", "test_conj_view", "complex64", "complex64", "torch.Tensor.__rmul__", 6),
        (
            "nn.functional.conv2d",
            "test_backward",
            "float32",
            "fp32",
            "torch.nn.functional.conv2d",
            9,
        ),
        (
            "nn.functional.conv2d",
            "test_backward",
            "float64",
            "fp64",
            "torch.nn.functional.conv2d",
            10,
        ),
        ("_refs.div", "test_neg_view", "float64", "fp64", "", 13),
        # a YAML loader would turn these into None; they are kept as upstream wrote them
        ("null", "test_pointwise_tag_coverage", "", "", "", 16),
        ("linalg.svd", "test_dtypes", "", "", "torch.linalg.svd", 19),
    ]
    assert {r.torch for r in rows} == {None}


@pytest.mark.parametrize(
    ("old", "new", "line", "message"),
    [
        ("  - float64\n_refs", "    - float64\n_refs", 10, None),  # deeper item indentation is fine
        ("  test_conj_view:\n", "   test_conj_view:\n", 5, "inconsistent indentation"),
        ("  - complex64\n", "  complex64\n", 6, "unexpected line"),
        ("__rmul__:\n", "", 2, "test 'test_compare_cpu' before any op"),
        ("  - float32\n  - float64", "  - float32\n  - float 64", 10, "not a dtype"),
    ],
)
def test_layout_changes_fail_loudly(
    fixtures: Path, old: str, new: str, line: int, message: str | None
) -> None:
    text = (fixtures / "apidocs" / "unsupported_ops_info_sample.yaml").read_text(encoding="utf-8")
    assert old in text
    broken = text.replace(old, new, 1)
    if message is None:
        rows = parse_unsupported_ops_info(broken, origin=Origin(path=BASE))
        assert any(r.line == line and r.dtype == "float64" for r in rows)
        return
    with pytest.raises(ScrapeError, match=message) as exc:
        parse_unsupported_ops_info(broken, origin=Origin(path=BASE))
    assert exc.value.source == BASE and exc.value.line == line


def test_paths_and_names() -> None:
    assert torch_from_path(V212) == "2.12"
    assert torch_from_path(BASE) is None
    assert api_from_opinfo("nn.functional.max_pool3d") == "torch.nn.functional.max_pool3d"
    assert api_from_opinfo("signal.windows.hann") == "torch.signal.windows.hann"
    assert opinfo_paths(
        [BASE, V212, "github/Ascend/op-plugin/master/op_plugin/config/op_plugin_functions.yaml"]
    ) == sorted([BASE, V212])


@pytest.mark.upstream
def test_real_files_match_a_yaml_loader(upstream: Path) -> None:
    manifest = (upstream / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]
    paths = opinfo_paths({line.split("\t")[0] for line in manifest})
    assert len(paths) == 16
    per_file: dict[str, int] = {}
    for path in paths:
        text = (upstream / path).read_text(encoding="utf-8")
        rows = parse_unsupported_ops_info(text, origin=Origin(path=path))
        loaded = yaml.safe_load(text) or {}
        expected = sum(
            len(dtypes or []) for tests in loaded.values() for dtypes in (tests or {}).values()
        )
        assert len(rows) == expected, path
        assert len({r.opinfo for r in rows}) == len(loaded), path
        per_file[path.split("/")[-2]] = len(rows)
    # the per-version files are empty placeholders today; the base list holds everything
    assert per_file == {**{p.split("/")[-2]: 0 for p in paths if p != BASE}, "test": 5241}
    base = parse_unsupported_ops_info(
        (upstream / BASE).read_text(encoding="utf-8"), origin=Origin(path=BASE)
    )
    assert Counter(r.dtype for r in base) == {
        "float32": 2682, "complex64": 873, "float64": 842, "complex128": 530, "bool": 297, "int64": 14, "": 3,
    }  # fmt: skip
    conv = {(r.test, r.dtype) for r in base if r.opinfo == "nn.functional.conv2d"}
    assert conv and all(
        r.api == "torch.nn.functional.conv2d" for r in base if r.opinfo == "nn.functional.conv2d"
    )
