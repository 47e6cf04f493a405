from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.opplugin import (
    detect_format,
    functions_paths,
    parse_deprecated,
    parse_functions,
)
from opcheck.scrapers.rows import KernelRow, Origin

OP = "github/Ascend/op-plugin"


def _read(fixtures: Path, name: str) -> str:
    return (fixtures / "opplugin" / name).read_text(encoding="utf-8")


def _by(
    rows: list[KernelRow], op: str, status: str = "kernel", section: str | None = None
) -> dict[str | None, KernelRow]:
    found = [r for r in rows if r.op == op and r.status == status and section in (None, r.section)]
    out = {r.torch: r for r in found}
    assert len(out) == len(found), f"two {status} rows for one version of {op}"
    return out


# --------------------------------------------------------------------------------------------
# per-version format


@pytest.fixture
def v1r11(fixtures: Path) -> list[KernelRow]:
    origin = Origin(f"{OP}/fixture/op_plugin/config/v1r11/op_plugin_functions.yaml")
    return parse_functions(_read(fixtures, "v1r11/op_plugin_functions.yaml"), origin=origin)


def test_per_version_torch_from_folder_and_flags(v1r11: list[KernelRow]) -> None:
    assert {r.torch for r in v1r11} == {"1.11"}
    abs_ = _by(v1r11, "aten::abs")["1.11"]
    assert (abs_.acl_op, abs_.op_api, abs_.section, abs_.line) == (True, True, "official", 2)
    assert abs_.schema == "abs(Tensor self) -> Tensor"
    add = _by(v1r11, "aten::add.Tensor")["1.11"]
    assert (add.acl_op, add.op_api) == (False, True)
    # sparse-only registration: a sparse row, no dense kernel row
    assert _by(v1r11, "aten::_coalesce") == {}
    sparse = _by(v1r11, "aten::_coalesce", "sparse")["1.11"]
    assert sparse.op_api and sparse.line == 7


def test_per_version_tocpu_and_unsupported(v1r11: list[KernelRow]) -> None:
    tocpu = sorted(r.op for r in v1r11 if r.status == "tocpu")
    unsupported = sorted(r.op for r in v1r11 if r.status == "unsupported")
    assert tocpu == ["aten::_cholesky_helper", "aten::orgqr.out"]
    assert unsupported == ["aten::_conj", "aten::isin.Tensor_Tensor_out", "aten::linalg_eig"]
    assert next(r.line for r in v1r11 if r.op == "aten::orgqr.out") == 26


def test_symint_namespace_rule(v1r11: list[KernelRow]) -> None:
    symint = {r.op for r in v1r11 if r.section == "symint"}
    assert symint == {
        "npu::npu_gather_backward",  # defined in custom
        "aten::repeat_interleave.self_int",  # no npu_ prefix, not custom
        "npu::npu_max_backward",  # npu_ prefix
        "npu::_dropout_with_byte_mask_backward",  # custom although no npu_ prefix
        "aten::embedding_backward",
    }
    assert {r.op for r in v1r11 if r.section == "custom"} == {
        "npu::npu_gather_backward",
        "npu::npu_transpose",
        "npu::_dropout_with_byte_mask_backward",
    }


def test_per_version_torch_argument(fixtures: Path) -> None:
    text = _read(fixtures, "v1r11/op_plugin_functions.yaml")
    rows = parse_functions(text, origin=Origin("somewhere/op_plugin_functions.yaml"), torch="1.11")
    assert {r.torch for r in rows} == {"1.11"}
    with pytest.raises(ScrapeError, match="torch version unknown"):
        parse_functions(text, origin=Origin("somewhere/op_plugin_functions.yaml"))
    with pytest.raises(ScrapeError, match=r"folder for 1\.11"):
        parse_functions(text, origin=Origin("x/config/v1r11/op_plugin_functions.yaml"), torch="2.1")


def test_custom_supported_adds_nothing_already_custom(fixtures: Path) -> None:
    origin = Origin("x/op_plugin/config/v2r1/op_plugin_functions.yaml")
    rows = parse_functions(_read(fixtures, "v2r1/op_plugin_functions.yaml"), origin=origin)
    assert [(r.op, r.torch, r.section) for r in rows] == [
        ("aten::abs", "2.1", "official"),
        ("npu::npu_transpose", "2.1", "custom"),
    ]


# --------------------------------------------------------------------------------------------
# transitional format (6.0.rc2)


def test_transitional_pairs_lists(fixtures: Path) -> None:
    text = _read(fixtures, "transitional.yaml")
    assert detect_format(text) == "transitional"
    rows = parse_functions(text, origin=Origin("t.yaml"))
    abs_ = _by(rows, "aten::abs")
    assert {v: (r.acl_op, r.op_api) for v, r in abs_.items()} == {
        "1.11": (True, True),
        "2.0": (True, False),
        "2.1": (True, True),
    }
    assert set(_by(rows, "aten::__ilshift__.Scalar")) == {"1.11", "2.0", "2.1"}
    assert set(_by(rows, "aten::_adaptive_avg_pool2d")) == {"1.11"}
    assert set(_by(rows, "npu::npu_transpose")) == {"2.0", "2.1"}
    assert {r.torch for r in parse_functions(text, origin=Origin("t"), torch="2.0")} == {"2.0"}


def test_transitional_length_mismatch(fixtures: Path) -> None:
    text = _read(fixtures, "transitional.yaml").replace(
        "version: 1,11, 2.0, 2.1\n", "version: 1,11, 2.0\n", 1
    )
    with pytest.raises(ScrapeError, match=r"t\.yaml:4: impl_ns has 3 items but version has 2"):
        parse_functions(text, origin=Origin("t.yaml"))


# --------------------------------------------------------------------------------------------
# combined format


@pytest.fixture
def combined(fixtures: Path) -> list[KernelRow]:
    return parse_functions(_read(fixtures, "combined.yaml"), origin=Origin("c.yaml"))


ALL = ["2.1", "2.2", "2.3", "2.4", "2.5", "2.6", "2.7"]


def test_combined_all_version_and_aclnn(combined: list[KernelRow]) -> None:
    # abs is also in symint (for 2.7): one row per section, so pick official
    assert sorted(r.section for r in combined if r.op == "aten::abs" and r.torch == "2.7") == [
        "official",
        "symint",
    ]
    abs_ = _by(combined, "aten::abs", section="official")
    assert list(abs_) == ALL
    assert all(r.acl_op and r.op_api and r.aclnn == "aclnnAbs" for r in abs_.values())
    # exec's first token; structured_inherit borrows the target's exec
    assert {r.aclnn for r in _by(combined, "aten::ceil.out").values()} == {"aclnnCeil"}
    assert {r.aclnn for r in _by(combined, "aten::ceil").values()} == {"aclnnCeil"}
    assert {r.aclnn for r in _by(combined, "npu::npu_gelu", section="custom").values()} == {
        "aclnnGeluV2"
    }


def test_combined_range_syntaxes(combined: list[KernelRow]) -> None:
    gelu = _by(combined, "aten::gelu")
    # acl_op [v2.1, v2.3]; op_api "[ v2.5, newest ]" with stray spaces; dvm all_version
    assert {v: (r.acl_op, r.op_api) for v, r in gelu.items()} == {
        "2.1": (True, False),
        "2.2": (True, False),
        "2.3": (True, False),
        "2.4": (False, False),  # dvm only: still a kernel
        "2.5": (False, True),
        "2.6": (False, True),
        "2.7": (False, True),
    }
    erfinv = _by(combined, "aten::erfinv")  # single "v2.2" and comma list "v2.1, v2.4"
    assert {v: (r.acl_op, r.op_api) for v, r in erfinv.items()} == {
        "2.1": (False, True),
        "2.2": (True, False),
        "2.4": (False, True),
    }


def test_combined_sparse_rows(combined: list[KernelRow]) -> None:
    assert _by(combined, "aten::_coalesce") == {}
    assert list(_by(combined, "aten::_coalesce", "sparse")) == ALL
    assert list(_by(combined, "aten::add.out")) == ALL
    assert list(_by(combined, "aten::add.out", "sparse")) == ["2.6", "2.7"]


def test_combined_duplicate_key_last_wins(combined: list[KernelRow]) -> None:
    # npu_gelu_backward says op_api twice: [v2.1, v2.2] then [v2.6, newest]; PyYAML keeps
    # the last one and so does the parser.
    assert list(_by(combined, "npu::npu_gelu_backward")) == ["2.6", "2.7"]


def test_combined_sections_namespaces_and_lists(combined: list[KernelRow]) -> None:
    assert list(_by(combined, "aten::_thnn_fused_gru_cell")) == ["2.5", "2.6", "2.7"]
    assert list(_by(combined, "aten::q_scale")) == ["2.2"]
    symint = {r.op for r in combined if r.section == "symint"}
    assert symint == {
        "npu::npu_gelu",
        "aten::abs",
        "npu::npu_only_here",
        "aten::something_else",
    }
    assert [(r.op, r.torch) for r in combined if r.status == "tocpu"] == [
        ("aten::_cholesky_helper", "2.1"),
        ("aten::_cholesky_helper", "2.2"),
    ]
    assert [(r.op, r.torch) for r in combined if r.status == "unsupported"] == [
        ("aten::linalg_eig", "2.6"),
        ("aten::linalg_eig", "2.7"),
    ]
    assert next(r for r in combined if r.op == "npu::npu_dropout_gen_mask").acl_op


def test_combined_torch_filter(fixtures: Path) -> None:
    rows = parse_functions(_read(fixtures, "combined.yaml"), origin=Origin("c"), torch="v2.2")
    assert {r.torch for r in rows} == {"2.2"}
    assert "aten::q_scale" in {r.op for r in rows}


@pytest.mark.parametrize(
    ("old", "new", "message"),
    [
        ("acl_op: v2.2\n", "acl_op: v2.9\n", r"c\.yaml:\d+: acl_op: 2\.9 is not in all_version"),
        ("[v2.1, v2.3]", "[v2.3, v2.1]", r"empty range"),
        ("[v2.1, v2.3]", "[v2.1]", r"a range must be"),
        ("acl_op: v2.2\n", "acl_op: 2.2.x\n", r"bad version"),
        ("    exposed: all_version\n", "    exposed: sometimes\n", r"exposed: bad version"),
        (
            "    sparse: [v2.1, newest]\n\n  - func: add",
            "\n  - func: add",
            r"c\.yaml:34: entry registers nothing",
        ),
    ],
)
def test_combined_bad_specs(fixtures: Path, old: str, new: str, message: str) -> None:
    text = _read(fixtures, "combined.yaml")
    assert old in text
    with pytest.raises(ScrapeError, match=message):
        parse_functions(text.replace(old, new, 1), origin=Origin("c.yaml"))


# --------------------------------------------------------------------------------------------
# strictness: file and line in every error


def test_unknown_key_names_file_and_line(fixtures: Path) -> None:
    with pytest.raises(ScrapeError) as e:
        parse_functions(_read(fixtures, "unknown_key.yaml"), origin=Origin("a/b/unknown_key.yaml"))
    assert str(e.value).startswith("a/b/unknown_key.yaml:8: unknown key 'op_apii'")
    assert e.value.line == 8 and e.value.source == "a/b/unknown_key.yaml"


def test_unknown_section(fixtures: Path) -> None:
    with pytest.raises(ScrapeError, match=r"^s\.yaml:5: unknown top-level section 'experimental'"):
        parse_functions(_read(fixtures, "unknown_section.yaml"), origin=Origin("s.yaml"))


def test_malformed_yaml(fixtures: Path) -> None:
    with pytest.raises(ScrapeError, match=r"^m\.yaml:6: malformed YAML"):
        parse_functions(_read(fixtures, "malformed.yaml"), origin=Origin("m.yaml"))


def test_truncated_file(fixtures: Path) -> None:
    text = _read(fixtures, "combined.yaml")
    cut_in_flow = text[: text.index("[ v2.5, newest ]") + 7]  # "...op_api: [ v2.5,"
    with pytest.raises(ScrapeError, match=r"malformed YAML"):
        parse_functions(cut_in_flow, origin=Origin("c.yaml"))
    cut_after_func = text[: text.index("    acl_op: all_version\n    op_api: all_version")]
    with pytest.raises(ScrapeError, match=r"c\.yaml:3: entry registers nothing"):
        parse_functions(cut_after_func, origin=Origin("c.yaml"))
    with pytest.raises(ScrapeError, match="empty file"):
        parse_functions("", origin=Origin("c.yaml"))
    with pytest.raises(ScrapeError, match="all_version"):
        parse_functions("all_version:\nofficial:\n", origin=Origin("c.yaml"))


def test_wrong_shapes() -> None:
    with pytest.raises(ScrapeError, match="expected a mapping"):
        parse_functions("- a\n- b\n", origin=Origin("x/v2r1/op_plugin_functions.yaml"))
    with pytest.raises(ScrapeError, match=r":2: official: expected an entry"):
        parse_functions("official:\n  - abs\n", origin=Origin("x/v2r1/f.yaml"))
    with pytest.raises(ScrapeError, match="unknown kernel family 'aclop'"):
        parse_functions(
            "official:\n  - func: abs(Tensor self) -> Tensor\n    impl_ns: aclop\n",
            origin=Origin("x/v2r1/f.yaml"),
        )


# --------------------------------------------------------------------------------------------
# deprecated / path selection


def test_deprecated(fixtures: Path) -> None:
    rows = parse_deprecated(_read(fixtures, "deprecated.yaml"), origin=Origin("dep"))
    assert [(r.op, r.replacement, r.line) for r in rows] == [
        ("npu::npu_silu", "torch.nn.functional.silu", 2),
        ("npu::npu_min.dim", "torch.min", 4),
        ("npu::npu_nms_rotated", "", 6),
    ]
    with pytest.raises(ScrapeError, match=r"dep:3: unknown key 'replaced'"):
        parse_deprecated("deprecated:\n  - name: npu_silu\n    replaced: x\n", origin=Origin("dep"))


def test_functions_paths() -> None:
    ref = f"{OP}/6.0.rc2/op_plugin/config"
    both = [
        f"{ref}/op_plugin_functions.yaml",
        f"{ref}/v2r1/op_plugin_functions.yaml",
        f"{ref}/v1r11/op_plugin_functions.yaml",
        f"{ref}/v2r10/op_plugin_functions.yaml",
        f"{ref}/v2r1/derivatives.yaml",
        f"{ref}/README.md",
    ]
    assert functions_paths(both) == [both[2], both[1], both[3]]  # version order, 2.10 last
    assert functions_paths(both, torch="2.1.0") == [both[1]]
    assert functions_paths([both[0], both[5]]) == [both[0]]
    assert functions_paths(["op_plugin/config/op_plugin_functions.yaml"]) == [
        "op_plugin/config/op_plugin_functions.yaml"
    ]
    assert functions_paths([]) == []


def test_detect_format(fixtures: Path) -> None:
    assert detect_format(_read(fixtures, "combined.yaml")) == "combined"
    assert detect_format(_read(fixtures, "transitional.yaml")) == "transitional"
    assert detect_format(_read(fixtures, "v1r11/op_plugin_functions.yaml")) == "per_version"


# --------------------------------------------------------------------------------------------
# the real files


def _all(upstream: Path, pattern: str) -> list[Path]:
    return sorted((upstream / OP).glob(pattern))


def _origin(upstream: Path, path: Path) -> Origin:
    return Origin(str(path.relative_to(upstream)))


def _raw_entry_lines(text: str, fmt: str) -> set[int]:
    """Lines that must yield rows, found without YAML: every "- func:" item (outside
    custom_supported) and, in per-version files, the bare names under tocpu/unsupported."""
    lines: set[int] = set()
    section = ""
    for n, line in enumerate(text.splitlines(), start=1):
        top = re.match(r"^(\w+):", line)
        if top:
            section = top[1]
            continue
        is_func = re.match(r"^\s*-\s+func:", line) and section != "custom_supported"
        is_bare_name = (
            fmt == "per_version"
            and section in ("tocpu", "unsupported")
            and re.match(r"^\s*-\s+[\w.]+\s*$", line)
        )
        if is_func or is_bare_name:
            lines.add(n)
    return lines


def test_every_functions_file_parses_and_covers_every_entry(upstream: Path) -> None:
    files = _all(upstream, "*/op_plugin/config/**/op_plugin_functions.yaml")
    # per-version folders (v1r11/ …) before 6.0.rc2, the transitional combined file of
    # 6.0.rc2 (parallel comma lists, no all_version:), one combined file with all_version:
    # after: told apart here by folder and first key, not by detect_format
    expected: Counter[str] = Counter(
        "per_version" if re.fullmatch(r"v\d+r\d+", p.parent.name)
        else "combined" if p.read_text(encoding="utf-8").lstrip().startswith("all_version:")
        else "transitional" for p in files)
    assert len(files) > 57
    formats: Counter[str] = Counter()
    # (parse time is measured by benchmarks/bench_catalog.py, not asserted here)
    # Half the files are byte-identical to another pin's in the same folder name (84 files,
    # 41 distinct): the parser reads the text and the folder (a per-version file's torch
    # version) only, so each distinct (folder, text) is parsed once.
    checked: set[tuple[str, str]] = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        fmt = detect_format(text)
        formats[fmt] += 1
        if (path.parent.name, text) in checked:
            continue
        checked.add((path.parent.name, text))
        rows = parse_functions(text, origin=_origin(upstream, path))
        assert {r.line for r in rows} == _raw_entry_lines(text, fmt), path
    assert formats == expected
    assert formats["transitional"] >= 1 and formats["per_version"] >= 30


def _raw_kernel_names(text: str, version: str) -> set[str]:
    """Distinct op names with an acl_op/op_api/dvm registration for ``version`` in a combined
    file, by regex over the text (no YAML, no parser code)."""
    head = re.search(r"^all_version:\s*\[(.*)\]", text, re.MULTILINE)
    assert head
    order = [v.strip().lstrip("v") for v in head[1].split(",")]
    names: set[str] = set()
    for block in re.split(r"\n(?=  - func:|\S)", text):
        m = re.match(r"  - func: ([\w.]+)", block)
        if not m:
            continue
        for spec in re.findall(r"^    (?:acl_op|op_api|dvm):(.*)$", block, re.MULTILINE):
            spec = spec.strip()
            if spec == "all_version":
                hit = True
            elif spec.startswith("["):
                lo, hi = (s.strip().lstrip("v") for s in spec.strip("[] ").split(","))
                hi = order[-1] if hi == "newest" else hi
                hit = order.index(lo) <= order.index(version) <= order.index(hi)
            else:
                hit = version in [s.strip().lstrip("v") for s in spec.split(",")]
            if hit:
                names.add(m[1])
    return names


def test_real_counts_26_1_0(upstream: Path) -> None:
    path = upstream / OP / "26.1.0/op_plugin/config/op_plugin_functions.yaml"
    text = path.read_text(encoding="utf-8")
    rows = parse_functions(text, origin=_origin(upstream, path))
    for version, expected in (("2.1", 1413), ("2.12", 1442)):
        ops = {r.op for r in rows if r.torch == version and r.status == "kernel"}
        assert len(ops) == expected
        # no name is both aten:: and npu::, so names count the same as ops
        assert len(_raw_kernel_names(text, version)) == expected
        assert {o.split("::")[1] for o in ops} == _raw_kernel_names(text, version)


def test_real_master_drops_dimname_overloads_at_2_13(upstream: Path) -> None:
    path = upstream / OP / "master/op_plugin/config/op_plugin_functions.yaml"
    text = path.read_text(encoding="utf-8")
    rows = parse_functions(text, origin=_origin(upstream, path))
    k12 = {r.op for r in rows if r.torch == "2.12" and r.status == "kernel"}
    k13 = {r.op for r in rows if r.torch == "2.13" and r.status == "kernel"}
    assert (len(k12), len(k13)) == (1459, 1430)
    assert k13 < k12
    dropped = k12 - k13
    # 29 named-tensor overloads, each limited to [v2.1, v2.12] in the file
    assert len(dropped) == 29
    assert all(re.search(r"[Dd]imname|names", op) for op in dropped)
    assert "acl_op: [v2.1, v2.12]" in text


def test_real_spot_checks(upstream: Path) -> None:
    path = upstream / OP / "26.1.0/op_plugin/config/op_plugin_functions.yaml"
    text = path.read_text(encoding="utf-8")
    rows = parse_functions(text, origin=_origin(upstream, path))
    lines = text.splitlines()
    # two official entries: line 4267 (SymInt schema, [v2.2, newest]) and 4271 (v2.1 only)
    assert (
        lines[4266].startswith("  - func: repeat_interleave.self_Tensor(")
        and "SymInt?" in lines[4266]
    )
    assert lines[4267:4269] == ["    acl_op: [v2.2, newest]", "    op_api: [v2.2, newest]"]
    assert lines[4271:4273] == ["    acl_op: v2.1", "    op_api: v2.1"]
    official = [
        r for r in rows if r.op == "aten::repeat_interleave.self_Tensor" and r.section == "official"
    ]
    assert {(r.torch, r.line) for r in official} == {("2.1", 4271)} | {
        (f"2.{m}", 4267) for m in range(2, 14)
    }
    assert all(r.acl_op and r.op_api for r in official)
    # npu_gelu: gen_opapi exec at the line below names aclnnGeluV2
    gelu = [r for r in rows if r.op == "npu::npu_gelu" and r.section == "custom"]
    assert gelu and {r.aclnn for r in gelu} == {"aclnnGeluV2"}
    exec_line = next(line for line in lines[gelu[0].line :] if line.strip().startswith("exec:"))
    assert exec_line.strip().startswith("exec: aclnnGeluV2,")


def test_real_transitional_6_0_rc2_is_an_unfinished_subset(upstream: Path) -> None:
    cfg = upstream / OP / "6.0.rc2/op_plugin/config"
    trans = parse_functions((cfg / "op_plugin_functions.yaml").read_text(), origin=Origin("t"))
    missing = {}
    for folder, version in (("v1r11", "1.11"), ("v2r0", "2.0"), ("v2r1", "2.1"), ("v2r4", "2.4")):
        path = cfg / folder / "op_plugin_functions.yaml"
        per = parse_functions(path.read_text(), origin=_origin(upstream, path))
        t = {r.op for r in trans if r.torch == version and r.status == "kernel"}
        p = {r.op for r in per if r.status == "kernel"}
        assert t <= p
        missing[version] = len(p - t)
    assert missing == {"1.11": 1, "2.0": 152, "2.1": 213, "2.4": 202}
    raw = (cfg / "op_plugin_functions.yaml").read_text()
    # the reason: one entry per op under its 1.11 schema, so SymInt schemas of 2.x are absent
    assert "func: _adaptive_avg_pool2d(Tensor self, int[2] output_size)" in raw
    assert "SymInt[2] output_size" not in raw
    assert "\nsymint:" not in raw
    ref_files = [str(p.relative_to(upstream)) for p in cfg.rglob("*.yaml")]
    chosen = functions_paths(ref_files)
    assert len(chosen) == 6 and all("/v" in p for p in chosen)


def test_every_deprecated_file_parses(upstream: Path) -> None:
    files = _all(upstream, "*/op_plugin/config/deprecated.yaml")
    assert len(files) == 15
    for path in files:
        text = path.read_text(encoding="utf-8")
        rows = parse_deprecated(text, origin=_origin(upstream, path))
        assert len(rows) == text.count("- name:")
        assert sum(1 for r in rows if r.replacement) == text.count("replace:")
    path = upstream / OP / "26.1.0/op_plugin/config/deprecated.yaml"
    rows = parse_deprecated(path.read_text(), origin=_origin(upstream, path))
    assert (len(rows), sum(1 for r in rows if r.replacement)) == (57, 28)
    assert ("npu::npu_silu", "torch.nn.functional.silu") in {(r.op, r.replacement) for r in rows}
