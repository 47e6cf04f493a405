"""Graph mode (torch.compile with torchair): converters per release, the graph verdict, the CLI.

The core tests run on the small fixture mirror tests/fixtures/torchair (two mirrored commits,
one pin that is not mirrored) over the hand-written catalog; the real-data tests read the real
converter files of two pins and trace a LLaMA-style transformer once."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from catalog_fixture import small_catalog
from testpaths import TESTS

from opcheck.checker.graph import (
    CONDITIONAL,
    CONVERTED,
    NO_CONVERTER,
    RAISES,
    UNKNOWN,
    functional_name,
    graph_check,
    graph_matrix,
    graph_ops,
    graph_text,
    op_graph,
)
from opcheck.checker.history import HistoryFacts, describe_op
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import CatalogData, OperatorRec, ReleaseRec
from opcheck.db.engine import make_engine
from opcheck.db.graph import graph_pins
from opcheck.db.snapshot import read_snapshot, write_snapshot
from opcheck.sync.context import SyncContext
from opcheck.sync.sources import MirrorSource
from opcheck.sync.torchair import TorchairConverters

FIXTURE = TESTS / "fixtures" / "torchair"
A = "1a2b3c4d5e6f708192a3b4c5d6e7f80912a3b4c5"  # pinned by 2.1.0.post17 (v7.2.0)
B = "9f8e7d6c5b4a39281706f5e4d3c2b1a098765432"  # pinned by 2.6.0.post5 (v7.3.0)


def _collect(data: CatalogData, mirror: Path) -> SyncContext:
    ctx = SyncContext(MirrorSource(mirror))
    ctx.data = data
    TorchairConverters().collect(ctx)
    assert ctx.failures == []
    return ctx


def _oplist(*ops: str, method: str = "runtime", ir: str = "runtime-dispatch") -> OpList:
    return OpList("m", method, ir, ops=[OpUse(op=o, count=1, dtypes=["float32"]) for o in ops])


@pytest.fixture(scope="module")
def graph_data() -> CatalogData:
    data = small_catalog()
    _collect(data, FIXTURE)
    return data


@pytest.fixture(scope="module")
def cat_path(graph_data: CatalogData, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_catalog(graph_data, tmp_path_factory.mktemp("graph") / "catalog.sqlite")


@pytest.fixture(scope="module")
def cat(cat_path: Path) -> Catalog:
    return Catalog.load(make_engine(cat_path))


def test_pins_map_releases_by_tag_and_never_borrow(graph_data: CatalogData) -> None:
    pins = {p.torch_npu: p for p in graph_data.graph_pins}
    assert [(r, pins[r].torchair[:8], pins[r].state) for r in sorted(pins)] == [
        ("1.11.0.post8", "", "no_pin"),  # its tag has no row in the pins file
        ("2.1.0.post10", "0000aaaa", "not_mirrored"),
        ("2.1.0.post17", A[:8], "read"),
        ("2.4.0", "", "no_pin"),  # no tag at all
        ("2.6.0.post5", B[:8], "read"),
    ]
    # one source per commit's converter folder (not one per file), with its row count
    sources = {s.id: s for s in graph_data.sources}
    folder = sources[pins["2.1.0.post17"].converters_source_id or 0]
    assert (folder.scraper, folder.commit, folder.rows) == ("torchair", A, 10)
    assert folder.path.endswith(f"{A}/python/torchair/_ge_concrete_graph/ge_converter")


def test_a_source_without_pins_is_a_note_not_a_failure() -> None:
    data = small_catalog()
    ctx = _collect(data, TESTS / "fixtures" / "mirror")
    assert data.graph_pins == [] and data.graph_converters == []
    assert any("graph-mode status unknown for every release" in n for n in ctx.notes)


def test_identical_facts_group_across_commits(graph_data: CatalogData) -> None:
    by_op: dict[str, list[Any]] = {}
    for g in graph_data.graph_converters:
        by_op.setdefault(g.op, []).append(g)
    pins = {p.torch_npu: p.converters_source_id for p in graph_data.graph_pins}
    a, b = pins["2.1.0.post17"], pins["2.6.0.post5"]
    (add,) = by_op["aten::add.Tensor"]  # the same file at both commits: one record
    assert (add.sources, add.lines, add.dtypes) == (f"{a},{b}", "13,13", "bfloat16,float16,float32")
    assert [(g.status, g.sources) for g in by_op["aten::mm"]] == [
        (CONDITIONAL, str(a)), (RAISES, str(b))]
    assert [g.sources for g in by_op["aten::relu"]] == [str(a)]


def test_snapshot_round_trip_keeps_graph_facts(graph_data: CatalogData, tmp_path: Path) -> None:
    write_snapshot(graph_data, tmp_path)
    back = read_snapshot(tmp_path)
    assert back.graph_pins == graph_data.graph_pins
    assert sorted(back.graph_converters, key=repr) == sorted(graph_data.graph_converters, key=repr)


def test_functional_forms_and_compile_spellings() -> None:
    known = {"aten::relu", "aten::add.Tensor"}
    assert functional_name("aten::relu_", known) == "aten::relu"
    assert functional_name("aten::add_.Tensor", known) == "aten::add.Tensor"
    assert functional_name("aten::normal_", known) == "aten::normal_"  # no functional op known
    assert functional_name("aten::__iand__.Tensor", known) == "aten::__iand__.Tensor"
    assert functional_name("aten::_reshape_alias", known) == "aten::view"
    ol = OpList("m", "runtime", "runtime-dispatch", ops=[
        OpUse(op="aten::linear", count=1, composite=True, children=["aten::t", "aten::addmm"]),
        OpUse(op="aten::t", count=1, parent="aten::linear", via=["aten::linear"]),
        OpUse(op="aten::relu_", count=2), OpUse(op="aten::relu", count=1)])
    rows = graph_ops(ol, known)
    # the composite is decomposed whatever kernels exist; relu_ counts as relu
    assert [(op, u.count, via) for op, u, via in rows] == [
        ("aten::relu", 3, ["aten::relu_"]), ("aten::t", 1, [])]


def test_graph_check_per_release(cat: Catalog) -> None:
    ol = _oplist("aten::relu_", "aten::add.Tensor", "aten::mm", "aten::_softmax.out",
                 "aten::foo", "_c10d_functional::all_reduce")
    g = graph_check(cat, ol, "2.1.0.post17")
    by = {o["op"]: o for o in g["ops"]}
    assert {op: o["status"] for op, o in by.items()} == {
        "aten::relu": CONVERTED, "aten::add.Tensor": CONVERTED, "aten::mm": CONDITIONAL,
        "aten::_softmax.out": RAISES, "aten::foo": NO_CONVERTER,
        # registered only on torch >= 2.3.1; this release is torch 2.1.0
        "_c10d_functional::all_reduce": NO_CONVERTER}
    assert g["verdict"] == "NO" and g["torchair"] == A and g["tag"] == "v7.2.0-pytorch2.1.0"
    assert g["not_converting"] == [  # raises first, then no converter
        "aten::_softmax.out", "_c10d_functional::all_reduce", "aten::foo"]
    assert g["ops"][0]["status"] == RAISES  # worst first
    assert by["aten::relu"]["functional_of"] == ["aten::relu_"]
    assert by["aten::relu"]["eager"] == "npu"  # eager status alongside, from the resolver
    assert by["aten::mm"]["condition"] == (
        "self.dtype == DataType.DT_INT8 or mat2.dtype == DataType.DT_INT8")
    assert by["aten::_softmax.out"]["message"].startswith("RuntimeError: torch.ops.aten._softmax")
    assert by["aten::_softmax.out"]["url"] == (
        f"https://github.com/Ascend/torchair/blob/{A}/python/torchair/_ge_concrete_graph/"
        "ge_converter/aten/_softmax.py#L21")
    assert any("CompositeImplicitAutograd op decomposed" in n for n in g["notes"])
    # the other commit: relu has no converter there, mm always raises
    g26 = graph_check(cat, _oplist("aten::relu", "aten::mm"), "2.6.0.post5")
    assert {o["op"]: o["status"] for o in g26["ops"]} == {
        "aten::relu": NO_CONVERTER, "aten::mm": RAISES}


def test_only_converted_ops_say_yes_and_conditional_says_maybe(cat: Catalog) -> None:
    assert graph_check(cat, _oplist("aten::add.Tensor", "aten::relu"),
                       "2.1.0.post17")["verdict"] == "YES"
    assert graph_check(cat, _oplist("aten::add.Tensor", "aten::mm"),
                       "2.1.0.post17")["verdict"] == "MAYBE"


def test_unmirrored_pin_is_inferred_from_its_torch_line_and_labelled(cat: Catalog) -> None:
    pins = graph_pins(cat.engine)
    assert not pins["2.1.0.post10"].known and pins["2.1.0.post17"].known
    g = graph_check(cat, _oplist("aten::add.Tensor"), "2.1.0.post10")
    exact = graph_check(cat, _oplist("aten::add.Tensor"), "2.1.0.post17")
    # judged on the converters of the same torch line's mirrored pin, and says so
    assert g["inferred"] and g["basis_torchair"] == pins["2.1.0.post17"].torchair
    assert g["basis"].startswith(f"inferred from torchair at {pins['2.1.0.post17'].torchair[:12]}")
    assert g["verdict"] == exact["verdict"] != "UNKNOWN"
    assert [o["status"] for o in g["ops"]] == [o["status"] for o in exact["ops"]]
    assert g["exact_releases"][0] == "2.1.0.post17"  # its own line first
    assert not exact["inferred"] and exact["exact_releases"] == []
    assert "inferred from torchair at" in graph_text(g)


def test_no_pin_of_its_torch_line_stays_unknown_and_suggests_exact_releases(
        cat: Catalog) -> None:
    g = graph_check(cat, _oplist("aten::add.Tensor"), "2.4.0")
    assert g["verdict"] == "UNKNOWN" and g["ops"][0]["status"] == UNKNOWN and not g["inferred"]
    assert any("no known torchair" in n for n in g["notes"])
    pins = graph_pins(cat.engine)
    assert g["exact_releases"] and all(pins[r].known for r in g["exact_releases"])
    assert any(f"--graph --torch-npu {g['exact_releases'][0]}" in n for n in g["notes"])


def test_matrix_over_releases(cat: Catalog) -> None:
    m = graph_matrix(cat, _oplist("aten::add.Tensor", "aten::relu"))
    assert m["verdicts"] == {"1.11.0.post8": "UNKNOWN", "2.1.0.post10": "YES",
                             "2.1.0.post17": "YES", "2.6.0.post5": "NO"}
    assert m["inferred"] == {"2.1.0.post10": graph_pins(cat.engine)["2.1.0.post17"].torchair}
    assert m["ops"]["aten::relu"] == {"2.1.0.post10": CONVERTED, "2.1.0.post17": CONVERTED,
                                      "2.6.0.post5": NO_CONVERTER}
    # an inferred answer never makes the oldest converting release
    assert m["oldest_graph_release"] == "2.1.0.post17"


def test_op_history_shows_graph_status_next_to_eager(cat: Catalog) -> None:
    doc = describe_op(HistoryFacts.load(cat), "aten::relu").to_json()
    graph = {g["torch_npu"]: g["status"] for g in doc["graph"]}
    assert graph == {"1.11.0.post8": UNKNOWN, "2.1.0.post10": CONVERTED,
                     "2.1.0.post17": CONVERTED, "2.4.0": UNKNOWN,
                     "2.6.0.post5": NO_CONVERTER}
    inferred = {g["torch_npu"]: g["inferred"] for g in doc["graph"]}
    assert inferred["2.1.0.post10"].startswith("inferred from torchair at")
    assert inferred["2.1.0.post17"] == ""
    assert op_graph(cat, "aten::mm")[2]["condition"].startswith("self.dtype ==")


def test_catalog_without_graph_data_reads_unknown(tmp_path: Path) -> None:
    path = write_catalog(small_catalog(), tmp_path / "plain.sqlite")
    plain = Catalog.load(make_engine(path))
    assert graph_pins(plain.engine) == {}
    assert graph_check(plain, _oplist("aten::relu"), "2.1.0.post17")["verdict"] == "UNKNOWN"


def test_cli_check_graph(cat_path: Path, tmp_path: Path, cli: Callable[..., Any]) -> None:
    catalog = str(cat_path)
    bad = tmp_path / "bad.json"
    bad.write_text(_oplist("aten::relu", "aten::mm").dumps(), encoding="utf-8")
    args = ["check", str(bad), "--catalog", catalog, "--torch-npu", "2.6.0.post5", "--graph"]
    r = cli(*args, "-f", "json")
    assert r.exit_code == 1, r.output  # eager is clean; graph mode is not
    doc = json.loads(r.output)
    assert doc["graph"]["verdict"] == "NO" and doc["verdict"] != "NO"
    table = cli(*args)
    assert "Graph mode (torch.compile + torchair) on torch_npu 2.6.0.post5: NO" in table.output
    assert "no converter" in table.output
    md = cli(*args, "-f", "markdown")
    assert "## Graph mode (torch.compile with torchair)" in md.output
    assert cli(*args, "--fail-on", "never").exit_code == 0
    every = json.loads(cli(*args, "--all-releases", "-f", "json").output)
    assert every["graph"]["matrix"]["verdicts"]["2.1.0.post17"] == "MAYBE"
    plain = cli(*args[:-1], "-f", "json")
    assert "graph" not in json.loads(plain.output)  # without --graph the report is unchanged
    assert plain.exit_code == 0  # so the finding above is graph mode's


# --- real converters, a real transformer ---------------------------------------------------

REAL_PINS = {  # release → its real tag (the pins file maps it to a torchair commit)
    "2.4.0.post3": ("2.4.0", "v6.0.0.1-pytorch2.4.0"),  # c8745d0: mirrored
    "2.8.0.post5": ("2.8.0", "v26.0.1-pytorch2.8.0"),  # 7c6c754: mirrored
    "2.6.0": ("2.6.0", "v7.1.0-pytorch2.6.0"),  # 66c3272: not mirrored
    "2.10.0": ("2.10.0", "v26.0.0-pytorch2.10.0"),  # 7c6c754: mirrored (via 2.8.0's tag)
    "2.10.0.post4": ("2.10.0", "v26.1.0-pytorch2.10.0"),  # be0c45f: not mirrored
}


@pytest.fixture(scope="module")
def real_graph(upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    data = CatalogData()
    data.releases = [ReleaseRec(rel, torch, tag=tag, sort_key=i, kernel_source="op_plugin")
                     for i, (rel, (torch, tag)) in enumerate(sorted(REAL_PINS.items()))]
    # the functional forms the check maps in-place ops to must be known ops
    data.operators = [OperatorRec(op, "aten", op[6:].split(".")[0], "")
                      for op in ("aten::add.Tensor", "aten::mul.Tensor", "aten::relu")]
    _collect(data, upstream)
    path = write_catalog(data, tmp_path_factory.mktemp("real") / "catalog.sqlite")
    return Catalog.load(make_engine(path))


@pytest.fixture(scope="module")
def llama() -> OpList:
    torch = pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from opcheck.tracers import runtime
    from opcheck.tracers.inputs import InputSpec

    sys.path.insert(0, str(TESTS))
    from models import hf

    with torch.device("meta"):
        model, args, kwargs = hf.llama_tiny()
    return runtime.trace_module(model, InputSpec(), example_args=args, example_kwargs=kwargs,
                                label="llama_tiny")


@pytest.mark.upstream
@pytest.mark.torch
def test_llama_in_graph_mode_on_two_releases(real_graph: Catalog, llama: OpList) -> None:
    old = graph_check(real_graph, llama, "2.4.0.post3")
    new = graph_check(real_graph, llama, "2.8.0.post5")
    # the ops that would not convert: torchair c8745d0 (torch 2.1-2.4 era) has no converter
    # for _safe_softmax, which torch >= 2.5 decomposes sdpa to (the trace's torch is newer)
    assert old["not_converting"] == ["aten::_safe_softmax"] and old["verdict"] == "NO"
    assert new["not_converting"] == [] and new["verdict"] == "MAYBE"
    conditional = {o["op"] for o in new["ops"] if o["status"] == CONDITIONAL}
    assert {"aten::mm", "aten::bmm", "aten::_to_copy", "aten::embedding"} <= conditional
    ops = {o["op"] for o in new["ops"]}
    assert "aten::_reshape_alias" not in ops and "aten::view" in ops  # as torch.compile emits
    assert "aten::add_.Tensor" not in ops  # functionalized
    unknown = graph_check(real_graph, llama, "2.6.0")
    assert unknown["verdict"] == "UNKNOWN"
    m = graph_matrix(real_graph, llama)
    assert {r: m["verdicts"][r] for r in ("2.4.0.post3", "2.6.0", "2.8.0.post5")} == {
        "2.4.0.post3": "NO", "2.6.0": "UNKNOWN", "2.8.0.post5": "MAYBE"}


@pytest.mark.upstream
def test_a_2_10_release_answers_with_the_nearest_torchair_labelled(real_graph: Catalog) -> None:
    pins = graph_pins(real_graph.engine)
    assert not pins["2.10.0.post4"].known  # its own pin's converters are not mirrored
    oplist = _oplist("aten::add.Tensor", "aten::relu", "aten::masked_select")
    g = graph_check(real_graph, oplist, "2.10.0.post4")
    assert g["verdict"] != "UNKNOWN" and g["inferred"]
    assert g["basis_torchair"] == pins["2.10.0"].torchair  # the same torch line's mirrored pin
    assert f"inferred from torchair at {pins['2.10.0'].torchair[:12]}" in graph_text(g)
    assert g["exact_releases"][0] == "2.10.0"
    # the answer is the exact release's, op by op
    exact = graph_check(real_graph, oplist, "2.10.0")
    assert {o["op"]: o["status"] for o in g["ops"]} == {o["op"]: o["status"] for o in exact["ops"]}
    assert real_graph.release("2.10.0").torch == real_graph.release("2.10.0.post4").torch


@pytest.mark.upstream
@pytest.mark.torch
def test_model_of_converted_ops_says_yes(real_graph: Catalog) -> None:
    torch = pytest.importorskip("torch")
    from opcheck.tracers import runtime
    from opcheck.tracers.inputs import InputSpec

    class Gate(torch.nn.Module):
        def forward(self, x: Any) -> Any:
            return torch.relu(x) * torch.sigmoid(x) + x

    ol = runtime.trace_module(Gate(), InputSpec(), example_args=(torch.randn(2, 8),), label="g")
    g = graph_check(real_graph, ol, "2.8.0.post5")
    assert {o["op"] for o in g["ops"]} >= {"aten::relu", "aten::sigmoid", "aten::mul.Tensor",
                                           "aten::add.Tensor"}
    assert all(o["status"] == CONVERTED for o in g["ops"]) and g["verdict"] == "YES"


# --- torch.compile's default backend (inductor) ----------------------------------------------

INDUCTOR_LISTS = "aten = torch.ops.aten\nGENERATE_LIST = [\n    aten.add,\n    aten.relu,\n]\n"
INDUCTOR_INIT = "def _register():\n    register_backend_for_device('npu', S, W, C)\n"


@pytest.fixture(scope="module")
def inductor_cat(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from opcheck.sync.inductor import INIT, LISTS, InductorLowerings

    mirror = tmp_path_factory.mktemp("inductor_mirror")
    base = mirror / "github/Ascend/pytorch/v7.2.0-pytorch2.1.0"  # 2.1.0.post17's tag
    for rel, text in ((LISTS, INDUCTOR_LISTS), (INIT, INDUCTOR_INIT)):
        (base / rel).parent.mkdir(parents=True, exist_ok=True)
        (base / rel).write_text(text, encoding="utf-8")
    data = small_catalog()
    ctx = SyncContext(MirrorSource(mirror))
    ctx.data = data
    InductorLowerings().collect(ctx)
    assert ctx.failures == [] and data.inductor_rules
    path = write_catalog(data, tmp_path_factory.mktemp("inductor") / "catalog.sqlite")
    return Catalog.load(make_engine(path))


def test_inductor_generates_listed_ops_and_runs_the_rest_eagerly(inductor_cat: Catalog) -> None:
    g = graph_check(inductor_cat, _oplist("aten::add.Tensor", "aten::mm"), "2.1.0.post17")
    ind = g["inductor"]
    assert [o["op"] for o in ind["generated"]] == ["aten::add.Tensor"]  # aten.add: any overload
    assert ind["generated"][0]["where"] == "torch_npu/_inductor/lowering_op_list.py:3"
    # the rest runs its eager kernel: the eager status of the same release
    eager = {o["op"]: o["eager"] for o in g["ops"]}
    assert [(o["op"], o["eager"]) for o in ind["eager"]] == [("aten::mm", eager["aten::mm"])]
    assert ind["verdict"] == ("YES" if eager["aten::mm"] in ("npu", "composite") else "MAYBE")
    assert not ind["inferred"]
    assert any("lowering" not in n and "__init__.py:2" in n for n in ind["notes"])
    # the same torch line without its own lists: inferred from the tag that has them
    other = graph_check(inductor_cat, _oplist("aten::add.Tensor"), "2.1.0.post10")["inductor"]
    assert other["inferred"] and other["basis"] == (
        "inferred from torch_npu's _inductor at v7.2.0-pytorch2.1.0")
    # another torch line: unknown, never borrowed across lines
    assert graph_check(inductor_cat, _oplist("aten::add.Tensor"),
                       "2.6.0.post5")["inductor"]["verdict"] == "UNKNOWN"


def test_inductor_with_an_eager_problem_is_not_yes(inductor_cat: Catalog) -> None:
    ops = [op for op in ("aten::isin.Tensor_Tensor", "aten::_foo_unknown")]
    ind = graph_check(inductor_cat, _oplist(*ops), "2.1.0.post17")["inductor"]
    eager = {o["op"]: o["eager"] for o in ind["eager"]}
    assert ind["verdict"] in ("MAYBE", "NO") and set(eager) == set(ops)
    assert ind["verdict"] == ("NO" if "unsupported" in eager.values() else "MAYBE")
    assert "torch.compile default backend (inductor)" in graph_text(
        graph_check(inductor_cat, _oplist(*ops), "2.1.0.post17"))


REAL_INDUCTOR = {  # release → (torch, its tag), in release order
    "2.5.1.post3": ("2.5.1", "v7.1.0.2-pytorch2.5.1"),  # no _inductor in the 2.5 line
    "2.6.0.post3": ("2.6.0", "v7.2.0-pytorch2.6.0"),  # not mirrored: its line's tags judge it
    "2.6.0.post6": ("2.6.0", "v7.3.1-pytorch2.6.0"),  # the newest of the 2.6 line: mirrored
    "2.7.1.post8": ("2.7.1", "v26.1.0-pytorch2.7.1"),  # the fallback-list format
    "2.10.0.post4": ("2.10.0", "v26.1.0-pytorch2.10.0"),  # GENERATE_LIST format
}


@pytest.fixture(scope="module")
def real_inductor(upstream: Path, tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    from opcheck.sync.inductor import InductorLowerings

    data = CatalogData()
    data.releases = [ReleaseRec(rel, torch, tag=tag, sort_key=i, kernel_source="op_plugin")
                     for i, (rel, (torch, tag)) in enumerate(REAL_INDUCTOR.items())]
    data.operators = [OperatorRec(op, "aten", op[6:].split(".")[0], "")
                      for op in ("aten::add.Tensor", "aten::mm", "aten::_cdist_forward")]
    ctx = SyncContext(MirrorSource(upstream))
    ctx.data = data
    InductorLowerings().collect(ctx)
    assert ctx.failures == []
    path = write_catalog(data, tmp_path_factory.mktemp("real_inductor") / "catalog.sqlite")
    return Catalog.load(make_engine(path))


def test_inductor_verdict_per_release_on_the_real_sources(real_inductor: Catalog) -> None:
    ops = _oplist("aten::add.Tensor", "aten::_cdist_forward")
    verdicts = {rel: graph_check(real_inductor, ops, rel)["inductor"] for rel in REAL_INDUCTOR}
    assert all(v["verdict"] != "UNKNOWN" for v in verdicts.values())
    # 2.6.0.post3's own tag is not mirrored: the nearest tag of the 2.6 line, labelled
    six = verdicts["2.6.0.post3"]
    assert six["inferred"] and six["tag"] == "v7.3.1-pytorch2.6.0"
    assert "aten::add.Tensor" in {o["op"] for o in six["generated"]}
    ten = verdicts["2.10.0.post4"]
    assert not ten["inferred"] and ten["tag"] == "v26.1.0-pytorch2.10.0"
    assert ten["generated"][0]["where"].startswith("torch_npu/_inductor/lowering_op_list.py:")
    # the fallback-list format: every op but the listed fallbacks is lowered
    seven = verdicts["2.7.1.post8"]
    assert [o["op"] for o in seven["generated"]] == ["aten::add.Tensor"]
    assert [o["op"] for o in seven["eager"]] == ["aten::_cdist_forward"]
    assert seven["generated"][0]["where"].startswith("torch_npu/_inductor/lowering_fallback")
    # before torch_npu had _inductor: no NPU backend, said so
    five = verdicts["2.5.1.post3"]
    assert five["verdict"] == "NO" and not five["generated"]
    assert "has no _inductor" in five["notes"][0] and "2.6.0.post6" in five["notes"][0]
