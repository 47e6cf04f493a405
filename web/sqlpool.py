"""The served catalog as a Datasette database whose visitor-written SQL runs off the event loop.

Pages, facets and canned queries run on the event loop (``num_sql_threads: 0``: the catalog is
indexed and read-only, and thread hand-offs would cost every page more than they save). A
query typed by a visitor (``?sql=``, ``_where=``) runs instead on a small thread pool: the
event loop keeps answering other visitors while it runs, and Datasette's progress handler
(``sql_time_limit_ms``) interrupts it in that thread at the limit, which frees the thread.
SQLite releases the GIL while it steps, so a slow query costs the loop little.
"""

from __future__ import annotations

import asyncio
import sqlite3
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

from datasette.database import Database

from opcheck.web.guard import ARBITRARY_SQL

T = TypeVar("T")

SQL_THREADS = 2  # per worker process: more would only share the same core
VALUE_LIMIT = 1_000_000  # bytes of one string or blob a visitor's query may build
SQL_LIMIT = 100_000  # bytes of SQL text
# What one visitor query may return in all: rows a page shows are capped by Datasette's
# max_returned_rows, but each value may be up to VALUE_LIMIT, so 5,000 of them were 5 GB.
RESULT_BYTES = 8_000_000
RESULT_ROWS = 10_000  # what a fetch of every row (not a page) may return


class ResultTooLarge(sqlite3.OperationalError):
    pass


def _row_bytes(row: Any) -> int:
    return sum(len(v) if isinstance(v, (str, bytes)) else 8 for v in row if v is not None)


class _BoundedCursor:
    """A cursor whose fetches stop with an error past RESULT_BYTES or RESULT_ROWS in all."""

    def __init__(self, cursor: sqlite3.Cursor) -> None:
        self._cursor = cursor
        self._bytes = 0
        self._rows = 0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cursor, name)

    def execute(self, sql: str, params: Any = ()) -> _BoundedCursor:
        self._cursor.execute(sql, params)
        self._bytes = self._rows = 0
        return self

    def _take(self, limit: int | None) -> list[Any]:
        rows: list[Any] = []
        while limit is None or len(rows) < limit:
            row = self._cursor.fetchone()
            if row is None:
                break
            self._rows += 1
            self._bytes += _row_bytes(row)
            if self._bytes > RESULT_BYTES:
                raise ResultTooLarge(f"the query returns more than {RESULT_BYTES // 1_000_000} MB: "
                                     "select fewer rows or shorter values")
            if self._rows > RESULT_ROWS:
                raise ResultTooLarge(f"the query returns more than {RESULT_ROWS} rows")
            rows.append(row)
        return rows

    def fetchmany(self, size: int | None = None) -> list[Any]:
        return self._take(self._cursor.arraysize if size is None else size)

    def fetchall(self) -> list[Any]:
        return self._take(None)

    def fetchone(self) -> Any:
        rows = self._take(1)
        return rows[0] if rows else None

    def __iter__(self) -> Any:
        return iter(self.fetchone, None)


class _BoundedConnection:
    """The visitor SQL thread's connection as Datasette's query functions see it."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self._conn = conn

    def __getattr__(self, name: str) -> Any:
        return getattr(self._conn, name)

    def cursor(self) -> _BoundedCursor:
        return _BoundedCursor(self._conn.cursor())

    def execute(self, sql: str, params: Any = ()) -> _BoundedCursor:
        return self.cursor().execute(sql, params)


class CatalogDatabase(Database):  # type: ignore[misc]  # Datasette is untyped
    """An immutable catalog database (same as ``Datasette(immutables=[...])`` makes) that
    routes visitor-written SQL to its own thread pool and leaves SQL errors, which are the
    visitor's, out of the server log (the access log has the 400)."""

    def __init__(self, ds: Any, path: str, threads: int = SQL_THREADS) -> None:
        super().__init__(ds, path=path, is_mutable=False)
        self.threads = threads
        self._pool: ThreadPoolExecutor | None = None
        self._local = threading.local()

    @property
    def pool(self) -> ThreadPoolExecutor:
        if self._pool is None:
            self._pool = ThreadPoolExecutor(max_workers=self.threads,
                                            thread_name_prefix="opcheck-sql")
        return self._pool

    async def execute_fn(self, fn: Callable[[Any], T]) -> T:
        if not ARBITRARY_SQL.get():
            result: T = await super().execute_fn(fn)
            return result

        def in_thread() -> T:
            conn = getattr(self._local, "conn", None)
            if conn is None:
                conn = self.connect()
                self.ds._prepare_connection(conn, self.name)
                # One SQLite step can build a value of any size (zeroblob(200000000) took a
                # worker to 2.4 GB): no catalog value comes near these, a visitor's may not.
                conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, VALUE_LIMIT)
                conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, SQL_LIMIT)
                self._local.conn = conn
            return fn(_BoundedConnection(conn))

        return await asyncio.get_running_loop().run_in_executor(self.pool, in_thread)

    async def execute(self, sql: str, params: Any = None, truncate: bool = False,
                      custom_time_limit: int | None = None, page_size: int | None = None,
                      log_sql_errors: bool = True) -> Any:
        return await super().execute(sql, params, truncate=truncate,
                                     custom_time_limit=custom_time_limit,
                                     page_size=page_size, log_sql_errors=False)
