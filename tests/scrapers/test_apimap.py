from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest
from testpaths import ROOT

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.apidocs import api_doc_paths, parse_markdown
from opcheck.scrapers.apimap import (
    is_op_api,
    link_api,
    load_overrides,
    mapping_coverage,
    normalize_api,
    parse_overrides,
    universe_from_native_functions,
)
from opcheck.scrapers.rows import Origin

OVERRIDES_FILE = ROOT / "data" / "api_overrides.yaml"

SMALL = {
    "aten::abs",
    "aten::abs.out",
    "aten::abs_",
    "aten::add.Tensor",
    "aten::add.Scalar",
    "aten::add.out",
    "aten::add_.Tensor",
    "aten::add_.Scalar",
    "aten::isin.Tensor_Tensor",
    "aten::isin.Tensor_Tensor_out",
    "aten::max_pool3d",
    "aten::max_pool3d_with_indices",
    "aten::leaky_relu",
    "aten::_adaptive_avg_pool2d",
    "aten::adaptive_avg_pool2d",
    "aten::batch_norm",
    "aten::cross_entropy_loss",
    "aten::special_erf",
    "aten::linalg_svd",
    "aten::linalg_svd.U",
    "aten::__and__.Tensor",
    "aten::bitwise_and.Tensor",
    "aten::upsample_nearest2d",
    "aten::upsample_nearest2d.vec",
    "aten::upsample_nearest2d.out",
    "aten::log_sigmoid",
    "aten::_to_copy",
}


def _native_functions_text() -> str | None:
    spec = importlib.util.find_spec("torchgen")  # finds the package without importing torch
    if spec is None or not spec.submodule_search_locations:
        return None
    path = (
        Path(next(iter(spec.submodule_search_locations)))
        / "packaged/ATen/native/native_functions.yaml"
    )
    return path.read_text(encoding="utf-8") if path.is_file() else None


@pytest.fixture(scope="module")
def universe() -> set[str]:
    text = _native_functions_text()
    if text is None:
        pytest.skip("torchgen's native_functions.yaml not installed")
    return universe_from_native_functions(text)


@pytest.mark.parametrize(
    ("api", "ops"),
    [
        ("torch.nn.functional.max_pool3d", ["aten::max_pool3d"]),
        ("Tensor.abs", ["aten::abs"]),
        ("torch.Tensor.abs", ["aten::abs"]),
        ("torch.abs", ["aten::abs"]),
        ("torch.isin", ["aten::isin.Tensor_Tensor"]),  # the out= overload is left out
        ("torch.Tensor.add_", ["aten::add_.Scalar", "aten::add_.Tensor"]),
        ("Tensor.__radd__", ["aten::add.Scalar", "aten::add.Tensor"]),
        ("Tensor.__iadd__", ["aten::add_.Scalar", "aten::add_.Tensor"]),
        ("Tensor.__and__", ["aten::__and__.Tensor"]),  # an ATen dunder wins
        ("torch.nn.LeakyReLU", ["aten::leaky_relu"]),
        ("torch.nn.AdaptiveAvgPool2d", ["aten::adaptive_avg_pool2d"]),  # public name first
        ("torch.nn.BatchNorm2d", ["aten::batch_norm"]),
        ("torch.nn.LazyBatchNorm2d", ["aten::batch_norm"]),
        ("torch.nn.functional.cross_entropy", ["aten::cross_entropy_loss"]),
        ("torch.nn.functional.logsigmoid", ["aten::log_sigmoid"]),
        ("torch.special.erf", ["aten::special_erf"]),
        ("torch.linalg.svd", ["aten::linalg_svd"]),  # .U is an out= variant
        ("torch.ops.aten._to_copy.default", ["aten::_to_copy"]),
        ("torch.cuda.synchronize", []),
        ("torch.nn.Module.add_module", []),
        ("torch.distributed.all_reduce", []),
    ],
)
def test_rules_on_a_small_universe(api: str, ops: list[str]) -> None:
    assert link_api(api, SMALL, {}) == ops


def test_overrides_win_and_can_say_no_op() -> None:
    overrides = {
        "F.interpolate": ["upsample_nearest2d"],
        "torch.abs": ["aten::add.Tensor", "aten::not_in_universe"],
        "Tensor.abs": [],
    }
    assert link_api("torch.nn.functional.interpolate", SMALL, overrides) == [
        "aten::upsample_nearest2d",
        "aten::upsample_nearest2d.vec",
    ]
    assert link_api("torch.abs", SMALL, overrides) == ["aten::add.Tensor"]
    assert link_api("torch.Tensor.abs", SMALL, overrides) == []
    assert link_api("torch.abs_", SMALL, overrides) == ["aten::abs_"]  # the rules again
    cov = mapping_coverage(
        ["torch.abs", "Tensor.abs", "torch.nn.functional.interpolate", "torch.cuda.init"],
        SMALL,
        overrides,
    )
    assert (cov.total, cov.linked, cov.no_op, cov.unlinked) == (4, 2, 1, ("torch.cuda.init",))


def test_normalize_api() -> None:
    assert normalize_api("Tensor.bitwise\\_and") == "torch.Tensor.bitwise_and"
    assert normalize_api("F.relu") == "torch.nn.functional.relu"
    assert normalize_api("`torch.abs()`") == "torch.abs"
    assert is_op_api("Tensor.abs") and not is_op_api("torch.nn.Module.cuda")
    assert not is_op_api("torch.cuda.synchronize") and not is_op_api("torch.FloatStorage.dtype")


def test_universe_from_native_functions() -> None:
    text = "- func: add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor\n  variants: function\n- func: relu(Tensor self) -> Tensor\n"
    assert universe_from_native_functions(text) == {"aten::add.Tensor", "aten::relu"}


def test_parse_overrides_errors() -> None:
    with pytest.raises(ScrapeError, match="expected a list of op names"):
        parse_overrides("torch.abs: {a: 1}\n")
    with pytest.raises(ScrapeError) as exc:
        parse_overrides("torch.abs: [abs\n  bad: :\n")
    assert exc.value.line is not None
    assert parse_overrides("torch.abs:\n") == {"torch.abs": ()}


def test_overrides_file_is_clean(universe: set[str]) -> None:
    text = OVERRIDES_FILE.read_text(encoding="utf-8")
    overrides = load_overrides()
    assert overrides == load_overrides(OVERRIDES_FILE)
    # YAML silently keeps the last of duplicate keys: count key lines independently
    keys = re.findall(r"^([^#\s][^:]*):", text, re.M)
    assert len(keys) == len(set(keys)) == len(overrides)
    # every op named resolves in the current universe (no typos, no dead entries)
    dead = {
        api: ops
        for api, ops in overrides.items()
        if ops and not link_api(api, universe, {api: ops})
    }
    assert dead == {}
    for api, ops in overrides.items():
        for op in ops:
            resolved = link_api(api, universe, {api: [op]})
            assert resolved, f"{api}: {op} is not in native_functions.yaml"


def test_real_universe_links(universe: set[str]) -> None:
    overrides = load_overrides()
    assert len(universe) > 2000
    assert link_api("torch.nn.functional.max_pool3d", universe, overrides) == ["aten::max_pool3d"]
    assert "aten::isin.Tensor_Tensor" in link_api("torch.isin", universe, overrides)
    assert "aten::upsample_bilinear2d.vec" in link_api(
        "torch.nn.functional.interpolate", universe, overrides
    )
    assert link_api("torch.nn.functional.unfold", universe, overrides) == ["aten::im2col"]
    assert link_api("torch.Tensor.float", universe, overrides) == ["aten::_to_copy"]
    assert link_api("torch.no_grad", universe, overrides) == []


@pytest.mark.upstream
def test_mapping_coverage_of_the_docs(upstream: Path, universe: set[str]) -> None:
    manifest = (upstream / "MANIFEST.tsv").read_text(encoding="utf-8").splitlines()[1:]
    rows = []
    for path in api_doc_paths({line.split("\t")[0] for line in manifest}):
        rows += parse_markdown(
            (upstream / path).read_text(encoding="utf-8"), origin=Origin(path=path)
        )
    eager = [r for r in rows if not r.feature]
    overrides = load_overrides()

    every = mapping_coverage((r.api for r in eager), universe, overrides)
    op_apis = mapping_coverage((r.api for r in eager if is_op_api(r.api)), universe, overrides)
    bare = mapping_coverage((r.api for r in eager if is_op_api(r.api)), universe, {})
    entries = {(r.api, r.doc_version, r.ref, r.line) for r in eager}
    linked_entries = sum(1 for api, *_ in entries if link_api(api, universe, overrides))
    op_entries = [api for api, *_ in entries if is_op_api(api)]
    linked_op_entries = sum(1 for api in op_entries if link_api(api, universe, overrides))
    print(f"all documented APIs: {every}")
    print(f"op-level APIs: {op_apis}; rules only: {bare}")
    print(
        f"doc entries linked: {linked_entries}/{len(entries)} ({linked_entries / len(entries):.1%})"
    )
    print(
        f"op-level doc entries linked: {linked_op_entries}/{len(op_entries)} ({linked_op_entries / len(op_entries):.1%})"
    )

    assert op_apis.fraction >= 0.90  # measured 91.3% (1305/1430) with torch 2.13's universe
    assert every.linked >= 1300
    assert op_apis.linked > bare.linked  # the overrides file adds links
    # most entries are Python machinery (torch.distributed, torch.cuda, nn.Module methods…)
    assert linked_entries / len(entries) >= 0.30  # measured 30.6%
    assert linked_op_entries / len(op_entries) >= 0.88  # measured 90.3%
