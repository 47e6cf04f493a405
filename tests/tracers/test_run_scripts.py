"""``opcheck run SCRIPT``: whole scripts on the recorded real-data npu device, end to end.

Each test runs a script of tests/fixtures/scripts through the CLI, in the sandboxed worker
(a fresh process: the device's kernels are registered once per process), and checks the
report against the bundled catalog.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from testpaths import FIXTURES

pytest.importorskip("torch")

if TYPE_CHECKING:
    from click.testing import Result

SCRIPTS = FIXTURES / "scripts"
OLD = ("--torch-npu", "2.1.0.post4")


def _run(cli: Callable[..., Result], catalog: Path, script: str, *args: str,
         opts: tuple[str, ...] = OLD) -> tuple[Result, dict[str, Any]]:  # fmt: skip
    res = cli("run", "--catalog", str(catalog), "-f", "json", "--timeout", "240",
              "--memory-mb", "4096", *opts, str(SCRIPTS / script), *args)  # fmt: skip
    assert res.exit_code in (0, 1, 2), res.output
    return res, json.loads(res.stdout)


def _ops(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["op"]: o for o in doc["ops"]}


def test_cuda_training_loop_isin_is_cpu_fallback_on_2_1(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    res, doc = _run(cli, bundled_catalog, "train_isin.py", "--epochs", "3")
    assert res.exit_code == 0, res.output  # a fallback is not a failure under --fail-on unsupported
    ops = _ops(doc)
    isin = ops["aten::isin.Tensor_Tensor"]
    assert isin["status"] == "cpu_fallback"
    assert isin["locations"] == ["tests/fixtures/scripts/train_isin.py:32"]
    assert isin["workarounds"]
    assert doc["mode"] == "train"
    # the whole loop: embedding forward/backward, the loss, .item(), both optimizers (at the
    # level this release receives: a composite op or its decomposition)
    assert "aten::_local_scalar_dense" in ops and "aten::embedding" in ops
    assert ops.keys() & {"aten::nll_loss", "aten::nll_loss_forward"}
    emb_bw = ops.get("aten::embedding_backward") or ops["aten::embedding_dense_backward"]
    assert "backward" in emb_bw["modules"]
    assert "optimizer" in ops["aten::_foreach_lerp_.Scalar"]["modules"]  # AdamW, foreach path
    assert "aten::_foreach_add_.List" in ops  # SGD momentum, foreach path
    notes = " ".join(doc["notes"])
    # the budget shortens the epoch loop once an epoch repeats the ops seen: the script ends
    assert "tests/fixtures/scripts/train_isin.py:30 ran 2 of 3 iterations" in notes
    assert "step 1 (optimizer)" in notes and "step 2 (optimizer)" in notes
    assert doc["complete"] and doc["verdict"] != "INCOMPLETE"


def test_script_arguments_and_step_budget(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    # --epochs 1 reaches the script's argparse: one iteration, the script ends by itself
    _, doc = _run(cli, bundled_catalog, "train_isin.py", "--epochs", "1")
    notes = " ".join(doc["notes"])
    assert "step 1 (optimizer)" in notes and "step 2" not in notes
    assert "stopped by the budget" not in notes
    # the hard stop: the op list is incomplete and names the line it stopped at (the next
    # iteration's forward), and the exit code says so
    res, doc = _run(cli, bundled_catalog, "train_isin.py", opts=(*OLD, "--max-steps", "1"))
    assert res.exit_code == 1
    assert doc["verdict"] == "INCOMPLETE" and not doc["complete"]
    assert ("after 1 optimizer steps (--max-steps 1) at tests/fixtures/scripts/train_isin.py:35:"
            " that line and the code after it did not run") in doc["stopped"]


def test_data_dependent_float64_code_runs_to_the_end(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    _, doc = _run(cli, bundled_catalog, "lstsq_f64.py")
    ops = _ops(doc)
    assert "aten::linalg_lstsq" in ops and ops["aten::linalg_lstsq"]["status"]
    assert ops["aten::linalg_lstsq"]["dtypes"] == ["float64"]
    # CompositeExplicitAutograd: its kernel sends linalg_lstsq.out, which has no NPU kernel
    assert ops["aten::linalg_lstsq"]["status"] == "cpu_fallback"
    assert ops["aten::linalg_lstsq"]["via"] == ["aten::linalg_lstsq", "aten::linalg_lstsq.out"]
    # the float64 repeat_interleave, whole or decomposed (the level this release receives)
    ri = ops.get("aten::repeat_interleave.self_Tensor") or ops["aten::index_select"]
    assert "float64" in ri["dtypes"] and ri["status"]
    # the lines after `if sol[0].item() > 1.5:` ran: the data is real
    assert any(loc.endswith("lstsq_f64.py:12") for loc in ops["aten::abs"]["locations"])
    assert "tests/fixtures/scripts/lstsq_f64.py:11" in ops["aten::_local_scalar_dense"]["locations"]


def test_op_list_keeps_both_levels_of_composites(bundled_catalog: Path) -> None:
    from opcheck.tracers.composites import watched_composites
    from opcheck.tracers.script import run_script

    run = run_script(SCRIPTS / "lstsq_f64.py", timeout=240, memory_mb=4096,
                     composites=watched_composites(bundled_catalog))  # fmt: skip
    assert run.error == "" and run.oplist.complete and run.oplist.method == "run"
    uses = {u.op: u for u in run.oplist.ops}
    ri = uses["aten::repeat_interleave.self_Tensor"]
    assert ri.composite and "float64" in ri.dtypes
    assert "aten::index_select" in ri.children
    child = next(u for u in run.oplist.ops if u.op == "aten::index_select")
    assert child.parent == "aten::repeat_interleave.self_Tensor"


def test_script_raising_half_way_exits_2_with_its_line_and_keeps_ops(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    res, doc = _run(cli, bundled_catalog, "raises_halfway.py")
    assert res.exit_code == 2
    assert ("raises_halfway.py raised at tests/fixtures/scripts/raises_halfway.py:11: "
            "RuntimeError: mat1 and mat2 shapes cannot be multiplied") in res.stderr  # fmt: skip
    ops = _ops(doc)
    assert {"aten::addmm", "aten::relu", "aten::_local_scalar_dense"} <= set(ops)
    assert ops.keys() & {"aten::mm", "aten::matmul"}  # the op it failed in is listed too
    assert ops["aten::isin.Tensor_Tensor"]["status"] == "cpu_fallback"
    assert not any("never reached" in n for n in doc["notes"])
    res, _ = _run(cli, bundled_catalog, "raises_halfway.py", opts=(*OLD, "--partial"))
    assert res.exit_code == 0  # --partial: --fail-on decides on the ops before the error
    res, _ = _run(cli, bundled_catalog, "raises_halfway.py",
                  opts=(*OLD, "--partial", "--fail-on", "fallback"))  # fmt: skip
    assert res.exit_code == 1


def test_eval_transformer_encoder_layer_takes_the_fast_path(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    _, doc = _run(cli, bundled_catalog, "encoder_eval.py")
    ops = _ops(doc)
    assert "aten::_transformer_encoder_layer_fwd" in ops
    assert doc["mode"] == "inference"
    assert "aten::native_layer_norm" not in ops  # the fused kernel, not the layer's pieces
    # no optimizer: forward calls are the steps; the third iteration repeats, so it is skipped
    assert "tests/fixtures/scripts/encoder_eval.py:9 ran 2 of 3 iterations" in " ".join(doc["notes"])


def test_detector_post_processing(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    _, doc = _run(cli, bundled_catalog, "detector.py")
    ops = _ops(doc)
    assert {"aten::grid_sampler_2d", "aten::nonzero", "aten::index.Tensor", "aten::topk",
            "aten::convolution"} <= set(ops)  # fmt: skip
    assert ops.keys() & {"aten::upsample_bicubic2d.vec", "aten::upsample_bicubic2d"}
    assert "bool" in ops["aten::index.Tensor"]["dtypes"]
    # the `boxes.shape[0] > 0` branch ran, and its .tolist() (a copy to the host)
    assert ops["aten::topk"]["locations"] == ["tests/fixtures/scripts/detector.py:32"]
    assert any("tests/fixtures/scripts/detector.py:33" in o["locations"] for o in ops.values())


def test_amp_step_casts_on_the_device(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    _, doc = _run(cli, bundled_catalog, "amp_step.py", opts=())
    ops = _ops(doc)
    assert "bfloat16" in ops["aten::addmm"]["dtypes"]  # autocast lower-precision list
    assert ops["aten::native_layer_norm"]["dtypes"][0] == "float32"  # fp32 list
    assert "aten::_amp_foreach_non_finite_check_and_unscale_" in ops  # GradScaler.step
    assert "aten::_amp_update_scale_" in ops


def test_what_needs_hardware_is_a_finding_not_a_crash(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    res, doc = _run(cli, bundled_catalog, "cuda_extras.py", opts=())
    assert res.exit_code == 0, res.output
    notes = [n for n in doc["notes"] if n.startswith("finding: ")]
    assert any("cuda_extras.py:10: imports flash_attn" in n for n in notes)
    assert any("cuda_extras.py:16: distributed: init_process_group(backend='nccl')" in n
               for n in notes)  # fmt: skip
    assert any("cuda_extras.py:22: distributed: all_reduce" in n for n in notes)
    ops = _ops(doc)
    # torch.Generator("cuda") draws on the host: randn(generator=...) still reaches the device
    assert {"aten::addmm", "aten::randn.generator", "aten::add.Tensor"} <= set(ops)


def test_missing_script_is_a_usage_error(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    res = cli("run", "--catalog", str(bundled_catalog), "no/such/train.py")
    assert res.exit_code == 2
    assert "no such script" in res.stderr


def test_tiny_llama_generate_loop(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    pytest.importorskip("transformers")
    res, doc = _run(cli, bundled_catalog, "llama_generate.py")
    assert res.exit_code == 0, res.output
    ops = _ops(doc)
    # generate(): the stopping criteria's isin and the greedy argmax run on the device, the
    # KV cache grows with cat; each step reads values back (.item() on the finished flags)
    assert ops["aten::isin.Tensor_Tensor"]["status"] == "cpu_fallback"
    assert {"aten::argmax", "aten::cat", "aten::_local_scalar_dense", "aten::embedding"} <= set(ops)
    assert any("LlamaForCausalLM" in n for n in doc["notes"])  # steps are forward calls
    assert doc["mode"] == "inference"


def test_extension_op_is_unknown_with_its_namespace(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    _, doc = _run(cli, bundled_catalog, "custom_op.py", opts=())
    op = _ops(doc)["mylib::box_scale"]
    assert op["status"] == "unknown" and "mylib" in op["reason"]
    assert op["locations"] == ["tests/fixtures/scripts/custom_op.py:12"]


def test_timeout_keeps_the_streamed_ops(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    res = cli("run", "--catalog", str(bundled_catalog), "-f", "json", "--timeout", "10",
              "--memory-mb", "4096", str(SCRIPTS / "hangs.py"))  # fmt: skip
    assert res.exit_code == 2
    assert "hangs.py stopped: tracing timed out after 10 s" in res.stderr
    doc = json.loads(res.stdout)
    ops = _ops(doc)
    assert {"aten::linalg_inv_ex", "aten::_local_scalar_dense"} <= set(ops)
    assert any("tracing timed out" in n for n in doc["notes"] + doc["warnings"])


def test_data_loader_checkpoint_round_trip_without_budget(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    # pin_memory, .cuda(non_blocking=True), torch.save of device tensors and
    # torch.load(map_location="cuda") all run; --max-steps 0 runs the script to its end
    res, doc = _run(cli, bundled_catalog, "data_pipeline.py", opts=("--max-steps", "0"))
    assert res.exit_code == 0, res.stderr
    ops = _ops(doc)
    assert {"aten::copy_", "aten::argmax", "aten::_foreach_add_.List"} <= set(ops)
    assert "tests/fixtures/scripts/data_pipeline.py:25" in ops["aten::copy_"]["locations"]
    notes = " ".join(doc["notes"])
    assert "step 4 (optimizer)" in notes and "stopped" not in notes


def test_spawned_ranks_run_once_as_rank_0(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    res, doc = _run(cli, bundled_catalog, "spawn_ranks.py", opts=())
    assert res.exit_code == 0, res.stderr
    assert any("spawn_ranks.py:13: torch.multiprocessing.spawn(nprocs=8)" in n
               for n in doc["notes"])  # fmt: skip
    assert _ops(doc)["aten::cumsum"]["locations"] == ["tests/fixtures/scripts/spawn_ranks.py:9"]


def _alive(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat[stat.rfind(")") + 2] != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc (Linux)")
def test_processes_a_script_leaves_behind_are_killed_and_the_report_comes(
    cli: Callable[..., Result], bundled_catalog: Path, tmp_path: Path
) -> None:
    """Issue 32: a forked child holding stderr, or a setsid daemon, made `run` wait for ever
    (or report "timed out" with no report)."""
    import time

    pids = tmp_path / "pids.txt"
    started = time.monotonic()
    res = cli("run", "--catalog", str(bundled_catalog), "-f", "json", "--timeout", "120",
              "--memory-mb", "4096", *OLD, str(SCRIPTS / "leaves_processes.py"), str(pids))  # fmt: skip
    assert res.exit_code == 0, res.output
    assert time.monotonic() - started < 100  # far from the timeout: not waited for
    doc = json.loads(res.stdout)
    assert doc["complete"]
    assert any("linalg_inv" in op for op in _ops(doc))  # the work before the fork
    left = [int(p) for p in pids.read_text().split()]
    assert len(left) == 2
    deadline = time.monotonic() + 5
    while any(_alive(p) for p in left) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [p for p in left if _alive(p)]


def test_a_stderr_flood_keeps_only_a_tail(tmp_path: Path) -> None:
    """Issue 32: opcheck kept a child's whole stderr (3 GB in 5.8 s)."""
    import resource
    import sys

    from opcheck.tracers.sandbox import STDERR_KEEP, run_limited

    flood = tmp_path / "flood.py"
    flood.write_text("import os\nfor _ in range(600):\n    os.write(2, b'y' * (1 << 20))\n"
                     "os.write(2, b'the end\\n')\n")
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    child = run_limited([sys.executable, str(flood)], cwd=str(tmp_path), env={},
                        timeout=120, memory_mb=2048)
    grown_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert child.returncode == 0
    assert child.stderr.endswith("the end\n") and len(child.stderr) <= STDERR_KEEP
    assert grown_mb < 50, grown_mb  # 600 MB went through the pipe


def test_each_runs_past_the_training_loop_to_the_code_after_it(
    cli: Callable[..., Result], bundled_catalog: Path
) -> None:
    """Issue 30: a three-epoch loop, then float64 repeat_interleave and lstsq after it. The
    old default (stop at the second optimizer step) never reached them; the budget shortens
    the loops and the code after them runs. Two scripts, one torch import (--each)."""
    res = cli("run", "--catalog", str(bundled_catalog), "-f", "json", "--timeout", "240",
              "--memory-mb", "4096", *OLD, "--each", str(SCRIPTS / "train_then_fit.py"),
              str(SCRIPTS / "lstsq_f64.py"))  # fmt: skip
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["kind"] == "opcheck.reports" and not doc["errors"]
    assert [Path(m).name for m in doc["models"]] == ["train_then_fit.py", "lstsq_f64.py"]
    train, fit = doc["reports"]
    assert train["model"] == "train_then_fit.py" and fit["model"] == "lstsq_f64.py"
    assert train["complete"] and train["verdict"] != "INCOMPLETE"
    ops = _ops(train)
    lstsq = ops["aten::linalg_lstsq"]
    assert lstsq["dtypes"] == ["float64"] and lstsq["status"]
    assert lstsq["locations"] == ["tests/fixtures/scripts/train_then_fit.py:28"]
    ri = ops["aten::repeat_interleave.self_Tensor"]
    assert "float64" in ri["dtypes"] and ri["status"]
    assert ri["locations"] == ["tests/fixtures/scripts/train_then_fit.py:26"]
    assert any("optimizer" in o["modules"] for o in train["ops"])  # the loop ran too
    notes = " ".join(train["notes"])
    assert "tests/fixtures/scripts/train_then_fit.py:19 ran 2 of 3 iterations" in notes
    assert "tests/fixtures/scripts/train_then_fit.py:20 ran 2 of 8" in notes
    assert "aten::linalg_lstsq" in _ops(fit)


def test_trace_run_writes_the_op_list_the_web_page_checks(
    cli: Callable[..., Result], bundled_catalog: Path, tmp_path: Path
) -> None:
    """`opcheck trace --run SCRIPT -- ARGS`: the op list of a run, checked later by `opcheck
    check` and by the web check page. --max-steps 1 is the hard stop: incomplete, with the
    line it stopped at."""
    from types import SimpleNamespace

    from opcheck.core.errors import UsageError
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import make_engine
    from opcheck.web.pages.check import Submission, run_check

    out = tmp_path / "ops.json"
    res = cli("trace", "--catalog", str(bundled_catalog), "--run", "--max-steps", "1",
              "--timeout", "240", "--memory-mb", "4096", "-o", str(out),
              str(SCRIPTS / "train_then_fit.py"), "--", "--epochs", "5")  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "train_then_fit.py: incomplete op list: stopped by the budget" in res.stderr
    ol = json.loads(out.read_text())
    assert ol["kind"] == "opcheck.oplist" and ol["method"] == "run" and not ol["complete"]
    assert ("after 1 optimizer steps (--max-steps 1) at tests/fixtures/scripts/"
            "train_then_fit.py:21") in ol["stopped"]
    assert "aten::linalg_lstsq" not in {o["op"] for o in ol["ops"]}  # it was cut
    res = cli("check", "--catalog", str(bundled_catalog), "-f", "json", *OLD, str(out))
    assert res.exit_code == 1
    checked = json.loads(res.stdout)
    assert checked["verdict"] == "INCOMPLETE"
    state = SimpleNamespace(facts=SimpleNamespace(workarounds=None),
                            catalog=Catalog.load(make_engine(bundled_catalog)),
                            has_api_docs=True)  # fmt: skip
    report = run_check(state, Submission(out.read_text(), OLD[1]))  # type: ignore[arg-type]
    assert report.method == "run" and report.verdict.value == "INCOMPLETE"
    assert {f.op for f in report.ops} == {o["op"] for o in checked["ops"]}
    with pytest.raises(UsageError, match="trace --run SCRIPT"):
        run_check(state, Submission(res.stdout, OLD[1]))  # type: ignore[arg-type]
