"""CANN op_api sources → launches per aclnn function with engine and routing condition, and
the decision of one call on them (checker.engine.decide), on the real sources."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

import pytest

from opcheck.checker.engine import call_of, decide
from opcheck.core.oplist import Signature
from opcheck.scrapers import cann_engine as ce
from opcheck.scrapers.cann_binaries import parse_binary_list, parse_opdef, soc_of_path
from opcheck.scrapers.rows import Origin

pytestmark = pytest.mark.upstream

NN = "github/hicann/ops-nn/v9.1.0"
IMPL = "index/index_put_v2/op_api/aclnn_index_put_impl.cpp"


@cache
def _sites(root: Path, under: str = "") -> list[ce.EngineSite]:
    files = []
    for p in sorted((root / under).rglob("*.cpp")):
        if "/op_api/" not in str(p):
            continue
        rel = str(p.relative_to(root))
        files.append((rel, ce.parse_source(p.read_text(encoding="utf-8", errors="replace"),
                                           origin=Origin(rel))))
    return ce.analyze(files)


def _by(sites: list[ce.EngineSite], fn: str) -> list[ce.EngineSite]:
    return [s for s in sites if s.aclnn == fn]


def _index_sites(upstream: Path) -> list[ce.EngineSite]:
    return _by(_sites(upstream / NN, "index"), "aclnnIndexPutImpl")


def _line_in_function(text: str, function: str, needle: str) -> int:
    """The line of the first ``needle`` after the definition of ``function`` (read directly)."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines)
                 if re.match(rf"static bool {function}\(", ln.strip()))
    return next(i + 1 for i in range(start, len(lines)) if needle in lines[i])


def test_index_put_float64_on_910b_runs_on_the_ai_cpu(upstream: Path) -> None:
    sites = _index_sites(upstream)
    call, steps = call_of(Signature({"self": "float64", "indices": "int64",
                                     "values": "float64"}), "ascend910b", "aclnnIndexPutImpl")
    d = decide("aclnnIndexPutImpl", sites, call)
    assert d.engine == "aicpu" and steps == []
    assert "IndexPut" in d.aicpu_ops
    text = (upstream / NN / IMPL).read_text(encoding="utf-8")
    # IsAiCPUSupport's double/int16 test: the routing line the finding must cite
    line = _line_in_function(text, "IsAiCPUSupport", "DT_DOUBLE")
    assert f"{IMPL}:{line}" in [c.where for c in d.because]
    # the launch is the AI CPU one of the level-0 IndexPut
    launch = d.launch[0].where
    path, _, ln = launch.rpartition(":")
    src = (upstream / NN / path).read_text(encoding="utf-8").splitlines()
    assert "ADD_TO_LAUNCHER_LIST_AICPU" in src[int(ln) - 1]


def test_index_put_float32_on_910b_runs_on_the_ai_core(upstream: Path) -> None:
    sites = _index_sites(upstream)
    call, _ = call_of(Signature({"self": "float32", "indices": "int64", "values": "float32"}),
                      "ascend910b", "aclnnIndexPutImpl")
    d = decide("aclnnIndexPutImpl", sites, call)
    assert d.engine == "aicore"
    # only shape and size thresholds can still send it to the AI CPU, each with its line
    assert d.when and all(re.search(r"\.cpp:\d+$", c.where) for c in d.when)


def test_boolean_mask_is_a_nonzero_then_the_int64_routing(upstream: Path) -> None:
    sites = _index_sites(upstream)
    for dtype, want in (("float32", "aicore"), ("float64", "aicpu")):
        call, steps = call_of(Signature({"self": dtype, "indices": "bool", "values": dtype}),
                              "ascend910b", "aclnnIndexPutImpl")
        assert steps == ["nonzero"]
        assert call.dtypes["indice"] == ("int64",)
        assert decide("aclnnIndexPutImpl", sites, call).engine == want


def test_index_put_on_310p(upstream: Path) -> None:
    sites = _index_sites(upstream)
    call, _ = call_of(Signature({"self": "float64", "indices": "int64", "values": "float64"}),
                      "ascend310p", "aclnnIndexPutImpl")
    assert decide("aclnnIndexPutImpl", sites, call).engine == "aicpu"
    # float32 on 310P: IsAiCPUSupport's count/position tests decide, which a trace lacks
    call, _ = call_of(Signature({"self": "float32", "indices": "int64", "values": "float32"}),
                      "ascend310p", "aclnnIndexPutImpl")
    d = decide("aclnnIndexPutImpl", sites, call)
    assert d.engine == "maybe_aicpu" and d.when
    # the 910B-only sort path is not reachable there
    assert "IndexPutWithSort" not in decide("aclnnIndexPutImpl", sites, call).aicore_ops


def test_formulas_round_trip_through_json(upstream: Path) -> None:
    for s in _index_sites(upstream):
        assert ce.formula_loads(ce.formula_dumps(s.condition)) == s.condition


LOG_L0 = """
namespace l0op {
static const std::initializer_list<op::DataType> AICORE_LIST = {
    op::DataType::DT_FLOAT, op::DataType::DT_FLOAT16};
static bool IsAiCoreSupport(const aclTensor *self) {
  if (GetCurrentPlatformInfo().GetSocVersion() == SocVersion::ASCEND310P) {
    return false;
  }
  return CheckType(self->GetDataType(), AICORE_LIST);
}
static const aclTensor *LogAiCore(const aclTensor *self, aclTensor *out, aclOpExecutor *executor) {
  auto ret = ADD_TO_LAUNCHER_LIST_AICORE(Log, OP_INPUT(self), OP_OUTPUT(out));
  return out;
}
static const aclTensor *LogAiCpu(const aclTensor *self, aclTensor *out, aclOpExecutor *executor) {
  auto ret = ADD_TO_LAUNCHER_LIST_AICPU(Log, OP_INPUT(self), OP_OUTPUT(out));
  return out;
}
const aclTensor *Log(const aclTensor *x, aclOpExecutor *executor) {
  if (IsAiCoreSupport(x)) {
    return LogAiCore(x, nullptr, executor);
  } else {
    return LogAiCpu(x, nullptr, executor);
  }
}
}
"""
LOG_ENTRY = """
extern "C" {
aclnnStatus aclnnLogGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *ws,
                                     aclOpExecutor **executor) {
  if (self->IsEmpty()) {
    return ACLNN_SUCCESS;
  }
  auto r = l0op::Log(self, executor);
  return ACLNN_SUCCESS;
}
}
"""


@pytest.mark.parametrize(("soc", "dtype", "want"), [
    ("ascend910b", "float32", "aicore"), ("ascend910b", "float64", "aicpu"),
    ("ascend310p", "float32", "aicpu"), ("ascend910b", "int64", "aicpu"),
])
def test_level0_dtype_and_soc_routing(soc: str, dtype: str, want: str) -> None:
    sites = ce.sites_of({"log.cpp": LOG_L0, "aclnn_log.cpp": LOG_ENTRY})
    assert {(s.op_type, s.engine) for s in sites} == {("Log", "aicore"), ("Log", "aicpu")}
    d = decide("aclnnLog", sites, ce.Call(soc, {"self": (dtype,)}))
    assert d.engine == want
    if want == "aicpu":
        assert d.launch[0].where == "log.cpp:16"


def test_unparsed_condition_is_kept_with_its_line() -> None:
    entry = LOG_ENTRY.replace("auto r = l0op::Log(self, executor);",
                              "if (self->GetViewShape().GetDimNum() > 8 && weird(self)) {\n"
                              "    auto r = l0op::Log(self, executor);\n  }")
    sites = ce.sites_of({"log.cpp": LOG_L0, "aclnn_log.cpp": entry})
    d = decide("aclnnLog", sites, ce.Call("ascend910b", {"self": ("float64",)}))
    assert d.engine == "maybe_aicpu"
    assert any(c.where == "aclnn_log.cpp:8" and "weird" in c.text for c in d.when)


def test_binary_lists_and_opdefs(upstream: Path) -> None:
    root = upstream / NN
    paths = sorted(root.rglob("op_host/config/*/*_binary.json"))
    assert len(paths) > 300
    socs = set()
    for p in paths[:400]:
        b = parse_binary_list(p.read_text(encoding="utf-8"), origin=Origin(str(p)))
        assert b.op_type and b.binaries >= 0
        socs.add(b.soc)
    assert {"ascend910b", "ascend310p"} <= socs
    assert soc_of_path(str(paths[0])) == paths[0].parent.name
    defs = [r for p in sorted(root.rglob("op_host/*_def.cpp"))[:200]
            for r in parse_opdef(p.read_text(encoding="utf-8", errors="replace"),
                                 origin=Origin(str(p)))]
    assert defs and any("ascend910b" in r.socs for r in defs)
    with pytest.raises(Exception, match="op_type"):
        parse_binary_list('{"op_list": []}', origin=Origin("x/op_host/config/a/b_binary.json"))


FOO = """
namespace l0op {
static const std::initializer_list<op::DataType> L = {op::DataType::DT_FLOAT};
const aclTensor *Foo(const aclTensor *self, aclOpExecutor *executor) {
  auto curArch = GetCurrentPlatformInfo().GetCurNpuArch();
  if (curArch == NpuArch::DAV_3102 || IsComplexType(self->GetDataType())) {
    ADD_TO_LAUNCHER_LIST_AICPU(Foo, OP_INPUT(self));
  } else if (std::find(L.begin(), L.end(), self->GetDataType()) != L.end()) {
    ADD_TO_LAUNCHER_LIST_AICORE(Foo, OP_INPUT(self));
  } else {
    ADD_TO_LAUNCHER_LIST_AICPU(Foo2, OP_INPUT(self));
  }
  return nullptr;
}
}
extern "C" {
aclnnStatus aclnnFooGetWorkspaceSize(const aclTensor *self, uint64_t *ws, aclOpExecutor **e) {
  auto r = l0op::Foo(self, e);
  return ACLNN_SUCCESS;
}
}
"""


@pytest.mark.parametrize(("soc", "dtype", "want"), [
    ("ascend910b", "float32", "aicore"), ("ascend910b", "complex64", "aicpu"),
    ("ascend910b", "int32", "aicpu"),
    # an architecture the sources name but whose SoCs are not known: undecided there only
    ("ascend310p", "float32", "maybe_aicpu"),
])
def test_arch_type_class_and_find_tests(soc: str, dtype: str, want: str) -> None:
    sites = ce.sites_of({"foo.cpp": FOO})
    assert decide("aclnnFoo", sites, ce.Call(soc, {"self": (dtype,)})).engine == want
