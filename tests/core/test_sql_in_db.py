"""All SQL lives in ``opcheck.db`` (issue 25): the rest of the product calls its read API.

Found in every product module outside ``db/`` (tests and benchmarks are not the product):

- a string literal that reads as SQL (``SELECT … FROM``, ``INSERT INTO``, ``UPDATE … SET``,
  ``DELETE FROM``, ``CREATE TABLE/INDEX``, ``DROP``, ``PRAGMA``);
- a call of SQLAlchemy's or SQLModel's ``text`` or ``select`` (``text(…)``, ``sa.select(…)``);
- a call of ``.execute(``, ``.executemany(``, ``.executescript(`` or ``.exec_driver_sql(``.

Datasette's canned queries (``web/datasette/config.yaml``, ``queries:``) are not scanned: they
are configuration Datasette runs as named, user-visible pages, checked against the catalog's
query plans by ``tests/db/test_catalog_plans.py``. One module may call ``.execute(`` without
holding SQL: ``web/sqlpool.py`` is the Datasette database class and forwards the statements
Datasette hands it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from testpaths import ROOT

NOT_PRODUCT = {"db", "tests", "benchmarks", "build", ".venv", "data"}
# module → why it may call .execute( (no SQL of its own)
FORWARDERS = {"web/sqlpool.py": "Datasette's Database subclass: forwards Datasette's statements"}

SQL_TEXT = re.compile(
    r"\bSELECT\b[\s\S]*\bFROM\b|\bINSERT\s+INTO\b|\bUPDATE\s+\w+\s+SET\b|\bDELETE\s+FROM\b"
    r"|\bCREATE\s+(?:UNIQUE\s+)?(?:TABLE|INDEX|VIRTUAL|VIEW)\b|\bDROP\s+(?:TABLE|INDEX)\b"
    r"|\bPRAGMA\s+\w+")
EXECUTE = {"execute", "executemany", "executescript", "exec_driver_sql"}
SQL_MODULES = {"sqlalchemy", "sqlmodel", "sqlalchemy.sql", "sqlalchemy.sql.expression"}
BUILDERS = {"text", "select"}


def product_files() -> list[Path]:
    return [p for p in sorted(ROOT.rglob("*.py"))
            if p.relative_to(ROOT).parts[0] not in NOT_PRODUCT]


def sql_outside_db(path: Path, source: str) -> list[str]:
    """Where ``source`` (the text of ``path``) holds SQL or runs a statement."""
    rel = path.relative_to(ROOT).as_posix() if path.is_absolute() else str(path)
    tree = ast.parse(source, rel)
    builders: set[str] = set()  # local names bound to sqlalchemy/sqlmodel text or select
    modules: set[str] = set()  # local names bound to those modules
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module in SQL_MODULES:
            builders |= {a.asname or a.name for a in node.names if a.name in BUILDERS}
        elif isinstance(node, ast.Import):
            modules |= {a.asname or a.name for a in node.names
                        if a.name.split(".")[0] in {"sqlalchemy", "sqlmodel"}}
    found = []
    for node in ast.walk(tree):
        where = f"{rel}:{getattr(node, 'lineno', 0)}"
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            if SQL_TEXT.search(node.value):
                found.append(f"{where}: SQL text {node.value[:50]!r}")
        elif isinstance(node, ast.Call):
            func = node.func
            if isinstance(func, ast.Name) and func.id in builders:
                found.append(f"{where}: {func.id}(…) builds a statement")
            elif isinstance(func, ast.Attribute):
                if (func.attr in BUILDERS and isinstance(func.value, ast.Name)
                        and func.value.id in modules):
                    found.append(f"{where}: {func.value.id}.{func.attr}(…) builds a statement")
                elif func.attr in EXECUTE and rel not in FORWARDERS:
                    found.append(f"{where}: .{func.attr}(…) runs a statement")
    return found


def test_no_sql_outside_db() -> None:
    found = [hit for p in product_files()
             for hit in sql_outside_db(p, p.read_text(encoding="utf-8"))]
    assert found == [], "SQL outside opcheck.db (add a read function in db/):\n" + "\n".join(found)


def test_the_scan_sees_each_form_of_sql() -> None:
    """The rule fails on what it promises to fail on, and not on prose or lookalikes."""
    here = ROOT / "checker" / "x.py"
    cases = {
        'q = "SELECT op FROM npukernel WHERE release = :r"': 1,
        'conn.execute(q)': 1,
        'from sqlalchemy import text\nx = text(q)': 1,
        'import sqlalchemy as sa\nx = sa.select(t)': 1,
        'from sqlmodel import select as pick\nx = pick(t)': 1,
        's = "INSERT INTO meta (key, value) VALUES (?, ?)"': 1,
        'p = "PRAGMA foreign_key_check"': 1,
        # not SQL: prose, another module's text(), the standard select module
        'doc = "select a release from the list"': 0,
        'got = ctx.text(path)': 0,
        'import select\nselect.select([], [], [])': 0,
    }
    for source, hits in cases.items():
        assert len(sql_outside_db(here, source)) == hits, source
    assert sql_outside_db(ROOT / "web" / "sqlpool.py", "super().execute(sql)") == []
