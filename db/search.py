"""Full-text search indexes, built into a catalog while it is written (storage, not serving)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

# FTS5 tables built next to the facts (the served catalog is immutable). Trigram tokens let a
# search for `interleave` find `aten::repeat_interleave.self_Tensor` and `Add` find `aclnnAddmm`;
# workaround prose reads better with word stems.
SEARCH_INDEXES: dict[str, tuple[str, tuple[str, ...], str]] = {
    "operator_fts": ("operator", ("op",), "trigram"),
    "npukernel_fts": ("npukernel", ("aclnn",), "trigram"),
    "api_support_fts": ("api_support", ("api",), "unicode61"),
    "workaround_fts": ("workaround", ("id", "title", "problem", "fix", "rewrite_api"),
                       "porter unicode61"),
    "message_template_fts": ("message_template", ("template", "function", "path"), "unicode61"),
}


def create_search_index(conn: sqlite3.Connection) -> None:
    """Build the full-text indexes into a catalog being written (call before it is renamed
    into place). External-content tables: the text is stored once, in the fact tables."""
    for fts, (table, cols, tokenize) in SEARCH_INDEXES.items():
        conn.execute(f"DROP TABLE IF EXISTS {fts}")
        conn.execute(
            f"CREATE VIRTUAL TABLE {fts} USING fts5({', '.join(cols)}, "
            f"content='{table}', tokenize='{tokenize}')"
        )
        conn.execute(f"INSERT INTO {fts}({fts}) VALUES ('rebuild')")


def table_names(path: Path) -> set[str]:
    conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    finally:
        conn.close()


def search_tables(path: Path) -> set[str]:
    """The full-text tables present in a catalog file."""
    return table_names(path) & set(SEARCH_INDEXES)
