"""``opcheck run`` on a script written for NCCL: each collective is recorded (dtype, shape,
ReduceOp, splits, group size) and checked on HCCL per release, from torch_npu's own sources
(the bundled catalog's ``hccl_fact`` rows)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from testpaths import FIXTURES

pytest.importorskip("torch")

if TYPE_CHECKING:
    from click.testing import Result

SCRIPT = FIXTURES / "scripts" / "collectives.py"
WARNING = "HCCL doesn't support gather at the moment. Implemented with allgather instead."


def _run(cli: Callable[..., Result], catalog: Path, release: str,
         *opts: str) -> dict[str, Any]:  # fmt: skip
    res = cli("run", "--catalog", str(catalog), "-f", "json", "--timeout", "240",
              "--torch-npu", release, "--hardware", "910B", *opts, str(SCRIPT))
    assert res.exit_code in (0, 1), res.output
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def _ops(doc: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {o["op"]: o for o in doc["ops"] if o["op"].startswith("c10d::")}


def _hccl(op: dict[str, Any]) -> list[dict[str, Any]]:
    return [r for r in op["restrictions"] if r["source"] == "hccl"]


_CACHE: dict[str, dict[str, Any]] = {}


@pytest.fixture
def on_271(cli: Callable[..., Result], bundled_catalog: Path) -> dict[str, Any]:
    """One run shared by the tests reading it (a run is a sandboxed process)."""
    if "2.7.1.post2" not in _CACHE:
        _CACHE["2.7.1.post2"] = _run(cli, bundled_catalog, "2.7.1.post2")
    return _CACHE["2.7.1.post2"]


def test_gather_int64_is_an_emulation_with_its_line_and_fix(on_271: dict[str, Any]) -> None:
    gather = _ops(on_271)["c10d::gather_"]
    assert gather["status"] == "npu" and "int64" in gather["dtypes"]
    assert "tests/fixtures/scripts/collectives.py:11" in gather["locations"]
    speed = [s for s in on_271["speed"]["findings"]
             if s["kind"] == "collective" and s["op"] == "c10d::gather_"]
    assert speed, on_271["speed"]
    first = speed[0]
    assert WARNING in first["why"] and "8× the traffic" in first["why"]
    # the warning's own line in torch_npu's distributed_c10d.py
    assert "/torch_npu/distributed/distributed_c10d.py#L" in first["link"]
    assert "all_gather_into_tensor" in first["instead"]
    # gather_object goes through the same emulation, with its own fix
    assert any("all_gather_object" in s["instead"] for s in speed)


def test_unmapped_and_unchecked_dtypes_are_restricted_with_the_cast(
        on_271: dict[str, Any]) -> None:  # fmt: skip
    ops = _ops(on_271)
    bcast = ops["c10d::broadcast_"]
    assert bcast["restricted"]
    text = " ".join(r["text"] for r in _hccl(bcast))
    assert "complex64 has no HCCL data type" in text and "view_as_real" in text
    allreduce = ops["c10d::allreduce_"]
    assert allreduce["restricted"]
    f64 = next(r for r in _hccl(allreduce) if "float64" in r["dtypes_seen_outside"])
    assert f64["text"].startswith("HCCL allreduce: Unsupported data type float64")
    assert "cast to float32" in f64["text"] and "ProcessGroupHCCL.cpp#L" in f64["link"]


def test_avg_uneven_alltoall_and_p2p_on_271(on_271: dict[str, Any]) -> None:
    ops = _ops(on_271)
    avg = [s for s in on_271["speed"]["findings"]
           if s["kind"] == "collective" and s["op"] == "c10d::allreduce_"]
    assert avg and "divided by the group size" in avg[0]["why"]
    a2a = ops["c10d::alltoall_base_"]
    assert a2a["status"] == "npu" and not a2a["restricted"]
    assert any("HcclAlltoAllV" in r["text"] for r in _hccl(a2a))
    assert ops["c10d::send"]["status"] == ops["c10d::recv_"]["status"] == "npu"
    assert "HcclSend" in ops["c10d::send"]["reason"]
    # the C++ side of 2.7.1.post2 is read at another tag of torch 2.7: labelled inferred
    assert "inferred from v26.1.0-pytorch2.7.1 (nearest tag of torch 2.7" in ops["c10d::send"]["reason"]
    assert any("group of 8 ranks" in n for n in on_271["notes"])


def test_each_era_handles_avg_and_gather_its_own_way(
        cli: Callable[..., Result], bundled_catalog: Path) -> None:  # fmt: skip
    old = _ops(_run(cli, bundled_catalog, "2.0.1"))
    # 2.0.1: no gather in the process group and no Python emulation yet
    assert old["c10d::gather_"]["status"] == "unsupported"
    assert "ProcessGroupHCCL does not support gather" in old["c10d::gather_"]["reason"]
    # ... and AVG is neither mapped nor refused: summed without the division
    avg = [r for r in _hccl(old["c10d::allreduce_"]) if "AVG" in r["text"]]
    assert avg and avg[0]["unsupported"] and "wrong result" in avg[0]["text"]
    mid = _ops(_run(cli, bundled_catalog, "2.3.1", "--world-size", "4"))
    refused = [r for r in _hccl(mid["c10d::allreduce_"]) if "AVG" in r["text"]]
    assert refused and refused[0]["text"].startswith("Cannot use ReduceOp.AVG with HCCL")
    assert mid["c10d::gather_"]["status"] == "npu"  # emulated in Python from 6.0
    emulation = next(r for r in _hccl(mid["c10d::gather_"]) if r["slow"])
    assert "4× the traffic" in emulation["text"]  # --world-size wins over the script's 8
