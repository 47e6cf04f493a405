"""The read API outside Catalog (opcheck.db.reads) on the small catalog, and what it feeds."""

from __future__ import annotations

from pathlib import Path

from catalog_fixture import small_catalog

from opcheck.contrib.workaround_catalog import workaround_lookup
from opcheck.db import reads
from opcheck.db.build import write_catalog
from opcheck.db.catalog import Catalog
from opcheck.db.data import WorkaroundRec
from opcheck.db.engine import make_engine
from opcheck.db.tables import Source, Workaround


def _catalog(tmp_path: Path) -> Catalog:
    data = small_catalog()
    data.workarounds = [
        WorkaroundRec("everywhere", "all products", "rewrite", hardware="all", ops=("aten::relu",)),
        WorkaroundRec("a2-only", "A2 only", "rewrite", hardware="atlas-a2-training",
                      ops=("aten::relu",)),
    ]
    return Catalog.load(make_engine(write_catalog(data, tmp_path / "c.sqlite")))


def test_whole_rows_read_as_table_models(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    sources = reads.sources(cat.engine)
    data = small_catalog()
    assert [s.id for s in sources] == [s.id for s in data.sources]
    assert all(isinstance(s, Source) for s in sources)
    assert [(d.op, d.replacement) for d in reads.deprecations(cat.engine)] == [
        (d.op, d.replacement) for d in data.deprecations]
    ws = reads.workarounds(cat.engine)
    assert [w.id for w in ws] == ["a2-only", "everywhere"] and isinstance(ws[0], Workaround)


def test_workaround_lookup_matches_the_named_hardware(tmp_path: Path) -> None:
    cat = _catalog(tmp_path)
    release = cat.releases[-1]

    def ids(hardware: str | None) -> list[str]:
        return [r.id for r in workaround_lookup(cat, hardware)("aten::relu", release)]

    assert ids(None) == ["a2-only", "everywhere"]
    assert ids("A2") == ["a2-only", "everywhere"]
    assert ids("910A") == ["everywhere"]
