"""``opcheck trace --log``: a runtime log becomes an op list. The reader is
``opcheck.contrib.logs`` (the one ``opcheck explain`` uses), called by the CLI; the tracers
package reads no logs (it sits below contrib)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opcheck.contrib.logs import parse_log
from opcheck.core.oplist import OpList

LOG = """\
[W compiler_depend.ts:51] Warning: CAUTION: The operator 'aten::isin.Tensor_Tensor_out' is not currently supported on the NPU backend and will fall back to run on the CPU. This may have performance implications. (function npu_cpu_fallback)
/usr/lib/python3.9/site-packages/torch_npu/utils.py:12: UserWarning: The operator 'aten::_unique2' is not currently supported on the NPU backend and will fall back to run on the CPU.
[ERROR] 2024-05-01 aclnnIsin is not in libopapi.so, please check the CANN version
RuntimeError: "index_put" not implemented for 'Double'
E39999: Inner Error! EZ1001: op addmm does not support DT_DOUBLE
RuntimeError: matmul: not implemented for DT_DOUBLE
"""


def test_log_becomes_op_list(tmp_path: Path) -> None:
    p = tmp_path / "run.log"
    junk = bytes(range(256)) * 4
    p.write_bytes(LOG.encode() + junk + b"\n" + LOG.splitlines()[0].encode() + b"\n")
    ol = parse_log(p)
    ops = ol.by_op()
    assert ol.method == "log" and ol.ir == "log"
    assert ops["aten::isin.Tensor_Tensor_out"].count == 2
    assert "aten::_unique2" in ops
    assert "aclnn::aclnnIsin" in ops
    assert ops["aten::index_put"].dtypes == ["float64"]
    assert ops["aten::matmul"].dtypes == ["float64"]
    assert ops["aten::isin.Tensor_Tensor_out"].locations[0] == "run.log:1"
    text = " ".join(ol.notes)
    assert "fell back to the CPU" in text and "EZ1001 x1" in text and "E39999" in text
    assert "binary" in text


def test_huge_line_and_empty_log(tmp_path: Path) -> None:
    p = tmp_path / "big.log"
    p.write_bytes(b"x" * 300_000 + b"\n" + LOG.splitlines()[1].encode() + b"\n")
    assert "aten::_unique2" in parse_log(p).by_op()
    e = tmp_path / "empty.log"
    e.write_text("")
    assert parse_log(e).ops == []


def test_wrapped_and_coloured_warnings(tmp_path: Path) -> None:
    """Colours are stripped, a progress bar's last segment is read, and a warning wrapped
    after "NPU" still counts: what explain sees."""
    p = tmp_path / "run.log"
    p.write_bytes(
        b"\x1b[33m[W] The operator 'aten::roll' is not currently supported on the NPU backend\x1b[0m\n"
        b"10%\r90%\rThe operator 'aten::cummax' is not currently supported on the NPU b\n"
        b"ackend and will fall back to run on the CPU.\n"
    )
    ops = parse_log(p).by_op()
    assert set(ops) == {"aten::roll", "aten::cummax"}
    assert ops["aten::cummax"].locations == ["run.log:2"]


def test_trace_log_command_writes_the_contrib_op_list(tmp_path: Path,
                                                      cli: Callable[..., Any]) -> None:
    p = tmp_path / "run.log"
    p.write_text(LOG, encoding="utf-8")
    out = tmp_path / "ops.json"
    r = cli("trace", "--log", str(p), "-o", str(out))
    assert r.exit_code == 0, r.output
    assert OpList.load(out).to_json() == parse_log(p).to_json()
    assert json.loads(out.read_text(encoding="utf-8"))["method"] == "log"
