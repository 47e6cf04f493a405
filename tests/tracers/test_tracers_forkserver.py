"""The forkserver (``sandbox.shared_imports``): children forked from one torch-importing
template keep the isolation of fresh processes.

A model that segfaults, runs out of memory or hangs fails alone, with the reason the
fresh-process path gives; models traced before and after it still get their op lists; the
template survives; a timeout kills the child's whole session; the template and its children
die with the process that started them.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from opcheck.core.errors import TraceError
from opcheck.tracers import sandbox
from opcheck.tracers.api import trace

pytestmark = pytest.mark.torch
pytest.importorskip("torch")

MODELS = '''
import os
import signal
import subprocess
import time
from pathlib import Path

import torch
from torch import nn

PIDS = {pids!r}


class Net(nn.Module):
    def __init__(self, how: str = "") -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.how = how

    def forward(self, x):
        if self.how == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        if self.how == "oom":
            hog = bytearray(8 << 30)
            hog[-1] = 1
        return torch.relu(self.fc(x))


def good():
    return Net(), (torch.randn(2, 4),)


def other():
    return nn.Sequential(nn.Conv2d(3, 4, 3), nn.Sigmoid()), (torch.randn(1, 3, 8, 8),)


def segv():
    return Net("segv"), (torch.randn(2, 4),)


def oom():
    return Net("oom"), (torch.randn(2, 4),)


def hang():
    helper = subprocess.Popen(["sleep", "600"])
    Path(PIDS).write_text(f"{{os.getpid()}} {{helper.pid}}")
    time.sleep(600)
'''

TIMEOUT = 4.0
OOM_LIMIT = 2048


def _models(tmp_path: Path) -> tuple[Path, Path]:
    pids = tmp_path / "pids.txt"
    f = tmp_path / "bad_models.py"
    f.write_text(MODELS.format(pids=str(pids)), encoding="utf-8")
    return f, pids


def _gone(pid: int, within: float = 20.0) -> bool:
    """The process has ended (a zombie waiting for its new parent to reap it counts)."""
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return True
        if stat.rsplit(")", 1)[1].split()[0] in ("Z", "X"):
            return True
        time.sleep(0.1)
    return False


def _failure(f: Path, name: str) -> str:
    """The one-line reason a bad model's trace fails."""
    memory = OOM_LIMIT if name == "oom" else 4096
    with pytest.raises(TraceError) as info:
        trace(None, model_spec=f"{f}:{name}", timeout=TIMEOUT, memory_mb=memory)
    return str(info.value)


def _ops(f: Path, name: str) -> dict[str, int]:
    ol = trace(None, model_spec=f"{f}:{name}", timeout=120, memory_mb=4096)
    assert ol.complete
    return {op: e.count for op, e in ol.by_op().items()}


def test_bad_models_fail_alone_with_the_fresh_process_reasons(tmp_path: Path) -> None:
    f, pids = _models(tmp_path)
    bad = ("segv", "oom", "hang")
    with sandbox.shared_imports() as server:
        before = _ops(f, "good")
        forked: dict[str, str] = {}
        for name in bad:
            forked[name] = _failure(f, name)
            if name == "hang":
                child, helper = (int(p) for p in pids.read_text().split())
        after = _ops(f, "good")
        conv = _ops(f, "other")
        assert server.proc.poll() is None, "the template died with a child"
    assert "aten::addmm" in before and "aten::relu" in before
    assert after == before
    assert "aten::convolution" in conv and "aten::sigmoid" in conv

    assert forked["segv"].startswith("tracer worker crashed (SIGSEGV) in bad_models.py:")
    assert forked["segv"].endswith("(forward)")
    assert forked["oom"] == (f"tracing ran out of memory (limit {OOM_LIMIT} MB; "
                             "raise --memory-mb)")
    assert forked["hang"] == f"tracing timed out after {TIMEOUT:g} s (raise --timeout)"
    # the timeout killed the child's whole session, not only the child
    assert _gone(child) and _gone(helper)

    # the same models in fresh processes: the same reasons, word for word
    assert not sandbox.sharing()
    pids.unlink()
    assert {name: _failure(f, name) for name in bad} == forked
    assert _gone(int(pids.read_text().split()[1]))
    assert _ops(f, "good") == before


def _hanging_parent(tmp_path: Path) -> tuple[subprocess.Popen[bytes], int, int, int]:
    """A process tracing a hanging model in a shared_imports() block: it, the template's pid,
    the forked child's and the helper process the child started."""
    f, pids = _models(tmp_path)
    script = textwrap.dedent(f"""
        from opcheck.tracers import sandbox
        from opcheck.tracers.api import trace

        with sandbox.shared_imports() as server:
            print(server.proc.pid, flush=True)
            trace(None, model_spec={f"{f}:hang"!r}, timeout=600, memory_mb=4096)
    """)
    parent = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, cwd=tmp_path, start_new_session=True)
    assert parent.stdout is not None
    template = int(parent.stdout.readline())
    deadline = time.monotonic() + 120
    while not (pids.is_file() and len(pids.read_text().split()) == 2):
        assert time.monotonic() < deadline, "the hanging model never started"
        assert parent.poll() is None
        time.sleep(0.1)
    child, helper = (int(p) for p in pids.read_text().split())
    return parent, template, child, helper


def test_the_template_and_its_children_die_with_their_parent(tmp_path: Path) -> None:
    parent, template, child, helper = _hanging_parent(tmp_path)
    try:
        assert not _gone(template, within=0)
        os.kill(parent.pid, signal.SIGKILL)  # no cleanup code of the parent runs
        parent.wait()
        assert _gone(template), "the template outlived its parent"
        assert _gone(child) and _gone(helper), "a forked child outlived the template"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()


def test_children_die_with_a_template_killed_outright(tmp_path: Path) -> None:
    parent, template, child, _helper = _hanging_parent(tmp_path)
    try:
        # neither the template's end-of-input handling nor the parent's timeout runs
        os.kill(template, signal.SIGKILL)
        os.kill(parent.pid, signal.SIGKILL)
        parent.wait()
        assert _gone(child), "a forked child outlived its template"
    finally:
        if parent.poll() is None:
            os.killpg(parent.pid, signal.SIGKILL)
            parent.wait()
        with contextlib.suppress(OSError):
            os.killpg(child, signal.SIGKILL)  # the helper, whichever way the test went


def test_a_module_run_in_a_forked_child_behaves_as_python_m(tmp_path: Path) -> None:
    (tmp_path / "probe_mod.py").write_text(textwrap.dedent("""
        import resource
        import sys

        print(resource.getrlimit(resource.RLIMIT_AS)[0], sys.argv[1:], file=sys.stderr)
        sys.exit(int(sys.argv[1]))
    """), encoding="utf-8")
    fresh = sandbox.run_module("probe_mod", ["3", "x"], cwd=str(tmp_path), timeout=60,
                               memory_mb=3072)
    with sandbox.shared_imports(("torch",)):
        forked = sandbox.run_module("probe_mod", ["3", "x"], cwd=str(tmp_path), timeout=60,
                                    memory_mb=3072)
    assert fresh == forked
    assert forked.returncode == 3
    assert forked.stderr.strip() == f"{3072 << 20} ['3', 'x']"


def test_the_zoo_template_imports_transformers_only_when_a_model_uses_it(tmp_path: Path) -> None:
    import ast

    from opcheck.checker import zoo

    # the table agrees with the factories: those that import transformers, and only those
    tree = ast.parse(zoo.models_file().read_text(encoding="utf-8"))
    uses = {f.name for f in tree.body if isinstance(f, ast.FunctionDef)
            and any(isinstance(n, ast.ImportFrom) and (n.module or "").startswith("transformers")
                    for n in ast.walk(f))}
    assert uses == {zoo.MODELS[n] for n in zoo.USES_TRANSFORMERS}
    plain, hf = sandbox.PRELOAD, (*sandbox.PRELOAD, *zoo.ZOO_PRELOAD)
    assert zoo.preload(["conv_classifier", "lstm", "yolo"]) == plain
    assert zoo.preload(["lstm", "bert"]) == hf
    assert zoo.preload(None) == hf
    own = tmp_path / "own.py"
    own.write_text("import torch\n\ndef f():\n    return torch.nn.ReLU()\n")
    assert zoo.preload([f"{own}:f"]) == plain
    own.write_text("from transformers import BertModel\n")
    assert zoo.preload([f"{own}:f"]) == hf
    assert zoo.preload(["mypkg.models:build"]) == hf  # unknown without importing it


def _child(code: str, *, timeout: float) -> sandbox.ChildRun:
    return sandbox.run_limited([sys.executable, "-c", textwrap.dedent(code)], cwd=".",
                               env=dict(os.environ), timeout=timeout, memory_mb=4096,
                               signals_ready=True)


def test_the_timeout_counts_from_the_end_of_the_workers_imports(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A child that is slow to start (a loaded machine importing torch) still gets the whole
    timeout after it signals; one that never signals stops at STARTUP_LIMIT with its own
    reason, which a worker reports as such."""
    slow_start = _child("""
        import os, time
        time.sleep(3)
        os.write(int(os.environ["OPCHECK_READY_FD"]), b"ready")
        time.sleep(0.1)
    """, timeout=2)
    assert (slow_start.returncode, slow_start.started) == (0, True)
    died_importing = _child("raise SystemExit(3)", timeout=2)
    assert (died_importing.returncode, died_importing.started) == (3, True)

    monkeypatch.setattr(sandbox, "STARTUP_LIMIT", 1.0)
    never = _child("import time; time.sleep(60)", timeout=120)
    assert (never.returncode, never.started) == (None, False)

    f, _ = _models(tmp_path)
    slow = tmp_path / "slow"
    slow.mkdir()
    # runs at interpreter start, before the worker imports torch
    (slow / "sitecustomize.py").write_text("import time\ntime.sleep(60)\n", encoding="utf-8")
    monkeypatch.setenv("PYTHONPATH", str(slow))
    assert not sandbox.sharing()
    with pytest.raises(TraceError, match=r"^tracer worker did not finish importing torch "
                                         r"within 1 s"):
        trace(None, model_spec=f"{f}:good", timeout=120, memory_mb=4096)
