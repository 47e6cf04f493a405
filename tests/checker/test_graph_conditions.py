"""torchair converter conditions decided on the traced call signatures: the conditions and
schemas come from the bundled catalog (real torchair converters, real ATen schemas)."""

from __future__ import annotations

from pathlib import Path

import pytest

from opcheck.checker.graph import CONDITIONAL, CONVERTED, RAISES, graph_check
from opcheck.checker.graph_conditions import first_rank, holds, schema_params
from opcheck.core.oplist import OpList, OpUse, Signature
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.db.graph import ConverterInfo, converters, graph_pins


@pytest.fixture(scope="module")
def cat(bundled_catalog: Path) -> Catalog:
    return Catalog.load(make_engine(bundled_catalog))


def _conditional(cat: Catalog, op: str, needle: str) -> tuple[str, ConverterInfo]:
    """A release whose torchair converter for ``op`` raises under a condition naming
    ``needle``, and that converter."""
    pins = graph_pins(cat.engine)
    for rel in reversed(cat.releases):
        pin = pins.get(rel.torch_npu)
        if pin is None or not pin.known:
            continue
        info = converters(cat.engine, pin, [op]).get(op)
        if info is not None and info.status == CONDITIONAL and needle in info.condition:
            return rel.torch_npu, info
    raise AssertionError(f"no release converts {op} under a condition on {needle}")


def _schema(cat: Catalog, op: str) -> str:
    return cat.operators[op].schema


def test_schema_arguments_and_defaults_are_read(cat: Catalog) -> None:
    params = schema_params(_schema(cat, "aten::embedding"))
    assert list(params) == ["weight", "indices", "padding_idx", "scale_grad_by_freq", "sparse"]
    assert params["padding_idx"].default == -1 and params["sparse"].default is False
    assert params["weight"].is_tensor and not params["sparse"].is_tensor


def test_defaults_decide_a_condition_the_signature_leaves_out(cat: Catalog) -> None:
    _, info = _conditional(cat, "aten::embedding", "sparse")
    schema = _schema(cat, "aten::embedding")
    plain = Signature(inputs={"weight": "float32", "indices": "int64"})
    assert holds(info.condition, plain, schema) is False
    sparse = Signature(inputs={"weight": "float32", "indices": "int64"}, args={"sparse": True})
    assert holds(info.condition, sparse, schema) is True


@pytest.mark.parametrize(("dtype", "raises"), [("int8", True), ("float16", False),
                                               ("bfloat16", False)])
def test_dtype_conditions_read_the_traced_dtypes(cat: Catalog, dtype: str, raises: bool) -> None:
    _, info = _conditional(cat, "aten::bmm", "DT_INT8")
    sig = Signature(inputs={"self": dtype, "mat2": dtype})
    assert holds(info.condition, sig, _schema(cat, "aten::bmm")) is raises


def test_what_a_signature_cannot_say_stays_undecided(cat: Catalog) -> None:
    schema = _schema(cat, "aten::sgn")
    sig = Signature(inputs={"self": "float32"})
    assert holds("self.dtype == 28", sig, schema) is None  # the enum's number is not known
    assert holds("is_arch35() and self.dtype == DataType.DT_FLOAT", sig, schema) is None
    assert holds("not is_arch35() or self.dtype == DataType.DT_INT8", sig, schema) is None
    # a false conjunct decides an `and` whatever the unknown one says
    assert holds("is_arch35() and self.dtype == DataType.DT_INT8", sig, schema) is False
    assert holds("self.rank > 2", sig, schema) is None
    assert holds("this is not python", sig, schema) is None


def test_an_argument_the_converter_reassigns_first_is_not_the_calls(cat: Catalog) -> None:
    schema = _schema(cat, "aten::slice.Tensor")
    cond = "end is not None and end > 2147483647"
    long = Signature(inputs={"self": "float32"}, args={"end": 2**40})
    assert holds(cond, long, schema) is True
    assert holds(cond, long, schema, rebound=("end",)) is None
    # `if end is None: end = 2147483647`: a passed end is the call's, a None end the default
    assert holds(cond, long, schema, rebound=("end:none=2147483647",)) is True
    open_ended = Signature(inputs={"self": "float32"})  # end=None, the schema's default
    assert holds(cond, open_ended, schema) is False
    assert holds("end > 2147483646", open_ended, schema,
                 rebound=("end:none=2147483647",)) is True
    assert holds(cond, open_ended, schema, rebound=("end:none",)) is None


def test_rank_is_known_only_from_a_complete_sample_of_one_rank(cat: Catalog) -> None:
    _, info = _conditional(cat, "aten::t", "rank")
    schema = _schema(cat, "aten::t")
    sig = Signature(inputs={"self": "float32"})
    assert holds(info.condition, sig, schema, first_rank(schema, [[4, 8]], True)) is False
    assert holds(info.condition, sig, schema, first_rank(schema, [[2, 3, 4]], True)) is True
    assert first_rank(schema, [[4, 8], [2, 3, 4]], True) is None
    assert first_rank(schema, [[4, 8]], False) is None


def _use(op: str, dtype: str, count: int = 3) -> OpUse:
    sig = Signature(inputs={"self": dtype, "mat2": dtype}, count=count)
    return OpUse(op=op, count=count, dtypes=[dtype], shapes=[[2, 4, 4]], signatures=[sig])


@pytest.mark.parametrize(("dtype", "status"), [("int8", RAISES), ("float32", CONVERTED)])
def test_graph_check_decides_the_op_for_the_model(cat: Catalog, dtype: str, status: str) -> None:
    release, _ = _conditional(cat, "aten::bmm", "DT_INT8")
    ol = OpList("m", "runtime", "runtime-dispatch", ops=[_use("aten::bmm", dtype)])
    graph = graph_check(cat, ol, release)
    (row,) = graph["ops"]
    assert row["status"] == status
    assert row["evaluated"] and ("int8" in row["evaluated"]) == (status == RAISES)
    assert graph["verdict"] == ("NO" if status == RAISES else "YES")
    assert any("decided on the traced arguments" in n for n in graph["notes"])


def test_signatures_that_miss_calls_leave_the_op_conditional(cat: Catalog) -> None:
    release, _ = _conditional(cat, "aten::bmm", "DT_INT8")
    use = _use("aten::bmm", "float32")
    use.count = 5  # more calls than the recorded signatures hold (the recorder's cap)
    graph = graph_check(cat, OpList("m", "runtime", "runtime-dispatch", ops=[use]), release)
    assert graph["ops"][0]["status"] == CONDITIONAL and graph["verdict"] == "MAYBE"


def test_the_release_matrix_says_it_decided_conditions(cat: Catalog) -> None:
    from opcheck.checker.graph import graph_matrix, graph_text

    release, _ = _conditional(cat, "aten::bmm", "DT_INT8")
    ol = OpList("m", "runtime", "runtime-dispatch", ops=[_use("aten::bmm", "float32")])
    matrix = graph_matrix(cat, ol)
    assert matrix["ops"]["aten::bmm"][release] == CONVERTED
    assert matrix["decided"] >= 1
    graph = graph_check(cat, ol, release)
    graph["matrix"] = matrix
    assert "decided on the traced arguments" in graph_text(graph)
