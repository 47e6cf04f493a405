"""One check use case, three surfaces: ``opcheck check`` (one model and several), ``opcheck
run`` and the web check page build the same request and must give the same report.

The common input is an op list: ``check`` reads it from a file, the web page takes it as the
POSTed document, and ``run`` gets it as the op list its script run recorded (the sandboxed
run itself is the tracers' job, tested in tests/tracers; here the recorded op list is handed
to the command so that only the request building and the check are compared)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from opcheck.core.oplist import OpList, OpUse

if TYPE_CHECKING:
    from click.testing import Result

TARGET, OLD = "2.6.0.post5", "2.1.0.post10"
CANN = "8.3.RC1"  # older than what 2.6.0.post5 pairs with: the report warns
HARDWARE = "A2"


def oplist() -> OpList:
    return OpList(model="tiny.py", method="runtime", ir="runtime-dispatch", torch_version="2.6.0",
                  ops=[OpUse("aten::relu", 4, ["float32"]),
                       OpUse("aten::add.Tensor", 2, ["float32"]),
                       OpUse("aten::isin.Tensor_Tensor", 3, ["int64"],
                             locations=["model.py:42"]),
                       OpUse("aten::repeat_interleave.self_Tensor", 1),
                       OpUse("aten::mm", 2, ["float16"]),
                       OpUse("mylib::custom", 1)])


@pytest.fixture(scope="module")
def web(bundled_catalog: Path) -> Iterator[Callable[..., Any]]:
    """POST to the web check page of the bundled catalog; returns the JSON answer."""
    pytest.importorskip("datasette")
    from opcheck.web.app import make_datasette

    ds = make_datasette(bundled_catalog)
    loop = asyncio.new_event_loop()
    loop.run_until_complete(ds.invoke_startup())

    def post(path: str, **kw: Any) -> Any:
        r = loop.run_until_complete(ds.client.post(path, **kw))
        assert r.status_code == 200, r.text[:2000]
        return r.json()

    yield post
    loop.close()


@pytest.fixture
def ops_file(tmp_path: Path) -> Path:
    path = tmp_path / "ops.json"
    path.write_text(oplist().dumps(), encoding="utf-8")
    return path


def _json(result: Result) -> dict[str, Any]:
    assert result.exit_code in (0, 1), result.output
    return dict(json.loads(result.stdout))


def _run(cli: Callable[..., Result], monkeypatch: pytest.MonkeyPatch, tmp_path: Path,
         *options: str) -> Result:
    """``opcheck run SCRIPT`` whose recorded op list is :func:`oplist`."""
    from opcheck.tracers import script

    recorded: list[tuple[str, ...]] = []

    def run_script(path: str | Path, args: Any = (), **kw: Any) -> script.ScriptRun:
        recorded.append(tuple(args))
        return script.ScriptRun(oplist())

    monkeypatch.setattr(script, "run_script", run_script)
    train = tmp_path / "train.py"
    train.write_text("print('never run here')\n", encoding="utf-8")
    r = cli("run", *options, str(train), "--epochs", "3")
    assert recorded == [("--epochs", "3")]  # the script's own arguments reach the run
    return r


def test_check_run_and_web_give_the_same_report(
        cli: Callable[..., Result], web: Callable[..., Any], bundled_catalog: Path,
        ops_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    options = ("--catalog", str(bundled_catalog), "--torch-npu", TARGET, "--cann", CANN,
               "--hardware", HARDWARE, "--jit-compile", "off", "--internal-format", "on",
               "--graph", "--all-releases", "--no-cpu-fallback",
               "--fail-on", "never", "-f", "json")
    one = _json(cli("check", str(ops_file), *options))
    # several models: one report each, on one target
    other = tmp_path / "other.json"
    other.write_text(oplist().dumps(), encoding="utf-8")
    several = _json(cli(str(ops_file), str(other), *options))
    run = _json(_run(cli, monkeypatch, tmp_path, *options))
    page = web(f"/-/check?release={TARGET}&cann={CANN}&hardware={HARDWARE}&graph=1"
               "&all_releases=1&no_cpu_fallback=1&jit_compile=off&internal_format=on", content=oplist().dumps(),
               headers={"content-type": "application/json"})

    assert several["models"] == [str(ops_file), str(other)]
    assert several["reports"] == [one, one]
    assert run == one
    assert page == one
    # what the request asked for is in it: the target, the CANN note, both modes
    assert one["target"]["torch_npu"] == TARGET and one["target"]["cann"] == CANN
    assert any(f"CANN {CANN} was asked for" in w for w in one["warnings"])
    assert one["notes"][0] == f"target torch_npu {TARGET}: asked for with --torch-npu {TARGET}"
    assert one["graph"]["release"] == TARGET and one["graph"]["matrix"]["releases"]
    assert one["matrix"]["releases"] and "aten::isin.Tensor_Tensor" in one["matrix"]["ops"]
    statuses = {o["op"]: o["status"] for o in one["ops"]}
    assert "cpu_fallback" not in statuses.values()  # --no-cpu-fallback was applied


def test_the_baseline_is_the_same_on_every_surface(
        cli: Callable[..., Result], web: Callable[..., Any], bundled_catalog: Path,
        ops_file: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    base = tmp_path / "base.json"
    r = cli("check", str(ops_file), "--catalog", str(bundled_catalog), "--torch-npu", OLD,
            "--fail-on", "never", "-f", "json", "-o", str(base))
    assert r.exit_code == 0, r.output
    options = ("--catalog", str(bundled_catalog), "--torch-npu", TARGET, "--baseline",
               str(base), "--fail-on", "never", "-f", "json")
    one = _json(cli("check", str(ops_file), *options))
    run = _json(_run(cli, monkeypatch, tmp_path, *options))
    page = web("/-/check?_format=json", data={"release": TARGET, "oplist": oplist().dumps()},
               files={"baseline": ("base.json", base.read_bytes(), "application/json")})
    assert run == one
    assert page == one
    old = {o["op"]: (o["status"], o["restricted"]) for o in json.loads(base.read_text())["ops"]}
    full = _json(cli("check", str(ops_file), *options[:4], "-f", "json"))
    changed = [o["op"] for o in full["ops"] if old.get(o["op"]) != (o["status"], o["restricted"])]
    assert [o["op"] for o in one["ops"]] == changed
    assert len(changed) < len(full["ops"])  # something was hidden: the filter ran
    hidden = len(full["ops"]) - len(changed)
    assert f"baseline: {hidden} ops unchanged and hidden; {len(changed)} new or changed" \
        in one["notes"]


def test_run_help_lists_the_check_options(cli: Callable[..., Result]) -> None:
    r = cli("run", "--help")
    assert r.exit_code == 0
    for option in ("--graph", "--baseline", "--all-releases", "--cann", "--hardware",
                   "--all-ops"):
        assert option in r.output, option


@pytest.mark.torch
def test_run_checks_graph_mode_and_against_a_baseline(
        cli: Callable[..., Result], bundled_catalog: Path, tmp_path: Path) -> None:
    """A real script run (sandbox, recorded device): --graph adds the graph-mode section and
    --baseline hides what did not change since the previous report."""
    pytest.importorskip("torch")
    from testpaths import FIXTURES

    script = str(FIXTURES / "scripts" / "train_isin.py")
    common = ("--catalog", str(bundled_catalog), "-f", "json", "--timeout", "240",
              "--memory-mb", "4096", "--fail-on", "never")
    base = tmp_path / "base.json"
    r = cli("run", *common, "--torch-npu", "2.1.0.post4", "-o", str(base), script)
    assert r.exit_code == 0, r.output
    before = json.loads(base.read_text())
    assert "graph" not in before
    r = cli("run", *common, "--torch-npu", TARGET, "--graph", "--baseline", str(base), script)
    assert r.exit_code == 0, r.output
    after = json.loads(r.stdout)
    assert after["graph"]["release"] == TARGET and after["graph"]["ops"]
    old = {o["op"]: (o["status"], o["restricted"]) for o in before["ops"]}
    assert after["ops"], "isin runs on the NPU in 2.6 but fell back in 2.1: a change"
    assert all(old.get(o["op"]) != (o["status"], o["restricted"]) for o in after["ops"])
    assert any(n.startswith("baseline: ") for n in after["notes"])
