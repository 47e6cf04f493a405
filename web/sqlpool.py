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
            return fn(conn)

        return await asyncio.get_running_loop().run_in_executor(self.pool, in_thread)

    async def execute(self, sql: str, params: Any = None, truncate: bool = False,
                      custom_time_limit: int | None = None, page_size: int | None = None,
                      log_sql_errors: bool = True) -> Any:
        return await super().execute(sql, params, truncate=truncate,
                                     custom_time_limit=custom_time_limit,
                                     page_size=page_size, log_sql_errors=False)
