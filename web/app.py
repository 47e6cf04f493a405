"""The Datasette app: metadata and configuration merged, the instance, the ASGI app with its
start-up, and ``--export`` for ``datasette publish``.

Datasette 0.65 reads one metadata document. ``datasette/metadata.yaml`` (what the tables and
columns mean, sources, licences) and ``datasette/config.yaml`` (facets, search, canned queries,
plugins, settings) are kept apart on disk and merged here.

Nothing in this module imports Datasette at import time.
"""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
import sqlite3
from pathlib import Path
from typing import Any

import yaml

from opcheck.core.errors import UsageError
from opcheck.core.vocab import Status
from opcheck.db.search import SEARCH_INDEXES, create_search_index, search_tables, table_names

DATASETTE_DIR = Path(__file__).resolve().parent / "datasette"
DB_NAME = "catalog"


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _read_yaml(name: str) -> dict[str, Any]:
    doc = yaml.safe_load((DATASETTE_DIR / name).read_text(encoding="utf-8"))
    if not isinstance(doc, dict):
        raise UsageError(f"{name} is not a mapping")
    return doc


def status_list_html() -> str:
    """Every status with what it means, from the vocabulary: metadata.yaml names none."""
    return ", ".join(f"<code>{s.value}</code>: {html.escape(s.label)}" for s in Status)


def load_config() -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata for Datasette, settings): descriptions and configuration merged."""
    config = _read_yaml("config.yaml")
    settings = config.pop("settings", {}) or {}
    meta = _deep_merge(_read_yaml("metadata.yaml"), config)
    if isinstance(meta.get("description_html"), str):
        meta["description_html"] = meta["description_html"].replace("{statuses}",
                                                                    status_list_html())
    return meta, settings


def metadata_for(path: Path) -> tuple[dict[str, Any], dict[str, Any]]:
    """The merged metadata for one catalog file: search settings only for the indexes the
    file has (catalogs built before the indexes existed still serve, without search)."""
    meta, settings = load_config()
    present = table_names(path)
    db = meta.get("databases", {}).get(DB_NAME, {})
    for table in db.get("tables", {}).values():
        if table.get("fts_table") and table["fts_table"] not in present:
            for key in ("fts_table", "fts_pk", "searchmode"):
                table.pop(key, None)
    # Catalogs written before the per-API tables existed: their queries would only fail.
    missing = {"api_support", "api_op"} - present
    queries = db.get("queries", {})
    for name in [n for n, q in queries.items()
                 if any(re.search(rf"\b{t}\b", q.get("sql", "")) for t in missing)]:
        del queries[name]
    return meta, settings


def sql_settings(settings: dict[str, Any], allow_sql: bool) -> dict[str, Any]:
    """Settings with visitor-written SQL (``?sql=``, ``_where=``) allowed or not; canned
    queries, table views, facets and search work either way."""
    return {**settings, "default_allow_sql": allow_sql}


def make_datasette(catalog: Path, *, allow_sql: bool = True,
                   host_names: list[str] | None = None) -> Any:
    """A Datasette instance serving ``catalog`` immutably under the name ``catalog``; with
    ``allow_sql`` visitors may also run their own read-only SQL (on a thread pool, under the
    time limit: opcheck.web.sqlpool)."""
    from datasette.app import Datasette

    from opcheck.web.sqlpool import CatalogDatabase

    meta, settings = metadata_for(catalog)
    settings = sql_settings(settings, allow_sql)
    if host_names is not None:  # the guard refuses other Hosts (web/guard.py)
        meta.setdefault("plugins", {}).setdefault("opcheck", {})["host_names"] = host_names
    ds = Datasette(
        immutables=[str(catalog)],
        metadata=meta,
        settings=settings,
        template_dir=str(DATASETTE_DIR / "templates"),
        plugins_dir=str(DATASETTE_DIR / "plugins"),
    )
    # URLs and the metadata key are the database name; a synced or cached catalog file has
    # a digest in its name, so it is renamed to one stable name.
    # The database is replaced by one that runs visitor-written SQL off the event loop.
    name = next(n for n, d in ds.databases.items() if d.path == str(catalog))
    ds.remove_database(name)
    ds.add_database(CatalogDatabase(ds, str(catalog)), name=DB_NAME)
    return ds


def asgi_app(catalog: Path, ready: Any = None, *, allow_sql: bool = True,
             host_names: list[str] | None = None) -> Any:
    """The site as an ASGI app that runs plugin start-up (the op page's kernel cache) on the
    server's lifespan start-up, before the first visitor arrives, as ``datasette serve`` does
    before it starts listening. ``ready`` (an Event) is set when start-up is done."""
    ds = make_datasette(catalog, allow_sql=allow_sql, host_names=host_names)
    inner = ds.app()

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "lifespan":
            await inner(scope, receive, send)
            return
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await ds.invoke_startup()
                await send({"type": "lifespan.startup.complete"})
                if ready is not None:
                    ready.set()
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return

    return app


def export(catalog: Path, folder: Path, *, allow_sql: bool = False) -> list[str]:
    """Write a self-contained folder for ``datasette publish`` / a container image: the
    catalog (as ``catalog.sqlite``, with search indexes), merged metadata, templates and
    plugins. Returns the ``datasette`` arguments that serve it: a published catalog is
    public, so visitor-written SQL is off unless ``allow_sql``."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{DB_NAME}.sqlite"
    shutil.copyfile(catalog, target)
    if len(search_tables(target)) < len(SEARCH_INDEXES):
        conn = sqlite3.connect(target)
        try:
            create_search_index(conn)
            conn.commit()
        finally:
            conn.close()
    meta, settings = metadata_for(target)
    settings = sql_settings(settings, allow_sql)
    (folder / "metadata.json").write_text(json.dumps(meta, indent=2, ensure_ascii=False) + "\n",
                                          encoding="utf-8")
    for sub in ("templates", "plugins"):
        shutil.copytree(DATASETTE_DIR / sub, folder / sub, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    args = ["-i", str(target), "--metadata", str(folder / "metadata.json"),
            "--template-dir", str(folder / "templates"),
            "--plugins-dir", str(folder / "plugins")]
    for key, value in settings.items():
        args += ["--setting", key, str(value).lower() if isinstance(value, bool) else str(value)]
    return args
