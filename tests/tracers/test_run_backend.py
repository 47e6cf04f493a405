"""``opcheck run``'s recorded device against a real PrivateUse1 backend, on whole scripts.

tests/fixtures/scripts/cpp_backend_script.py runs the scripts on the tiny C++ backend of
tests/fixtures/tracers/recording_backend.cpp (host memory, CPU fallback, every op reaching
PrivateUse1 recorded), with the same CUDA redirection; the distinct ops must be the same as the
recorded device's (the fully decomposed level). Counts may differ (the budget is off here, but
the wrapper's own bookkeeping is not counted by the backend either way).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from testpaths import FIXTURES

pytest.importorskip("torch")

SCRIPTS = FIXTURES / "scripts"
CASES = ["train_isin.py", "lstsq_f64.py", "encoder_eval.py", "detector.py", "amp_step.py"]
try:
    import transformers  # noqa: F401

    CASES.append("llama_generate.py")
except ImportError:
    pass
# reshape takes view or _reshape_alias depending on the strides the previous kernels returned
# (tests/tracers/test_tracers_backend.py): inside grouped-query SDPA the CPU fallback's and the
# wrapper's differ. Both are metadata-only views every backend implements.
STRIDE_DEPENDENT = frozenset({"aten::_reshape_alias"})


@pytest.fixture(scope="module")
def backend_ops(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, int]]:
    build = tmp_path_factory.mktemp("recording_backend")
    proc = subprocess.run(
        [sys.executable, str(SCRIPTS / "cpp_backend_script.py"), str(build), ",".join(CASES)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, dict[str, int]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


@pytest.mark.slow
@pytest.mark.timeout(600)
@pytest.mark.parametrize("name", CASES)
def test_script_ops_match_real_backend(name: str, backend_ops: dict[str, dict[str, int]]) -> None:
    from opcheck.tracers.script import run_script

    run = run_script(SCRIPTS / name, max_steps=0, timeout=300, memory_mb=4096)
    assert run.error == ""
    mine = {u.op for u in run.oplist.leaves()}
    real = set(backend_ops[name])
    diff = mine ^ real
    assert diff <= STRIDE_DEPENDENT, (
        f"run-only {sorted(mine - real)}, backend-only {sorted(real - mine)}"
    )
    assert len(mine & real) >= 4
