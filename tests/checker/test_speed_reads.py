"""Per-op catalog reads: the resolver reads the kernel rows of the ops it resolves (and of the
chains they lead to), and decides exactly what it decided over a whole release in memory."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import event

from opcheck.checker.check import all_releases_matrix
from opcheck.checker.levels import received
from opcheck.checker.queries import missing_in_release, op_history
from opcheck.checker.resolve import Resolver
from opcheck.core.oplist import OpList, OpUse
from opcheck.db.catalog import Catalog
from opcheck.db.engine import open_catalog


def _fresh(path: Path) -> Catalog:
    return Catalog.load(open_catalog(path))


def _whole(path: Path) -> Catalog:
    """A catalog with every release's kernels in memory: the resolver's old way of reading."""
    cat = _fresh(path)
    for r in cat.releases:
        cat.kernels(r.torch_npu)
    return cat


@contextmanager
def kernel_queries(cat: Catalog) -> Iterator[list[str]]:
    seen: list[str] = []

    def record(_conn: object, _cursor: object, statement: str, *_args: object) -> None:
        if "FROM npukernel" in statement:
            seen.append(statement)

    event.listen(cat.engine, "before_cursor_execute", record)
    try:
        yield seen
    finally:
        event.remove(cat.engine, "before_cursor_execute", record)


def _oplist(ops: list[str]) -> OpList:
    """Ops called directly, plus a composite whose kernel some releases lack."""
    linear = OpUse(op="aten::linear", composite=True, children=["aten::t", "aten::addmm"])
    inner = [OpUse(op=o, via=["aten::linear"], parent="aten::linear")
             for o in ("aten::t", "aten::addmm")]
    return OpList(model="m", method="test", ir="aten",
                  ops=[OpUse(op=op) for op in ops] + [linear, *inner])


def _ops(cat: Catalog) -> list[str]:
    return [*sorted(cat.operators.keys() | cat.registered_ops()), "custom::not_known.x"]


def test_per_op_reads_decide_as_a_whole_release_does(small_catalog_path: Path) -> None:
    whole = _whole(small_catalog_path)
    ops = _ops(whole)
    for rel in (r.torch_npu for r in whole.releases if r.has_kernels):
        want = [Resolver(whole, rel).resolve(op) for op in ops]
        # one op at a time (opcheck op, the web pages) and in a batch (a check)
        assert [Resolver(_fresh(small_catalog_path), rel).resolve(op) for op in ops] == want
        assert Resolver(_fresh(small_catalog_path), rel).resolve_many(ops,
                                                                      with_history=False) == want
        assert (Resolver(_fresh(small_catalog_path), rel).resolve_many(ops)
                == Resolver(whole, rel).resolve_many(ops))


def test_real_catalog_same_statuses_history_and_matrix(bundled_catalog: Path) -> None:
    whole = _whole(bundled_catalog)
    ops = _ops(whole)[::9]  # a spread over the universe: ~400 ops, structured chains included
    lazy = _fresh(bundled_catalog)
    for rel in [r.torch_npu for r in whole.releases if r.has_kernels][::6]:
        assert Resolver(lazy, rel).resolve_many(ops) == Resolver(whole, rel).resolve_many(ops)
    for op in ("aten::isin.Tensor_Tensor_out", "aten::logcumsumexp", "aten::add.out"):
        assert op_history(_fresh(bundled_catalog), op) == op_history(whole, op)
    oplist = _oplist(ops[:60])
    assert all_releases_matrix(_fresh(bundled_catalog), oplist) == all_releases_matrix(whole, oplist)


def test_a_check_reads_only_its_ops_rows(bundled_catalog: Path) -> None:
    cat = _fresh(bundled_catalog)
    release = next(r.torch_npu for r in reversed(cat.releases) if r.has_kernels)
    oplist = _oplist(["aten::mm", "aten::add.Tensor", "aten::isin.Tensor_Tensor",
                      "aten::logcumsumexp", "aten::relu"])
    with kernel_queries(cat) as queries:
        resolver = Resolver(cat, release)
        uses = received(oplist, resolver).ops
        resolver.resolve_many([u.op for u in uses], with_history=False)
    assert len(queries) == 1  # the ops and their chains, in one read
    assert not cat._kernels  # no release read whole
    assert sum(len(f) for f in cat._partial.values()) < 20


def test_all_releases_reads_each_op_once(bundled_catalog: Path) -> None:
    cat = _fresh(bundled_catalog)
    oplist = _oplist(["aten::mm", "aten::isin.Tensor_Tensor"])
    with kernel_queries(cat) as queries:
        all_releases_matrix(cat, oplist)
    assert len(queries) <= 2  # the first release, then every release in one go
    assert not cat._kernels


def test_walking_the_universe_reads_the_release_whole(small_catalog_path: Path) -> None:
    whole = _whole(small_catalog_path)
    lazy = _fresh(small_catalog_path)
    for rel in (r.torch_npu for r in whole.releases if r.has_kernels):
        assert missing_in_release(lazy, rel) == missing_in_release(whole, rel)


def test_walking_the_real_universe_switches_to_one_whole_read(bundled_catalog: Path) -> None:
    whole = _whole(bundled_catalog)
    lazy = _fresh(bundled_catalog)
    rel = next(r.torch_npu for r in reversed(whole.releases) if r.has_kernels)
    with kernel_queries(lazy) as queries:
        assert missing_in_release(lazy, rel) == missing_in_release(whole, rel)
    assert rel in lazy._kernels  # after a bounded number of single-op reads
    assert len(queries) < 80
