from __future__ import annotations

from pathlib import Path

from opcheck.tracers.api import trace_log

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
    ol = trace_log(p)
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
    assert "aten::_unique2" in trace_log(p).by_op()
    e = tmp_path / "empty.log"
    e.write_text("")
    assert trace_log(e).ops == []
