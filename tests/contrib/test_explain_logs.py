"""``explain`` reads the shapes of torch_npu / CANN failures: fields, codes, rules, encodings.

The logs in tests/fixtures/logs are written for these tests, each modelled on a public report
(named in the rule that explains it).
"""

from __future__ import annotations

import io
import json
import re
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from testpaths import TESTS

from opcheck.contrib.explain import codes, diagnose, facts, problem, reader, scan, signatures, sites
from opcheck.contrib.explain.reader import decoded, iter_records, sniff_encoding
from opcheck.contrib.explain.records import parse_record
from opcheck.core.errors import CatalogError

if TYPE_CHECKING:
    from click.testing import Result

LOGS = TESTS / "fixtures" / "logs"
SIGS = signatures.load_dir()
CODES = codes.load_codes()
RULES = codes.load_rules()
NEW_LOGS = ["flash_attention_mask.log", "bf16_cast_910a.log", "bf16_cast_310p.log",
            "aicore_exception.log", "unknown_code.log", "conv3d_compile.log"]
ALL_LOGS = sorted(p.name for p in LOGS.glob("*.log"))


class FakeFacts:
    """A catalog link and doc rows given by the test."""

    def __init__(self, links: dict[str, list[str]] | None = None,
                 docs: list[facts.DocCode] | None = None) -> None:
        self.links = links or {}
        self.docs = docs or []

    def aclnn_ops(self, function: str) -> list[str]:
        return self.links.get(function, [])

    def aclnn_codes(self, function: str, code: str) -> list[facts.DocCode]:
        return [d for d in self.docs if d.function in (function, "") and d.code == code]


def problems_of(path: Path | None = None, *, result: scan.ExplainResult | None = None,
                facts: facts.CatalogFacts | None = None) -> list[problem.Problem]:
    result = result if result is not None else scan.explain_file(path or LOGS / "x", SIGS)
    wa_ops = {"uint64-to-int64-dtype-cast": {"aten::add.Tensor", "aten::randint.low"},
              "inplace-zero-561103-driver": {"aten::zero_"}}
    return diagnose.diagnose(result, facts=facts, codes=CODES, rules=RULES, workaround_ops=wa_ops)


def only(problems: list[problem.Problem]) -> problem.Problem:
    assert len(problems) == 1, [p.as_dict() for p in problems]
    return problems[0]


# ------------------------------------------------------------------------------ shapes


@pytest.mark.parametrize(("line", "kind", "fields"), [
    ("NPU function error: call aclnnFlashAttentionScore failed, error code is 561103",
     "aclnn_call", {"function": "aclnnFlashAttentionScore", "code": "561103"}),
    ("RuntimeError: call aclnnCast failed, detail:EZ1001: self not implemented for DT_BFLOAT16",
     "aclnn_call", {"function": "aclnnCast", "code": ""}),
    ("RuntimeError: InnerRun:OpParamMaker.cpp:208 OPS function error: Conv3DTranspose, error code is 500002",
     "ops_error", {"op": "Conv3DTranspose", "code": "500002"}),
    ("NPU function error: c10_npu::acl::AclrtSynchronizeStreamWithTimeout(stream()), error code is 507015",
     "acl_call", {"function": "c10_npu::acl::AclrtSynchronizeStreamWithTimeout", "code": "507015"}),
    ("EZ9999[PID: 1] 2026-01-19-16:32:47.486.947 (EZ9999):  get unsupported atten_mask shape, the "
     "shape is [1, 6902].[FUNC:Analyze][FILE:x.cpp][LINE:1606]",
     "cann_error", {"code": "EZ9999", "message": "get unsupported atten_mask shape, the shape is [1, 6902]."}),
    ("E40021: 2024-09-09-06:13:16.170.001 Failed to compile Op [Conv3DTranspose1].",
     "cann_error", {"code": "E40021", "message": "Failed to compile Op [Conv3DTranspose1]."}),
    ("E60108: In op[conv3d_backprop_input], [prebuild failed]", "cann_error", {"code": "E60108"}),
    ("[ERROR] 2026-01-19-16:32:47 (PID:1, Device:0, RankID:0) ERR00100 PTA call acl api failed.",
     "pta_error", {"code": "ERR00100", "message": "PTA call acl api failed"}),
    ("[ERROR] ERR01100 OPS call acl api failed", "pta_error", {"code": "ERR01100"}),
    ("there is an aicore error exception, core id is 3", "device_exception", {"op": "aicore"}),
    ("fault kernel_name=UpsampleLinear1d_8732184_mix_aiv, fault kernel info ext=none", "kernel",
     {"kernel": "UpsampleLinear1d_8732184_mix_aiv"}),
    ("launch failed for FlashAttentionScore, errno:561103.", "kernel",
     {"kernel": "FlashAttentionScore", "code": "561103"}),
    ("[W] The operator 'aten::isin.Tensor_Tensor_out' is not currently supported on the NPU backend",
     "cpu_fallback", {"op": "aten::isin.Tensor_Tensor_out"}),
    ("RuntimeError: aclnnPromptFlashAttentionV3 not in libopapi.so, or libopapi.so not found.",
     "missing_symbol", {"function": "aclnnPromptFlashAttentionV3"}),
    ("ImportError: /x/libtorch_npu.so: undefined symbol: aclnnIsin", "missing_symbol",
     {"function": "aclnnIsin"}),
    ("Tensor self not implemented for DT_UINT64, should be in dtype support list [DT_BFLOAT16]",
     "dtype", {"dtype": "uint64"}),
    ("ValueError: the mask has the wrong rank", "exception", {"op": "ValueError"}),
])
def test_each_shape_gives_its_fields(line: str, kind: str, fields: dict[str, str]) -> None:
    got = [f for f in parse_record(line, 7) if f.kind == kind]
    assert len(got) == 1, parse_record(line, 7)
    f = got[0]
    assert f.line == 7
    for name, value in fields.items():
        assert getattr(f, name) == value, name


def test_a_code_named_twice_on_a_line_is_one_finding() -> None:
    line = "EZ9999[PID: 413] 2026-02-05-11:47:24.075.926 (EZ9999):  get unsupported atten_mask shape"
    assert [f.kind for f in parse_record(line, 1)] == ["cann_error"]


def test_the_rejected_dtype_is_not_one_of_the_supported_list() -> None:
    line = ("self not implemented for DT_BFLOAT16, should be in dtype support list "
            "[DT_FLOAT16,DT_UINT64,]")
    assert [f.dtype for f in parse_record(line, 1) if f.kind == "dtype"] == ["bfloat16"]


# ------------------------------------------------------------------------------ the cases


def test_flash_attention_mask_names_the_shape_rule_not_the_driver() -> None:
    p = only(problems_of(LOGS / "flash_attention_mask.log"))
    assert (p.anchor.kind, p.anchor.line) == ("aclnn_call", 7)
    assert p.functions == ["aclnnFlashAttentionScore"] and p.codes[0] == "561103"
    assert p.where == "/home/user/imagegen/generate.py:88"
    assert p.rule is not None and p.rule.id == "flash-attention-mask-shape"
    assert p.rule_text == ("atten_mask shape [1, 6902]: the FlashAttentionScore contract accepts "
                           "[B,N,Sq,Skv], [B,1,Sq,Skv], [1,1,Sq,Skv], [Sq,Skv]")
    assert str(p.rule.doc).endswith("aclnnFlashAttentionScore.md#L152")
    assert p.code is not None and p.code.known and p.code.name == "ACLNN_ERR_INNER_NULLPTR"
    assert p.workarounds == []
    assert "inplace-zero-561103-driver" not in json.dumps(p.as_dict())
    # every line of the failure belongs to it: ERR00100, both EZ9999 lines, the kernel lines
    assert sorted({f.line for f in p.findings}) == [7, 8, 9, 10, 14, 15]


@pytest.mark.parametrize(("log", "product"), [("bf16_cast_910a.log", "910A"),
                                              ("bf16_cast_310p.log", "310P3")])
def test_bf16_cast_on_910a_and_310p_gets_float16(log: str, product: str) -> None:
    result = scan.explain_file(LOGS / log, SIGS)
    p = only(problems_of(result=result))
    assert p.functions == ["aclnnCast"] and p.dtypes == ["bfloat16"]
    assert p.rule is not None and p.rule.id == "bfloat16-on-910a-310p"
    assert product in p.rule_text and "float16" in p.rule.fix
    assert p.workarounds == []
    text = json.dumps(p.as_dict())
    assert "uint64-to-int64" not in text and "unsigned" not in text
    # the signature that used to give the uint64 advice does not match a bfloat16 line
    assert "dtype-other-unsupported" not in result.signature_ids


def test_bf16_without_a_product_in_the_log_still_never_gets_uint64() -> None:
    lines = ["RuntimeError: call aclnnCast failed, detail:EZ1001: self not implemented for "
             "DT_BFLOAT16, should be in dtype support list [DT_FLOAT16,DT_UINT64,]."]
    p = only(problems_of(result=scan.explain(lines, SIGS)))
    assert p.rule is not None and p.rule.id == "bfloat16-rejected"
    assert p.rule_text == "dtype bfloat16 is not in the dtype list of aclnnCast"
    assert "float16" in p.rule.fix and p.workarounds == []


def test_aicore_exception_names_the_kernel_and_the_code() -> None:
    p = only(problems_of(LOGS / "aicore_exception.log"))
    assert p.anchor.kind == "acl_call" and p.anchor.line == 6
    assert p.code is not None and (p.code.code, p.code.known) == ("507015", True)
    assert p.code.name == "ACL_ERROR_RT_AICORE_EXCEPTION"
    assert p.kernels == ["UpsampleLinear1d_8732184_mix_aiv"]
    assert "device_exception" in {f.kind for f in p.findings}
    assert p.where == "/work/audio/infer.py:40"


def test_an_unknown_code_is_reported_unknown_with_what_was_parsed() -> None:
    p = only(problems_of(LOGS / "unknown_code.log"))
    assert p.code is not None and (p.code.code, p.code.known, p.code.family) == ("999123", False, "")
    assert p.code.meaning == "" and p.code.name == ""
    assert p.functions == ["aclnnMyCustomOp"]
    assert p.messages == ["custom layer rejected its tensor"]
    assert p.rule is None and p.workarounds == [] and p.signatures == []
    assert [(o.code, o.known, o.family) for o in p.other_codes] == [("EQ4321", False, "")]


def test_a_code_known_only_by_family_says_so() -> None:
    p = only(problems_of(result=scan.explain(
        ["NPU function error: call aclnnFoo failed, error code is 561999"], SIGS)))
    assert p.code is not None and not p.code.known and p.code.family.startswith("561xxx")


def test_compile_failure_reads_the_cann_lines() -> None:
    p = only(problems_of(LOGS / "conv3d_compile.log"))
    assert (p.anchor.kind, p.anchor.op, p.anchor.code) == ("ops_error", "Conv3DTranspose", "500002")
    assert p.code is not None and p.code.name == "ACL_ERROR_GE_FAILURE"
    others = {o.code: o for o in p.other_codes}
    assert others["E40021"].known and not others["E60108"].known
    assert others["E60108"].family.startswith("E6xxxx")
    assert p.messages[0].startswith("In op[conv3d_backprop_input]")


def test_rule_workarounds_need_the_op_as_well_as_the_trigger() -> None:
    log = ["RuntimeError: add_out_npu_nocheck NPU function error: call aclnnAdd failed, error "
           "code is 161002",
           "AclNN_Parameter_Error(EZ1001): Tensor self not implemented for DT_UINT64, should be "
           "in dtype support list [DT_FLOAT,DT_INT64,]."]
    result = scan.explain(log, SIGS)
    unlinked = only(problems_of(result=result, facts=FakeFacts()))
    assert unlinked.rule is not None and unlinked.rule.id == "uint64-rejected"
    assert unlinked.workarounds == []  # the trigger holds, but no op of the failure is the entry's
    linked = only(problems_of(result=result, facts=FakeFacts({"aclnnAdd": ["aten::add.Tensor"]})))
    assert linked.ops == ["aten::add.Tensor"]
    assert linked.workarounds == ["uint64-to-int64-dtype-cast"]


def test_the_function_rows_of_the_docs_are_attached() -> None:
    doc = facts.DocCode("aclnnCast", "161002", "ACLNN_ERR_PARAM_INVALID", "dtype", "self,out", 161,
                     "https://example.invalid/aclnnCast.md")
    shared = facts.DocCode("", "161002", "ACLNN_ERR_PARAM_INVALID", "dtype", "", 35, "u")
    p = only(problems_of(result=scan.explain(
        ["call aclnnCast failed, error code is 161002"], SIGS), facts=FakeFacts(docs=[doc, shared])))
    assert p.code is not None and p.code.documented == [doc] and p.code.known


# ------------------------------------------------------------------------------ once, with lines


@pytest.mark.parametrize("name", ALL_LOGS)
def test_every_finding_is_explained_once_with_its_line(name: str) -> None:
    result = scan.explain_file(LOGS / name, SIGS)
    problems = problems_of(result=result)
    seen: list[tuple[str, ...]] = []
    for p in problems:
        assert p.anchor.line > 0
        seen += [f.key for f in p.findings]
    assert len(seen) == len(set(seen))
    claiming = {f.key for f in result.findings.values() if f.kind in scan.CLAIMING}
    assert claiming <= set(seen)
    # a signature is shown on its own only for lines no failure explains
    for h in result.hits.values():
        assert 0 <= h.standalone <= h.count


# ------------------------------------------------------------------------------ encodings, sizes


def _fa_bytes() -> bytes:
    return (LOGS / "flash_attention_mask.log").read_bytes()


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be", "utf-8-sig"])
def test_utf16_and_bom_logs_read_like_utf8(tmp_path: Path, encoding: str) -> None:
    p = tmp_path / "powershell.log"
    p.write_bytes(_fa_bytes().decode("utf-8").encode(encoding))
    got = only(problems_of(p))
    want = only(problems_of(LOGS / "flash_attention_mask.log"))
    assert got.as_dict() == want.as_dict()


def test_sniff_encoding() -> None:
    assert sniff_encoding("x".encode("utf-16")) == "utf-16"
    assert sniff_encoding("EZ9999: x".encode("utf-16-le")) == "utf-16-le"
    assert sniff_encoding("EZ9999: x".encode("utf-16-be")) == "utf-16-be"
    assert sniff_encoding(b"\xef\xbb\xbfEZ") == "utf-8-sig"
    assert sniff_encoding("步骤 EZ9999".encode()) == "utf-8"
    assert sniff_encoding(b"") == "utf-8"


def test_a_single_line_log_is_split_on_record_boundaries(tmp_path: Path) -> None:
    lines = _fa_bytes().decode().splitlines()
    one = " ".join(f"[rank0]:{line}" for line in lines) + " " * 20_000  # no newline at all
    p = tmp_path / "one.log"
    p.write_text(one, encoding="utf-8")
    result = scan.explain_file(p, SIGS)
    assert result.lines == 1
    got = only(problems_of(result=result))
    assert got.rule is not None and got.rule.id == "flash-attention-mask-shape"
    assert got.rule_text.startswith("atten_mask shape [1, 6902]")
    assert got.where == "/home/user/imagegen/generate.py:88"


def test_iter_records_splits_only_long_lines() -> None:
    data = b"[rank0]:a [rank0]:b\n" + b"[rank1]:c " * 10
    got = list(iter_records(io.BytesIO(data), chunk_size=4, max_line=40))
    assert got[0] == (1, b"[rank0]:a [rank0]:b")
    assert [r for _, r in got[1:]] == [b"[rank1]:c "] * 10
    assert {n for n, _ in got[1:]} == {2}
    # a stretch with no record start is cut every max_line bytes, nothing lost
    got2 = list(iter_records(io.BytesIO(b"y" * 100), chunk_size=7, max_line=40))
    assert [len(r) for _, r in got2] == [40, 40, 20]


class _Generated:
    """A log of ``size`` bytes on one line, made as it is read (never whole in memory)."""

    def __init__(self, size: int) -> None:
        self.left = size
        self.record = (b"[rank3]:[E205 11:47:24.695 compiler_depend.ts:444] step ok loss 0.25 "
                       b"lr 1e-4 ")

    def read(self, size: int = -1) -> bytes:
        n = min(self.left, size if size > 0 else 1 << 16)
        self.left -= n
        return (self.record * (n // len(self.record) + 1))[:n]


def test_a_long_single_line_log_runs_in_bounded_memory() -> None:
    tracemalloc.start()
    try:
        result = scan.explain(reader.log_records(_Generated(6_000_000)), SIGS)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.lines == 1
    assert peak < 4_000_000


def test_progress_is_reported(tmp_path: Path) -> None:
    p = tmp_path / "big.log"
    p.write_bytes(b"step ok\n" * 400_000)
    seen: list[int] = []
    scan.explain_file(p, SIGS, progress=seen.append, progress_step=1 << 20)
    assert len(seen) >= 3 and seen == sorted(seen) and seen[-1] <= p.stat().st_size


def test_decoded_streams_in_chunks() -> None:
    raw = ("EZ9999: 步骤\n" * 5000).encode("utf-16")
    out = decoded(io.BytesIO(raw))
    chunks = iter(lambda: out.read(1000), b"")
    assert b"".join(chunks).decode() == "EZ9999: 步骤\n" * 5000


# ------------------------------------------------------------------------------ data files


def test_shipped_codes_and_rules_load() -> None:
    assert CODES.lookup("561103") is not None and CODES.lookup("561103")[0].code == "561103"
    assert CODES.lookup("561999")[0].code == "561xxx"  # type: ignore[index]
    assert CODES.lookup("EZ1234")[0].code == "EZxxxx"  # type: ignore[index]
    assert CODES.lookup("999123") is None and CODES.lookup("EQ4321") is None
    ids = [r.id for r in RULES]
    assert "flash-attention-mask-shape" in ids and "bfloat16-on-910a-310p" in ids
    # the product-specific rule is tried before the general one
    assert ids.index("bfloat16-on-910a-310p") < ids.index("bfloat16-rejected")
    from opcheck.contrib import workarounds as wa
    entries = {e.id for e in wa.load_dir()}
    assert all(set(r.workarounds) <= entries for r in RULES)


def test_bad_rule_and_code_files(tmp_path: Path) -> None:
    (tmp_path / "r.yaml").write_text(
        "id: r-x\ntitle: t\nwhen: {}\nrule: 'rrrrrrrrrrrr'\ncause: cccccccccccc\nfix: ffffffffffff\n")
    with pytest.raises(CatalogError, match=r"r\.yaml: when: a rule needs at least one trigger"):
        codes.load_rules(tmp_path)
    (tmp_path / "r.yaml").unlink()
    (tmp_path / "c.yaml").write_text(
        "source: https://example.invalid/x\ncodes:\n- code: 'oops'\n  meaning: mmmmmmmmmmmm\n")
    with pytest.raises(CatalogError, match=r"c\.yaml: codes\.0\.code"):
        codes.load_codes(tmp_path)


# ------------------------------------------------------------------------------ the command


_OP = re.compile(r"\b(?:aten|npu|torchvision|prims|c10d|_c10d_functional)::[A-Za-z_][\w.]*")


@pytest.mark.parametrize("name", ALL_LOGS)
def test_every_op_named_is_in_the_log_or_linked_from_it(
        name: str, cli: Callable[..., Result], bundled_catalog: Path) -> None:
    log = LOGS / name
    text = log.read_text(encoding="utf-8")
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    cf = facts.catalog_facts(Catalog.load(open_catalog(bundled_catalog)))
    functions = set(re.findall(r"aclnn[A-Z]\w*", text))
    linked = {op for fn in functions for op in cf.aclnn_ops(fn)}
    # kernel and op type names in the log reach ATen ops through the engine facts (the aclnn
    # functions that launch the op type)
    from opcheck.contrib.explain import records as logs

    types = {sites.op_type_of(next(g for g in m.group("kernel", "kernel2", "kernel3") if g))
             for m in logs.KERNEL_NAME.finditer(text)}
    types |= {m["op"] for rx in (logs.NO_BINARY, logs.SOC_OPTYPE) for m in rx.finditer(text)}
    types |= set(re.findall(r"\bOptype \[(\w+)\]", text))  # EZ3002: a kernel rejecting a dtype
    types |= {m["op"] for m in logs.ACLOP_WORKING.finditer(text)}  # refused under capture
    types |= {sites.op_type_of((m["op"] or m["op2"] or "").strip(" ,").removeprefix("trans_"))
              for m in logs.COMPILE_FAILED.finditer(text)}  # a TBE compile failure's op
    types |= {m["op"] for m in logs.OPTYPE_NAMED.finditer(text)}  # "optype: [X]"
    for t in types:
        o = cf.op_type(t)
        linked |= set(o.ops)
        if o.acl_op is not None:  # the ops whose acl_op kernels run it
            linked |= {*o.acl_op.ops, *o.acl_op.through, *o.acl_op.aicpu}
    for fmt in ("json", "table"):
        r = cli("explain", str(log), "--catalog", str(bundled_catalog), "--format", fmt)
        assert r.exit_code == 0, r.output
        for op in set(_OP.findall(r.output)):
            assert op in text or op in linked, (fmt, op)
        for code in set(re.findall(r"\b(?:E[0-9A-Z]\d{4}|ERR\d{5}|[1-5]\d{5})\b", r.output)):
            assert code in text, (fmt, code)


def _json(cli: Callable[..., Result], catalog: Path, log: Path) -> dict[str, Any]:
    r = cli("explain", str(log), "--catalog", str(catalog), "--format", "json")
    assert r.exit_code == 0, r.output
    doc: dict[str, Any] = json.loads(r.output)
    return doc


def test_json_keeps_every_parsed_field(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    doc = _json(cli, bundled_catalog, LOGS / "flash_attention_mask.log")
    call = next(f for f in doc["findings"] if f["kind"] == "aclnn_call")
    assert call == {**call, "line": 7, "code": "561103", "function": "aclnnFlashAttentionScore",
                    "where": "/home/user/imagegen/generate.py:88"}
    ez = [f for f in doc["findings"] if f["kind"] == "cann_error"]
    assert [(f["line"], f["code"]) for f in ez] == [(9, "EZ9999"), (10, "EZ9999")]
    assert ez[1]["message"].startswith("get unsupported atten_mask shape, the shape is [1, 6902]")
    (prob,) = doc["problems"]
    assert prob["rule"]["id"] == "flash-attention-mask-shape"
    assert prob["code"]["name"] == "ACLNN_ERR_INNER_NULLPTR"
    assert "aten::zero_" not in json.dumps(doc)
    conv = _json(cli, bundled_catalog, LOGS / "conv3d_compile.log")
    assert {"kind": "ops_error", "op": "Conv3DTranspose", "code": "500002", "line": 4}.items() \
        <= conv["findings"][0].items()


def test_the_catalog_link_names_the_aten_ops(cli: Callable[..., Result], bundled_catalog: Path,
                                             tmp_path: Path) -> None:
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    cf = facts.catalog_facts(Catalog.load(open_catalog(bundled_catalog)))
    ops = cf.aclnn_ops("aclnnSilu")
    assert "aten::silu" in ops
    log = tmp_path / "silu.log"
    log.write_text("RuntimeError: NPU function error: call aclnnSilu failed, error code is 161002\n")
    doc = _json(cli, bundled_catalog, log)
    (prob,) = doc["problems"]
    assert prob["ops"] == ops
    assert {o["op"]: o.get("via") for o in doc["op_status"]}["aten::silu"] == "aclnnSilu"
    # the synced docs: aclnnSilu's own 161002 rows, with their trigger kinds and lines
    documented = prob["code"]["documented"]
    assert documented and all(d["function"] == "aclnnSilu" and d["line"] > 0 for d in documented)
    assert any("dtype" in d["triggers"] for d in documented)


def test_nothing_recognised_says_what_looked_like_errors(cli: Callable[..., Result],
                                                       bundled_catalog: Path, tmp_path: Path) -> None:
    log = tmp_path / "odd.log"
    log.write_text("epoch 1\nsomething failed badly in stage 2\nepoch 2\nfatal: giving up\n")
    r = cli("explain", str(log), "--catalog", str(bundled_catalog))
    assert r.exit_code == 0, r.output
    assert "no known problem in 4 lines; 2 line(s) look like errors, the first (line 2): " \
           "something failed badly in stage 2" in " ".join(r.output.split())


def test_fallback_workarounds_only_for_ops_in_the_log(cli: Callable[..., Result],
                                                      bundled_catalog: Path, tmp_path: Path) -> None:
    log = tmp_path / "fb.log"
    log.write_text("[W] Warning: CAUTION: The operator 'aten::_logcumsumexp' is not currently "
                   "supported on the NPU backend and will fall back to run on the CPU.\n")
    r = cli("explain", str(log), "--catalog", str(bundled_catalog), "--torch-npu", "2.1.0.post4")
    assert r.exit_code == 0, r.output
    assert "logcumsumexp-rewrite" in r.output
    for other in ("isin-tensor-tensor-rewrite", "torchvision-nms-rewrite", "linalg-lstsq-rewrite"):
        assert other not in r.output



def test_the_documented_contract_says_where_the_dtype_is_taken(
        cli: Callable[..., Result], bundled_catalog: Path, tmp_path: Path) -> None:
    """A uint64 add (Ascend/pytorch#158): the aclnnAdds page lists no UINT64 on any product."""
    log = tmp_path / "uint64.log"
    log.write_text(
        "RuntimeError: add_out_npu_nocheck:third_party/op-plugin/op_plugin/ops/opapi/"
        "AddKernelNpuOpApi.cpp:52 NPU function error: call aclnnAdds failed, error code is 161002\n"
        "[PID: 1] 2026-08-03-15:41:28.117.010 AclNN_Parameter_Error(EZ1001): Tensor self not "
        "implemented for DT_UINT64, should be in dtype support list [DT_FLOAT,DT_INT32,].\n",
        encoding="utf-8")
    doc = _json(cli, bundled_catalog, log)
    (prob,) = doc["problems"]
    [adds] = [c for c in prob["contract"] if c["function"] == "aclnnAdds"]
    assert adds["dtype"] == "UINT64" and not adds["accepts"]
    assert {"910B", "910C"} <= set(adds["rejects"]) and "/aclnnAdds.md#L" in adds["url"]
    cast = _json(cli, bundled_catalog, LOGS / "bf16_cast_910a.log")
    [c] = [c for p in cast["problems"] for c in p["contract"] if c["function"] == "aclnnCast"]
    assert (c["dtype"], c["rejects"][:2]) == ("BFLOAT16", ["910A", "310P"])
    assert "910B" in c["accepts"]
