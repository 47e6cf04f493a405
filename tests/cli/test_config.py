"""`-V`, and `[tool.opcheck]` in the nearest pyproject.toml holding it (as ruff finds its
settings): the defaults of `check` and `run`, which their own options override."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from typer.testing import CliRunner, Result

from opcheck import __version__
from opcheck.cli import config
from opcheck.cli.app import app, route
from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog


def run(*args: str) -> Result:
    return CliRunner().invoke(app, route(list(args)), env={"OPCHECK_WIDTH": "0"})


@pytest.fixture(scope="module")
def cat_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_catalog(small_catalog(), tmp_path_factory.mktemp("config") / "c.sqlite")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with its pyproject.toml, the working directory one folder below it."""
    monkeypatch.delenv(config.NO_CONFIG_ENV, raising=False)
    ol = OpList(model="m.py", method="runtime", ir="runtime-dispatch",
                ops=[OpUse("aten::isin.Tensor_Tensor", 3, ["int64"])])
    (tmp_path / "ops.json").write_text(ol.dumps())
    (tmp_path / "src").mkdir()
    monkeypatch.chdir(tmp_path / "src")
    return tmp_path


def write(project: Path, table: str) -> None:
    (project / "pyproject.toml").write_text(f'[project]\nname = "m"\n\n[tool.opcheck]\n{table}')


@pytest.mark.parametrize("flag", ["-V", "--version"])
def test_version(flag: str) -> None:
    r = run(flag)
    assert r.exit_code == 0 and r.stdout.strip() == f"opcheck {__version__}"


def test_project_defaults_and_flags_override_them(project: Path, cat_path: Path) -> None:
    write(project, 'torch-npu = "2.1.0.post10"\nfail-on = "fallback"\n')
    args = (str(project / "ops.json"), "--catalog", str(cat_path), "-f", "json")
    r = run(*args)
    # isin falls back on 2.1.0.post10: a finding at the project's fail level
    assert r.exit_code == 1, r.output
    assert json.loads(r.stdout)["target"]["torch_npu"] == "2.1.0.post10"
    assert f"defaults from [tool.opcheck] in {project / 'pyproject.toml'}" in r.stderr
    flags = run(*args, "--torch-npu", "2.6.0.post5", "--fail-on", "never")
    assert flags.exit_code == 0 and json.loads(flags.stdout)["target"]["torch_npu"] == "2.6.0.post5"


def test_baseline_path_is_relative_to_the_file(project: Path, cat_path: Path) -> None:
    write(project, 'baseline = "base.json"\n')
    first = run(str(project / "ops.json"), "--catalog", str(cat_path), "-f", "json",
                "--torch-npu", "2.1.0.post10", "--fail-on", "never")
    # without a base.json yet the configured baseline is a usage error naming it
    assert first.exit_code == 2 and "base.json" in first.output
    config_less = CliRunner().invoke(app, route([str(project / "ops.json"), "--catalog",
                                                 str(cat_path), "-f", "json", "--torch-npu",
                                                 "2.1.0.post10", "--fail-on", "never"]),
                                     env={config.NO_CONFIG_ENV: "1"})
    (project / "base.json").write_text(config_less.stdout)
    again = run(str(project / "ops.json"), "--catalog", str(cat_path), "-f", "json",
                "--torch-npu", "2.1.0.post10", "--fail-on", "never")
    assert again.exit_code == 0, again.output
    assert json.loads(again.stdout)["ops"] == []  # nothing changed since the baseline


def test_nearest_file_with_the_table_wins(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text('[tool.opcheck]\nhardware = "910B"\n')
    inner = tmp_path / "pkg"
    inner.mkdir()
    (inner / "pyproject.toml").write_text('[project]\nname = "pkg"\n')  # no table: passed over
    found = config.load(inner)
    assert found.path == tmp_path / "pyproject.toml" and found.values == {"hardware": "910B"}


@pytest.mark.parametrize("table, message", [
    ("fail_level = 'never'\n", "no key 'fail_level'"),
    ("graph = 'yes'\n", "graph must be true or false"),
    ("torch-npu = [2]\n", "torch-npu must be a string"),
    ("torch-npu = \n", "not valid TOML"),
])
def test_bad_config_is_one_line_exit_2(project: Path, cat_path: Path, table: str,
                                       message: str) -> None:
    write(project, table)
    r = run(str(project / "ops.json"), "--catalog", str(cat_path))
    assert r.exit_code == 2 and message in r.output and "Traceback" not in r.output
    assert len(r.output.strip().splitlines()) == 1
    with pytest.raises(UsageError):
        config.parse(project / "pyproject.toml")


def test_other_commands_ignore_the_table(project: Path, cat_path: Path) -> None:
    write(project, "no-such-key = 1\n")
    r = run("releases", "--catalog", str(cat_path))
    assert r.exit_code == 0, r.output
