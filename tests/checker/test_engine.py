"""The engine and binary facts in a check: a small catalog (tests/catalog_fixture.py) plus the
real facts of CANN's ops-nn sources at 8.5.0 for index_put and AdamW, through ``check``."""

from __future__ import annotations

from pathlib import Path

import pytest
from catalog_fixture import small_catalog

from opcheck.checker.check import check
from opcheck.checker.engine import choose_version, engine_lookup
from opcheck.core.oplist import OpList, OpUse, Signature
from opcheck.core.vocab import Engine
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import (
    EngineSiteRec,
    KernelFacts,
    KernelRec,
    OpAclnnRec,
    OpBinaryRec,
    OperatorRec,
)
from opcheck.db.engine import make_engine
from opcheck.scrapers import cann_binaries as cb
from opcheck.scrapers import cann_engine as ce
from opcheck.scrapers.rows import Origin

pytestmark = pytest.mark.upstream

NN = "github/hicann/ops-nn/v8.5.0"
RELEASE = "2.6.0.post5"  # the fixture pairs it with CANN 8.5.0
LINKS = {"aten::index_put_": "aclnnIndexPutImpl", "aten::_fused_adamw_": "aclnnApplyAdamWV2"}


def _catalog(upstream: Path, tmp_path: Path) -> Catalog:
    d = small_catalog()
    root = upstream / NN
    sid = d.add_source("cann_engine", NN, url="https://github.com/hicann/ops-nn/blob/v8.5.0/")
    wheel = next(s.id for s in d.sources if RELEASE in s.path)
    for op, fn in LINKS.items():
        name = op.removeprefix("aten::")
        d.operators.append(OperatorRec(op, "aten", name, "", f"{name}(Tensor self) -> Tensor",
                                       "", "CPU", "backend"))
        d.kernels.append(KernelRec(op, RELEASE, KernelFacts(op_api=True), wheel))
        d.op_aclnn.append(OpAclnnRec(op, fn, "exec", releases=RELEASE, path="x.cpp", line=1))
    files = [(str(p.relative_to(root)),
              ce.parse_source(p.read_text(encoding="utf-8", errors="replace"),
                              origin=Origin(str(p))))
             for sub in ("index", "optim") for p in sorted((root / sub).rglob("op_api/*.cpp"))]
    d.engine_sites = [EngineSiteRec(s.aclnn, "8.5.0", "ops-nn", s.op_type, s.engine,
                                    ce.formula_dumps(s.condition), s.launch, s.entry, sid)
                      for s in ce.analyze(files) if s.aclnn in LINKS.values()]
    for p in sorted((root / "optim").rglob("op_host/config/*/*_binary.json")):
        b = cb.parse_binary_list(p.read_text(encoding="utf-8"), origin=Origin(str(p)))
        d.op_binaries.append(OpBinaryRec(b.op_type, "8.5.0", "ops-nn", b.soc, b.binaries,
                                         ",".join(b.dtypes), False,
                                         str(p.relative_to(root)), sid))
    return Catalog.load(make_engine(write_catalog(d, tmp_path / "engine.sqlite")))


def _oplist(*uses: OpUse) -> OpList:
    return OpList(model="m", method="runtime", ir="runtime-dispatch", torch_version="2.6.0",
                  ops=list(uses))


def _index_put(*dtypes: tuple[str, str]) -> OpUse:
    sigs = [Signature({"self": s, "indices": i, "values": s}, [s], count=2) for s, i in dtypes]
    return OpUse("aten::index_put_", count=2 * len(sigs), signatures=sigs)


def _run(cat: Catalog, hardware: str, *uses: OpUse):  # type: ignore[no-untyped-def]
    target = next(r for r in cat.releases if r.torch_npu == RELEASE)
    return check(cat, _oplist(*uses), target, engine=engine_lookup(cat, hardware))


def test_index_put_engine_per_signature_on_910b(upstream: Path, tmp_path: Path) -> None:
    cat = _catalog(upstream, tmp_path)
    report = _run(cat, "910B", _index_put(("float64", "int64"), ("float32", "int64"),
                                          ("float32", "bool")))
    f = report.ops[0]
    assert f.engine is not None and f.engine["product"] == "910B"
    calls = {(c["inputs"]["self"], c["inputs"]["indices"]): c for c in f.engine["calls"]}
    slow = calls[("float64", "int64")]
    assert slow["engine"] == Engine.AICPU
    because = slow["aclnn"][0]["because"][0]
    assert because["at"].startswith("index/index_put_v2/op_api/aclnn_index_put_impl.cpp:")
    assert because["url"].startswith("https://github.com/hicann/ops-nn/blob/v8.5.0/index/")
    line = int(because["at"].rsplit(":", 1)[1])
    text = (upstream / NN / "index/index_put_v2/op_api/aclnn_index_put_impl.cpp").read_text(
        encoding="utf-8").splitlines()
    assert "DT_DOUBLE" in text[line - 1]
    assert calls[("float32", "int64")]["engine"] == Engine.AICORE
    # y[y < 0] = 0: the mask's nonzero (a host sync), then the routing on int64 indices
    mask = calls[("float32", "bool")]
    assert mask["before"][0]["step"] == "aten::nonzero" and mask["before"][0]["host_sync"]
    assert mask["engine"] == Engine.AICORE
    assert f.engine["aicpu_calls"] == 2 and f.engine["host_syncs"] == 2
    assert report.slow_paths == {"aicpu_calls": 2, "maybe_aicpu_calls": 0, "host_syncs": 2}
    slow_r = [r for r in f.restrictions if r.source == "cann_engine"]
    assert len(slow_r) == 1 and slow_r[0].slow and not slow_r[0].violated
    assert report.verdict == "YES"  # a slow path, not a failure
    assert "CANN 8.5.0 op_api sources" in f.engine["basis"]


def test_missing_binary_on_310p_is_a_finding(upstream: Path, tmp_path: Path) -> None:
    cat = _catalog(upstream, tmp_path)
    adamw = OpUse("aten::_fused_adamw_", count=1,
                  signatures=[Signature({"self": "float32"}, count=1)])
    on_310p = _run(cat, "310P", adamw).ops[0]
    found = [r for r in on_310p.restrictions if r.source == "cann_binary"]
    assert len(found) == 1 and found[0].violated and found[0].error == "561000"
    assert "Op ApplyAdamWV2 does not has any binary" in found[0].text
    assert "ascend310p" in found[0].text and on_310p.restricted
    row = next(b for b in on_310p.binaries if b["op_type"] == "ApplyAdamWV2")
    assert row["kernel"] == "none" and "ascend910b" in row["socs"]
    on_910b = _run(cat, "910B", adamw).ops[0]
    assert not [r for r in on_910b.restrictions if r.source == "cann_binary"]
    assert next(b for b in on_910b.binaries if b["op_type"] == "ApplyAdamWV2")["kernel"] == "binary"


def test_versions_before_the_open_sources_are_inferred_and_labelled() -> None:
    versions = ["8.5.0", "9.0.0", "9.1.0"]
    assert choose_version(versions, "9.0.0") == ("9.0.0", "CANN 9.0.0 op_api sources")
    v, basis = choose_version(versions, "8.2.RC1") or ("", "")
    assert v == "8.5.0" and basis.startswith("inferred") and "predates" in basis
    v, basis = choose_version(versions, "9.2.0") or ("", "")
    assert v == "9.1.0" and basis.startswith("inferred")


@pytest.mark.torch
def test_traced_script_shows_the_ai_cpu_call_and_the_mask_sync(upstream: Path,
                                                               tmp_path: Path) -> None:
    """The real recording of ``y[idx] = v`` and ``y[y < 0] = 0`` checked on 910B."""
    pytest.importorskip("torch")
    from testpaths import FIXTURES

    from opcheck.tracers.script import run_script

    run = run_script(FIXTURES / "scripts" / "index_put_engine.py", timeout=240,
                     memory_mb=4096)
    use = next(u for u in run.oplist.ops if u.op == "aten::index_put_")
    cat = _catalog(upstream, tmp_path)
    calls = {c["inputs"]["indices"]: c for c in _run(cat, "910B", use).ops[0].engine["calls"]}
    assert calls["int64"]["engine"] == Engine.AICPU and calls["int64"]["inputs"]["self"] == "float64"
    assert calls["bool"]["before"][0]["step"] == "aten::nonzero"
    assert calls["bool"]["engine"] == Engine.AICORE
