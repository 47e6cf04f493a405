"""torch_npu's inductor lists (``torch_npu/_inductor/lowering_op_list.py``) and backend
registration (``__init__.py``), in both formats: texts written by hand in each format, and every
mirrored tag of ../shared/upstream (skipped when absent)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import inductor
from opcheck.scrapers.rows import Origin

ORIGIN = Origin("github/Ascend/pytorch/vX-pytorch2.6.0/torch_npu/_inductor/lowering_op_list.py")

LISTS = """import torch
from torch_npu import npu_dtype_cast

aten = torch.ops.aten
prims = torch.ops.prims

GENERATE_LIST = [
    prims.iota,
    aten.mul,
    aten.copy_,
    aten.add.Tensor,
    aten.mul,
    npu_dtype_cast,
    torch.ops.higher_order.invoke_subgraph,
]

GENERATE_LIST2 = [
    "foreach"
]

FALLBACK_LIST = [
    aten.gather,
]

LOWERING_OVERLOAD_OP = [aten.cumsum]
"""


def test_lists_become_rows_with_their_lines() -> None:
    rows = inductor.parse(LISTS, ORIGIN)
    got = {(r.kind, r.name): r.line for r in rows}
    assert got == {
        ("generate", "prims::iota"): 8, ("generate", "aten::mul"): 9,
        ("generate", "aten::copy_"): 10, ("generate", "aten::add.Tensor"): 11,
        ("generate", "npu_dtype_cast"): 13, ("generate", "higher_order::invoke_subgraph"): 14,
        ("generate_prefix", "foreach"): 18, ("fallback", "aten::gather"): 22,
    }
    lines = LISTS.splitlines()
    for r in rows:  # each row's line names it
        assert r.name.split("::")[-1].split(".")[0] in lines[r.line - 1]


def test_backend_registration_is_found_or_absent() -> None:
    init = ("from torch._inductor.codegen.common import register_backend_for_device\n\n"
            "def _register():\n"
            "    register_backend_for_device('npu', A, B, C)\n")
    assert inductor.parse_init(init, ORIGIN) == [inductor.InductorRow("backend", "npu", 4)]
    assert inductor.parse_init("register_backend_for_device('cpu', A, B)\n", ORIGIN) == []


def test_changed_files_fail_loudly() -> None:
    with pytest.raises(ScrapeError, match="no GENERATE_LIST"):
        inductor.parse("FALLBACK_LIST = []\n", ORIGIN)
    with pytest.raises(ScrapeError, match=r"lowering_op_list\.py:2: unexpected generate entry"):
        inductor.parse("GENERATE_LIST = [\n    make(1),\n]\n", ORIGIN)
    with pytest.raises(ScrapeError, match="GENERATE_LIST is not a list"):
        inductor.parse("GENERATE_LIST = tuple()\n", ORIGIN)


FALLBACKS = """import torch
from torch.ops import _c10d_functional, fsdp
from torch._higher_order_ops.cond import cond

aten = torch.ops.aten

NPU_EXTRA_FALLBACK_LIST = [
    _c10d_functional.all_reduce.default,
    cond,
]

TORCH_NATIVE_FALLBACK_LIST = [
    aten._cdist_forward.default,
    aten._cdist_forward.out,
]

FALLBACK_LIST = TORCH_NATIVE_FALLBACK_LIST + NPU_EXTRA_FALLBACK_LIST

if inductor_indirect_memory_mode != 'linear':
    FALLBACK_LIST += [
        aten.isnan,
    ]
"""

OVERRIDES = """import torch
aten = torch.ops.aten
prims = torch.ops.prims

LOWERING_OVERRIDE_OP = [
    aten.cumsum,
    prims.convert_element_type,
    torch.ops.higher_order.flex_attention,
]

INDIRECT_MEM_OVERRIDE_LIST = [aten.gather]

if inductor_indirect_memory_mode == "simt_template":
    LOWERING_OVERRIDE_OP += INDIRECT_MEM_OVERRIDE_LIST
"""


def test_fallback_list_format_keeps_ops_eager_and_lowers_the_rest() -> None:
    rows = inductor.parse_fallbacks(FALLBACKS, ORIGIN)
    got = {(r.kind, r.name): r.line for r in rows}
    assert got == {
        ("generate_rest", "*"): 17,
        ("fallback", "_c10d_functional::all_reduce"): 8, ("fallback", "cond"): 9,
        ("fallback", "aten::_cdist_forward"): 13, ("fallback", "aten::_cdist_forward.out"): 14,
        ("fallback", "aten::isnan"): 21,  # added under a config switch, by its default
    }
    over = {(r.kind, r.name): r.line for r in inductor.parse_overrides(OVERRIDES, ORIGIN)}
    assert over == {("generate", "aten::cumsum"): 6, ("generate", "prims::convert_element_type"): 7,
                    ("generate", "higher_order::flex_attention"): 8}
    with pytest.raises(ScrapeError, match="no FALLBACK_LIST"):
        inductor.parse_fallbacks("X_FALLBACK_LIST = []\n", ORIGIN)
    with pytest.raises(ScrapeError, match="no LOWERING_OVERRIDE_OP"):
        inductor.parse_overrides("aten = 1\n", ORIGIN)
    with pytest.raises(ScrapeError, match=r":2: unexpected fallback entry"):
        inductor.parse_fallbacks("FALLBACK_LIST = [\n    unknown_ns.op.default,\n]\n", ORIGIN)


def test_every_mirrored_tag_parses_in_its_own_format(upstream: Path) -> None:
    from opcheck.sync.inductor import FALLBACKS as FALLBACK_FILE
    from opcheck.sync.inductor import LISTS as LIST_FILE
    from opcheck.sync.inductor import OVERRIDES as OVERRIDE_FILE

    tags = sorted(p.parent.parent for p in
                  (upstream / "github/Ascend/pytorch").glob("*/torch_npu/_inductor"))
    assert len(tags) >= 10
    formats = set()
    for tag in tags:
        if (tag / LIST_FILE).is_file():
            text = (tag / LIST_FILE).read_text(encoding="utf-8")
            rows = inductor.parse(text, Origin(str(tag / LIST_FILE)))
            formats.add("lists")
            assert any(r.kind == "generate" and r.name == "aten::mul" for r in rows), tag
        else:
            text = (tag / FALLBACK_FILE).read_text(encoding="utf-8")
            rows = inductor.parse_fallbacks(text, Origin(str(tag / FALLBACK_FILE)))
            rows += inductor.parse_overrides((tag / OVERRIDE_FILE).read_text(encoding="utf-8"),
                                             Origin(str(tag / OVERRIDE_FILE)))
            formats.add("fallbacks")
            assert {("generate_rest", "*"), ("generate", "aten::mm")} <= {
                (r.kind, r.name) for r in rows}, tag
        lines = text.splitlines()
        for r in rows:
            if r.kind == "fallback":
                assert r.name.split("::")[-1].split(".")[0] in lines[r.line - 1]
        init = (tag / "torch_npu/_inductor/__init__.py").read_text(encoding="utf-8")
        assert inductor.parse_init(init, ORIGIN), tag
    assert formats == {"lists", "fallbacks"}
