"""explain names the user's own line ("your call"): the last frame of a Python traceback
outside torch, torch_npu and site-packages, tied to the ATen op the failure names; deep and
chained tracebacks neither hang nor hold memory."""

from __future__ import annotations

import io
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path

from click.testing import Result

from opcheck.contrib.explain import diagnose, scan, signatures
from opcheck.contrib.explain.records import MAX_CALLS

SIGS = signatures.load_dir()

# the shape of https://github.com/Ascend/pytorch issues on 507018 AI CPU exceptions: the
# traceback, torch_npu's "current working operator name", then the CANN lines
REPEAT_INTERLEAVE = """\
Traceback (most recent call last):
  File "/root/test.py", line 20, in <module>
    out = torch.repeat_interleave(x >> 1, repeats, dim=0)
  File "/usr/local/python3.9/lib/python3.9/site-packages/torch/functional.py", line 100, in f
    return _VF.repeat_interleave(input, repeats, dim)
RuntimeError: The Inner error is reported as above. The process exits for this inner error, and the current working operator name is aclnnRepeatInterleaveIntWithDim.
[ERROR] 2024-08-29-10:35:19 (PID:38271, Device:0, RankID:-1) ERR00100 PTA call acl api failed
EZ9999: Inner Error!
EZ9999: 2024-08-29-10:35:19.417.180  Kernel task happen error, retCode=0x2a, [aicpu exception].
        synchronize stream failed, runtime result = 507018[FUNC:ReportCallError]
"""


class _Ops:
    def aclnn_ops(self, function: str) -> list[str]:
        return ["aten::repeat_interleave.self_int"] if "RepeatInterleave" in function else []

    def aclnn_codes(self, function: str, code: str) -> list[object]:
        return []


def test_the_user_line_of_a_traceback_is_your_call_tied_to_the_aten_op() -> None:
    result = scan.explain(REPEAT_INTERLEAVE.splitlines(), SIGS)
    (p,) = diagnose.diagnose(result, facts=_Ops())  # type: ignore[arg-type]
    assert p.functions == ["aclnnRepeatInterleaveIntWithDim"]
    assert p.call is not None and p.call.where == "/root/test.py:20"
    assert p.call.code == "out = torch.repeat_interleave(x >> 1, repeats, dim=0)"
    assert p.call_ops == ["aten::repeat_interleave.self_int"]


def test_the_cli_prints_your_call(cli: Callable[..., Result], bundled_catalog: Path,
                                  tmp_path: Path) -> None:
    log = tmp_path / "ri.log"
    log.write_text(REPEAT_INTERLEAVE)
    r = cli("explain", str(log), "--catalog", str(bundled_catalog))
    assert r.exit_code == 0, r.output
    assert "your call: /root/test.py:20: out = torch.repeat_interleave(x >> 1" in r.output
    assert "aten::repeat_interleave" in r.output.split("your call:")[1].splitlines()[1]


def test_a_traceback_printed_after_the_runtime_error_still_names_the_call() -> None:
    log = """\
[ERROR] RUNTIME(3912,python):2024-05-10-09:12:44 there is an aicore error exception, core id is 2, kernelName=Abs_1
Traceback (most recent call last):
  File "/home/u/infer.py", line 7, in <module>
    y = torch.abs(x)
RuntimeError: ACL stream synchronize failed, error code:507015
"""
    result = scan.explain(log.splitlines(), SIGS)
    p = diagnose.diagnose(result)[0]
    assert p.call is not None and p.call.where == "/home/u/infer.py:7"


def _deep(size: int, *, chain: bool, frames: int = 2000) -> bytes:
    frame = (b'  File "/usr/lib/python3.10/site-packages/torch/nn/modules/module.py", line 1501, '
             b'in _call_impl\n    return forward_call(*args, **kwargs)\n')
    user = b'  File "/home/u/train.py", line 20, in step\n    y = model(x)\n'
    out = bytearray()
    while len(out) < size:
        out += b"Traceback (most recent call last):\n" + user + frame * frames
        out += b"RuntimeError: call aclnnAdd failed, error code is 161002\n"
        if chain:
            out += b"\nDuring handling of the above exception, another exception occurred:\n\n"
    return bytes(out)


def test_deep_chained_tracebacks_stay_bounded() -> None:
    data = _deep(1 << 20, chain=True, frames=2000) + _deep(1 << 20, chain=True, frames=20)
    tracemalloc.start()
    t0 = time.perf_counter()
    result = scan.explain_stream(io.BytesIO(data), SIGS)
    seconds = time.perf_counter() - t0
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert data.count(b"Traceback") > 2 * MAX_CALLS
    assert len(result.calls) == MAX_CALLS  # the last ones, not one per link of the chain
    assert all(c.where == "/home/u/train.py:20" for c in result.calls)
    (p,) = diagnose.diagnose(result)
    assert p.call is not None and p.call.code == "y = model(x)"
    assert peak < 24 << 20, peak  # the log is never held, nor its frames
    assert seconds < 120


def test_a_traceback_without_its_exception_line_and_a_frame_without_source() -> None:
    log = ['Traceback (most recent call last):', '  File "/home/u/a.py", line 3, in <module>',
           '  File "/home/u/b.py", line 9, in g', "EZ9999: Inner Error!"] * 3
    result = scan.explain(log, SIGS)
    assert result.calls == []  # never closed: nothing kept
    p = diagnose.diagnose(result)[0]
    assert p.call is None
