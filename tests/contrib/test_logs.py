from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.contrib.explain import scan, signatures
from opcheck.contrib.explain.reader import clean_line, is_binary, iter_lines
from opcheck.contrib.explain.records import fallback_op
from opcheck.contrib.logs import parse_log
from opcheck.core.errors import TraceError

LOGS = TESTS / "fixtures" / "logs"
SIGS = signatures.load_dir()


def test_iter_lines_chunks_and_caps() -> None:
    data = b"a\nbb\n" + b"x" * 50 + b"\ncc\nlast"
    got = list(iter_lines(io.BytesIO(data), chunk_size=7, max_line=10))
    assert got == [b"a", b"bb", b"x" * 10, b"cc", b"last"]
    assert list(iter_lines(io.BytesIO(b""), chunk_size=4)) == []
    assert list(iter_lines(io.BytesIO(b"\n\n"), chunk_size=1)) == [b"", b""]


def test_clean_line_and_binary() -> None:
    assert clean_line(b"\x1b[33mwarn\x1b[0m") == "warn"
    assert clean_line("10%\r90%\rdone\r\n") == "done"
    assert len(clean_line("y" * 100_000)) == 4096
    raw = b"\x01\x02\x03abc"
    assert is_binary(raw, clean_line(raw))
    assert is_binary(b"text\x00", "text\x00")
    assert not is_binary(b"plain text", "plain text") and not is_binary(b"", "")


@pytest.mark.parametrize(("line", "op"), [
    ("[W compiler_depend.ts:51] Warning: CAUTION: The operator 'aten::isin.Tensor_Tensor_out' "
     "is not currently supported on the NPU backend and will fall back to run on the CPU.",
     "aten::isin.Tensor_Tensor_out"),
    # a terminal wrapped the line right after "NPU"
    ("Warning: CAUTION: The operator 'torchvision::nms' is not currently supported on the NPU b",
     "torchvision::nms"),
    # older torch_npu: a bare name and "implemented"; ".default" is no overload
    ("UserWarning: the operator 'nonzero' is not currently implemented on the NPU backend",
     "aten::nonzero"),
    ("The operator 'aten::add.default' is not currently supported on the NPU backend", "aten::add"),
    ("Could not run 'aten::roll' with arguments from the 'NPU' backend", None),
    ("The operator '" + "a" * 300 + "' is not currently supported on the NPU backend", None),
])
def test_fallback_op(line: str, op: str | None) -> None:
    assert fallback_op(line) == op


def _fallback_ops_of_both(path: Path) -> tuple[dict[str, int], dict[str, int]]:
    explained = scan.explain_file(path, SIGS)
    traced = parse_log(path)
    fell_back = {o.op: o.count for o in explained.ops.values() if o.op in explained.fallback_ops}
    note = next((n for n in traced.notes if "fell back to the CPU" in n), "")
    return fell_back, {u.op: u.count for u in traced.ops if u.op in note}


@pytest.mark.parametrize("name", sorted(p.name for p in LOGS.glob("*.log")))
def test_explain_and_parse_log_agree_on_fallbacks(name: str) -> None:
    explained, traced = _fallback_ops_of_both(LOGS / name)
    assert explained == traced


def test_agreement_on_edge_lines(tmp_path: Path) -> None:
    p = tmp_path / "edge.log"
    p.write_bytes(b"\n".join([
        b"\x1b[33mThe operator 'aten::roll' is not currently supported on the NPU backend\x1b[0m",
        b"progress 10%\rprogress 90%\rThe operator 'aten::cummax' is not currently supported on the NPU",
        b"UserWarning: the operator 'nonzero' is not currently implemented on the NPU backend",
        b"\x00\x01\x02 The operator 'aten::relu' is not currently supported on the NPU \xff\xfe",
        b"x" * 70_000 + b" The operator 'aten::gelu' is not currently supported on the NPU backend",
    ]))
    explained, traced = _fallback_ops_of_both(p)
    assert traced == {"aten::roll": 1, "aten::cummax": 1, "aten::nonzero": 1}
    # explain reads binary lines too (a signature may still match), trace --log skips them
    assert explained == {**traced, "aten::relu": 1}
    assert "1 unreadable (binary) line(s) skipped" in parse_log(p).notes


def test_wrapped_warning_counts_for_parse_log() -> None:
    ops = parse_log(LOGS / "llm_generate_fallback.log").by_op()
    # the fourth warning is wrapped across lines 8 and 9: counted, as explain counts it
    assert ops["aten::isin.Tensor_Tensor_out"].count == 2
    assert ops["aten::isin.Tensor_Tensor_out"].locations == [
        "llm_generate_fallback.log:4", "llm_generate_fallback.log:8"]
    assert set(ops) == {"aten::isin.Tensor_Tensor_out", "aten::_logcumsumexp", "torchvision::nms"}


def test_unreadable_log(tmp_path: Path) -> None:
    with pytest.raises(TraceError, match="cannot read log"):
        parse_log(tmp_path)


def test_reading_a_log_does_not_import_torch() -> None:
    code = ("import sys\nfrom pathlib import Path\nfrom opcheck.contrib.logs import parse_log\n"
            f"parse_log(Path({str(LOGS / 'llm_generate_fallback.log')!r}))\n"
            "sys.exit(1 if 'torch' in sys.modules else 0)")
    assert subprocess.run([sys.executable, "-c", code]).returncode == 0


def test_parse_log_reads_utf16_and_single_line_logs(tmp_path: Path) -> None:
    warn = ("[rank0]:[W compiler_depend.ts:51] Warning: CAUTION: The operator 'aten::isin.Tensor_"
            "Tensor_out' is not currently supported on the NPU backend and will fall back to run "
            "on the CPU.")
    utf16 = tmp_path / "ps.log"
    utf16.write_bytes(("step 1\n" + warn + "\n").encode("utf-16"))
    assert [u.op for u in parse_log(utf16).ops] == ["aten::isin.Tensor_Tensor_out"]
    one = tmp_path / "one.log"
    one.write_text(" ".join(["[rank0]:step ok loss 0.1"] * 3000 + [warn]), encoding="utf-8")
    got = parse_log(one)
    assert [(u.op, u.locations) for u in got.ops] == [("aten::isin.Tensor_Tensor_out", ["one.log:1"])]
