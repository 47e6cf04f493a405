"""Site disambiguation on the real files (``../shared/upstream``): a check macro's text is
printed from many files; explain names the failing function's own file (or a helper in its
operator's folder), never an unrelated operator's, and says "one of N sites" when the log does
not decide. One case per shared macro text of :data:`MACRO_TEMPLATES` found in ops-math."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from opcheck.contrib.explain import diagnose, problem, scan, signatures
from opcheck.contrib.explain.templates import MessageIndex
from opcheck.db.data import MessageTemplateRec
from opcheck.db.messages import MessageRow
from opcheck.scrapers import messages as ms
from opcheck.scrapers.rows import Origin
from opcheck.sync.messages import MessageSites, _anchor, _Group

pytestmark = pytest.mark.upstream

SIGS = signatures.load_dir()
MATH = "github/hicann/ops-math/v9.1.0"
NN = "github/hicann/ops-nn/v9.1.0"
QUANT = (NN, "matmul/quant_batch_matmul_v3/op_api/quant_matmul_checker.cpp")
EXPM1 = (MATH, "math/expm1/op_api/aclnn_expm1.cpp")


class Facts:
    def __init__(self, rows: list[MessageRow]) -> None:
        self.rows = rows

    def message_sites(self, template: str) -> list[MessageRow]:
        return [r for r in self.rows if r.template == template]

    def paths_of(self, function: str) -> list[str]:
        return sorted({r.path for r in self.rows if function in r.entries})

    def ops_reaching(self, function: str) -> list[str]:
        return []

    def op_type(self, op_type: str) -> object:
        raise AssertionError("no op type in these logs")


def build(upstream: Path, files: list[tuple[str, str]]) -> tuple[MessageIndex, Facts]:
    groups: dict[tuple[str, ...], _Group] = {}
    for root, rel in files:
        parsed = ms.parse_source((upstream / root / rel).read_text(encoding="utf-8"),
                                 origin=Origin(f"{root}/{rel}"))
        lib = root.split("/")[2]
        for s in parsed.sites:
            MessageSites._add(groups, "cann", lib, rel, s, parsed.aclnn, "9.1.0", (9, 1), 0)
    recs: list[MessageTemplateRec] = [MessageSites._finish(g, 1) for g in groups.values()]
    _anchor(recs)
    rows = [MessageRow(i, r.template, r.kind, r.library, r.macro, r.level, r.function, r.entry,
                       r.condition, r.lists, r.code, r.literal, r.path, r.line, r.versions,
                       r.newest, "") for i, r in enumerate(recs)]
    return MessageIndex([(r.template, r.anchor, r.literal) for r in recs if r.anchor]), Facts(rows)


def explained(index: tuple[MessageIndex, Facts], log: str) -> list[problem.Problem]:
    idx, facts = index
    result = scan.explain(log.strip("\n").splitlines(), SIGS, messages=idx)
    return diagnose.diagnose(result, messages=facts)  # type: ignore[arg-type]


def test_expm1_names_its_own_file_not_a_matmul_checker(upstream: Path) -> None:
    # the log of the issue: aclnnExpm1 rejecting float64; the text is OP_CHECK_DTYPE_NOT_SUPPORT's
    # ("Tensor self …" as CANN prints it, which quant_matmul_checker.cpp's own OP_LOGE also prints)
    index = build(upstream, [QUANT, EXPM1, (MATH, "math/arg_max_v2/op_api/aclnn_argmax.cpp")])
    log = """
RuntimeError: call aclnnExpm1 failed, error code is 161002
[PID: 1234] 2025-01-10-11:22:33.123.456 AclNN_Parameter_Error(EZ1001): Tensor self not implemented for DT_DOUBLE, should be in dtype support list [DT_FLOAT16,DT_FLOAT,DT_BFLOAT16,].
"""
    (p,) = explained(index, log)
    site = next(s for s in p.sites if "support list" in s.template)
    assert [r.path for r in site.rows] == [EXPM1[1]]
    assert "aclnnExpm1" in site.narrowed_by and not site.undecided
    # without the failing function the log does not decide: one of N, never a single guess
    (q,) = explained(index, log.replace("RuntimeError: call aclnnExpm1 failed, error code is "
                                        "161002\n", ""))
    site = next(s for s in q.sites if "support list" in s.template)
    assert site.undecided and site.total > 1 and len(site.rows) <= 2


def _macro_files(upstream: Path, macro: str, limit: int = 6) -> list[str]:
    """ops-math files (op_api) calling ``macro``, at most ``limit``."""
    out: list[str] = []
    for path in sorted((upstream / MATH).glob("*/*/op_api/aclnn_*.cpp")):
        if f"{macro}(" in path.read_text(encoding="utf-8", errors="replace"):
            out.append(str(path.relative_to(upstream / MATH)))
            if len(out) >= limit:
                break
    return out


def _message(template: str) -> str:
    """The template filled in as CANN fills it: numbers for integer conversions."""
    text = re.sub(r"%(?:z|l{1,2})?[dui]", "8", template)
    return re.sub(r"%\{[^}]*\}|%[a-z]{1,3}", "DT_DOUBLE", text)


@pytest.mark.parametrize("macro", sorted(ms.MACRO_TEMPLATES))
def test_each_shared_macro_text_is_placed_by_the_failing_function(upstream: Path,
                                                                   macro: str) -> None:
    files = _macro_files(upstream, macro)
    if len(files) < 2:
        pytest.skip(f"{macro}: fewer than two ops-math files call it")
    idx, facts = build(upstream, [(MATH, f) for f in files])
    # a text printed by sites of two different files, each with its aclnn functions
    by_text: dict[str, list[MessageRow]] = {}
    for r in facts.rows:
        if r.macro == macro and r.entries:
            by_text.setdefault(r.template, []).append(r)
    shared = [(t, rs) for t, rs in sorted(by_text.items()) if len({r.path for r in rs}) > 1]
    if not shared:
        pytest.skip(f"{macro}: no text shared by two of {len(files)} files")
    template, rows = shared[0]
    for own in {r.path: r for r in rows}.values():
        fn = own.entries[0]
        log = f"RuntimeError: call {fn} failed, error code is 161002\n" \
              f"[PID: 1] 2025-01-01-00:00:00.000.000 AclNN_Parameter_Error(EZ1001): {_message(template)}"
        (p,) = explained((idx, facts), log)
        site = next(s for s in p.sites if s.template == template)
        assert {r.path for r in site.rows} <= {r.path for r in rows if fn in r.entries}, \
            (fn, [r.path for r in site.rows])


def test_a_known_function_with_no_site_of_its_own_names_no_other_file(upstream: Path) -> None:
    # the index lacks aclnn_expm1.cpp: the text's other sites belong to other operators
    index = build(upstream, [QUANT, (MATH, "math/arg_max_v2/op_api/aclnn_argmax.cpp")])
    (p,) = explained(index, """
RuntimeError: call aclnnExpm1 failed, error code is 161002
[PID: 1234] 2025-01-10-11:22:33.123.456 AclNN_Parameter_Error(EZ1001): Tensor self not implemented for DT_DOUBLE, should be in dtype support list [DT_FLOAT16,DT_FLOAT,DT_BFLOAT16,].
""")
    site = next(s for s in p.sites if "support list" in s.template)
    assert site.undecided and site.rows == [] and site.total >= 1
    # the list the installed CANN printed still says what to cast to
    assert any(c.startswith("cast ") and "DT_FLOAT16, DT_FLOAT, DT_BFLOAT16" in c for c in p.changes)
