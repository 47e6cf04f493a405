"""torchair converter files → per-overload graph-mode status (pure ast, torchair never imported)."""

from __future__ import annotations

from collections import Counter
from functools import cache
from pathlib import Path

import pytest
from testpaths import TESTS

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.rows import Origin
from opcheck.scrapers.torchair import (
    CONDITIONAL,
    CONVERTED,
    RAISES,
    ConverterRow,
    parse_converters,
    parse_pins,
)

FIXTURE = TESTS / "fixtures" / "torchair"
COMMIT_A = "1a2b3c4d5e6f708192a3b4c5d6e7f80912a3b4c5"
GE = "python/torchair/_ge_concrete_graph/ge_converter"


def _parse(text: str, path: str = "aten/x.py") -> dict[str, ConverterRow]:
    return {r.op: r for r in parse_converters(text, origin=Origin(path))}


def _fixture(rel: str) -> dict[str, ConverterRow]:
    path = FIXTURE / "github/Ascend/torchair" / COMMIT_A / GE / rel
    return _parse(path.read_text(encoding="utf-8"), rel)


def test_statuses_messages_conditions_and_dtypes() -> None:
    add = _fixture("aten/add.py")
    assert add["aten::add.Tensor"] == ConverterRow(
        "aten::add.Tensor", CONVERTED, dtypes=("bfloat16", "float16", "float32"), line=13)
    out = add["aten::add.out"]
    assert (out.status, out.line) == (RAISES, 23)
    assert out.message == ("NotImplementedError: torch.ops.aten.add.out ge_converter is not "
                           "implemented!")
    sm = _fixture("aten/_softmax.py")
    assert sm["aten::_softmax"].status == CONDITIONAL  # raises for half_to_float on non-half
    assert sm["aten::_softmax"].condition == "half_to_float and self.dtype != DataType.DT_FLOAT16"
    assert sm["aten::_softmax"].line == 12 and sm["aten::_softmax"].dtypes == ("float32",)
    # implicit string concatenation is read as one message
    assert sm["aten::_softmax.out"].message == (
        "RuntimeError: torch.ops.aten._softmax.out is redundant before pytorch 2.1.0,it might "
        "be supported in future version.")
    # registered under `if op is not None:` (the op exists in the traced torch): kept
    assert sm["aten::_safe_softmax"].status == CONVERTED
    mm = _fixture("aten/mm.py")["aten::mm"]
    assert mm.condition == "self.dtype == DataType.DT_INT8 or mat2.dtype == DataType.DT_INT8"


def test_guards_packets_builtins_and_applied_registrations() -> None:
    c10d = _fixture("c10d_functional/c10d_functional.py")
    assert c10d["_c10d_functional::all_reduce"].min_torch == "2.3.1"
    sym = _fixture("aten/sym_size.py")
    # operator.add and sym_sqrt are symbolic-shape arithmetic, not ATen ops: skipped; the
    # packet and .default are one canonical op and the more capable converter wins
    assert list(sym) == ["aten::sym_size"]
    assert sym["aten::sym_size"].status == CONVERTED
    gmm = _fixture("custom/grouped_matmul.py")["npu::npu_grouped_matmul"]
    assert gmm.status == CONDITIONAL and gmm.dtypes == ("float16",)
    assert gmm.condition == "for w in weight and w.dtype == DataType.DT_INT4"


def test_return_before_raise_makes_the_raise_conditional_on_the_negated_test() -> None:
    rows = _parse(
        "@register_fx_node_ge_converter(torch.ops.aten.foo.default)\n"
        "def f(self, meta_outputs=None):\n"
        "    '''NB: doc'''\n"
        "    if self.symsize is not None:\n"
        "        return ge.Foo(self)\n"
        "    raise NotImplementedError('dynamic ' 'shape')\n"
        "@register_fx_node_ge_converter(torch.ops.aten.foo.out)\n"
        "def g(self, out=None):\n"
        "    x = ge.Foo(self)\n"
        "    raise x\n"
    )
    foo = rows["aten::foo"]
    assert (foo.status, foo.condition, foo.message, foo.line) == (
        CONDITIONAL, "not (self.symsize is not None)", "NotImplementedError: dynamic shape", 6)
    assert rows["aten::foo.out"].status == RAISES and rows["aten::foo.out"].message == "x"


def test_arguments_reassigned_before_the_raise_are_named() -> None:
    rows = _parse(
        "@register_fx_node_ge_converter(torch.ops.aten.slice.Tensor)\n"
        "def f(self, dim=0, start=None, end=None, step=1, meta_outputs=None):\n"
        "    if end is None:\n"
        "        end = 2147483647\n"
        "    start += 0\n"
        "    if end == 9223372036854775807:\n"
        "        end = 2147483647\n"
        "    elif end > 2147483647 and dim < 0:\n"
        "        raise RuntimeError('too long')\n"
        "    step = 2\n"
        "    return ge.StridedSliceV2(self, start, end, step)\n"
    )
    # `start` is reassigned but not read by the test; `step` only after the raise; `end` only
    # when None, to one constant (the branch exclusive to the raise does not count)
    assert rows["aten::slice.Tensor"].rebound == ("end:none=2147483647",)
    rows = _parse(
        "@register_fx_node_ge_converter(torch.ops.aten.foo.default)\n"
        "def f(self, dim=None, end=None, meta_outputs=None):\n"
        "    if dim is None:\n"
        "        dim = self.rank - 1\n"
        "    end = end or 0\n"
        "    if dim > 3 or end > 2:\n"
        "        raise RuntimeError('no')\n"
        "    return self\n"
    )
    assert rows["aten::foo"].rebound == ("dim:none", "end")
    assert _fixture("aten/mm.py")["aten::mm"].rebound == ()


@pytest.mark.parametrize(("text", "needle", "line"), [
    ("@register_fx_node_ge_converter(make_op())\ndef f(x):\n    return x\n",
     "unrecognised converter target", 1),
    ("if platform == 'x':\n    @register_fx_node_ge_converter(torch.ops.aten.a.default)\n"
     "    def f(x):\n        return x\n", "unrecognised module-level test", 1),
    ("def f(x):\n    return register_fx_node_ge_converter(torch.ops.aten.a.default)\n",
     "outside a module-level function decorator", 2),
    ("@register_fx_node_ge_converter(torch.ops.aten.a.default, True)\ndef f(x):\n    return x\n",
     "with 2 arguments", 1),
    ("def f(:\n", "not Python", 1),
])
def test_unknown_structure_raises_with_file_and_line(text: str, needle: str, line: int) -> None:
    with pytest.raises(ScrapeError, match=needle) as exc:
        parse_converters(text, origin=Origin("aten/odd.py"))
    assert exc.value.source == "aten/odd.py" and exc.value.line == line


def test_pins() -> None:
    text = (FIXTURE / "torchair_pins.tsv").read_text(encoding="utf-8")
    pins = parse_pins(text, origin=Origin("torchair_pins.tsv"))
    assert [(p.tag, p.commit[:8], p.line) for p in pins] == [
        ("v7.2.0-pytorch2.1.0", "1a2b3c4d", 2), ("v7.3.0-pytorch2.6.0", "9f8e7d6c", 3),
        ("v6.0.0-pytorch2.1.0", "0000aaaa", 4)]
    with pytest.raises(ScrapeError, match="header"):
        parse_pins("tag\tcommit\n", origin=Origin("p.tsv"))
    with pytest.raises(ScrapeError, match="bad pin row") as exc:
        parse_pins("tag\ttorchair_commit\nv1\tnot-a-sha\n", origin=Origin("p.tsv"))
    assert exc.value.line == 2


# --- the real converter files of two pins --------------------------------------------------

PINS = {
    # torch_npu 2.3.1.post5 / 2.4.0.post3 (v6.0.0.1): torch 2.1 .. 2.4 era
    "c8745d0312fae9d568976120fafe43b966c93429": (1970, {CONVERTED: 287, CONDITIONAL: 72,
                                                        RAISES: 1611}),
    # v26.0.x: torch 2.7 .. 2.10
    "7c6c754bed00c86ffaaa2a45cb7ac2724f058013": (2075, {CONVERTED: 387, CONDITIONAL: 92,
                                                        RAISES: 1596}),
}


@cache  # each pin is parsed once for the tests below
def _real(upstream: Path, commit: str) -> dict[str, tuple[str, ConverterRow]]:
    base = upstream / "github/Ascend/torchair" / commit / GE
    out: dict[str, tuple[str, ConverterRow]] = {}
    for path in sorted(base.rglob("*.py")):
        if path.name in ("__init__.py", "converter_utils.py"):
            continue
        rel = path.relative_to(base).as_posix()
        for r in parse_converters(path.read_text(encoding="utf-8"), origin=Origin(rel)):
            assert r.op not in out, f"{r.op} registered in two files"
            out[r.op] = (rel, r)
    return out


@pytest.mark.upstream
@pytest.mark.parametrize("commit", sorted(PINS))
def test_real_pins_parse_completely_with_known_counts(upstream: Path, commit: str) -> None:
    rows = _real(upstream, commit)
    total, counts = PINS[commit]
    assert len(rows) == total
    assert Counter(r.status for _, r in rows.values()) == counts


# Checked by hand against the files (path, line, status).
BY_HAND = {
    "7c6c754bed00c86ffaaa2a45cb7ac2724f058013": {
        # `if half_to_float and self.dtype != DT_FLOAT16: raise` before the SoftmaxV2
        "aten::_softmax": ("aten/_softmax.py", 14, CONDITIONAL),
        "aten::_softmax.out": ("aten/_softmax.py", 30, RAISES),  # "redundant before 2.1.0"
        "aten::_safe_softmax": ("aten/_softmax.py", 47, CONVERTED),  # under `if op is not None`
        "aten::add.Tensor": ("aten/add.py", 16, CONVERTED),
        "aten::add.out": ("aten/add.py", 60, RAISES),
        "aten::mm": ("aten/mm.py", 8, CONDITIONAL),  # int8 inputs raise
        "aten::mm.out": ("aten/mm.py", 17, RAISES),
        "aten::erfinv.out": ("aten/erfinv.py", 16, RAISES),  # builds a node, then `raise out`
        "aten::relu": ("aten/relu.py", 9, CONVERTED),
        "aten::embedding": ("aten/embedding.py", 15, CONDITIONAL),  # scale_grad_by_freq/sparse
        "aten::_adaptive_avg_pool2d_backward": ("aten/_adaptive_avg_pool2d_backward.py", 11,
                                                CONDITIONAL),  # raises after `if static: return`
        "aten::sym_size": ("aten/sym_size.py", 31, CONVERTED),  # the packet registration
        "_c10d_functional::all_reduce": ("c10d_functional/c10d_functional.py", 84, CONVERTED),
    },
    "c8745d0312fae9d568976120fafe43b966c93429": {
        "aten::_softmax": ("aten/_softmax.py", 37, CONDITIONAL),
        "aten::_softmax.out": ("aten/_softmax.py", 53, RAISES),
        "aten::add.Tensor": ("aten/add.py", 40, CONVERTED),
        "aten::add.out": ("aten/add.py", 84, RAISES),
        "aten::mm": ("aten/mm.py", 29, CONDITIONAL),
        "aten::erfinv.out": ("aten/erfinv.py", 36, RAISES),
        "aten::t": ("aten/t.py", 44, CONDITIONAL),  # rank > 2 "unsupported case"
        # registered through the module-level alias ALL_TO_ALL_SINGLE
        "c10d_functional::all_to_all_single": ("c10d_functional/c10d_functional.py", 104,
                                               CONDITIONAL),
    },
}


@pytest.mark.upstream
def test_real_converters_checked_by_hand(upstream: Path) -> None:
    for commit, expected in BY_HAND.items():
        rows = _real(upstream, commit)
        got = {op: (rows[op][0], rows[op][1].line, rows[op][1].status) for op in expected}
        assert got == expected, commit
    new = _real(upstream, "7c6c754bed00c86ffaaa2a45cb7ac2724f058013")
    assert new["_c10d_functional::all_reduce"][1].min_torch == "2.3.1"
    assert new["aten::_softmax"][1].condition == (
        "half_to_float and self.dtype != DataType.DT_FLOAT16")
    assert new["aten::_softmax"][1].rebound == ()
    assert new["aten::slice.Tensor"][1].rebound == ("end:none=2147483647",)
    assert "aten::_safe_softmax" not in _real(upstream, "c8745d0312fae9d568976120fafe43b966c93429")
