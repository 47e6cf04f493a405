"""torch_npu's inductor lists (``torch_npu/_inductor/lowering_op_list.py``) and backend
registration (``__init__.py``). The shared mirror does not hold these files, so the texts here
are written by hand in their format (module-level lists of ``aten.X`` / ``prims.X`` / names)."""

from __future__ import annotations

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
