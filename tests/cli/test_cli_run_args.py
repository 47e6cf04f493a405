"""``opcheck run`` / ``opcheck trace --run`` argument handling, without running a script:
options after SCRIPT (issue 30), ``--each`` and ``trace --run`` usage errors."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from click.testing import Result
from typer.testing import CliRunner

from opcheck.cli.app import app, route
from opcheck.cli.commands_run import misplaced_warning
from opcheck.db.build import write_catalog

runner = CliRunner()


def invoke(*args: str) -> Result:
    return runner.invoke(app, route(list(args)))


@pytest.fixture
def cat_path(tmp_path: Path) -> Path:
    return write_catalog(small_catalog(), tmp_path / "c.sqlite")


@pytest.fixture
def script(tmp_path: Path) -> Path:
    path = tmp_path / "train.py"
    path.write_text("print('hi')\n")
    return path


def test_misplaced_warning_names_run_options_only() -> None:
    opts = ["--torch-npu", "--format", "-f", "--max-steps"]
    assert misplaced_warning("train.py", ["--epochs", "3", "--lr=0.1"], opts) == ""
    line = misplaced_warning("train.py", ["--epochs", "3", "--torch-npu=2.1.0.post4"], opts)
    assert line == ("opcheck: warning: --torch-npu after train.py went to the script, not to "
                    "`opcheck run` (it is one of run's own options): put it before train.py, "
                    "or write `train.py -- --torch-npu ...` to pass it to the script on purpose")
    two = misplaced_warning("train.py", ["-f", "json", "--max-steps", "0", "-f", "x"], opts)
    assert two.startswith("opcheck: warning: -f, --max-steps after train.py") and "\n" not in two
    # after the script's own `--` the arguments are its business
    assert misplaced_warning("train.py", ["a", "--", "--torch-npu", "2.1"], opts) == ""


def test_run_warns_in_one_line_and_goes_on(cat_path: Path, script: Path) -> None:
    # --memory-mb below the minimum stops before anything starts: no torch imported here
    r = invoke("run", "--catalog", str(cat_path), "--memory-mb", "100", str(script),
               "--torch-npu", "2.1.0.post4")  # fmt: skip
    warn, err = r.stderr.splitlines()
    assert warn.startswith("opcheck: warning: --torch-npu after train.py went to the script")
    assert "too low to start torch" in err and r.exit_code == 2  # it went on to the run
    # `SCRIPT -- ARGS`: on purpose, no warning
    r = invoke("run", "--catalog", str(cat_path), "--memory-mb", "100", str(script), "--",
               "--torch-npu", "2.1.0.post4")  # fmt: skip
    assert "warning" not in r.stderr and "too low to start torch" in r.stderr


@pytest.mark.parametrize(("args", "message"), [
    (["--each", "a.py", "--epochs", "3"], "--each runs scripts without arguments: --epochs"),
    (["--each", "-f", "sarif", "a.py", "b.py"], "--format sarif takes one model"),
    (["--each", "--baseline", "r.json", "a.py", "b.py"], "--baseline compares one report"),
])
def test_each_usage_errors(cat_path: Path, args: list[str], message: str) -> None:
    r = invoke("run", "--catalog", str(cat_path), *args)
    assert r.exit_code == 2 and message in r.stderr, r.output


def test_trace_run_usage_errors(cat_path: Path, script: Path) -> None:
    r = invoke("trace", "--catalog", str(cat_path), "model.pt2", "--", "--epochs", "3")
    assert r.exit_code == 2
    assert "unexpected argument --epochs: arguments after MODEL are a script's" in r.stderr
    r = invoke("trace", "--catalog", str(cat_path), "--max-steps", "3", "model.pt2")
    assert r.exit_code == 2 and "--max-steps applies to a script run" in r.stderr
    r = invoke("trace", "--catalog", str(cat_path), "--run", "--model", "m.py:f", str(script))
    assert r.exit_code == 2 and "--run takes a SCRIPT" in r.stderr
