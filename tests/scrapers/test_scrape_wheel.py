from __future__ import annotations

import csv
import re
from pathlib import Path
from typing import cast

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.npu_native import parse_native
from opcheck.scrapers.opplugin import functions_paths, parse_functions
from opcheck.scrapers.rows import KernelRow, Origin
from opcheck.scrapers.wheel import (
    parse_codegen,
    parse_version_py,
    parse_wheel_facts,
    wheel_facts,
)

WHEELS = ("2.1.0.post17", "2.6.0.post5", "2.9.0.post6", "2.12.0.post3", "2.13.0", "2.14.0")
CODEGEN = "torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
NATIVE = "torch_npu/csrc/aten/npu_native_functions.yaml"


# --------------------------------------------------------------------------------------------
# fixtures


@pytest.mark.parametrize(
    ("name", "version", "requirement", "torch"),
    [
        ("facts_paren.txt", "2.6.0.post5", "==2.6.0+cpu", "2.6.0"),
        ("facts_space.txt", "2.12.0.post3", "==2.12.0", "2.12.0"),
        ("facts_star.txt", "2.13.0", "==2.13.0.*", "2.13.0"),
    ],
)
def test_wheel_facts_spellings(
    fixtures: Path, name: str, version: str, requirement: str, torch: str
) -> None:
    facts = parse_wheel_facts((fixtures / "wheel" / name).read_text(), origin=Origin(name))
    assert (facts.torch_npu_version, facts.torch_requirement, facts.torch_version) == (
        version,
        requirement,
        torch,
    )


def test_wheel_facts_errors() -> None:
    with pytest.raises(ScrapeError, match="no Requires-Dist: torch"):
        parse_wheel_facts("Version: 1\nRequires-Dist: torchvision\n", origin=Origin("f"))
    with pytest.raises(ScrapeError, match="no Version:"):
        parse_wheel_facts("Requires-Dist: torch==2.1\n", origin=Origin("f"))
    with pytest.raises(ScrapeError, match=r"f:3: two torch requirements \(first at line 2\)"):
        parse_wheel_facts(
            "Version: 1\nRequires-Dist: torch==2.1\nRequires-Dist: torch>=2\n", origin=Origin("f")
        )
    with pytest.raises(ScrapeError, match=r"f:2: expected 'Key: value'"):
        parse_wheel_facts("Version: 1\ngarbage\n", origin=Origin("f"))
    loose = parse_wheel_facts("Version: 1\nRequires-Dist: torch (>=2.1)\n", origin=Origin("f"))
    assert (loose.torch_requirement, loose.torch_version) == (">=2.1", "")


def test_version_py_and_combination(fixtures: Path) -> None:
    text = (fixtures / "wheel" / "version.py").read_text()
    assert parse_version_py(text, origin=Origin("v")) == (
        "2.13.0",
        "c798c6532a0d05c1863489e83cb7e3985be4e830",
    )
    facts = parse_wheel_facts(
        (fixtures / "wheel" / "facts_star.txt").read_text(), origin=Origin("f")
    )
    kernels = [KernelRow(op="aten::abs", torch=None)]
    combined = wheel_facts(
        facts, version_py=parse_version_py(text, origin=Origin("v")), kernels=kernels
    )
    assert combined.git_commit.startswith("c798c65") and combined.kernels == tuple(kernels)
    with pytest.raises(ScrapeError, match=r"METADATA says 2\.13\.0"):
        wheel_facts(facts, version_py=("2.12.0", ""))
    with pytest.raises(ScrapeError, match=r"v:1: not Python"):
        parse_version_py("__version__ = (\n", origin=Origin("v"))
    with pytest.raises(ScrapeError, match="no __version__"):
        parse_version_py("x = 1\n", origin=Origin("v"))
    with pytest.raises(ScrapeError, match="not a commit"):
        parse_version_py("__version__ = '1'\ngit_version = 'Unknown!'\n", origin=Origin("v"))


def test_codegen_fixture(fixtures: Path) -> None:
    rows = parse_codegen((fixtures / "wheel" / "codegen.yaml").read_text(), origin=Origin("c"))
    got = [(r.op, r.section, r.status, r.native, r.acl_op, r.op_api) for r in rows]
    assert got == [
        ("aten::_thnn_fused_gru_cell", "autograd", "kernel", False, False, True),
        ("npu::npu_change_data_ptr", "custom", "kernel", True, False, False),
        ("npu::empty_with_format", "custom", "kernel", True, False, False),
        ("npu::npu_gelu", "custom", "kernel", False, False, True),
        ("aten::int_repr", "quant", "kernel", False, True, True),
        ("aten::_local_scalar_dense", "supported", "kernel", True, False, False),
        ("npu::empty_with_format", "supported", "kernel", True, False, False),
        ("aten::clone", "supported", "kernel", True, False, True),
        ("aten::abs", "supported", "kernel", False, True, True),  # "acl_op, op_api, dvm"
        ("aten::_coalesce", "supported", "sparse", False, False, True),
        ("aten::add.out", "supported", "sparse", False, False, True),
        ("aten::add.out", "supported", "kernel", False, True, False),
        ("aten::as_strided_", "symint", "kernel", True, False, False),
        ("npu::npu_gather_backward", "symint", "kernel", False, False, True),
    ]
    assert all(r.torch is None for r in rows)
    with pytest.raises(ScrapeError, match=r"c:3: impl_ns: unknown kernel family 'cuda'"):
        parse_codegen(
            "supported:\n- func: abs(Tensor self) -> Tensor\n  impl_ns: cuda\n", origin=Origin("c")
        )


# --------------------------------------------------------------------------------------------
# real wheels


def _codegen(upstream: Path, wheel: str) -> tuple[str, list[KernelRow]]:
    path = upstream / "pypi/torch-npu" / wheel / CODEGEN
    text = path.read_text(encoding="utf-8")
    return text, parse_codegen(text, origin=Origin(str(path.relative_to(upstream))))


def test_every_wheel_file_parses(upstream: Path) -> None:
    for wheel in WHEELS:
        base = upstream / "pypi/torch-npu" / wheel
        facts = parse_wheel_facts((base / "WHEEL-FACTS.txt").read_text(), origin=Origin("f"))
        version, commit = parse_version_py(
            (base / "torch_npu/version.py").read_text(), origin=Origin("v")
        )
        assert facts.torch_npu_version == version == wheel
        assert wheel.startswith(facts.torch_version) and len(commit) == 40
        text, rows = _codegen(upstream, wheel)
        # one row per list item, plus a second row for items with both impl_ns and sparse
        items = len(re.findall(r"^- ", text, re.MULTILINE))
        both = len(
            re.findall(r"^  impl_ns: .*\n  sparse: |^  sparse: .*\n  impl_ns: ", text, re.MULTILINE)
        )
        assert len(rows) == items + both, wheel


def _raw_impl_names(text: str) -> set[str]:
    """Names of codegen entries with an impl_ns: line, by regex (no YAML)."""
    names: set[str] = set()
    for block in re.split(r"\n(?=- |\S)", text):
        m = re.search(r"func: ([\w.]+)", block)
        if m and re.search(r"^  impl_ns:", block, re.MULTILINE):
            names.add(m[1])
    return names


def _flags(rows: list[KernelRow]) -> dict[str, tuple[bool, bool]]:
    """op → (acl_op, op_api), OR-ed over sections (embedding is in official and symint)."""
    out: dict[str, tuple[bool, bool]] = {}
    for r in rows:
        a, b = out.get(r.op, (False, False))
        out[r.op] = (a or r.acl_op, b or r.op_api)
    return out


def _op_plugin(upstream: Path, ref: str, minor: str) -> list[KernelRow]:
    root = upstream / "github/Ascend/op-plugin" / ref
    files = [str(p.relative_to(upstream)) for p in root.rglob("*.yaml")]
    rows: list[KernelRow] = []
    for rel in functions_paths(files, torch=minor):
        text = (upstream / rel).read_text(encoding="utf-8")
        rows += parse_functions(text, origin=Origin(rel), torch=minor)
    return rows


def _compare(upstream: Path, wheel: str, ref: str) -> dict[str, object]:
    base = upstream / "pypi/torch-npu" / wheel
    facts = parse_wheel_facts((base / "WHEEL-FACTS.txt").read_text(), origin=Origin("f"))
    minor = ".".join(facts.torch_version.split(".")[:2])
    raw, codegen = _codegen(upstream, wheel)
    native = parse_native((base / NATIVE).read_text(), origin=Origin("n"))
    op_plugin = _op_plugin(upstream, ref, minor)

    wheel_kernels = _flags([r for r in codegen if r.status == "kernel" and not r.native])
    plugin_kernels = _flags([r for r in op_plugin if r.status == "kernel"])
    assert {op.split("::")[1] for op in wheel_kernels} == _raw_impl_names(raw)
    return {
        "only_wheel": sorted(set(wheel_kernels) - set(plugin_kernels)),
        "only_op_plugin": sorted(set(plugin_kernels) - set(wheel_kernels)),
        "flags": sorted(
            (op, plugin_kernels[op], wheel_kernels[op])
            for op in set(wheel_kernels) & set(plugin_kernels)
            if wheel_kernels[op] != plugin_kernels[op]
        ),
        "native_equal": {r.op for r in codegen if r.native} == {r.op for r in native},
        "sparse_equal": {r.op for r in codegen if r.status == "sparse"}
        == {r.op for r in op_plugin if r.status == "sparse"},
        "kernels": len(wheel_kernels),
    }


def _releases(upstream: Path) -> dict[str, dict[str, str]]:
    with (upstream / "releases.tsv").open(encoding="utf-8") as f:
        return {row["torch_npu_version"]: row for row in csv.DictReader(f, delimiter="\t")}


@pytest.mark.parametrize(
    ("wheel", "tag", "kernels"),
    [
        ("2.1.0.post17", "v7.2.0-pytorch2.1.0", 1330),
        ("2.6.0.post5", "v7.3.0-pytorch2.6.0", 1343),
        ("2.9.0.post6", "v26.1.0-pytorch2.9.0", 1440),
    ],
)
def test_tagged_wheels_match_op_plugin_exactly(
    upstream: Path, wheel: str, tag: str, kernels: int
) -> None:
    """A wheel with a release tag: its compiled list is exactly op-plugin at the tag's pinned
    commit for its torch minor (ops and acl_op/op_api flags, sparse registrations) plus the
    wheel's own npu_native_functions.yaml. No difference at all."""
    release = _releases(upstream)[wheel]
    assert release["tag"] == tag
    got = _compare(upstream, wheel, release["op_plugin_commit"])
    assert got == {
        "only_wheel": [],
        "only_op_plugin": [],
        "flags": [],
        "native_equal": True,
        "sparse_equal": True,
        "kernels": kernels,
    }


# The three wheels without a tag in releases.tsv were built from op-plugin commits the
# snapshot does not hold. master is the closest ref for each (fewer differences than the
# 26.1.0 branch or the 2.12.0 tag's pin; the only ref whose all_version reaches v2.14), and
# what is left is one consistent drift between that build commit and the snapshot's master:
DRIFT_ONLY_WHEEL = [  # compiled into the wheels, absent from master's YAML
    "aten::_fused_adam_",
    "aten::_fused_adam_.tensor_lr",
    "aten::bitwise_left_shift.Scalar_Tensor",
    "aten::bitwise_left_shift.Tensor_Scalar",
    "aten::bitwise_left_shift.Tensor_Scalar_out",
    "aten::bitwise_left_shift_.Tensor_Scalar",
    "aten::bitwise_right_shift.Scalar_Tensor",
    "aten::bitwise_right_shift.Tensor_Scalar",
    "aten::bitwise_right_shift.Tensor_Scalar_out",
    "aten::bitwise_right_shift_.Tensor_Scalar",
    "aten::to_padded_tensor",
    "npu::_npu_matmul_abft_verify",
]
DRIFT_ONLY_MASTER = [  # in master (all_version), not compiled into these wheels
    "npu::npu_moe_distribute_combine_setup",
    "npu::npu_moe_distribute_combine_teardown",
    "npu::npu_moe_distribute_dispatch_setup",
    "npu::npu_moe_distribute_dispatch_teardown",
]
# quant ops: master registers acl_op only, the wheels acl_op + op_api
DRIFT_FLAGS = [
    ("aten::dequantize.self", (True, False), (True, True)),
    ("aten::int_repr", (True, False), (True, True)),
]


@pytest.mark.parametrize(
    ("wheel", "kernels"), [("2.12.0.post3", 1467), ("2.13.0", 1438), ("2.14.0", 1438)]
)
def test_untagged_wheels_differ_from_master_only_by_documented_drift(
    upstream: Path, wheel: str, kernels: int
) -> None:
    assert wheel not in _releases(upstream)
    got = _compare(upstream, wheel, "master")
    assert got == {
        "only_wheel": DRIFT_ONLY_WHEEL,
        "only_op_plugin": DRIFT_ONLY_MASTER,
        "flags": DRIFT_FLAGS,
        "native_equal": True,
        "sparse_equal": True,
        "kernels": kernels,
    }


def test_untagged_master_is_the_closest_ref(upstream: Path) -> None:
    def distance(wheel: str, ref: str) -> int:
        got = _compare(upstream, wheel, ref)
        return sum(
            len(cast("list[object]", got[k])) for k in ("only_wheel", "only_op_plugin", "flags")
        )

    pin_2_12 = _releases(upstream)["2.12.0"]["op_plugin_commit"]
    assert distance("2.12.0.post3", "master") < distance("2.12.0.post3", "26.1.0")
    assert distance("2.12.0.post3", "master") < distance("2.12.0.post3", pin_2_12)
    assert distance("2.13.0", "master") < distance("2.13.0", "26.1.0")
    # 26.1.0's all_version stops at v2.13: nothing there for torch 2.14
    assert _op_plugin(upstream, "26.1.0", "2.14") == []


def test_drift_checked_against_the_raw_files(upstream: Path) -> None:
    """The documented drift, checked on the text without the parsers."""
    master = (
        upstream / "github/Ascend/op-plugin/master/op_plugin/config/op_plugin_functions.yaml"
    ).read_text()
    for wheel in ("2.12.0.post3", "2.13.0", "2.14.0"):
        text = (upstream / "pypi/torch-npu" / wheel / CODEGEN).read_text()
        for op in DRIFT_ONLY_WHEEL:
            name = op.split("::")[1]
            assert f"- func: {name}(" in text
            assert f"func: {name}(" not in master
        for op in DRIFT_ONLY_MASTER:
            name = op.split("::")[1]
            assert f"func: {name}(" in master
            assert f"func: {name}(" not in text
        for op, _, _ in DRIFT_FLAGS:
            name = op.split("::")[1]
            assert re.search(
                rf"^- func: {re.escape(name)}\(.*\n  impl_ns: acl_op, op_api$", text, re.MULTILINE
            )
            assert re.search(
                rf"^  - func: {re.escape(name)}\(.*\n    acl_op: \[v2\.2, newest\]\n\n",
                master,
                re.MULTILINE,
            )
