"""``opcheck op c10d::<collective>``: what HCCL does with it on every release, from torch_npu's
own sources in the bundled catalog."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from click.testing import Result


def test_gather_per_release(cli: Callable[..., Result], bundled_catalog: Path) -> None:
    res = cli("op", "--catalog", str(bundled_catalog), "-f", "json", "c10d::gather_")
    assert res.exit_code == 0, res.output
    rows = {r["torch_npu"]: r for r in json.loads(res.stdout)["releases"]}
    assert rows["2.0.1"]["how"] == "refused" and rows["2.0.1"]["status"] == "unsupported"
    new = rows["2.7.1.post2"]
    assert (new["how"], new["status"]) == ("emulated", "npu")
    assert "Implemented with allgather instead" in new["why"]
    assert "distributed_c10d.py#L" in new["why"]
    assert "int64" in new["dtypes"] and "complex64" not in new["dtypes"]


def test_allreduce_reduce_ops_and_dtypes(cli: Callable[..., Result],
                                         bundled_catalog: Path) -> None:  # fmt: skip
    res = cli("op", "--catalog", str(bundled_catalog), "-f", "json", "c10d::allreduce_")
    assert res.exit_code == 0, res.output
    rows = {r["torch_npu"]: r for r in json.loads(res.stdout)["releases"]}
    assert rows["2.0.1"]["reduce_ops"]["AVG"] == "unchecked"
    assert rows["2.3.1"]["reduce_ops"]["AVG"] == "refused"
    assert rows["2.7.1.post2"]["reduce_ops"]["AVG"] == "sum_then_divide"
    assert rows["2.7.1.post2"]["reduce_ops"]["BXOR"] == "refused"
    # the per-collective check leaves float64 out from 6.0 on; 5.0 maps it
    assert "float64" in rows["2.0.1"]["dtypes"] and "float64" not in rows["2.3.1"]["dtypes"]
    table = cli("op", "--catalog", str(bundled_catalog), "c10d::allreduce_")
    assert table.exit_code == 0 and "sum_then_divide" in table.stdout


def test_alltoall_and_p2p_rules_per_release(cli: Callable[..., Result],
                                            bundled_catalog: Path) -> None:  # fmt: skip
    def rows(op: str) -> dict[str, dict[str, object]]:
        res = cli("op", "--catalog", str(bundled_catalog), "-f", "json", op)
        assert res.exit_code == 0, res.output
        return {r["torch_npu"]: r for r in json.loads(res.stdout)["releases"]}

    a2a = rows("c10d::alltoall_base_")
    new = " ".join(a2a["2.7.1.post2"]["rules"])  # type: ignore[arg-type]
    assert "uneven: split sizes given: sent with HcclAlltoAllV" in new
    assert "zero_dim: Scalar tensors (0-dim tensors)" in new
    assert "zero_dim" not in " ".join(a2a["2.3.1"]["rules"])  # type: ignore[arg-type]
    send, recv = rows("c10d::send"), rows("c10d::recv_")
    assert send["2.7.1.post2"]["status"] == recv["2.7.1.post2"]["status"] == "npu"
    assert "HcclRecv" in " ".join(recv["2.7.1.post2"]["rules"])  # type: ignore[arg-type]
    anysource = rows("c10d::recv_any_source_")
    assert anysource["2.7.1.post2"]["status"] == "unsupported"
