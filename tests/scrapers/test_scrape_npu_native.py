from __future__ import annotations

import re
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.npu_native import parse_native
from opcheck.scrapers.rows import Origin


def test_fixture_rows(fixtures: Path) -> None:
    text = (fixtures / "wheel" / "npu_native_functions.yaml").read_text()
    rows = parse_native(text, origin=Origin("n.yaml"))
    got = [(r.op, r.section, r.op_api, r.native, r.torch, r.line) for r in rows]
    assert got == [
        ("aten::_local_scalar_dense", "supported", False, True, None, 5),
        ("aten::clone", "supported", True, True, None, 6),
        ("aten::copy_", "supported", True, True, None, 8),
        # listed in supported but defined in custom: torch_npu's own op
        ("npu::empty_with_format", "supported", False, True, None, 11),
        ("aten::resize_as_", "supported", False, True, None, 12),
        ("npu::npu_change_data_ptr", "custom", False, True, None, 16),
        ("npu::empty_with_format", "custom", False, True, None, 18),
        ("aten::as_strided_", "symint", False, True, None, 23),
        ("npu::npu_convolution", "custom_autograd", False, True, None, 26),
    ]
    assert all(r.status == "kernel" and not r.acl_op for r in rows)
    assert rows[5].schema.startswith("npu_change_data_ptr(Tensor dst")
    assert {r.torch for r in parse_native(text, origin=Origin("n"), torch="2.6.0")} == {"2.6"}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (
            "backend: NPU\nsupported:\n  - func: clone\n    op_api: yes please\n",
            r"n:4: op_api: expected True/False",
        ),
        (
            "backend: NPU\nsupported:\n  - func: clone\n    impl_ns: op_api\n",
            r"n:4: unknown key 'impl_ns'",
        ),
        ("backend: NPU\nexperimental:\n  - clone\n", r"n:2: unknown top-level section"),
        ("backend: [NPU]\n", r"n:1: backend: expected a string"),
        ("backend: NPU\nsupported:\n  - clone\n  - [x\n", r"n:5: malformed YAML"),
        ("backend: NPU\nsupported:\n  - not an op!\n", r"n:3: func: not an operator"),
    ],
)
def test_errors(text: str, message: str) -> None:
    with pytest.raises(ScrapeError, match=message):
        parse_native(text, origin=Origin("n"))


def _copies(upstream: Path) -> list[Path]:
    gh = sorted(
        upstream.glob("github/Ascend/pytorch/*/torch_npu/csrc/aten/npu_native_functions.yaml")
    )
    pypi = sorted(upstream.glob("pypi/torch-npu/*/torch_npu/csrc/aten/npu_native_functions.yaml"))
    return gh + pypi


def test_every_copy_parses_one_row_per_list_item(upstream: Path) -> None:
    files = _copies(upstream)
    tags = [
        line.split("\t", 1)[0]
        for line in (upstream / "releases.tsv").read_text().splitlines()[1:]
    ]
    on_disk = {p.parts[-5] for p in files if "github" in p.parts}
    # every release tag that ships the file is read (the v3.0.rc* 1.5 tree has none)
    missing = [
        t
        for t in tags
        if (upstream / "github/Ascend/pytorch" / t / "torch_npu/csrc/aten").is_dir()
        and t not in on_disk
    ]
    assert not missing
    assert len(files) >= 70  # 64 final tags + master + 6 wheels before rc/hotfix tags came
    for path in files:
        text = path.read_text(encoding="utf-8")
        rows = parse_native(text, origin=Origin(str(path.relative_to(upstream))))
        items = [n for n, line in enumerate(text.splitlines(), 1) if re.match(r"^\s*- ", line)]
        assert [r.line for r in rows] == items, path
        assert all(r.native for r in rows)


def test_real_facts(upstream: Path) -> None:
    path = (
        upstream
        / "github/Ascend/pytorch/v7.2.0-pytorch2.1.0/torch_npu/csrc/aten/npu_native_functions.yaml"
    )
    rows = parse_native(path.read_text(), origin=Origin("x"))
    by_op = {(r.op, r.section): r for r in rows}
    assert by_op[("aten::copy_", "supported")].op_api
    assert not by_op[("aten::empty_strided", "supported")].op_api
    assert ("npu::npu_format_cast", "custom") in by_op
    assert len(rows) == 67
    # the old 1.8.1 tree listed every ATen op torch_npu had (no op-plugin yet)
    old = (
        upstream
        / "github/Ascend/pytorch/v3.0.0-pytorch1.8.1/torch_npu/csrc/aten/npu_native_functions.yaml"
    )
    old_rows = parse_native(old.read_text(), origin=Origin("y"))
    assert len(old_rows) == 1989
    assert {r.section for r in old_rows} == {"supported", "autograd", "custom", "custom_autograd"}
    assert ("aten::silu", "autograd") in {(r.op, r.section) for r in old_rows}


def test_rc_era_bscpp_flag(upstream: Path) -> None:
    """5.0.rc* files flag ops written in BiSheng C++ with ``bscpp_op``; a flag, not a section."""
    flagged = [
        p
        for p in _copies(upstream)
        if "bscpp_op:" in p.read_text(encoding="utf-8")
    ]
    assert len(flagged) == 10
    for path in flagged:
        rows = parse_native(path.read_text(encoding="utf-8"), origin=Origin(path.name))
        assert ("npu::bscpp_add", "custom") in {(r.op, r.section) for r in rows}, path
    with pytest.raises(ScrapeError, match=r"n:3: bscpp_op: expected True/False"):
        parse_native(
            "custom:\n  - func: bscpp_add(Tensor self) -> Tensor\n    bscpp_op: maybe\n",
            origin=Origin("n"),
        )
