"""``opcheck a b …``: several models in one invocation, one report each, the worst exit code."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from catalog_fixture import small_catalog
from click.testing import Result
from typer.testing import CliRunner

from opcheck.cli.app import app, route
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog

runner = CliRunner()
OLD = "2.1.0.post17"  # isin.Tensor_Tensor falls back to the CPU here


def invoke(*args: str) -> Result:
    return runner.invoke(app, route(list(args)))


@pytest.fixture
def setup(tmp_path: Path) -> tuple[list[str], Path, Path]:
    """(the common options, an op list with a CPU fallback, a clean one)."""
    cat = write_catalog(small_catalog(), tmp_path / "c.sqlite")
    falls = OpList(model="falls.py", method="runtime", ir="runtime-dispatch",
                   torch_version="2.1.0",
                   ops=[OpUse("aten::relu", 4, ["float32"]),
                        OpUse("aten::isin.Tensor_Tensor", 3, ["int64"])])
    clean = OpList(model="clean.py", method="runtime", ir="runtime-dispatch",
                   torch_version="2.1.0", ops=[OpUse("aten::relu", 2, ["float32"])])
    a, b = tmp_path / "falls.json", tmp_path / "clean.json"
    a.write_text(falls.dumps())
    b.write_text(clean.dumps())
    return ["--catalog", str(cat), "--torch-npu", OLD, "--fail-on", "fallback"], a, b


def test_json_holds_each_models_own_report_and_the_worst_exit_code(
        setup: tuple[list[str], Path, Path]) -> None:
    opts, falls, clean = setup
    both = invoke(str(clean), str(falls), *opts, "-f", "json")
    assert both.exit_code == 1, both.output  # the fallback of one model
    doc = json.loads(both.output)
    assert doc["kind"] == "opcheck.reports"
    assert doc["models"] == [str(clean), str(falls)]
    assert doc["errors"] == []
    alone = [invoke(str(m), *opts, "-f", "json") for m in (clean, falls)]
    assert [r.exit_code for r in alone] == [0, 1]
    assert doc["reports"] == [json.loads(r.output) for r in alone]
    assert doc["schema_version"] == doc["reports"][0]["schema_version"]


def test_table_and_markdown_are_the_single_reports_one_after_another(
        setup: tuple[list[str], Path, Path]) -> None:
    opts, falls, clean = setup
    for fmt, sep in (("table", "\n"), ("markdown", "\n---\n\n")):
        both = invoke(str(falls), str(clean), *opts, "-f", fmt)
        alone = [invoke(str(m), *opts, "-f", fmt).output for m in (falls, clean)]
        assert both.output == sep.join(alone), fmt
    table = invoke(str(falls), str(clean), *opts).output
    assert table.index("opcheck falls.py") < table.index("opcheck clean.py")


def test_a_model_that_cannot_be_listed_fails_alone(setup: tuple[list[str], Path, Path],
                                                   tmp_path: Path) -> None:
    opts, falls, clean = setup
    broken = tmp_path / "broken.json"
    broken.write_text("{not json")
    r = invoke(str(clean), str(broken), str(falls), *opts, "-f", "json")
    assert r.exit_code == 2
    lines = r.stderr.splitlines()
    assert lines == [f"opcheck: error: {broken}: {broken}: not JSON (Expecting property name "
                     "enclosed in double quotes at line 1)"]
    doc = json.loads(r.stdout)
    assert doc["models"] == [str(clean), str(broken), str(falls)]
    assert [d["model"] for d in doc["reports"]] == ["clean.py", "falls.py"]
    assert doc["errors"] == [{"model": str(broken), "error": lines[0].split(": ", 3)[3]}]
    table = invoke(str(clean), str(broken), *opts)
    assert table.exit_code == 2
    assert f"opcheck {broken}  ·  not checked: {broken}: not JSON" in table.stdout


@pytest.mark.parametrize("extra, message", [
    (["-f", "sarif"], "--format sarif takes one model: check several models with table, "
                      "markdown, json, or one at a time"),
    (["-f", "junit"], "--format junit takes one model"),
    (["-f", "csv"], "--format csv takes one model"),
    (["--baseline", "old.json"], "--baseline compares one report: give one MODEL"),
    (["--model", "m.py:f"], "--model and --log take the place of a single MODEL"),
])
def test_what_takes_one_model_is_a_usage_error(setup: tuple[list[str], Path, Path],
                                               extra: list[str], message: str) -> None:
    opts, falls, clean = setup
    r = invoke(str(falls), str(clean), *opts, *extra)
    assert r.exit_code == 2
    assert r.stdout == ""
    assert len(r.stderr.splitlines()) == 1
    assert message in r.stderr


@pytest.mark.torch
def test_runtime_traces_share_one_template_and_a_crash_stays_in_its_child(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    torch = pytest.importorskip("torch")
    (tmp_path / "mods_multi.py").write_text(
        "import os, signal\nimport torch\nfrom torch import nn\n\n"
        "class Good(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 3)\n"
        "    def forward(self, x):\n        return torch.relu(self.fc(x))\n\n"
        "class Crash(Good):\n"
        "    def forward(self, x):\n        os.kill(os.getpid(), signal.SIGSEGV)\n")
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    import mods_multi  # type: ignore[import-not-found]

    torch.save(mods_multi.Good(), tmp_path / "good.pt")
    torch.save(mods_multi.Crash(), tmp_path / "crash.pt")
    from opcheck.tracers import sandbox

    forked: list[str] = []
    real = sandbox.ForkServer.run

    def spy(self: sandbox.ForkServer, request: dict[str, object], **kw: object) -> object:
        forked.append(str(request.get("label")))
        return real(self, request, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(sandbox.ForkServer, "run", spy)
    opts = ["--trust", "--input-shape", "2,4", "-f", "json"]
    r = invoke("good.pt", "crash.pt", "good.pt", *opts)
    assert r.exit_code == 2
    assert len(forked) == 3  # one template, one forked child per model
    doc = json.loads(r.stdout)
    assert doc["errors"] == [{"model": "crash.pt",
                              "error": "tracer worker crashed (SIGSEGV) in "
                                       "mods_multi.py:14 (forward)"}]
    alone = invoke("good.pt", *opts)  # a fresh worker process, as before
    assert alone.exit_code == 0
    assert len(forked) == 3
    assert doc["reports"] == [json.loads(alone.stdout)] * 2
    ops = {o["op"] for o in doc["reports"][0]["ops"]}
    assert {"aten::addmm", "aten::relu"} <= ops
