from __future__ import annotations

import contextlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from opcheck.contrib import verify as vf
from opcheck.contrib import workarounds as wa
from opcheck.core.errors import CatalogError

pytestmark = pytest.mark.torch
torch = pytest.importorskip("torch")

RELEASES = ["2.0.1.post4", "2.1.0", "2.1.0.post4", "2.1.0.post10", "2.6.0.post3", "2.8.0", "2.12.0"]
ENTRIES = wa.load_dir(wa.default_workarounds_dir())
REWRITES = [e for e in ENTRIES if e.rewrite is not None]

# Every op an entry says is broken counts as falling back on the releases that entry names:
# a replacement that calls the very op it works around must fail the NPU check.
BROKEN = {(op, e.id) for e in ENTRIES for op in e.ops}


def catalog_status(op: str, release: str) -> str:
    for e in ENTRIES:
        if op in e.ops and e.kind is wa.Kind.rewrite and e.applies(release):
            return "fallback"
    return "npu"


ISIN_CODE = '''
import torch

def replacement(elements, test_elements, *, assume_unique=False, invert=False):
    out = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1)
    return ~out if invert else out

def inputs():
    yield (torch.randint(0, 9, (3, 5)), torch.tensor([1, 4])), {}
    yield (torch.arange(6), torch.tensor([0, 5])), {"invert": True}
'''


def _isin_entry(code: str = ISIN_CODE, **rewrite: Any) -> wa.Workaround:
    return wa.Workaround.model_validate({
        "id": "isin-test", "title": "isin test", "ops": ["aten::isin.Tensor_Tensor"],
        "applies_to": {"releases": [{"min": "2.1.0", "max": "2.1.0.post4"}]},
        "kind": "rewrite", "problem": "falls back to the CPU", "fix": "compare and reduce",
        "rewrite": {"api": "torch.isin", "code": code, **rewrite},
        "sources": ["https://github.com/Ascend/pytorch/issues/40"], "author": "t",
        "last_verified": "2026-11-01",
    })


@pytest.mark.parametrize("entry", REWRITES, ids=[e.id for e in REWRITES])
def test_every_shipped_rewrite_verifies(entry: wa.Workaround) -> None:
    result = vf.verify(entry, op_status=catalog_status, releases=RELEASES)
    assert result.ok, result.problems
    assert result.cases >= 3
    assert result.ops, "the tracer saw no ops"
    if entry.kind is wa.Kind.rewrite:
        assert not set(entry.ops) & result.ops, "replacement still calls the op it replaces"


def test_shipped_rewrites_exist() -> None:
    assert len(REWRITES) >= 6
    assert {"isin-tensor-tensor-rewrite", "torchvision-nms-rewrite"} <= {e.id for e in REWRITES}


def test_good_replacement_passes_and_reports_ops() -> None:
    r = vf.verify(_isin_entry(), op_status=lambda op, rel: "npu", releases=RELEASES)
    assert r.ok and r.cases == 2
    assert {"aten::eq.Tensor", "aten::any.dim"} <= r.ops


WRONG_VALUES = ISIN_CODE.replace("return ~out if invert else out", "return out")
WRONG_SHAPE = ISIN_CODE.replace("return ~out if invert else out", "return out.reshape(-1)")
WRONG_DTYPE = ISIN_CODE.replace("return ~out if invert else out", "return (~out if invert else out).int()")
RAISES = ISIN_CODE.replace("out = (elements", "raise RuntimeError('boom')\n    out = (elements")


@pytest.mark.parametrize(("code", "message"), [
    (WRONG_VALUES, "case 1: values differ"),
    (WRONG_SHAPE, "case 0: shape (15,) != (3, 5)"),
    (WRONG_DTYPE, "case 0: dtype torch.int32 != torch.bool"),
    (RAISES, "case 0: replacement raises RuntimeError: boom"),
])
def test_wrong_replacement_is_caught(code: str, message: str) -> None:
    r = vf.verify(_isin_entry(code))
    assert not r.ok
    assert r.problems[0] == message


def test_float_tolerance_is_applied() -> None:
    code = '''
import torch
def replacement(input, dim):
    return torch.cumsum(input, dim) * (1 + 1e-3)
def inputs():
    yield (torch.rand(8) + 1, 0), {}
'''
    loose = wa.Workaround.model_validate({**_isin_entry().model_dump(),
                                           "rewrite": {"api": "torch.cumsum", "code": code, "rtol": 1e-2}})
    tight = wa.Workaround.model_validate({**_isin_entry().model_dump(),
                                           "rewrite": {"api": "torch.cumsum", "code": code, "rtol": 1e-5}})
    assert vf.verify(loose).ok
    assert "max abs diff" in vf.verify(tight).problems[0]


def test_replacement_using_a_fallback_op_is_caught() -> None:
    # Agrees with torch.isin (it *is* torch.isin) but the op falls back on 2.1.0-2.1.0.post4.
    code = ISIN_CODE.replace("out = (elements.unsqueeze(-1) == test_elements.reshape(-1)).any(-1)",
                             "out = torch.isin(elements, test_elements)")
    entry = _isin_entry(code)

    def status(op: str, rel: str) -> str:
        return "fallback" if op == "aten::isin.Tensor_Tensor" and rel.startswith("2.1.0") else "npu"

    r = vf.verify(entry, op_status=status, releases=RELEASES)
    assert vf.check_equivalence(entry)[1] == []
    assert r.problems == [
        "replacement uses aten::isin.Tensor_Tensor, not on the NPU (2.1.0: fallback, 2.1.0.post4: fallback)"
    ]
    # 2.1.0.post10 is outside the entry's range, so its status is never asked for.
    asked: list[str] = []
    vf.check_npu_ops(entry, op_status=lambda op, rel: asked.append(rel) or "npu", releases=RELEASES)
    assert set(asked) == {"2.1.0", "2.1.0.post4"}


def test_injected_tracer_is_used() -> None:
    calls: list[int] = []

    def fake_trace(fn: Callable[..., Any], cases: Any) -> set[str]:
        calls.append(len(cases))
        return {"npu::npu_magic", "aten::add.Tensor"}

    ops, problems = vf.check_npu_ops(
        _isin_entry(), op_status=lambda op, rel: "npu" if op.startswith("aten") else "unknown",
        releases=["2.1.0"], trace_ops=fake_trace)
    assert calls == [2]
    assert ops == {"npu::npu_magic", "aten::add.Tensor"}
    assert problems == ["replacement uses npu::npu_magic, not on the NPU (2.1.0: unknown)"]


def test_npu_check_skipped_without_status_source() -> None:
    r = vf.verify(_isin_entry())
    assert r.ok and r.skipped == ["npu op check: no op status source"] and not r.ops


def test_reference_used_when_api_is_missing() -> None:
    code = '''
import torch
def reference(x):
    return x * 2
def replacement(x):
    return x + x
def inputs():
    yield (torch.randn(4),), {}
'''
    entry = wa.Workaround.model_validate({**_isin_entry().model_dump(),
                                           "rewrite": {"api": "nonexistent_pkg.ops.double", "code": code}})
    assert vf.verify(entry).ok
    no_ref = code.replace("def reference(x):\n    return x * 2\n", "")
    entry2 = wa.Workaround.model_validate({**_isin_entry().model_dump(),
                                            "rewrite": {"api": "nonexistent_pkg.ops.double", "code": no_ref}})
    r = vf.verify(entry2)
    assert r.problems == ["isin-test: cannot import nonexistent_pkg.ops.double; define reference() in the code"]


def test_broken_code_is_a_catalog_error() -> None:
    entry = _isin_entry(ISIN_CODE + "\nraise ValueError('bad module')\n")
    with pytest.raises(CatalogError, match="rewrite code fails to load: ValueError: bad module"):
        vf.load_rewrite(entry.rewrite, entry.id)  # type: ignore[arg-type]
    empty = _isin_entry(ISIN_CODE.replace("    yield (torch.randint", "    return []\n    yield (torch.randint"))
    assert vf.verify(empty).problems == ["isin-test: inputs() yields no cases"]


def test_in_place_originals_do_not_leak_into_replacement_inputs() -> None:
    code = '''
import torch
def reference(x):
    return x.add_(1)
def replacement(x):
    return x + 1
def inputs():
    yield (torch.zeros(3),), {}
'''
    entry = wa.Workaround.model_validate({**_isin_entry().model_dump(), "rewrite": {"api": "x.y", "code": code}})
    assert vf.verify(entry).ok


def test_verify_all_skips_entries_without_code() -> None:
    results = vf.verify_all(ENTRIES)
    by_id = {r.entry: r for r in results}
    assert by_id["hccl-exec-timeout"].skipped == ["no rewrite code"]
    assert all(r.ok for r in results)


def test_inputs_that_raise_are_reported() -> None:
    code = ISIN_CODE.replace("    yield (torch.randint", "    raise KeyError('nope')\n    yield (torch.randint")
    assert vf.verify(_isin_entry(code)).problems == ["isin-test: inputs() raises KeyError: 'nope'"]


def test_fake_npu_trace_follows_data_dependent_code_on_the_cpu() -> None:
    torch = pytest.importorskip("torch")
    from opcheck.contrib.verify import fake_npu_trace_ops

    def fn(x: object) -> object:
        if bool(x.sum() > 0):  # type: ignore[attr-defined]
            return x.cos()  # type: ignore[attr-defined]
        return x.sin()  # type: ignore[attr-defined]

    ops = fake_npu_trace_ops(fn, [((torch.ones(3),), {})])
    # The fake trace stops at the branch; the CPU run of the same case supplies the rest.
    assert {"aten::sum", "aten::cos"} <= ops and "aten::sin" not in ops


# --------------------------------------------------------------------------- edge cases

OLD_LOGCUMSUMEXP = '''
import torch

def replacement(input, dim):
    m = input.amax(dim=dim, keepdim=True).detach()
    m = torch.where(torch.isfinite(m), m, torch.zeros_like(m))
    return torch.log(torch.cumsum(torch.exp(input - m), dim=dim)) + m

def inputs():
    yield (torch.randn(16), 0), {}
    yield (torch.randn(4, 9) * 5, 1), {}
    yield (torch.randn(3, 5, 7), 0), {}
    yield (torch.randn(2, 8) * 10, -1), {}
'''


def _shipped(entry_id: str) -> wa.Workaround:
    return next(e for e in ENTRIES if e.id == entry_id)


def test_old_logcumsumexp_rewrite_fails_on_edge_cases_the_fixed_one_passes() -> None:
    shipped = _shipped("logcumsumexp-rewrite")
    assert shipped.rewrite is not None
    old = shipped.model_copy(update={"rewrite": shipped.rewrite.model_copy(
        update={"code": OLD_LOGCUMSUMEXP})})
    r = vf.verify(old)
    # its own randn cases pass: only the derived ones show the bug
    assert not any(p.split(":")[0] in {f"case {i}" for i in range(4)} for p in r.problems)
    assert "case 0 large: values differ" in " ".join(r.problems)
    assert any(p.startswith("case 0 empty: replacement raises") for p in r.problems)
    fixed = vf.verify(shipped)
    assert fixed.ok, fixed.problems
    assert fixed.edge_cases >= 5 * fixed.cases


def test_fixed_logcumsumexp_is_right_far_from_the_maximum() -> None:
    code = vf.load_rewrite(_shipped("logcumsumexp-rewrite").rewrite)  # type: ignore[arg-type]
    x = torch.tensor([-200.0, 0.0])
    assert torch.equal(code.replacement(x, 0), torch.logcumsumexp(x, 0))
    assert code.replacement(x, 0).tolist() == [-200.0, 0.0]
    odd = torch.tensor([float("-inf"), float("-inf"), 3.0, float("inf"), 1.0])
    assert torch.equal(code.replacement(odd, 0), torch.logcumsumexp(odd, 0))


def test_edge_cases_derive_every_kind_from_a_case() -> None:
    case = ((torch.randn(3, 4), torch.tensor([1, 2, 3])), {"dim": 1})
    derived = dict(vf.edge_cases([case]))
    assert list(derived) == ["case 0 large", "case 0 negative", "case 0 inf", "case 0 -inf",
                             "case 0 nan", "case 0 empty", "case 0 non-contiguous"]
    (x, ints), kwargs = derived["case 0 large"]
    assert x.abs().max() > 100 * case[0][0].abs().max() / 10 and torch.equal(ints, case[0][1])
    assert (derived["case 0 negative"][0][0] < 0).all()
    assert derived["case 0 nan"][0][0].isnan().sum() == 1
    assert derived["case 0 inf"][0][0].isposinf().sum() == 1
    # the tensors sharing the first dimension are emptied together; others keep theirs
    assert [t.shape[0] for t in derived["case 0 empty"][0]] == [0, 0]
    nc = derived["case 0 non-contiguous"][0]
    assert not nc[0].is_contiguous() and torch.equal(nc[0], case[0][0]) and kwargs == {"dim": 1}
    # no floating tensor: only the shape edge cases
    ints_only = dict(vf.edge_cases([((torch.arange(6),), {})]))
    assert list(ints_only) == ["case 0 empty", "case 0 non-contiguous"]
    assert list(dict(vf.edge_cases([case], ["empty"]))) == ["case 0 empty"]


def test_edge_cases_the_original_refuses_are_skipped() -> None:
    code = '''
import torch
def reference(x):
    if x.numel() == 0 or not torch.isfinite(x).all():
        raise ValueError("needs finite values")
    return x * 2
def replacement(x):
    return x + x
def inputs():
    yield (torch.randn(4),), {}
'''
    entry = wa.Workaround.model_validate({**_isin_entry().model_dump(),
                                           "rewrite": {"api": "x.y", "code": code}})
    r = vf.verify(entry)
    assert r.ok and r.cases == 1 and r.edge_cases == 3  # large, negative, non-contiguous


def test_an_entry_can_leave_out_edge_cases_that_mean_nothing_for_it() -> None:
    code = ISIN_CODE.replace("def inputs():", "def inputs():\n    yield (torch.randn(3), torch.tensor([0.5])), {}")
    nan_differs = code.replace("return ~out if invert else out",
                               "out = out | elements.isnan()\n    return ~out if invert else out")
    assert any(" nan: " in p for p in vf.verify(_isin_entry(nan_differs)).problems)
    entry = _isin_entry(nan_differs, edge_cases=["large", "negative", "empty", "noncontiguous"])
    assert vf.verify(entry).ok


# --------------------------------------------------------------------------- isolation


@pytest.mark.slow
def test_isolated_verify_gives_the_in_process_result() -> None:
    entry = _shipped("isin-tensor-tensor-rewrite")
    here = vf.verify(entry, op_status=catalog_status, releases=RELEASES)
    there = vf.verify_isolated(entry, op_status=catalog_status, releases=RELEASES, timeout=120)
    assert there.ok, there.problems
    assert (there.cases, there.edge_cases, there.ops) == (here.cases, here.edge_cases, here.ops)
    wrong = vf.verify_isolated(_isin_entry(WRONG_VALUES), timeout=120)
    assert wrong.problems[0] == "case 1: values differ"


@pytest.mark.slow
def test_an_endless_inputs_times_out_instead_of_hanging() -> None:
    import time

    endless = ISIN_CODE.replace("def inputs():", "def inputs():\n    while True:\n        pass")
    start = time.monotonic()
    r = vf.verify_isolated(_isin_entry(endless), timeout=8)
    assert time.monotonic() - start < 30
    assert r.problems == ["isin-test: timed out after 8 s (a loop in inputs() or replacement() "
                          "that does not end?)"]


@pytest.mark.slow
@pytest.mark.parametrize("shared", [False, True])
def test_processes_an_entry_leaves_behind_are_killed(tmp_path: Path, shared: bool) -> None:
    """Issue 32: an entry whose code left a daemon behind made verify wait for ever."""
    import time

    from opcheck.tracers import sandbox

    pids = tmp_path / "pids.txt"
    leaves = ISIN_CODE.replace("def inputs():", (
        "def _leave():\n"
        "    import os, sys, time\n"
        "    if os.fork() == 0:\n"
        "        os.setsid()\n"
        "        if os.fork() == 0:\n"
        f"            open({str(pids)!r}, 'a').write(f'{{os.getpid()}}\\n')\n"
        "            while True:\n"
        "                time.sleep(0.1)\n"
        "        os._exit(0)\n"
        "    time.sleep(0.3)\n"
        "_leave()\n"
        "def inputs():"))
    start = time.monotonic()
    with sandbox.shared_imports(sandbox.PRELOAD) if shared else contextlib.nullcontext():
        r = vf.verify_isolated(_isin_entry(leaves), timeout=60)
    assert time.monotonic() - start < 50, "waited for the daemon"
    assert r.problems == [] or not any("timed out" in p for p in r.problems), r.problems
    daemons = [int(p) for p in pids.read_text().split()]
    assert daemons
    time.sleep(0.5)
    for pid in daemons:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        assert stat[stat.rfind(")") + 2] == "Z", f"daemon {pid} still running"


@pytest.mark.slow
def test_the_entry_code_runs_under_the_memory_limit() -> None:
    shows_limit = ISIN_CODE.replace(
        "    out = (elements",
        "    import resource\n"
        "    raise RuntimeError(f'limit {resource.getrlimit(resource.RLIMIT_AS)[0]}')\n"
        "    out = (elements")
    r = vf.verify_isolated(_isin_entry(shows_limit), timeout=120, memory_mb=3072)
    assert r.problems[0] == f"case 0: replacement raises RuntimeError: limit {3072 << 20}"
    hog = ISIN_CODE.replace("    out = (elements",
                            "    hog = torch.ones(4 << 30, dtype=torch.uint8)\n    out = (elements")
    r = vf.verify_isolated(_isin_entry(hog), timeout=120, memory_mb=3072)
    assert r.problems[0].startswith("case 0: replacement raises RuntimeError: ") \
        or "out of memory" in r.problems[0]


def test_isolated_verify_refuses_a_memory_limit_torch_cannot_start_in() -> None:
    from opcheck.core.errors import UsageError

    with pytest.raises(UsageError, match="too low to start torch"):
        vf.verify_isolated(_isin_entry(), memory_mb=100)


@pytest.mark.slow
def test_verifying_several_entries_forks_them_from_one_template(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from opcheck.tracers import sandbox

    segfault = ISIN_CODE.replace(
        "    out = (elements", "    import os, signal\n    os.kill(os.getpid(), signal.SIGSEGV)\n"
        "    out = (elements")
    endless = ISIN_CODE.replace("def inputs():", "def inputs():\n    while True:\n        pass")
    hog = ISIN_CODE.replace("    out = (elements",
                            "    hog = bytearray(16 << 30)\n    out = (elements")
    entries = [_shipped("isin-tensor-tensor-rewrite"), _isin_entry(segfault),
               _isin_entry(WRONG_VALUES), _isin_entry(endless), _isin_entry(hog),
               _shipped("isin-tensor-tensor-rewrite")]
    forked: list[str] = []
    real = sandbox.ForkServer.run_module

    def spy(self: sandbox.ForkServer, module: str, args: list[str], **kw: Any) -> Any:
        forked.append(module)
        return real(self, module, args, **kw)

    monkeypatch.setattr(sandbox.ForkServer, "run_module", spy)
    opts: dict[str, Any] = {"op_status": catalog_status, "releases": RELEASES, "timeout": 10,
                            "memory_mb": 3072}
    together = vf.verify_all_isolated(entries, **opts)
    assert forked == ["opcheck.contrib.verify"] * len(entries)
    # fresh processes give the same results (the endless entry's message is the one
    # test_an_endless_inputs_times_out_instead_of_hanging checks on that path)
    alone = [vf.verify_isolated(e, **opts) for e in entries[:3] + entries[4:]]
    assert len(forked) == len(entries)
    same = together[:3] + together[4:]
    assert [r.problems for r in same] == [r.problems for r in alone]
    assert [(r.cases, r.edge_cases, r.ops) for r in same] == \
        [(r.cases, r.edge_cases, r.ops) for r in alone]
    assert together[0].ok and together[-1].ok  # the entries after the bad ones still verify
    assert together[1].problems == ["isin-test: the entry's process died (SIGSEGV)"]
    assert together[2].problems[0] == "case 1: values differ"
    assert together[3].problems == ["isin-test: timed out after 10 s (a loop in inputs() or "
                                    "replacement() that does not end?)"]
    assert "out of memory" in together[4].problems[0] or "MemoryError" in together[4].problems[0]
