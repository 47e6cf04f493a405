"""Upstream changes its formats: `opcheck sync` fails with a clear error and keeps the old catalog.

Each case copies a mirror, makes one realistic upstream change to one file (a renamed table
column, a new YAML key or section, a truncated file, a renamed API-doc header, a changed
releases.tsv header ...) and runs `opcheck sync --mirror COPY --catalog PATH` through the CLI.
Expected: exit code 1 (a source failed) or 2 (the release list itself is unreadable), a message
naming the file (and the line when the parser knows it), no traceback, and the catalog written
before is byte-identical.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import Result
from testpaths import TESTS
from typer.testing import CliRunner

from opcheck.cli.app import app
from opcheck.scrapers.pytorch import parse_native_functions
from opcheck.scrapers.rows import Origin
from opcheck.sync.pipeline import Universe

FIX = TESTS / "fixtures"
runner = CliRunner()

OPF = "github/Ascend/op-plugin/c210c210/op_plugin/config/op_plugin_functions.yaml"
OPF_V1 = "github/Ascend/op-plugin/c111c111/op_plugin/config/v1r11/op_plugin_functions.yaml"
DEPRECATED = "github/Ascend/op-plugin/c210c210/op_plugin/config/deprecated.yaml"
COMPAT = "github/Ascend/pytorch/master/COMPATIBILITY.md"
NATIVE = "github/Ascend/pytorch/v7.2.0-pytorch2.1.0/torch_npu/csrc/aten/npu_native_functions.yaml"
WHEEL = "pypi/torch-npu/2.6.0.post5"
CODEGEN = f"{WHEEL}/torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml"
NEW_WHEEL = "pypi/torch-npu/2.7.1"  # a wheel the release list does not know yet
# An API support doc added to the fixture mirror (the fixture mirror has none of its own).
APIDOC = "github/Ascend/pytorch/master/docs/zh/api/native_api/pytorch_2-7-1/torch-nn-functional.md"


def _edit(path: Path, old: str, new: str, count: int = 1) -> int:
    """Replace ``old`` (must occur) and return the 1-based line of the first change."""
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, count), encoding="utf-8")
    return text[: text.index(old)].count("\n") + 1


def _truncate(path: Path, marker: str, keep: int) -> None:
    """Cut the file ``keep`` characters into the first ``marker`` (a transfer cut short)."""
    text = path.read_text(encoding="utf-8")
    path.write_text(text[: text.index(marker) + keep], encoding="utf-8")


# case id → (file changed, change(mirror) → line the error should name, or None)
Change = Callable[[Path], "int | None"]


def _renamed_compat_column(m: Path) -> int:
    return _edit(m / COMPAT, "|   CANN版本    |", "|   配套CANN版本号    |")


def _new_yaml_key(m: Path) -> int:
    line = _edit(m / OPF, "    op_api: [v2.2, newest]\n",
                 "    op_api: [v2.2, newest]\n    dtype_check: [v2.2, newest]\n")
    return line + 1


def _new_top_level_section(m: Path) -> int:
    text = (m / OPF).read_text(encoding="utf-8")
    (m / OPF).write_text(text + "\nexperimental:\n  - func: npu_fast_gelu(Tensor self) -> Tensor\n"
                         "    op_api: all_version\n", encoding="utf-8")
    return text.count("\n") + 2


def _truncated_yaml(m: Path) -> None:
    _truncate(m / OPF, "    op_api: [v2.2, newest]", len("    op_api: [v2.2, ne"))


def _truncated_compat(m: Path) -> int:
    _truncate(m / COMPAT, "| 2.1.0.post17 |", len("| 2.1.0.post17 |  v2.1.0-7.2.0  |"))
    return (m / COMPAT).read_text(encoding="utf-8").count("\n") + 1


def _truncated_codegen(m: Path) -> None:
    _truncate(m / CODEGEN, "- func: copy_", len("- func: copy_\n  op_api: tr"))


def _changed_releases_header(m: Path) -> int:
    return _edit(m / "releases.tsv", "\top_plugin_commit\t", "\top_plugin_sha\t")


def _new_wheel(m: Path, facts: str) -> None:
    shutil.copytree(m / WHEEL, m / NEW_WHEEL)
    (m / NEW_WHEEL / "WHEEL-FACTS.txt").write_text(facts, encoding="utf-8")


def _new_wheel_unpinned_torch(m: Path) -> None:
    _new_wheel(m, "Version: 2.7.1\nRequires-Dist: torch>=2.7.1,<2.8\n")


def _new_wheel_facts_layout(m: Path) -> int:
    _new_wheel(m, "Metadata-Version: 2.4\nVersion: 2.7.1\nRequires-Dist torch==2.7.1\n")
    return 3


def _native_new_key(m: Path) -> int:
    return _edit(m / NATIVE, "    op_api: True", "    op_api: True\n    inplace_view: True") + 1


def _native_new_flag_type(m: Path) -> int:
    return _edit(m / NATIVE, "    op_api: True", "    op_api: [v2.1, newest]")


def _deprecated_new_key(m: Path) -> int:
    text = (m / DEPRECATED).read_text(encoding="utf-8")
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "name:" in ln)
    indent = re.match(r"^\s*-?\s*", text.splitlines()[line - 1])
    assert indent is not None
    _edit(m / DEPRECATED, text.splitlines()[line - 1],
          text.splitlines()[line - 1] + "\n" + " " * len(indent.group(0)) + "since: 2.6.0")
    return line + 1


def _per_version_impl_ns(m: Path) -> int:
    text = (m / OPF_V1).read_text(encoding="utf-8")
    old = next(ln for ln in text.splitlines() if "impl_ns:" in ln)
    return _edit(m / OPF_V1, old, old.split("impl_ns:")[0] + "impl_ns: acl_op, op_api, dvm_v2")


def _apidoc_renamed_header(m: Path) -> int:
    return _edit(m / APIDOC, "|API名称|是否支持|限制与说明|", "|API名称|是否支持|约束说明|")


def _apidoc_new_support_value(m: Path) -> int:
    return _edit(m / APIDOC, "|torch.nn.functional.avg_pool3d|否|-|",
                 "|torch.nn.functional.avg_pool3d|部分支持|-|")


CASES: dict[str, tuple[str, Change]] = {
    "renamed compat column": (COMPAT, _renamed_compat_column),
    "truncated compat table": (COMPAT, _truncated_compat),
    "new key in op_plugin_functions": (OPF, _new_yaml_key),
    "new top-level section": (OPF, _new_top_level_section),
    "truncated op_plugin_functions": (OPF, _truncated_yaml),
    "new kernel family in per-version impl_ns": (OPF_V1, _per_version_impl_ns),
    "truncated wheel codegen list": (CODEGEN, _truncated_codegen),
    "changed releases.tsv header": ("releases.tsv", _changed_releases_header),
    "new wheel with an unpinned torch": (f"{NEW_WHEEL}/WHEEL-FACTS.txt", _new_wheel_unpinned_torch),
    "new wheel with another METADATA layout": (f"{NEW_WHEEL}/WHEEL-FACTS.txt",
                                               _new_wheel_facts_layout),
    "new key in npu_native_functions": (NATIVE, _native_new_key),
    "flag becomes a version spec": (NATIVE, _native_new_flag_type),
    "new key in deprecated.yaml": (DEPRECATED, _deprecated_new_key),
    "renamed API doc header": (APIDOC, _apidoc_renamed_header),
    "new value in API doc support column": (APIDOC, _apidoc_new_support_value),
}


@pytest.fixture(scope="module")
def pristine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The fixture mirror plus one API support doc: the baseline that syncs cleanly."""
    dest = tmp_path_factory.mktemp("pristine") / "mirror"
    shutil.copytree(FIX / "mirror", dest)
    (dest / APIDOC).parent.mkdir(parents=True)
    shutil.copy(FIX / "apidocs" / "pipe.md", dest / APIDOC)
    return dest


@pytest.fixture(scope="module")
def universe() -> Universe:
    origin = Origin("torchgen/packaged/ATen/native/native_functions.yaml", ref="torch-test")
    text = (FIX / "universe.yaml").read_text(encoding="utf-8")
    return Universe(parse_native_functions(text, origin=origin), "2.6.0", origin)


@pytest.fixture(scope="module")
def good_catalog(pristine: Path, universe: Universe,
                 tmp_path_factory: pytest.TempPathFactory) -> Path:
    import opcheck.sync.pipeline as sync_mod

    mp = pytest.MonkeyPatch()
    mp.setattr(sync_mod, "installed_universe", lambda: universe)
    try:
        cat = tmp_path_factory.mktemp("good") / "catalog.sqlite"
        r = _sync(pristine, cat)
        assert r.exit_code == 0, r.output
    finally:
        mp.undo()
    return cat


def _sync(mirror: Path, catalog: Path) -> Result:
    return runner.invoke(app, ["sync", "--mirror", str(mirror), "--catalog", str(catalog)])


def _assert_clear_failure(r: Result, rel: str, line: int | None) -> None:
    output, exit_code = r.output, r.exit_code
    # CliRunner turns an escaping exception into exit code 1 too: it must be a clean exit
    assert isinstance(r.exception, SystemExit), (r.exception, output)
    assert exit_code in (1, 2), output
    assert "Traceback" not in output, output
    where = rel if line is None else f"{rel}:{line}"
    assert where in output, f"expected {where!r} in:\n{output}"
    if exit_code == 1:
        assert "the catalog was not replaced" in output, output
    else:
        assert output.count("opcheck: error:") == 1, output
    # every reported problem is one line that names a file
    problems = [ln for ln in output.splitlines() if ln.startswith(("failed:", "opcheck: error:"))]
    assert problems and all(re.search(r"\S+\.(ya?ml|md|tsv|txt|py|html)(:\d+)?: ", p)
                            for p in problems), problems


@pytest.mark.parametrize("case", sorted(CASES))
def test_changed_upstream_format_keeps_the_old_catalog(
    case: str, pristine: Path, good_catalog: Path, universe: Universe, tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import opcheck.sync.pipeline as sync_mod

    monkeypatch.setattr(sync_mod, "installed_universe", lambda: universe)
    mirror = tmp_path / "mirror"
    shutil.copytree(pristine, mirror)
    cat = tmp_path / "catalog.sqlite"
    shutil.copy(good_catalog, cat)
    before = cat.read_bytes()
    rel, change = CASES[case]
    line = change(mirror)
    r = _sync(mirror, cat)
    _assert_clear_failure(r, rel, line)
    assert cat.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.sqlite", "mirror"]


def test_the_baseline_mirror_syncs(pristine: Path, good_catalog: Path) -> None:
    """The cases above fail because of their one change: the same mirror unchanged is fine."""
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    cat = Catalog.load(open_catalog(good_catalog))
    assert [r.torch_npu for r in cat.releases] == ["1.11.0.post8", "2.1.0.post17", "2.6.0.post5"]
    with open_catalog(good_catalog).connect() as conn:
        n = conn.exec_driver_sql("SELECT count(*) FROM api_support").scalar()
    assert n and n > 5  # the added API doc was read


# ---------------------------------------------------------------------- one real mirror


@pytest.mark.slow
@pytest.mark.upstream
@pytest.mark.torch
def test_real_mirror_with_a_new_yaml_key_keeps_the_old_catalog(
    upstream: Path, tmp_path: Path, bundled_catalog: Path
) -> None:
    """The real snapshot (31 MB, ~25 s to sync): a new key in the real op_plugin_functions.yaml
    that several releases pin is reported with file and line, and the old catalog stays."""
    pytest.importorskip("torchgen")
    mirror = tmp_path / "upstream"
    # links, not copies, and without CANN's libraries (what the edit concerns is op-plugin's
    # registry; CANN's 5,000 sources and pages would only make the sync parse for minutes)
    shutil.copytree(upstream, mirror, copy_function=os.symlink,
                    ignore=lambda folder, names: ["hicann"] if folder.endswith("/github") else [])
    (mirror / "MANIFEST.tsv").unlink()  # the edit below would (rightly) fail the sha256 check
    rel = ("github/Ascend/op-plugin/8b9c8534fa41eff367a41c155843daa530ab3a08/"
           "op_plugin/config/op_plugin_functions.yaml")
    f = mirror / rel
    if not f.is_file():
        pytest.skip(f"{rel} not in this snapshot")
    lines = f.read_text(encoding="utf-8").split("\n")
    first = next(i for i, ln in enumerate(lines) if ln.lstrip().startswith("- func:"))
    indent = len(lines[first]) - len(lines[first].lstrip()) + 2
    lines.insert(first + 1, " " * indent + "dtype_check: all_version")
    f.unlink()  # the link to the real file, which stays as it is
    f.write_text("\n".join(lines), encoding="utf-8")

    cat = tmp_path / "catalog.sqlite"
    shutil.copy(bundled_catalog, cat)
    before = cat.read_bytes()
    r = _sync(mirror, cat)
    assert r.exit_code == 1, r.output
    _assert_clear_failure(r, rel, first + 2)
    assert "unknown key 'dtype_check'" in r.output
    assert cat.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["catalog.sqlite", "upstream"]
