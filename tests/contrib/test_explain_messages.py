"""``explain`` places log lines on the line of code that printed them (the message index).

The index here is built from real upstream sources (``../shared/upstream``) with the sync's own
scraper and grouping, a few files per class; engine and binary facts come from the bundled
catalog. Each log line is verbatim from the public report named next to it; where no public
report of a class was found, the line is the message the cited source line prints, filled in
as CANN fills it (said so in the test).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.contrib.explain import diagnose, facts, problem, scan, signatures
from opcheck.contrib.explain.templates import MessageIndex
from opcheck.db.data import MessageTemplateRec
from opcheck.db.messages import MessageRow
from opcheck.scrapers import messages as ms
from opcheck.scrapers.rows import Origin
from opcheck.sync.messages import MessageSites, _anchor, _Group

pytestmark = pytest.mark.upstream

SIGS = signatures.load_dir()
HICANN = "github/hicann/ops-math/v9.1.0"
PIN = "github/Ascend/op-plugin/8b9c8534fa41eff367a41c155843daa530ab3a08"
TAG = "github/Ascend/pytorch/v26.1.0-pytorch2.7.1"
FILES = [
    (HICANN, "conversion/view_copy/op_api/aclnn_copy.cpp", "cann", "ops-math"),
    (HICANN, "math/arg_max_v2/op_api/aclnn_argmax.cpp", "cann", "ops-math"),
    (HICANN, "math/cast/op_api/aclnn_cast.cpp", "cann", "ops-math"),
    (HICANN, "math/add/op_api/aclnn_add.cpp", "cann", "ops-math"),
    (PIN, "torchnpugen/gen.py", "codegen", "op-plugin"),
    (PIN, "op_plugin/ops/opapi/AdaptiveAvgPool2dKernelNpuOpApi.cpp", "op_plugin", "op-plugin"),
    (TAG, "torch_npu/csrc/core/npu/NPUException.h", "torch_npu", "pytorch"),
]


class IndexFacts:
    """The message index of FILES, with the bundled catalog's engine facts and op links."""

    def __init__(self, rows: list[MessageRow], catalog: facts._SqlFacts) -> None:
        self.rows = rows
        self.catalog = catalog

    def message_sites(self, template: str) -> list[MessageRow]:
        return [r for r in self.rows if r.template == template]

    def op_type(self, op_type: str) -> facts.OpTypeFacts:
        return self.catalog.op_type(op_type)

    def aclnn_ops(self, function: str) -> list[str]:
        return self.catalog.aclnn_ops(function)

    def ops_reaching(self, function: str) -> list[str]:
        return self.catalog.ops_reaching(function)

    def aclnn_codes(self, function: str, code: str) -> list[facts.DocCode]:
        return self.catalog.aclnn_codes(function, code)


@pytest.fixture(scope="module")
def index(upstream: Path, bundled_catalog: Path) -> tuple[MessageIndex, IndexFacts]:
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    groups: dict[tuple[str, ...], _Group] = {}
    for root, rel, kind, library in FILES:
        parsed = ms.parse_source((upstream / root / rel).read_text(encoding="utf-8"),
                                 origin=Origin(f"{root}/{rel}"))
        for s in parsed.sites:
            MessageSites._add(groups, kind, library, rel, s, parsed.aclnn, "9.1.0", (9, 1), 0)
    recs: list[MessageTemplateRec] = [MessageSites._finish(g, 1) for g in groups.values()]
    _anchor(recs)
    base = {"ops-math": "https://github.com/hicann/ops-math/blob/v9.1.0/",
            "op-plugin": f"https://github.com/Ascend/op-plugin/blob/{PIN.rsplit('/', 1)[1]}/",
            "pytorch": "https://github.com/Ascend/pytorch/blob/v26.1.0-pytorch2.7.1/"}
    rows = [MessageRow(i, r.template, r.kind, r.library, r.macro, r.level, r.function, r.entry,
                       r.condition, r.lists, r.code, r.literal, r.path, r.line, r.versions,
                       r.newest, base[r.library]) for i, r in enumerate(recs)]
    idx = MessageIndex([(r.template, r.anchor, r.literal) for r in recs if r.anchor])
    cat = facts.catalog_facts(Catalog.load(open_catalog(bundled_catalog)))
    return idx, IndexFacts(rows, cat)


def problems(index: tuple[MessageIndex, IndexFacts], log: str) -> list[problem.Problem]:
    idx, facts = index
    result = scan.explain(log.strip("\n").splitlines(), SIGS, messages=idx)
    return diagnose.diagnose(result, facts=facts, messages=facts)


def the(ps: list[problem.Problem], pred: object = None) -> problem.Problem:
    assert len(ps) == 1, [p.as_dict() for p in ps]
    return ps[0]


def test_rank_limit_is_placed_on_its_check_with_the_limit_to_respect(index: object) -> None:
    # https://github.com/sgl-project/sglang/issues/14159 (910B, CANN 8.3.RC1)
    p = the(problems(index, """
[2025-11-30 05:12:25] Error in request: copy_d2d_baseformat_opapi:build/CMakeFiles/torch_npu.dir/compiler_depend.ts:88 NPU function error: call aclnnInplaceCopy failed, error code is 161002
[ERROR] 2025-11-30-05:12:25 (PID:4346, Device:0, RankID:-1) ERR00100 PTA call acl api failed.
[PID: 4346] 2025-11-30-05:12:25.730.116 AclNN_Parameter_Error(EZ1001): The self tensor cannot be larger than 8 dimensions.
"""))  # type: ignore[arg-type]
    site = next(s for s in p.sites if s.template.startswith("The self tensor"))
    r = site.rows[0]
    assert (r.path, r.function) == ("conversion/view_copy/op_api/aclnn_copy.cpp", "CheckShape")
    assert "aclnnInplaceCopy" in r.entries and "aclnnInplaceCopy" in site.narrowed_by
    assert r.url.endswith(f"aclnn_copy.cpp#L{r.line}") and r.line > 0
    assert site.why.startswith("rank of self >")
    assert any("at most 8 dimensions" in c for c in p.changes)


def test_empty_dtype_support_list_says_no_cast_helps(index: object) -> None:
    # No public report of an empty list was found: the line is what aclnn_argmax.cpp's
    # OP_CHECK_DTYPE_NOT_SUPPORT prints when GetSupportDtypeList returns
    # EMPTY_DTYPE_SUPPORT_LIST (an architecture none of its lists covers).
    p = the(problems(index, """
RuntimeError: call aclnnArgMax failed, detail:EZ1001: [PID: 2211] 2025-03-02-10:01:02.123.456 self not implemented for DT_FLOAT, should be in dtype support list [].
"""))  # type: ignore[arg-type]
    site = p.sites[0]
    assert site.rows[0].path == "math/arg_max_v2/op_api/aclnn_argmax.cpp"
    assert "EMPTY_DTYPE_SUPPORT_LIST:" in site.rows[0].lists.split(";") or \
        any(x == "EMPTY_DTYPE_SUPPORT_LIST:" for x in site.rows[0].lists.split(";"))
    assert any(c.startswith("none: the support list this SoC selected is empty") for c in p.changes)
    assert not any(c.startswith("cast ") for c in p.changes)
    assert "aten::argmax" in p.ops  # op-plugin's link to aclnnArgMax


def test_dtype_rejection_with_a_list_says_what_to_cast_to(index: object) -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/4165 (aclnnCast, bfloat16)
    p = the(problems(index, """
RuntimeError: call aclnnCast failed, detail:EZ1001: 2024-06-10-00:01:59.325.061 self not implemented for DT_BFLOAT16, should be in dtype support list [DT_FLOAT16,DT_FLOAT,DT_DOUBLE,DT_INT8,DT_UINT8,DT_INT16,DT_INT32,DT_INT64,DT_UINT16,DT_UINT32,DT_UINT64,DT_BOOL,DT_COMPLEX64,DT_COMPLEX128,].
"""))  # type: ignore[arg-type]
    site = p.sites[0]
    assert "aclnnCast" in site.rows[0].entries
    assert site.rows[0].path == "math/cast/op_api/aclnn_cast.cpp"
    assert any(c.startswith("cast self to one of DT_FLOAT16, DT_FLOAT") for c in p.changes)


def test_aicore_exception_kernel_is_tied_to_its_op_type_engine_and_aten_ops(index: object) -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/4836 (910B, vector core exception)
    p = the(problems(index, """
        Kernel task happen error, retCode=0x31, [vector core exception].[FUNC:PreCheckTaskErr][FILE:davinic_kernel_task.cc][LINE:1201]
        Aicore kernel execute failed, device_id=2, stream_id=2, report_stream_id=2, task_id=57, flip_num=0, fault kernel_name=Maximum_ee98c6628030785f610b924ab1557b31_high_performance_223000000, fault kernel info ext=none, program id=34, hash=9727548023731030879.[FUNC:GetError][FILE:stream.cc][LINE:1082]
"""))  # type: ignore[arg-type]
    o = next(o for o in p.op_types if o.op_type == "Maximum")
    assert "aicore" in o.engines and any(fn.startswith("aclnnMax") for fn in o.engines["aicore"])
    assert "aten::maximum" in o.ops


def test_missing_binary_names_the_op_type_and_the_socs_that_have_it(index: object) -> None:
    # No issue in the corpus quotes it; the two lines are the shape public notes quote
    # ("Op Slice does not has any binary" / "launch failed for Slice, errno:561000").
    p = the(problems(index, """
RuntimeError: Op Slice does not has any binary.
launch failed for Slice, errno:561000.
"""))  # type: ignore[arg-type]
    o = next(o for o in p.op_types if o.op_type == "Slice")
    assert o.socs and o.engines
    assert any(c.startswith("install (or repair) the CANN kernels package") and "Slice" in c
               for c in p.changes)
    assert not any("read the lines before" in c for c in p.changes)


def test_soc_rejection_says_the_installed_kernels_lack_the_op_there(index: object) -> None:
    # https://github.com/gpustack/gpustack/issues/1226 (310P3)
    p = the(problems(index, """
EZ9999: Inner Error!
EZ9999  Get regInfo failed, The binary_info_config.json of socVersion [ascend310p] does not support opType [RotaryPositionEmbedding].[FUNC:GetBinFromCache][FILE:op_bin_info_utils.cc][LINE:123]
"""))  # type: ignore[arg-type]
    o = next(o for o in p.op_types if o.op_type == "RotaryPositionEmbedding")
    assert "ascend310p" not in o.socs and "ascend910b" in o.socs
    assert any(c.startswith("RotaryPositionEmbedding has no kernel for ascend310p") for c in p.changes)


def test_internal_format_rejection_is_placed_on_the_codegen_template(index: object) -> None:
    # No public report found: the line is what torchnpugen/gen.py's generated wrapper raises
    # for an op whose input is in a private format on an aclnn-only device (op filled in).
    p = the(problems(index, """
RuntimeError: Current device only support aclnn operator, and current operator gather do not support internal format.
"""))  # type: ignore[arg-type]
    site = p.sites[0]
    assert site.rows[0].kind == "codegen" and site.rows[0].path == "torchnpugen/gen.py"
    assert any("allow_internal_format = False" in c for c in p.changes)


def test_torch_check_of_an_op_plugin_kernel_is_placed_with_its_condition(index: object) -> None:
    # the TORCH_CHECK of op-plugin's adaptive_avg_pool2d (streamed message + PTA error suffix)
    p = the(problems(index, """
RuntimeError: adaptive_avg_pool2d: output size must be 2.
[ERROR] 2024-06-01-10:00:00 (PID:1, Device:0, RankID:-1) ERR00001 PTA invalid parameter
"""))  # type: ignore[arg-type]
    site = p.sites[0]
    assert site.rows[0].kind == "op_plugin" and site.rows[0].function.startswith("adaptive_avg_pool2d")
    assert site.why == "not ((output_size.size() == 2))"


def test_tbe_compile_failure_names_op_type_and_dtype(index: object) -> None:
    # https://github.com/Ascend/pytorch/issues/148 (910B, CANN 8.0.0)
    p = the(problems(index, """
  E90003: Compile operator failed
  bfloat16 of tbe.dsl.transdata is not supported.
  optype: [TransData]
"""))  # type: ignore[arg-type]
    assert p.anchor.kind == "compile" and p.dtypes == ["bfloat16"]
    assert [o.op_type for o in p.op_types] == ["TransData"]


def test_an_unindexed_message_says_what_was_parsed_and_no_fix(index: object) -> None:
    p = the(problems(index, """
[PID: 4346] 2025-11-30-05:12:25.730.116 AclNN_Parameter_Error(EZ1001): The frobnicator of self must be purple.
"""))  # type: ignore[arg-type]
    assert not p.sites and not p.changes
    assert p.notes and "message not in the index" in p.notes[0] and "frobnicator" in p.notes[0]


def test_installed_cann_outranks_newer_docs(cli: object, bundled_catalog: Path,
                                           tmp_path: Path) -> None:
    # https://github.com/hiyouga/LlamaFactory/issues/4165: aclnnCast rejected bfloat16 on the
    # user's CANN; the catalog's aclnnCast docs list bfloat16 on newer products/versions
    log = tmp_path / "cast.log"
    log.write_text("RuntimeError: call aclnnCast failed, detail:EZ1001: 2024-06-10-00:01:59.325.061 "
                   "self not implemented for DT_BFLOAT16, should be in dtype support list "
                   "[DT_FLOAT16,DT_FLOAT,DT_DOUBLE,DT_INT8,DT_UINT8,DT_INT16,DT_INT32,DT_INT64,"
                   "DT_BOOL,DT_COMPLEX64,DT_COMPLEX128,].\n", encoding="utf-8")
    import json

    r = cli("explain", str(log), "--catalog", str(bundled_catalog), "--format", "json")  # type: ignore[operator]
    assert r.exit_code == 0, r.output
    p = json.loads(r.output)["problems"][0]
    notes = [n for n in p["notes"] if "the log line wins" in n]
    assert notes and "BFLOAT16" in notes[0]
    assert any("CANN" in c["basis"] for c in p["contract"])
