"""Query plans on the built catalog: the indexes the library, the canned queries and the
browser's facets rely on are the ones SQLite picks (a wrong pick cost 3 s per canned query
before the facet indexes and statistics existed)."""

from __future__ import annotations

import re
import sqlite3
from pathlib import Path

import pytest
import yaml

from opcheck.db.catalog import KERNEL_RELEASES_SQL
from opcheck.web.app import DATASETTE_DIR


def plan(conn: sqlite3.Connection, sql: str, params: dict[str, str] | tuple[str, ...]) -> str:
    return "\n".join(r[3] for r in conn.execute("EXPLAIN QUERY PLAN " + sql, params))


@pytest.fixture(scope="module")
def conn(bundled_catalog: Path) -> sqlite3.Connection:
    return sqlite3.connect(f"file:{bundled_catalog}?mode=ro", uri=True)


def test_catalog_has_planner_statistics(conn: sqlite3.Connection) -> None:
    tables = {r[0] for r in conn.execute("SELECT tbl FROM sqlite_stat1")}
    assert {"npukernel", "operator", "release"} <= tables


def test_kernel_history_is_read_by_op(conn: sqlite3.Connection) -> None:
    ops = [r[0] for r in conn.execute("SELECT op FROM operator ORDER BY op LIMIT 500")]
    marks = ",".join("?" * len(ops))
    got = plan(conn, KERNEL_RELEASES_SQL.format(marks=marks), tuple(ops))
    assert "ix_npukernel_op" in got, got


@pytest.mark.parametrize("column", ["status", "op_api", "acl_op"])
def test_facet_counts_come_from_an_index(conn: sqlite3.Connection, column: str) -> None:
    # The SQL Datasette runs for a facet, for one release and for the whole table.
    for where, params in (("WHERE release = :r", {"r": "2.6.0.post5"}), ("", {})):
        sql = (f"SELECT {column} AS value, count(*) AS count FROM (SELECT * FROM npukernel "
               f"{where}) WHERE {column} IS NOT NULL GROUP BY {column} "
               "ORDER BY count DESC, value LIMIT 31")
        assert "COVERING INDEX" in plan(conn, sql, params), (where, plan(conn, sql, params))


def test_no_canned_query_scans_the_kernel_table(conn: sqlite3.Connection) -> None:
    config = yaml.safe_load((DATASETTE_DIR / "config.yaml").read_text(encoding="utf-8"))
    queries = config["databases"]["catalog"]["queries"]
    assert queries
    for name, query in queries.items():
        params = {p: "x" for p in re.findall(r":(\w+)", query["sql"])}
        got = plan(conn, query["sql"], params)
        assert not re.search(r"SCAN (npukernel|k)\b(?! USING)", got), (name, got)
