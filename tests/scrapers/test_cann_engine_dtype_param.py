"""A level-0 helper that takes a DataType value (``IsAiCoreSupport(DataType d)``) routes on the
dtype its caller passes (``x->GetDataType()``): the routing is decided per call, not left
undecided (aclnnCos at CANN 8.5.0-9.1.0 has this form: float64 runs on the AI CPU)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.checker.engine import call_of, decide
from opcheck.core.oplist import Signature
from opcheck.scrapers import cann_engine as ce
from opcheck.scrapers.rows import Origin

# A hand-written level-0 file in the shape of the open op_api sources: the dtype test lives in
# a helper whose parameter is a DataType value, not a tensor.
TAN_L0 = """
namespace l0op {
OP_TYPE_REGISTER(Tan);
static const std::initializer_list<DataType> NEW_LIST = {DataType::DT_FLOAT, DataType::DT_FLOAT16,
                                                         DataType::DT_BF16};
static const std::initializer_list<DataType> OLD_LIST = {DataType::DT_FLOAT, DataType::DT_FLOAT16};
static inline bool IsAiCoreSupport(DataType inputDtype, const aclTensor *unused) {
  if (GetCurrentPlatformInfo().GetSocVersion() == SocVersion::ASCEND910B) {
    return CheckType(inputDtype, NEW_LIST);
  }
  return CheckType(inputDtype, OLD_LIST);
}
const aclTensor *Tan(const aclTensor *x, aclOpExecutor *executor) {
  auto out = executor->AllocTensor(x->GetViewShape(), x->GetDataType());
  if (IsAiCoreSupport(x->GetDataType(), x)) {
    ADD_TO_LAUNCHER_LIST_AICORE(Tan, OP_INPUT(x), OP_OUTPUT(out));
    return out;
  }
  ADD_TO_LAUNCHER_LIST_AICPU(Tan, OP_ATTR_NAMES(), OP_INPUT(x), OP_OUTPUT(out));
  return out;
}
}
"""
TAN_ENTRY = """
extern "C" {
aclnnStatus aclnnTanGetWorkspaceSize(const aclTensor *self, aclTensor *out, uint64_t *ws,
                                     aclOpExecutor **executor) {
  auto r = l0op::Tan(self, executor);
  return ACLNN_SUCCESS;
}
}
"""


def test_only_value_parameters_of_type_datatype_are_dtype_parameters() -> None:
    src = ce.parse_source(TAN_L0 + "\nbool F(const DataType *p, DataType d, int n) { return true; }",
                          origin=Origin("tan.cpp"))
    by = {f.name: f for f in src.functions}
    assert by["IsAiCoreSupport"].dtype_params == ("inputDtype",)
    assert by["F"].dtype_params == ("d",)  # a pointer to a DataType is not a dtype value
    assert by["Tan"].dtype_params == ()


@pytest.mark.parametrize("entry_name", ["self", "input", "x"])
@pytest.mark.parametrize(("soc", "dtype", "want"), [
    ("ascend910b", "float32", "aicore"), ("ascend910b", "bfloat16", "aicore"),
    ("ascend910b", "float64", "aicpu"), ("ascend910", "bfloat16", "aicpu"),
    ("ascend910", "float16", "aicore"),
])
def test_helper_dtype_parameter_takes_the_callers_dtype(soc: str, dtype: str, want: str,
                                                        entry_name: str) -> None:
    # the aclnn entry may name its primary input self, input or x; aten::tan calls it self
    entry = TAN_ENTRY.replace("*self", f"*{entry_name}").replace("Tan(self", f"Tan({entry_name}")
    sites = ce.sites_of({"tan.cpp": TAN_L0, "aclnn_tan.cpp": entry})
    call, _ = call_of(Signature({"self": dtype}), soc, "aclnnTan")
    d = decide("aclnnTan", sites, call)
    assert d.engine == want, (d.engine, [c.text for c in d.when])


def test_primary_input_names_share_one_role() -> None:
    assert {ce.role(n) for n in ("self", "selfRef", "input", "inputCast", "x")} == {"self"}
    assert ce.role("exponent") != ce.role("self") and ce.role("other") != ce.role("self")


@pytest.mark.upstream
@pytest.mark.parametrize("tag", ["v8.5.0", "v9.1.0"])
def test_real_cos_float64_on_910b_runs_on_the_ai_cpu(upstream: Path, tag: str) -> None:
    root = upstream / "github/hicann/ops-math" / tag
    files = []
    for rel in ("math/cos/op_api/aclnn_cos.cpp", "math/cos/op_api/cos.cpp"):
        text = (root / rel).read_text(encoding="utf-8")
        files.append((rel, ce.parse_source(text, origin=Origin(rel))))
    # the cast and copy helpers the entry calls are not in this small set: only Cos decides
    sites = [s for s in ce.analyze(files) if s.op_type == "Cos"]
    assert {s.engine for s in sites} == {"aicore", "aicpu"}
    cos_l0 = (root / "math/cos/op_api/cos.cpp").read_text(encoding="utf-8")
    assert "IsAiCoreSupport(DataType" in cos_l0.replace("const ", "")  # the form this covers
    for dtype, want in (("float64", "aicpu"), ("float32", "aicore")):
        call, _ = call_of(Signature({"self": dtype}), "ascend910b", "aclnnCos")
        assert decide("aclnnCos", sites, call).engine == want, dtype
