from __future__ import annotations

import importlib.metadata
import json
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest
import typer
from catalog_fixture import small_catalog
from typer.testing import CliRunner

from opcheck.cli import commands_env
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import CatalogData, ReleaseRec
from opcheck.db.engine import open_catalog
from opcheck.env import assess as assessing
from opcheck.env import probe
from opcheck.env.assess import Assessment, assess
from opcheck.env.probe import (
    CommandResult,
    EnvRoots,
    Inventory,
    collect,
    parse_npu_smi,
    parse_version_cfg,
)

NPU_SMI_910B = """\
+------------------------------------------------------------------------------------------------+
| npu-smi 24.1.rc2                 Version: 24.1.rc2                                             |
+---------------------------+---------------+----------------------------------------------------+
| NPU   Name                | Health        | Power(W)    Temp(C)           Hugepages-Usage(page)|
| Chip                      | Bus-Id        | AICore(%)   Memory-Usage(MB)  HBM-Usage(MB)        |
+===========================+===============+====================================================+
| 0     910B3               | OK            | 93.4        37                0    / 0             |
| 0                         | 0000:C1:00.0  | 0           0    / 0          3395 / 65536         |
+===========================+===============+====================================================+
| 1     910B3               | OK            | 90.1        36                0    / 0             |
| 0                         | 0000:C2:00.0  | 0           0    / 0          3390 / 65536         |
+===========================+===============+====================================================+
+---------------------------+---------------+----------------------------------------------------+
| NPU     Chip              | Process id    | Process name             | Process memory(MB)      |
+===========================+===============+====================================================+
| 0       0                 | 41234         | python                   | 3100                    |
+===========================+===============+====================================================+
"""

NPU_SMI_310P = """\
+--------------------------------------------------------------------------------------------------------+
| npu-smi 23.0.rc3                                 Version: 23.0.rc3                                     |
+-------------------------------+-----------------+------------------------------------------------------+
| NPU     Name                  | Health          | Power(W)     Temp(C)           Hugepages-Usage(page) |
| Chip    Device                | Bus-Id          | AICore(%)    Memory-Usage(MB)                        |
+===============================+=================+======================================================+
| 8       310P3                 | OK              | NA           46                0     / 0             |
| 0       0                     | 0000:01:00.0    | 0            1419 / 21527                            |
+===============================+=================+======================================================+
| 9       310P3                 | Warning         | NA           47                0     / 0             |
| 0       1                     | 0000:02:00.0    | 0            1419 / 21527                            |
+===============================+=================+======================================================+
"""


def _catalog_data() -> CatalogData:
    d = small_catalog()
    # The release the example names: torch 2.6.0 on CANN 8.3.RC1, just before post5.
    d.releases.append(ReleaseRec("2.6.0.post3", "2.6.0", "7.2.0", "8.3.RC1", "3.9,3.10,3.11",
                                 "v7.2.0-pytorch2.6.0", has_cpu_fallback=True))
    # A hotfix whose CANN no table names yet, and a pre-release: neither is an install advice
    # while a final release with a known CANN fits as well.
    d.releases.append(ReleaseRec("2.6.0.post6", "2.6.0", "7.3.1", "", "3.9,3.10,3.11"))
    d.releases.append(ReleaseRec("2.7.0rc1", "2.7.0", "", "8.5.0", "3.10,3.11,3.12"))
    order = ["1.11.0.post8", "2.1.0.post10", "2.1.0.post17", "2.4.0", "2.6.0.post3", "2.6.0.post5",
             "2.6.0.post6", "2.7.0rc1"]
    for r in d.releases:
        r.sort_key = order.index(r.torch_npu)
    return d


@pytest.fixture(scope="module")
def cat(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    path = write_catalog(_catalog_data(), tmp_path_factory.mktemp("cat") / "c.sqlite")
    return Catalog.load(open_catalog(path))


@pytest.fixture
def cat_path(tmp_path: Path) -> Path:
    return write_catalog(_catalog_data(), tmp_path / "c.sqlite")


# --- fake machines ---------------------------------------------------------------------------

def write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def toolkit(base: Path, version: str, *, arch: str = "x86_64", link_latest: bool = True) -> Path:
    """``<base>/ascend-toolkit/<version>/<arch>-linux/ascend_toolkit_install.info`` + latest."""
    root = base / "ascend-toolkit" / version
    write(root / f"{arch}-linux" / "ascend_toolkit_install.info",
          f"package_name=Ascend-cann-toolkit\nversion={version}\n"
          "innerversion=V100R001C17SPC001B230\n"
          f"arch={arch}\nos=linux\npath={root}/{arch}-linux\n")
    write(root / "set_env.sh", "export ASCEND_HOME_PATH=...\n")
    if link_latest:
        latest = base / "ascend-toolkit" / "latest"
        if latest.is_symlink():
            latest.unlink()
        latest.symlink_to(version)
    return root


def driver(base: Path, version: str = "24.1.rc2", firmware: str | None = "7.5.0.1.129") -> None:
    write(base / "driver" / "version.info",
          f"Version={version}\nascendhal_version=7.35.19\npackage_version={version}\n")
    if firmware:
        write(base / "firmware" / "version.info", f"Version={firmware}\nfirmware_version=1.0\n")


def metadata(**versions: str) -> Callable[[str], str]:
    def version(name: str) -> str:
        key = name.replace("-", "_")
        if key not in versions:
            raise importlib.metadata.PackageNotFoundError(name)
        return versions[key]

    return version


def no_which(_name: str) -> str | None:
    return None


def never_run(argv: Sequence[str]) -> CommandResult:
    raise AssertionError(f"nothing should run: {argv}")


def roots_for(tmp_path: Path) -> EnvRoots:
    base = tmp_path / "Ascend"
    base.mkdir(parents=True, exist_ok=True)
    osr = write(tmp_path / "os-release", 'NAME="Ubuntu"\nPRETTY_NAME="Ubuntu 22.04.4 LTS"\n')
    (tmp_path / "dev").mkdir(exist_ok=True)
    return EnvRoots(ascend=(base,), os_release=osr, dev=tmp_path / "dev")


def machine(tmp_path: Path, *, environ: dict[str, str] | None = None,
            which: Callable[[str], str | None] = no_which,
            run: Callable[[Sequence[str]], CommandResult] = never_run,
            python: str = "3.10.12", **packages: str) -> Inventory:
    return collect(roots=roots_for(tmp_path), environ=environ or {}, which=which, run=run,
                   metadata_version=metadata(**packages), python=python,
                   implementation="CPython", machine="x86_64")


def statuses(a: Assessment, check: str) -> list[str]:
    return [f.status for f in a.findings if f.check == check]


def message(a: Assessment, check: str, status: str) -> str:
    return " | ".join(f.message for f in a.findings if f.check == check and f.status == status)


# --- parsing ---------------------------------------------------------------------------------

def test_parse_npu_smi_910b_and_310p() -> None:
    assert parse_npu_smi(NPU_SMI_910B) == ("24.1.rc2", ("910B3", "910B3"))
    assert parse_npu_smi(NPU_SMI_310P) == ("23.0.rc3", ("310P3", "310P3"))
    assert parse_npu_smi("garbage\n| x | y |\n") == ("", ())


def test_parse_version_cfg_takes_release_name_not_build_number() -> None:
    text = ("# version: 1.0\nruntime_running_version=[7.1.0.3.220:8.0.RC1]\n"
            "toolkit_running_version=[7.1.0.3.220:8.0.RC1]\n")
    assert parse_version_cfg(text) == "8.0.RC1"
    assert parse_version_cfg("version=8.0.0\n") == "8.0.0"
    assert parse_version_cfg("nothing here\n") == ""


# --- collect: layouts ------------------------------------------------------------------------

def test_toolkit_latest_symlink_and_side_by_side_versions(tmp_path: Path) -> None:
    base = tmp_path / "Ascend"
    toolkit(base, "8.0.RC1", link_latest=False)
    toolkit(base, "8.3.RC1")
    inv = machine(tmp_path)
    assert inv.cann is not None
    assert inv.cann.version == "8.3.RC1" and inv.cann.kind == "toolkit"
    assert inv.cann.source.endswith("x86_64-linux/ascend_toolkit_install.info")
    assert sorted(c.version for c in inv.cann_installs) == ["8.0.RC1", "8.3.RC1"]
    assert inv.os_name == "Ubuntu 22.04.4 LTS" and inv.arch == "x86_64"


def test_cann_85_layout_under_cann_dir(tmp_path: Path) -> None:
    write(tmp_path / "Ascend" / "cann" / "aarch64-linux" / "ascend_toolkit_install.info",
          "version=8.5.0\narch=aarch64\n")
    inv = collect(roots=roots_for(tmp_path), environ={}, which=no_which, run=never_run,
                  metadata_version=metadata(), python="3.11.2", machine="aarch64")
    assert inv.cann is not None and inv.cann.version == "8.5.0"
    assert "/cann/aarch64-linux/" in inv.cann.source


def test_other_arch_dir_is_still_read(tmp_path: Path) -> None:
    # An install copied from an aarch64 host onto x86 still says which version it is.
    toolkit(tmp_path / "Ascend", "8.0.0", arch="aarch64")
    inv = machine(tmp_path)
    assert inv.cann is not None and inv.cann.version == "8.0.0"


def test_version_cfg_and_version_info_layouts(tmp_path: Path) -> None:
    base = tmp_path / "Ascend"
    write(base / "ascend-toolkit" / "latest" / "version.cfg",
          "toolkit_running_version=[6.3.0.1.241:6.3.RC1]\n")
    inv = machine(tmp_path)
    assert inv.cann is not None and inv.cann.version == "6.3.RC1"
    assert inv.cann.source.endswith("version.cfg")

    other = tmp_path / "other"
    write(other / "Ascend" / "ascend-toolkit" / "latest" / "version.info", "Version=7.0.0\n")
    inv2 = machine(other)
    assert inv2.cann is not None and inv2.cann.version == "7.0.0"


def test_nnae_install(tmp_path: Path) -> None:
    write(tmp_path / "Ascend" / "nnae" / "latest" / "ascend_nnae_install.info",
          "version=8.0.RC2\n")
    inv = machine(tmp_path)
    assert inv.cann is not None
    assert (inv.cann.kind, inv.cann.version) == ("nnae", "8.0.RC2")


def test_custom_opp_path_is_not_taken_for_a_cann_root(tmp_path: Path) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    custom = tmp_path / "my_ops"
    custom.mkdir()
    inv = machine(tmp_path, environ={"ASCEND_OPP_PATH": str(custom)})
    assert inv.cann is not None and inv.cann.origin == "default"
    assert inv.problems == []


def test_env_vars_name_the_active_cann_over_latest(tmp_path: Path) -> None:
    base = tmp_path / "Ascend"
    old = toolkit(base, "8.0.0", link_latest=False)
    toolkit(base, "8.3.RC1")
    env = {"ASCEND_HOME_PATH": str(old), "ASCEND_OPP_PATH": str(old / "opp"),
           "ASCEND_AICPU_PATH": str(old), "PATH": "/usr/bin"}
    (old / "opp").mkdir()
    inv = machine(tmp_path, environ=env)
    assert inv.cann is not None
    assert inv.cann.version == "8.0.0" and inv.cann.origin == "ASCEND_HOME_PATH"
    assert set(inv.environment) == {"ASCEND_HOME_PATH", "ASCEND_OPP_PATH", "ASCEND_AICPU_PATH"}


def test_stale_env_var_and_split_env(tmp_path: Path, cat: Catalog) -> None:
    base = tmp_path / "Ascend"
    a = toolkit(base, "8.0.0", link_latest=False)
    b = toolkit(base, "8.3.RC1")
    env = {"ASCEND_TOOLKIT_HOME": str(tmp_path / "gone"), "ASCEND_HOME_PATH": str(a),
           "ASCEND_AICPU_PATH": str(b)}
    res = assess(machine(tmp_path, environ=env), cat)
    warn = message(res, "cann", "warning")
    assert "ASCEND_TOOLKIT_HOME=" in warn and "does not exist" in warn
    assert "point at different CANN installs" in warn


def test_env_root_without_version_file_is_reported(tmp_path: Path, cat: Catalog) -> None:
    empty = tmp_path / "custom-cann"
    empty.mkdir()
    res = assess(machine(tmp_path, environ={"ASCEND_HOME_PATH": str(empty)}), cat)
    assert "no CANN version file" in message(res, "files", "warning")
    assert statuses(res, "cann") == ["absent"]


def test_driver_firmware_from_files_without_npu_smi(tmp_path: Path) -> None:
    driver(tmp_path / "Ascend")
    inv = machine(tmp_path)
    assert inv.driver is not None and inv.driver.version == "24.1.rc2"
    assert inv.firmware is not None and inv.firmware.version == "7.5.0.1.129"
    assert inv.npu_smi is None


def test_npu_smi_is_preferred_and_a_pending_reboot_is_flagged(tmp_path: Path, cat: Catalog) -> None:
    driver(tmp_path / "Ascend", version="24.1.rc3")
    seen: list[list[str]] = []

    def run(argv: Sequence[str]) -> CommandResult:
        seen.append(list(argv))
        return CommandResult(0, NPU_SMI_910B)

    inv = machine(tmp_path, which=lambda n: "/usr/local/sbin/npu-smi" if n == "npu-smi" else None,
                  run=run)
    assert seen == [["/usr/local/sbin/npu-smi", "info"]]
    assert inv.driver is not None and inv.driver.version == "24.1.rc2"
    assert inv.npu_smi is not None and inv.npu_smi.chips == ("910B3", "910B3")
    res = assess(inv, cat)
    assert "reboot pending" in message(res, "driver", "warning")
    assert "2 NPU(s): 2 × 910B3" in message(res, "npu", "ok")


def test_npu_smi_failure_is_a_warning_not_a_crash(tmp_path: Path, cat: Catalog) -> None:
    def run(argv: Sequence[str]) -> CommandResult:
        return CommandResult(8, "", "dcmi module initialize failed. ret is -8005\n")

    def boom(argv: Sequence[str]) -> CommandResult:
        raise PermissionError("npu-smi: permission denied")

    for runner in (run, boom):
        inv = machine(tmp_path, which=lambda n: "/bin/npu-smi", run=runner)
        assert inv.npu_smi is not None and inv.npu_smi.error
        res = assess(inv, cat)
        assert "npu-smi info failed" in message(res, "npu", "warning")
        assert statuses(res, "driver") == ["absent"]


def test_devices_nodes_are_counted(tmp_path: Path, cat: Catalog) -> None:
    roots = roots_for(tmp_path)
    for name in ("davinci0", "davinci1", "davinci_manager", "davinci10"):
        (roots.dev / name).touch()
    inv = machine(tmp_path)
    assert inv.devices == ["davinci0", "davinci1", "davinci10"]
    assert "3 device node(s)" in message(assess(inv, cat), "npu", "ok")


def test_unreadable_version_file_is_a_finding(tmp_path: Path, cat: Catalog,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    root = toolkit(tmp_path / "Ascend", "8.3.RC1")
    info = root / "x86_64-linux" / "ascend_toolkit_install.info"
    drv = write(tmp_path / "Ascend" / "driver" / "version.info", "Version=24.1.rc2\n")
    real = Path.read_text

    # chmod 000 does not stop root (the test may run as root): fail the read itself.
    def read_text(self: Path, *args: object, **kwargs: object) -> str:
        if self.name in (info.name, drv.name):
            raise PermissionError(13, "Permission denied", str(self))
        return real(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(Path, "read_text", read_text)
    res = assess(machine(tmp_path, torch="2.6.0"), cat)
    files = message(res, "files", "warning")
    latest = tmp_path / "Ascend" / "ascend-toolkit" / "latest" / "x86_64-linux" / info.name
    assert f"cannot read {latest}: Permission denied" in files
    assert f"cannot read {drv}: Permission denied" in files
    assert statuses(res, "driver") == ["absent"]


def test_version_file_without_version_is_a_finding(tmp_path: Path, cat: Catalog) -> None:
    write(tmp_path / "Ascend" / "ascend-toolkit" / "latest" / "x86_64-linux"
          / "ascend_toolkit_install.info", "arch=x86_64\n")
    write(tmp_path / "Ascend" / "firmware" / "version.info", "\x00\xff junk")
    res = assess(machine(tmp_path), cat)
    assert "names no version" in message(res, "files", "warning")
    assert statuses(res, "cann") == ["absent"]


def test_broken_package_metadata_is_a_finding(tmp_path: Path, cat: Catalog) -> None:
    def meta(name: str) -> str:
        if name == "torch":
            raise ValueError("bad METADATA")
        raise importlib.metadata.PackageNotFoundError(name)

    inv = collect(roots=roots_for(tmp_path), environ={}, which=no_which, run=never_run,
                  metadata_version=meta)
    assert inv.torch is None
    assert "cannot read the torch package metadata" in message(assess(inv, cat), "files", "warning")


# --- assess ----------------------------------------------------------------------------------

def test_consistent_install(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    driver(tmp_path / "Ascend")
    env = {"ASCEND_HOME_PATH": str(tmp_path / "Ascend" / "ascend-toolkit" / "latest")}
    res = assess(machine(tmp_path, environ=env, torch="2.1.0+cpu", torch_npu="2.1.0.post17",
                         python="3.9.18"), cat)
    assert res.consistent
    assert res.release is not None and res.release.torch_npu == "2.1.0.post17"
    for check in ("torch_npu", "torch", "cann", "python", "driver", "firmware"):
        assert statuses(res, check) == ["ok"], (check, res.findings)
    assert not res.recommendation.needed


def test_torch_mismatch(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    res = assess(machine(tmp_path, torch="2.6.0", torch_npu="2.1.0.post17", python="3.9.1"), cat)
    assert not res.consistent
    assert "built for torch 2.1.0, installed torch is 2.6.0" in message(res, "torch", "mismatch")
    rec = res.recommendation
    assert rec.needed
    # Keeps CANN and torch: torch_npu 2.6.0.post3; the other way out keeps torch_npu.
    assert [c.release.torch_npu for c in rec.combinations] == ["2.6.0.post3", "2.1.0.post17"]
    assert rec.combinations[0].changes == ("pip install torch-npu==2.6.0.post3",)
    assert rec.combinations[1].changes == ("pip install torch==2.1.0",)


def test_cann_mismatch(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.0.0")
    res = assess(machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post17", python="3.9.1"), cat)
    assert "pairs with CANN 8.3.RC1 (train 7.2.0), installed is CANN 8.0.0" in message(
        res, "cann", "mismatch")
    combos = res.recommendation.combinations
    assert combos[0].release.torch_npu == "2.1.0.post10"
    assert combos[0].changes == ("pip install torch-npu==2.1.0.post10",)
    assert combos[1].changes == ("install CANN 8.3.RC1 (toolkit and kernels)",)


def test_python_mismatch(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    res = assess(machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post17", python="3.11.4"), cat)
    assert "supports Python 3.8, 3.9; this is Python 3.11" in message(res, "python", "mismatch")
    # No 2.1 release supports 3.11: keep CANN, move to torch 2.6.
    assert res.recommendation.combinations[0].release.torch_npu == "2.6.0.post3"


def test_example_torch_and_cann_gives_torch_npu(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    res = assess(machine(tmp_path, torch="2.6.0"), cat)
    assert res.consistent
    assert statuses(res, "torch_npu") == ["absent"]
    rec = res.recommendation
    assert rec.needed
    assert [c.release.torch_npu for c in rec.combinations] == ["2.6.0.post3"]
    assert rec.combinations[0].keeps == ("cann", "torch")
    assert rec.combinations[0].changes == ("pip install torch-npu==2.6.0.post3",)


def test_only_torch_gives_newest_release_and_its_cann(tmp_path: Path, cat: Catalog) -> None:
    res = assess(machine(tmp_path, torch="2.6.0+cpu"), cat)
    assert statuses(res, "cann") == ["absent"]
    [combo] = res.recommendation.combinations
    assert combo.release.torch_npu == "2.6.0.post5"
    assert combo.changes == ("pip install torch-npu==2.6.0.post5",
                             "install CANN 8.5.0 (toolkit and kernels)")


def test_only_cann_gives_the_pairs_for_it(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.rc1")  # case differs from the matrix on purpose
    res = assess(machine(tmp_path, python="3.9.0"), cat)
    pairs = [(c.release.torch, c.release.torch_npu) for c in res.recommendation.combinations]
    assert pairs == [("2.6.0", "2.6.0.post3"), ("2.1.0", "2.1.0.post17")]
    assert "in the release matrix" in message(res, "cann", "ok")


def test_prerelease_and_cann_less_rows_only_when_nothing_else_fits(tmp_path: Path,
                                                                  cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.5.0")
    res = assess(machine(tmp_path, python="3.10.0"), cat)
    assert [c.release.torch_npu for c in res.recommendation.combinations] == ["2.6.0.post5"]
    res = assess(machine(tmp_path / "t", torch="2.7.0"), cat)
    [combo] = res.recommendation.combinations
    assert combo.release.torch_npu == "2.7.0rc1"


def test_python_nobody_supports_offers_python_change(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    res = assess(machine(tmp_path, python="3.7.9"), cat)
    combos = res.recommendation.combinations
    # Only 1.11 is known to support 3.7 (another CANN); keeping CANN 8.3.RC1 needs another Python.
    assert combos[0].release.torch_npu == "1.11.0.post8"
    assert combos[1].release.torch_npu == "2.6.0.post3"
    assert "use Python 3.9, 3.10, 3.11 (this is 3.7)" in combos[1].changes
    res = assess(machine(tmp_path / "none", python="3.14.0"), cat)
    assert "no release is known to support Python 3.14" in res.recommendation.reason
    # 2.4.0 lists no Pythons: not ruled out, so it is what is left.
    assert [c.release.torch_npu for c in res.recommendation.combinations] == ["2.4.0"]


def test_torch_npu_not_in_catalog(tmp_path: Path, cat: Catalog) -> None:
    res = assess(machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post99"), cat)
    assert "not in the release matrix" in message(res, "torch_npu", "warning")
    assert res.release is None
    assert res.consistent


def test_torch_npu_without_torch_is_a_mismatch(tmp_path: Path, cat: Catalog) -> None:
    res = assess(machine(tmp_path, torch_npu="2.6.0.post5"), cat)
    assert "needs torch 2.6.0" in message(res, "torch", "mismatch")


def test_local_version_of_torch_npu_matches_its_release(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.5.0")
    res = assess(machine(tmp_path, torch="2.6.0", torch_npu="2.6.0.post5+git1a2b3c",
                         python="3.11.0"), cat)
    assert res.release is not None and res.release.torch_npu == "2.6.0.post5"
    assert res.consistent


def test_unknown_torch_version_is_a_warning(tmp_path: Path, cat: Catalog) -> None:
    res = assess(machine(tmp_path, torch="2.6.1"), cat)
    assert "same minor: torch 2.6.0" in message(res, "torch", "warning")
    assert res.recommendation.combinations[0].release.torch == "2.6.0"


def test_nothing_installed(tmp_path: Path, cat: Catalog) -> None:
    res = assess(machine(tmp_path), cat)
    assert res.consistent
    for check in ("torch_npu", "torch", "cann", "driver", "firmware", "npu"):
        assert statuses(res, check) == ["absent"], check
    [combo] = res.recommendation.combinations
    assert combo.release.torch_npu == "2.6.0.post5"


def test_set_env_not_sourced_hint(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    res = assess(machine(tmp_path), cat)
    assert "set_env.sh is not sourced" in message(res, "cann", "warning")


def test_json_shape(tmp_path: Path, cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    doc = assess(machine(tmp_path, torch="2.6.0", torch_npu="2.1.0.post17"), cat).to_json()
    json.dumps(doc)
    assert doc["schema_version"] == 1 and doc["consistent"] is False
    assert set(doc) == {"schema_version", "consistent", "inventory", "release", "findings",
                        "recommendation"}
    inv = doc["inventory"]
    assert inv["torch"] == {"version": "2.6.0", "source": "importlib.metadata (torch)"}
    assert inv["cann"]["version"] == "8.3.RC1" and inv["driver"] is None
    assert doc["release"]["pythons"] == ["3.8", "3.9"]
    assert {f["status"] for f in doc["findings"]} <= set(assessing.STATUSES)
    assert doc["recommendation"]["combinations"][0]["torch_npu"] == "2.6.0.post3"


# --- the real machine (no NPU, no CANN here) -------------------------------------------------

def test_real_machine_reports_absent_things_as_absent(cat: Catalog) -> None:
    inv = collect()
    assert inv.python and inv.arch and inv.os_name
    res = assess(inv, cat)
    json.dumps(res.to_json())
    assert all(f.status in assessing.STATUSES for f in res.findings)
    if inv.torch_npu is None:
        assert statuses(res, "torch_npu") == ["absent"]
    if inv.cann is None:
        assert "absent" in statuses(res, "cann")
    if inv.driver is None:
        assert statuses(res, "driver") == ["absent"]
    if inv.firmware is None:
        assert statuses(res, "firmware") == ["absent"]
    if inv.npu_smi is None and not inv.devices:
        assert statuses(res, "npu") == ["absent"]
    if inv.torch_npu is None:
        # Absent pieces are not a mismatch: nothing to pair torch with.
        assert res.consistent


def test_real_machine_cli_json(cat_path: Path) -> None:
    r = CliRunner().invoke(_app(), ["env", "--format", "json", "--catalog", str(cat_path)])
    assert r.exit_code in (0, 1), r.output
    doc = json.loads(r.output)
    assert doc["schema_version"] == 1
    assert r.exit_code == (0 if doc["consistent"] else 1)


# --- CLI -------------------------------------------------------------------------------------

def _app() -> typer.Typer:
    app = typer.Typer()
    commands_env.register(app)

    @app.callback()
    def _main() -> None:  # keeps `env` a sub-command rather than the whole app
        pass

    return app


def test_cli_json_and_exit_codes(tmp_path: Path, cat_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    runner = CliRunner()
    monkeypatch.setattr(probe, "collect",
                        lambda: machine(tmp_path, torch="2.6.0", torch_npu="2.1.0.post17"))
    r = runner.invoke(_app(), ["env", "--format", "json", "--catalog", str(cat_path)])
    assert r.exit_code == 1, r.output
    assert json.loads(r.output)["consistent"] is False

    monkeypatch.setattr(probe, "collect",
                        lambda: machine(tmp_path, torch="2.6.0", torch_npu="2.6.0.post3"))
    r = runner.invoke(_app(), ["env", "--catalog", str(cat_path)])
    assert r.exit_code == 0, r.output
    assert "consistent" in r.output and "2.6.0.post3" in r.output


def test_cli_table_shows_recommendation(tmp_path: Path, cat_path: Path,
                                        monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit(tmp_path / "Ascend", "8.0.0")
    monkeypatch.setattr(probe, "collect",
                        lambda: machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post17",
                                        python="3.9.0"))
    r = CliRunner().invoke(_app(), ["env", "--catalog", str(cat_path)])
    assert r.exit_code == 1
    assert "mismatch" in r.output and "pip install torch-npu==2.1.0.post10" in r.output


def test_cli_table_on_an_npu_host(tmp_path: Path, cat_path: Path,
                                  monkeypatch: pytest.MonkeyPatch) -> None:
    toolkit(tmp_path / "Ascend", "8.5.0")
    driver(tmp_path / "Ascend")
    env = {"ASCEND_HOME_PATH": str(tmp_path / "Ascend" / "ascend-toolkit" / "latest")}
    monkeypatch.setattr(probe, "collect", lambda: machine(
        tmp_path, environ=env, torch="2.6.0", torch_npu="2.6.0.post5",
        which=lambda n: "/usr/local/bin/npu-smi", run=lambda a: CommandResult(0, NPU_SMI_910B)))
    r = CliRunner().invoke(_app(), ["env", "--catalog", str(cat_path)])
    assert r.exit_code == 0, r.output
    assert "2 × 910B3" in r.output and "24.1.rc2" in r.output and "ASCEND_HOME_PATH" in r.output
    assert "install" not in r.output.split("consistent")[-1]


def test_cli_errors_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    r = runner.invoke(_app(), ["env", "--format", "xml", "--catalog", str(tmp_path / "none")])
    assert r.exit_code == 2 and "unknown format" in r.output
    r = runner.invoke(_app(), ["env", "--catalog", str(tmp_path / "none.sqlite")])
    assert r.exit_code == 2 and "no catalog" in r.output


# --- the pairing of the installed torch_npu and CANN ------------------------------------------

@pytest.fixture(scope="module")
def paired_cat(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    d = _catalog_data()
    # a hotfix tag no table names: its CANN is that of train 7.2.0, inferred
    d.releases.append(ReleaseRec("2.1.0.post18", "2.1.0", "7.2.0.1", "8.3.RC1", "3.8,3.9",
                                 "V7.2.0.1-pytorch2.1.0", has_cpu_fallback=True, sort_key=8,
                                 cann_inferred=True))
    path = write_catalog(d, tmp_path_factory.mktemp("paired") / "c.sqlite")
    return Catalog.load(open_catalog(path))


def test_older_cann_names_the_releases_that_pair_with_it(tmp_path: Path,
                                                          paired_cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.0.0")
    res = assess(machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post17"), paired_cat)
    msg = message(res, "cann", "mismatch")
    assert "pairs with CANN 8.3.RC1 (train 7.2.0), installed is CANN 8.0.0" in msg
    assert "(older than 8.3.RC1); torch_npu for CANN 8.0.0 on this torch line: 2.1.0.post10" in msg
    assert not res.consistent


def test_newer_cann_is_a_mismatch_saying_newer(tmp_path: Path, paired_cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "9.0.0")
    res = assess(machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post17"), paired_cat)
    msg = message(res, "cann", "mismatch")
    assert msg.endswith("(newer than 8.3.RC1)"), msg


def test_inferred_pairing_says_so(tmp_path: Path, paired_cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1")
    res = assess(machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post18", python="3.9.2"),
                 paired_cat)
    assert "pairs with torch_npu 2.1.0.post18, inferred from train 7.2.0.1" in message(
        res, "cann", "ok")
    assert res.to_json()["release"]["cann_inferred"] is True
    other = assess(machine(tmp_path / "o", torch="2.1.0", torch_npu="2.1.0.post17"), paired_cat)
    assert other.to_json()["release"]["cann_inferred"] is False


def test_prerelease_build_of_the_paired_cann_is_a_warning(tmp_path: Path,
                                                           paired_cat: Catalog) -> None:
    toolkit(tmp_path / "Ascend", "8.3.RC1.alpha002")
    res = assess(machine(tmp_path, torch="2.1.0", torch_npu="2.1.0.post17", python="3.9.2"),
                 paired_cat)
    assert statuses(res, "cann")[0] == "warning"
    assert "a pre-release build of CANN 8.3.RC1" in message(res, "cann", "warning")
    assert res.consistent


# --- the torch of opcheck's own environment (issue 31) ----------------------------------------


def test_cuda_torch_on_a_machine_without_cuda_is_a_warning(tmp_path: Path, cat: Catalog) -> None:
    inv = collect(roots=roots_for(tmp_path), environ={}, which=no_which, run=never_run,
                  metadata_version=metadata(torch="2.13.0"),
                  metadata_requires=lambda _n: ["nvidia-cuda-runtime-cu12==12.8.90; "
                                                "platform_system == 'Linux'", "filelock"])
    assert (inv.torch_build, inv.cuda_present) == ("cuda", False)
    a = assess(inv, cat)
    assert "a CUDA build and this machine has no CUDA" in message(a, "torch", "warning")
    # the same build where CUDA is: no word about it
    (tmp_path / "dev").mkdir(exist_ok=True)
    (tmp_path / "dev" / "nvidiactl").write_text("")
    with_cuda = collect(roots=roots_for(tmp_path), environ={}, which=no_which, run=never_run,
                        metadata_version=metadata(torch="2.13.0+cu126"))
    assert with_cuda.torch_build == "cuda" and with_cuda.cuda_present
    assert not any("CUDA build" in f.message for f in assess(with_cuda, cat).findings)


def test_torch_other_than_the_projects_pin_is_a_warning(tmp_path: Path, cat: Catalog) -> None:
    pins = write(tmp_path / "constraints.txt", "# opcheck's torch\ntorch==2.13.0  # CPU\n")
    moved = collect(roots=roots_for(tmp_path), environ={}, which=no_which, run=never_run,
                    metadata_version=metadata(torch="2.14.0"), constraints=pins)
    assert moved.project_torch == "2.13.0"
    text = message(assess(moved, cat), "torch", "warning")
    assert "set up with torch 2.13.0" in text and f"-c {pins}" in text
    kept = collect(roots=roots_for(tmp_path), environ={}, which=no_which, run=never_run,
                   metadata_version=metadata(torch="2.13.0+cpu"), constraints=pins)
    assert kept.torch_build == "cpu"
    assert not any("set up with" in f.message for f in assess(kept, cat).findings)
    # a faked inventory never reads opcheck's own file
    assert collect(roots=roots_for(tmp_path), environ={}, which=no_which, run=never_run,
                   metadata_version=metadata(torch="2.14.0")).project_torch == ""


def test_the_projects_constraints_pin_what_make_install_installs() -> None:
    from opcheck.env.probe import CONSTRAINTS, constraint_pin

    root = Path(probe.__file__).resolve().parent.parent
    pin = constraint_pin((root / CONSTRAINTS).read_text(), "torch")
    assert pin and "-c constraints.txt" in (root / "Makefile").read_text()
    assert "torch==" not in (root / "Makefile").read_text()  # one place for the pin
