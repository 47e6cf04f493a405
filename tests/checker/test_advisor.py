"""The profiling advisor's rules decided on traces: the bundled catalog plus the rules synced
from the mirror copy of Ascend/mstt under tests/fixtures."""

from __future__ import annotations

import sys
from typing import Any

import pytest
from testpaths import FIXTURES, TESTS

from opcheck.checker.advisor import Chain, advisor_tips, match_chains
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.sync.advisor import AdvisorRules
from opcheck.sync.context import SyncContext
from opcheck.sync.sources import MirrorSource


@pytest.fixture(scope="module")
def cat(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from opcheck.core.paths import snapshot_dir
    from opcheck.db.snapshot import read_snapshot

    data = read_snapshot(snapshot_dir())
    ctx = SyncContext(MirrorSource(FIXTURES / "mirror"))
    ctx.data = data
    AdvisorRules().collect(ctx)
    assert ctx.failures == [] and data.advisor_rules
    return Catalog.load(make_engine(write_catalog(
        data, tmp_path_factory.mktemp("advised") / "catalog.sqlite")))


@pytest.fixture(scope="module")
def traced() -> list[tuple[OpList, str]]:
    pytest.importorskip("torch")
    from opcheck.tracers import runtime
    from opcheck.tracers.composites import watched_composites
    from opcheck.tracers.inputs import InputSpec

    sys.path.insert(0, str(TESTS))
    from models import fusions

    return [(runtime.trace_module(model, InputSpec(), example_args=args,
                                  label=type(model).__name__,
                                  composites=watched_composites()), api)
            for model, args, api in fusions.cases()]


def _release(cat: Catalog, name: str) -> Any:
    return next(r for r in cat.releases if r.torch_npu == name)


def test_chains_keep_required_elements_and_the_npu_names() -> None:
    chain = Chain.parse("(permute|transpose)-(contiguous){0,1}-(reshape|view)")
    assert len(chain.required) == 2 and "unsafe_view" in chain.required[1]
    assert chain.holds({"permute", "view"}) and not chain.holds({"permute", "clone"})
    assert Chain.parse("(slice|chunk)-gelu-mul").holds({"split", "gelu", "mul"})


@pytest.mark.torch
def test_the_five_advisor_fusions_get_their_api_on_910b(cat: Catalog,
                                                         traced: list[tuple[OpList, str]]
                                                         ) -> None:
    release = _release(cat, "2.7.1.post2")
    for oplist, api in traced:
        tips = advisor_tips(cat, oplist, release, "910B")
        got = {t["api"]: t for t in tips}
        assert api in got, (oplist.model, list(got))
        tip = got[api]
        assert tip["call_sites"] and all("fusions.py:" in s for s in tip["call_sites"])
        assert tip["source"].startswith("https://github.com/Ascend/mstt/blob/")
        assert "no call order" in tip["why"] and tip["inferred"]
        # the GeGLU's gelu is part of npu_geglu: no separate fast_gelu tip there
        if api == "torch_npu.npu_geglu":
            assert "torch_npu.fast_gelu" not in got


@pytest.mark.torch
def test_no_advisor_tip_where_the_kernel_is_missing(cat: Catalog,
                                                    traced: list[tuple[OpList, str]]) -> None:
    lacking = 0
    for oplist, api in traced:
        kernel = "npu::" + api.rsplit(".", 1)[-1]
        old = next((r for r in cat.releases if r.has_kernels
                    and not cat.kernel_facts(r.torch_npu, kernel)), None)
        if old is not None:  # a release from before the kernel: no tip for it
            lacking += 1
            assert api not in {t["api"] for t in advisor_tips(cat, oplist, old, "910B")}
    assert lacking >= 3  # geglu, group_norm_silu, add_layer_norm came later
    # a product the kernel's aclnn docs do not list gets no tip for it either
    release = _release(cat, "2.7.1.post2")
    for oplist, api in traced:
        on_910a = {t["api"] for t in advisor_tips(cat, oplist, release, "910A")}
        if api in ("torch_npu.npu_geglu", "torch_npu.npu_group_norm_silu",
                   "torch_npu.npu_add_layer_norm"):  # aclnn-only kernels not documented there
            assert api not in on_910a


def test_sites_are_lines_or_a_module_with_its_children() -> None:
    ol = OpList("m", "runtime", "runtime-dispatch", ops=[
        OpUse("aten::native_group_norm", 2, modules=["blocks.0.norm"], locations=["m.py:9"]),
        OpUse("aten::silu", 2, modules=["blocks.0"], locations=["m.py:9"]),
        OpUse("aten::silu", 1, modules=["head"], locations=["m.py:30"]),
    ])
    from opcheck.db.advisor import AdvisorRule

    rule = AdvisorRule("aten", "torch_npu.npu_group_norm_silu", "group_norm-silu", "8.0.RC1",
                       "", "x.yaml", 3, "")
    [hit] = match_chains(ol, [rule])
    assert hit.ops == ["aten::native_group_norm", "aten::silu"]
    assert hit.lines == ["m.py:9"] and hit.count == 2
    assert match_chains(OpList("m", "runtime", "", ops=ol.ops[2:]), [rule]) == []


