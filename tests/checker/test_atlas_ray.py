"""``opcheck atlas --ray``: traces as Ray tasks on a local cluster (``ray.init(num_cpus=2)``),
results written by the one writer; a worker that dies mid-task is retried or reported, never
lost, never written twice."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from opcheck.checker import atlas
from opcheck.db.atlas import AtlasStore
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

ray = pytest.importorskip("ray")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def cluster() -> Iterator[Any]:
    ray.init(num_cpus=2, include_dashboard=False, logging_level="ERROR", log_to_driver=False)
    yield ray
    ray.shutdown()


@pytest.fixture
def small(small_catalog_path: Path) -> Catalog:
    return Catalog.load(make_engine(small_catalog_path))


def _oplist_json() -> str:
    from opcheck.core.oplist import OpList, OpUse

    ol = OpList("m", "runtime", "runtime-dispatch", torch_version="2.6.0",
                ops=[OpUse(op="aten::relu", count=1), OpUse(op="aten::add.Tensor", count=1)])
    return json.dumps(ol.to_json())


def test_a_dying_worker_is_retried_or_reported_never_lost_never_written_twice(
        cluster: Any, small: Catalog, tmp_path: Path) -> None:
    from opcheck.checker.atlas_ray import RETRIES, ray_tracer

    marks = tmp_path / "marks"
    marks.mkdir()
    text = _oplist_json()

    def task(spec: str, train: bool, timeout: float, memory_mb: int,
             composites: Any) -> tuple[str, str, float, str, bool]:
        # each attempt leaves a mark; "flaky" kills its worker on its first attempt only,
        # "doomed" on every attempt
        attempt = len(list(marks.glob(f"{spec}.*")))
        (marks / f"{spec}.{attempt}").touch()
        if spec == "doomed" or (spec == "flaky" and attempt == 0):
            os._exit(1)
        return text, "", 0.01, "fake-tensors", False

    names = ["ok1", "flaky", "doomed", "ok2"]
    archs = [atlas.Architecture("zoo", n, n) for n in names]
    store = AtlasStore(tmp_path / "atlas.sqlite")
    result = atlas.run_atlas(small, store, archs, atlas.Settings(),
                             tracer=ray_tracer("auto", task=task))
    assert result.traced == 4
    assert len(list(marks.glob("flaky.*"))) == 2  # died once, retried once
    assert len(list(marks.glob("doomed.*"))) == RETRIES + 1
    assert len(list(marks.glob("ok1.*"))) == 1
    (doomed,) = result.failed
    assert doomed.startswith("zoo/doomed: ray: ") and "\n" not in doomed
    rows = store.rows()
    by = {n: [r for r in rows if r.architecture == n] for n in names}
    assert all(by.values())  # nothing lost
    assert [r.verdict for r in by["doomed"]] == [atlas.ERROR]
    # written once: one run of rows per architecture, releases not repeated
    for n in ("ok1", "flaky", "ok2"):
        firsts = [r.first_release for r in by[n]]
        assert len(firsts) == len(set(firsts)) and by[n][-1].verdict == "YES"
    assert store.count("atlas_state") == 4


@pytest.mark.torch
def test_a_real_sandboxed_trace_runs_as_a_ray_task(cluster: Any, small: Catalog,
                                                   tmp_path: Path) -> None:
    from opcheck.checker.atlas_ray import ray_tracer

    (lstm,) = atlas.select(atlas.architectures("zoo"), ["lstm"])
    store = AtlasStore(tmp_path / "atlas.sqlite")
    result = atlas.run_atlas(small, store, [lstm], atlas.Settings(),
                             tracer=ray_tracer("auto"))
    assert result.failed == [] and result.traced == 1
    cached = store.trace(atlas.trace_key(lstm, atlas.library_version("zoo"), False))
    assert cached is not None
    ops = {u.op for u in atlas.OpList.from_json(json.loads(cached.oplist_json)).ops}
    assert "aten::lstm.input" in ops
