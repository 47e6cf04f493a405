from __future__ import annotations

import io
import random
import tracemalloc
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.contrib import workarounds as wa
from opcheck.contrib.explain import scan, signatures
from opcheck.contrib.explain.reader import iter_lines
from opcheck.core.errors import CatalogError, UsageError

SIGS = signatures.load_dir()
LOGS = TESTS / "fixtures" / "logs"

EXPECTED = {
    "llm_generate_fallback.log": (
        {"cpu-fallback"},
        {"aten::isin.Tensor_Tensor_out": (2, 4), "aten::_logcumsumexp": (1, 6), "torchvision::nms": (1, 7)},
    ),
    "version_mismatch.log": (
        {"torch-npu-abi-mismatch", "cann-env-not-sourced", "aclnn-symbol-missing", "err-pta-call-acl",
         "precision-mode-500001", "cann-error-code", "cann-symbol-missing"},
        {},
    ),
    "hccl_errors.log": (
        {"hccl-socket-timeout", "cann-error-code", "hccl-unsupported-dtype",
         "hccl-refused-collective"},
        {},
    ),
    "dtype_memory.log": (
        {"aclnn-param-161002", "err-pta-call-acl", "cann-error-code", "dtype-other-unsupported",
         "dtype-float64", "dtype-complex", "npu-oom", "npu-oom-absurd-size"},
        {},
    ),
    "distributed_errors.log": (
        {"port-in-use", "cann-error-code", "hccl-timeout", "collective-noncontiguous",
         "op-binary-not-found", "err-ops-call-acl", "aicpu-exception"},
        {},
    ),
    "misc_errors.log": (
        {"storage-offset-untrustworthy", "cpu-fallback", "err-feature-unsupported", "mixed-devices",
         "err-invalid-type", "cuda-not-compiled", "fallback-no-cpu-kernel", "loss-scale-overflow",
         "inplace-autograd", "libgomp-static-tls", "torch-npu-c-missing", "soc-unsupported",
         "atb-symbol-mismatch", "err-application-exception", "aclnn-error-561103", "cann-error-code",
         "optype-unsupported", "no-npu-kernel-no-fallback"},
        {"aten::linalg_lstsq.out": (1, 2), "aten::_scaled_dot_product_efficient_attention": (1, 8),
         "aten::_sparse_coo_tensor_with_dims_and_tensors": (1, 18)},
    ),
}


def test_shipped_signatures() -> None:
    assert len(SIGS) >= 25
    categories = {s.category for s in SIGS}
    assert {signatures.Category.install, signatures.Category.version, signatures.Category.aclnn, signatures.Category.fallback,
            signatures.Category.dtype, signatures.Category.memory, signatures.Category.precision, signatures.Category.error_code} <= categories
    entry_ids = {e.id for e in wa.load_dir()}
    for s in SIGS:
        assert set(s.workarounds) <= entry_ids, s.id


def test_every_signature_is_exercised_by_a_fixture() -> None:
    seen: set[str] = set()
    for ids, _ in EXPECTED.values():
        seen |= ids
    assert seen == {s.id for s in SIGS}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_fixture_logs_find_every_problem(name: str) -> None:
    ids, ops = EXPECTED[name]
    result = scan.explain_file(LOGS / name, SIGS)
    assert result.signature_ids == ids
    assert {o.op: (o.count, o.first_line) for o in result.ops.values()} == ops


def test_fixture_details() -> None:
    r = scan.explain_file(LOGS / "llm_generate_fallback.log", SIGS)
    hit = r.hits["cpu-fallback"]
    # Reported once with a count: four warnings (one wrapped across two terminal lines).
    assert (hit.count, hit.first_line) == (4, 4)
    assert r.fallback_ops == {"aten::isin.Tensor_Tensor_out", "aten::_logcumsumexp", "torchvision::nms"}
    assert r.lines == 11

    d = scan.explain_file(LOGS / "distributed_errors.log", SIGS)
    assert d.hits["cann-error-code"].codes == {"EI0002", "EZ9999", "E39999"}
    assert d.hits["op-binary-not-found"].symbols == {"Range"}
    m = scan.explain_file(LOGS / "misc_errors.log", SIGS)
    assert m.fallback_ops == {"aten::linalg_lstsq.out"}  # the other two ops did not fall back
    v = scan.explain_file(LOGS / "version_mismatch.log", SIGS)
    assert v.hits["aclnn-symbol-missing"].symbols == {"aclnnPromptFlashAttentionV3"}
    assert v.hits["cann-symbol-missing"].symbols == {"MsprofSysCycleTime"}
    assert v.hits["cann-error-code"].codes == {"EH9999"}


def test_unknown_lines_are_ignored() -> None:
    lines = ["epoch 1 step 3 loss 0.25", "", "Traceback (most recent call last):",
             "ERROR in ERRATA: Exxxxx", "warning: the operator is fine", "E12 is not a code"]
    r = scan.explain(lines, SIGS)
    assert r.hits == {} and r.ops == {} and r.lines == len(lines)


def test_bytes_str_ansi_and_carriage_returns() -> None:
    warn = "Warning: CAUTION: The operator 'aten::roll' is not currently supported on the NPU backend"
    lines: list[bytes | str] = [
        ("\x1b[33m" + warn + "\x1b[0m").encode(),
        "progress 10%\rprogress 90%\r" + warn.replace("roll", "cummax") + "\n",
        b"\xff\xfe garbage \x00 bytes",
    ]
    r = scan.explain(lines, SIGS)
    assert r.op_names == {"aten::roll", "aten::cummax"}


def test_binary_file(tmp_path: Path) -> None:
    rng = random.Random(7)
    p = tmp_path / "core.bin"
    warn = b"[W compiler_depend.ts:51] Warning: CAUTION: The operator 'aten::isin.Tensor_Tensor_out' is not currently supported on the NPU backend\n"
    with p.open("wb") as f:
        f.write(bytes(rng.getrandbits(8) for _ in range(300_000)).replace(b"\n", b"\x00"))  # one 300 KB "line"
        f.write(b"\n" + warn)
        f.write(bytes(rng.getrandbits(8) for _ in range(200_000)))
    r = scan.explain_file(p, SIGS)
    assert r.fallback_ops == {"aten::isin.Tensor_Tensor_out"}
    assert r.hits["cpu-fallback"].first_line == 2


def test_large_file_is_streamed(tmp_path: Path) -> None:
    p = tmp_path / "train.log"
    filler = "step {i} | loss 2.31412 | lr 1.0e-4 | grad_norm 0.8123 | tokens/s 412.7 | mem 41.2GiB\n"
    warn = "[W compiler_depend.ts:51] Warning: CAUTION: The operator 'aten::_logcumsumexp' is not currently supported on the NPU backend\n"
    oom = "RuntimeError: NPU out of memory. Tried to allocate 2.00 GiB (NPU 0; 60.96 GiB total capacity)\n"
    n = 120_000
    with p.open("w") as f:
        for i in range(n):
            f.write(filler.format(i=i))
            if i % 40_000 == 0:
                f.write(warn)
        f.write(oom)
    assert p.stat().st_size > 10_000_000
    r = scan.explain_file(p, SIGS)
    assert r.lines == n + 3 + 1
    assert r.ops["aten::_logcumsumexp"].count == 3
    assert r.hits["npu-oom"].first_line == r.lines

    # Streaming: the file is only ever read in bounded chunks, never whole.
    reads: list[int] = []

    class Spy(io.RawIOBase):
        def __init__(self, f: io.BufferedReader) -> None:
            self.f = f

        def read(self, size: int = -1) -> bytes:
            reads.append(size)
            return self.f.read(size)

    with p.open("rb") as f:
        again = scan.explain(iter_lines(Spy(f)), SIGS)  # type: ignore[arg-type]
    assert again.signature_ids == r.signature_ids
    assert len(reads) > 100 and 0 < max(reads) <= 1 << 16


def test_memory_does_not_grow_with_the_log(tmp_path: Path) -> None:
    line = "step 1 | loss 2.31412 | lr 1.0e-4 | grad_norm 0.8123 | tokens/s 412.7 | mem 41.2GiB\n"
    peaks = []
    for n in (5_000, 20_000):
        p = tmp_path / f"{n}.log"
        p.write_text(line * n)
        tracemalloc.start()
        try:
            scan.explain_file(p, SIGS)
            peaks.append(tracemalloc.get_traced_memory()[1])
        finally:
            tracemalloc.stop()
    assert peaks[1] < 1_000_000 and peaks[1] < 2 * peaks[0] + 200_000


def test_bad_signature_files(tmp_path: Path) -> None:
    (tmp_path / "x.yaml").write_text("id: x-y\ntitle: t\npatterns:\n  - '(unclosed'\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"x\.yaml: "):
        signatures.load_dir(tmp_path)
    (tmp_path / "x.yaml").write_text("id: [oops\n", encoding="utf-8")
    with pytest.raises(CatalogError, match=r"x\.yaml:\d+: YAML error"):
        signatures.load_dir(tmp_path)
    with pytest.raises(UsageError):
        signatures.load_dir(tmp_path / "missing")
    with pytest.raises(UsageError):
        scan.explain_file(tmp_path / "missing.log", SIGS)


def test_regex_errors_are_reported() -> None:
    base = {"id": "bad-rx", "title": "t", "category": "memory", "cause": "c" * 10, "fix": "f" * 10}
    with pytest.raises(ValueError, match="bad regex"):
        signatures.Signature.model_validate({**base, "patterns": ["(unclosed"]})
    with pytest.raises(ValueError, match="backreferences"):
        signatures.Signature.model_validate({**base, "patterns": ["(?P<a>x)(?P=a)"]})


def test_as_dict_is_json_ready() -> None:
    import json

    r = scan.explain_file(LOGS / "llm_generate_fallback.log", SIGS)
    d = json.loads(json.dumps(r.as_dict()))
    assert d["lines"] == 11
    assert [s["id"] for s in d["signatures"]] == ["cpu-fallback"]
    assert d["signatures"][0]["count"] == 4
    assert {o["op"]: o["fallback"] for o in d["ops"]} == {
        "aten::isin.Tensor_Tensor_out": True, "aten::_logcumsumexp": True, "torchvision::nms": True}


def test_signature_ops_must_be_canonical() -> None:
    base = {"id": "x-y", "title": "t", "category": "memory", "patterns": ["x"], "cause": "c" * 10,
            "fix": "f" * 10}
    with pytest.raises(ValueError, match="not canonical; write 'aten::relu'"):
        signatures.Signature.model_validate({**base, "ops": ["relu"]})
