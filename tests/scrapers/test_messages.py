"""Message sites of real upstream sources: templates, guards, lists, patterns, coverage.

Coverage is counted against an independent count of the message macros in the same files
(comments removed, ``#define`` lines skipped): every ``OP_LOGE``/``OP_CHECK_*``/``TORCH_CHECK``
call the files hold is found, and at least 95% of those with a literal message are indexed
(have a template an index can key on).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

from opcheck.scrapers import messages as ms
from opcheck.scrapers.rows import Origin

pytestmark = pytest.mark.upstream

HICANN = "github/hicann/ops-math/v9.1.0"
PIN = "github/Ascend/op-plugin/8b9c8534fa41eff367a41c155843daa530ab3a08"
TAG = "github/Ascend/pytorch/v26.1.0-pytorch2.7.1"


def parse(upstream: Path, path: str) -> ms.MessageFile:
    return ms.parse_source((upstream / path).read_text(encoding="utf-8"), origin=Origin(path))


def site(f: ms.MessageFile, start: str) -> ms.MessageSite:
    return next(s for s in f.sites if s.template.startswith(start))


def test_check_macros_get_their_message_guard_and_the_constant_behind_it(upstream: Path) -> None:
    f = parse(upstream, f"{HICANN}/math/add/op_api/aclnn_add.cpp")
    s = site(f, "The self tensor cannot be larger than %zu dimensions.")
    assert (s.macro, s.function) == ("OP_CHECK_MAX_DIM", "CheckShape")
    assert s.condition == "rank of self > MAX_DIM_LEN (8)"
    d = site(f, "self not implemented for %s, should be in dtype support list %s.")
    lists = dict(x.split(":", 1) for x in d.lists.split(";"))
    assert "DT_BF16" in lists["ASCEND910B_DTYPE_SUPPORT_LIST"].split()
    assert "DT_BF16" not in lists["ASCEND910_DTYPE_SUPPORT_LIST"].split()
    assert "aclnnAdd" in f.aclnn and "aclnnInplaceAdd" in f.aclnn


def test_op_loge_is_guarded_by_its_if_and_by_op_check(upstream: Path) -> None:
    f = parse(upstream, f"{HICANN}/math/add/op_api/aclnn_add.cpp")
    s = site(f, "Self dtype %s and other dtype %s can not promote dtype.")
    assert s.code == "ACLNN_ERR_PARAM_INVALID" and s.condition == "promoteType == DataType::DT_UNDEFINED"
    e = [x for x in f.sites if x.template.startswith("Alpha dtype %s can't be cast")]
    # the else branch reads as the negation of its if
    assert any(x.condition.startswith("not (") or "not (IsIntegralType" in x.condition for x in e)
    g = parse(upstream, f"{HICANN}/math/log/op_api/log.cpp")
    assert site(g, "LogAiCore ADD_TO_LAUNCHER_LIST_AICORE failed.").condition == \
        "not (ret == ACLNN_SUCCESS)"


def test_torch_check_streams_pieces_and_drops_the_error_code_suffix(upstream: Path) -> None:
    f = parse(upstream, f"{PIN}/op_plugin/ops/opapi/AdaptiveAvgPool2dKernelNpuOpApi.cpp")
    s = site(f, "expected dtype ")
    assert s.template == "expected dtype %{self.dtype()} for `output` but got dtype %{result.dtype()}"
    assert s.condition == "not (self.dtype() == result.dtype())" and s.code == "ErrCode::TYPE"
    pat = re.compile(ms.template_pattern(s.template))
    assert pat.search("RuntimeError: expected dtype Float for `output` but got dtype Half\n"
                      "[ERROR] ... ERR01002 OPS invalid type")


def test_codegen_templates_fill_the_op_name(upstream: Path) -> None:
    f = parse(upstream, f"{PIN}/torchnpugen/gen.py")
    s = site(f, "Current device only support aclnn operator, and current operator")
    assert s.template.endswith("%{impl_name} do not support internal format.")
    assert re.search(ms.template_pattern(s.template),
                     "RuntimeError: Current device only support aclnn operator, and current "
                     "operator gather do not support internal format.")


def test_patterns_match_the_lines_cann_prints(upstream: Path) -> None:
    f = parse(upstream, f"{HICANN}/math/cast/op_api/aclnn_cast.cpp")
    s = site(f, "self not implemented for %s")
    # https://github.com/hiyouga/LlamaFactory/issues/7522 (310P3): the line, verbatim
    line = ("RuntimeError: call aclnnCast failed, detail:EZ1001: [PID: 775588] 2025-07-01-15:17:20"
            ".355.304 self not implemented for DT_BFLOAT16, should be in dtype support list "
            "[DT_FLOAT16,DT_FLOAT,DT_DOUBLE,DT_INT8,DT_UINT8,DT_INT16,DT_INT32,DT_INT64,")
    assert re.search(ms.template_pattern(s.template), line + "DT_BOOL,].")
    assert "implemented" in ms.anchor_words(s.template)
    # a word touching a conversion may be extended by the value: never an anchor
    assert ms.anchor_words("abc%sdef ghi jkl%d") == ["ghi"]


_MACROS = re.compile(r"\b(OP_LOGE|OP_CHECK_[A-Z_]+|TORCH_CHECK(?:_[A-Z]+)?|AT_ERROR|"
                     r"TORCH_INTERNAL_ASSERT)\s*\(")
_COMMENT = re.compile(r'"(?:\\.|[^"\\\n])*"|//[^\n]*|/\*[\s\S]*?\*/')
_LITERAL_FIRST = re.compile(r'\s*(?:[A-Z_:]+\s*,\s*)?"')


def _independent(text: str) -> Counter[str]:
    """Macro calls by family, counted without the scraper (comments and #defines dropped)."""
    code = _COMMENT.sub(lambda m: m.group(0) if m.group(0)[0] == '"' else " ", text)
    code = "\n".join(ln for ln in code.splitlines() if not ln.lstrip().startswith("#"))
    out: Counter[str] = Counter()
    for m in _MACROS.finditer(code):
        name = m.group(1)
        if name == "OP_CHECK_IF":  # a guard, no message of its own
            continue
        out[ms.family(name)] += 1
    return out


@pytest.mark.parametrize(("root", "sub", "suffixes"), [
    (HICANN, "math", (".cpp", ".h")),
    (PIN, "op_plugin", (".cpp", ".h")),
    (TAG, "torch_npu/csrc", (".cpp", ".h")),
])
def test_coverage_per_source(upstream: Path, root: str, sub: str, suffixes: tuple[str, ...],
                             capsys: pytest.CaptureFixture[str]) -> None:
    # every third file: the whole sources' figures are in the report (test time)
    files = [p for p in sorted((upstream / root / sub).rglob("*"))
             if p.suffix in suffixes and ("op_api" in p.parts or root != HICANN)][::3]
    found: Counter[str] = Counter()
    literal: Counter[str] = Counter()
    indexed: Counter[str] = Counter()
    grep: Counter[str] = Counter()
    for p in files:
        text = p.read_text(encoding="utf-8", errors="replace")
        f = ms.parse_source(text, origin=Origin(str(p)))
        found.update(f.found)
        literal.update(f.literal)
        indexed.update(f.indexed)
        grep.update(_independent(text))
    with capsys.disabled():
        print(f"\n{root}/{sub}: {len(files)} files; " + "; ".join(
            f"{fam}: {grep[fam]} calls, {found[fam]} found, {literal[fam]} with a literal "
            f"message, {indexed[fam]} indexed" for fam in ("OP_LOGE", "OP_CHECK", "TORCH_CHECK")
            if grep[fam]))
    for fam in ("OP_LOGE", "OP_CHECK", "TORCH_CHECK"):
        if not grep[fam]:
            continue
        assert abs(found[fam] - grep[fam]) <= 0.02 * grep[fam], (fam, found[fam], grep[fam])
        assert indexed[fam] >= 0.95 * literal[fam], (fam, indexed[fam], literal[fam])
        assert literal[fam] >= 0.8 * found[fam], (fam, literal[fam], found[fam])
