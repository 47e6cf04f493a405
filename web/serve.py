"""Serve the catalog with Datasette: read-only, described, with an op page and an op-list page.

Datasette 0.65 reads one metadata document. ``datasette/metadata.yaml`` (what the tables and
columns mean, sources, licences) and ``datasette/config.yaml`` (facets, search, canned queries,
plugins, settings) are kept apart on disk and merged here. The op page and the op-list page
get their statuses from the resolver and the checker, never from SQL.

Nothing in this module imports Datasette at import time.
"""

from __future__ import annotations

import asyncio
import copy
import email.parser
import email.policy
import json
import os
import re
import shutil
import socket
import sqlite3
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import yaml

from opcheck.checker.check import Report, check
from opcheck.checker.resolve import Resolution, Resolver
from opcheck.core.errors import OpcheckError, UsageError
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.search import SEARCH_INDEXES, create_search_index, search_tables, table_names

DATASETTE_DIR = Path(__file__).resolve().parent / "datasette"
DB_NAME = "catalog"
MAX_UPLOAD = 5 * 1024 * 1024  # an op list of a large model is ~100 kB; anything bigger is not one

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


def load_config() -> tuple[dict[str, Any], dict[str, Any]]:
    """(metadata for Datasette, settings): descriptions and configuration merged."""
    config = _read_yaml("config.yaml")
    settings = config.pop("settings", {}) or {}
    return _deep_merge(_read_yaml("metadata.yaml"), config), settings


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


def make_datasette(catalog: Path) -> Any:
    """A Datasette instance serving ``catalog`` immutably under the name ``catalog``."""
    from datasette.app import Datasette

    meta, settings = metadata_for(catalog)
    ds = Datasette(
        immutables=[str(catalog)],
        metadata=meta,
        settings=settings,
        template_dir=str(DATASETTE_DIR / "templates"),
        plugins_dir=str(DATASETTE_DIR / "plugins"),
    )
    # URLs and the metadata key are the database name; a synced or cached catalog file has
    # a digest in its name, so it is renamed to one stable name.
    name, db = next((n, d) for n, d in ds.databases.items() if d.path == str(catalog))
    if name != DB_NAME:
        ds.remove_database(name)
        ds.add_database(db, name=DB_NAME)
    return ds


def asgi_app(catalog: Path, ready: Any = None) -> Any:
    """The site as an ASGI app that runs plugin start-up (the op page's kernel cache) on the
    server's lifespan start-up, before the first visitor arrives, as ``datasette serve`` does
    before it starts listening. ``ready`` (an Event) is set when start-up is done."""
    ds = make_datasette(catalog)
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


def default_workers() -> int:
    # A cold Datasette page is CPU-bound Python under one GIL: one process per core is what
    # lets concurrent visitors use the machine. Capped: each worker holds its own page cache
    # and kernel lists (~150 MB).
    return max(1, min(os.cpu_count() or 1, 4))


def _listening_socket(host: str, port: int, *, reuse_port: bool) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # IPPROTO_TCP named explicitly: accepted sockets inherit it, and asyncio turns Nagle off
    # (TCP_NODELAY) only on sockets that say they are TCP. Without it, every keep-alive
    # response waits ~40 ms for a delayed ACK.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    if reuse_port:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock


def _run(catalog: Path, sock: socket.socket, ready: Any = None) -> None:
    import uvicorn

    config = uvicorn.Config(asgi_app(catalog, ready), log_level="warning", lifespan="on")
    uvicorn.Server(config).run(sockets=[sock])


def _worker(catalog: str, host: str, port: int, ready: Any) -> None:
    _run(Path(catalog), _listening_socket(host, port, reuse_port=True), ready)


def serve(catalog: Path, *, host: str = "127.0.0.1", port: int = 8001,
          workers: int = 1) -> None:
    if not search_tables(catalog):
        print("opcheck serve: this catalog has no search index (rebuild it with a newer "
              "opcheck to search op names and workarounds)", file=sys.stderr)
    if workers <= 1 or not hasattr(socket, "SO_REUSEPORT") or not sys.platform.startswith("linux"):
        sock = _listening_socket(host, port, reuse_port=False)
        _announce(catalog, host, port, 1)
        _run(catalog, sock)
        return
    _serve_workers(catalog, host, port, workers)


def _announce(catalog: Path, host: str, port: int, workers: int) -> None:
    print(f"opcheck: serving {catalog} read-only at http://{host}:{port}/ with {workers} "
          f"worker process{'es' if workers > 1 else ''} (Ctrl-C stops)", file=sys.stderr,
          flush=True)


def _serve_workers(catalog: Path, host: str, port: int, workers: int) -> None:
    """One uvicorn per worker process, each with its own SO_REUSEPORT socket on the same
    port: Linux spreads new connections over them. (One shared socket lets whichever worker
    wakes first accept every keep-alive connection of a burst, leaving the others idle.)"""
    import multiprocessing
    import signal
    import time

    # SO_REUSEPORT lets any process of this user join a port that is already served (say, a
    # second `opcheck serve`): refuse a port that answers instead of sharing it.
    probe = "127.0.0.1" if host in ("0.0.0.0", "") else "::1" if host == "::" else host
    try:
        socket.create_connection((probe, port), timeout=0.5).close()
    except OSError:
        pass
    else:
        raise UsageError(f"cannot listen on {host}:{port}: something already serves that port")
    # Held, never listened on: the port is checked once, with a clear error, and stays ours.
    guard = _listening_socket(host, port, reuse_port=True)
    _announce(catalog, host, port, workers)
    ctx = multiprocessing.get_context("spawn")
    events = [ctx.Event() for _ in range(workers)]
    procs = [ctx.Process(target=_worker, args=(str(catalog), host, port, ev), daemon=True)
             for ev in events]
    stopping = False

    def stop(signum: int, frame: Any) -> None:
        nonlocal stopping
        stopping = True

    previous = {sig: signal.signal(sig, stop) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        for proc in procs:
            proc.start()
        announced = False
        while not stopping:
            dead = [p for p in procs if not p.is_alive()]
            if dead:
                time.sleep(0.3)  # a Ctrl-C reaches the workers and this process together
                if stopping:
                    break
                raise OpcheckError(f"a server worker exited with code {dead[0].exitcode}")
            if not announced and all(ev.is_set() for ev in events):
                print(f"opcheck serve: {workers} worker processes ready", file=sys.stderr,
                      flush=True)
                announced = True
            time.sleep(0.1)
    finally:
        for proc in procs:
            if proc.is_alive():
                proc.terminate()
        for proc in procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
        guard.close()
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def export(catalog: Path, folder: Path) -> list[str]:
    """Write a self-contained folder for ``datasette publish`` / a container image: the
    catalog (as ``catalog.sqlite``, with search indexes), merged metadata, templates and
    plugins. Returns the ``datasette`` arguments that serve it."""
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


# --- what the custom pages show -------------------------------------------------------------


@dataclass
class ServeState:
    """Per-catalog objects the pages share. Pages call them from the event loop thread only,
    so the catalog's lazy kernel cache is never filled concurrently."""

    path: str
    catalog: Catalog
    sources: dict[int, dict[str, str]]
    workarounds: list[dict[str, str]]
    workaround_ops: dict[str, list[str]]
    deprecations: dict[str, list[str]]

    products: list[str] = field(default_factory=list)  # hardware named by the API docs
    has_api_docs: bool = False  # catalogs written before the api_support table lack it

    def connect(self) -> sqlite3.Connection:
        return _read_only(self.path)

    @property
    def usable_releases(self) -> list[ReleaseInfo]:
        """Releases with a kernel list, newest first (what the op-list page offers)."""
        return [r for r in reversed(self.catalog.releases) if r.has_kernels]


def _read_only(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(f"file:{path}?mode=ro&immutable=1", uri=True)
    conn.row_factory = sqlite3.Row
    return conn


@lru_cache(maxsize=4)
def state_for(path: str) -> ServeState:
    from opcheck.db.engine import make_engine

    cat = Catalog.load(make_engine(Path(path)))
    conn = _read_only(path)
    try:
        sources = {r["id"]: {k: str(v or "") for k, v in dict(r).items()}
                   for r in conn.execute("SELECT * FROM source")}
        workarounds = [{k: str(v or "") for k, v in dict(r).items()}
                       for r in conn.execute("SELECT * FROM workaround ORDER BY id")]
        wops: dict[str, list[str]] = {}
        for op, wid in conn.execute("SELECT op, workaround_id FROM workaround_op ORDER BY op"):
            wops.setdefault(op, []).append(wid)
        products: list[str] = []
        has_api = conn.execute(  # the two per-API tables were added together
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' "
            "AND name IN ('api_support', 'api_op')").fetchone()[0] == 2
        if has_api:
            products = [r[0] for r in conn.execute(
                "SELECT DISTINCT hardware FROM api_support WHERE hardware != '' ORDER BY 1")]
        deps: dict[str, list[str]] = {}
        for op, repl in conn.execute("SELECT op, replacement FROM deprecation"):
            deps.setdefault(op, []).append(repl)
    finally:
        conn.close()
    return ServeState(path, cat, sources, workarounds, wops, deps, products, has_api)


def workarounds_for(state: ServeState, op: str) -> list[dict[str, str]]:
    """Workarounds filed for the op itself or for its overload packet (``aten::normal_``
    covers ``aten::normal_.Tensor_float``), or for one of its overloads."""
    ids: list[str] = []
    for key, wids in state.workaround_ops.items():
        if key == op or op.startswith(key + ".") or key.startswith(op + "."):
            ids += [w for w in wids if w not in ids]
    return [w for w in state.workarounds if w["id"] in ids]


@dataclass(frozen=True)
class TimelineRow:
    release: ReleaseInfo
    resolution: Resolution
    source: dict[str, str] | None


@dataclass(frozen=True)
class TimelineRun:
    """Consecutive releases of one torch line where the op resolves the same way, from the
    same kind of source: the op page shows where things change, not 77 near-identical rows."""

    rows: tuple[TimelineRow, ...]  # newest first

    @property
    def head(self) -> TimelineRow:
        return self.rows[0]

    @property
    def releases(self) -> str:
        newest, oldest = self.rows[0].release.torch_npu, self.rows[-1].release.torch_npu
        return newest if len(self.rows) == 1 else f"{newest} … {oldest} ({len(self.rows)})"

    @property
    def cann(self) -> str:
        canns = list(dict.fromkeys(t.release.cann or "?" for t in reversed(self.rows)))
        return canns[0] if len(canns) == 1 else f"{canns[0]} – {canns[-1]}"

    @property
    def approximate(self) -> bool:
        return any(t.release.kernel_source == "op_plugin_branch" for t in self.rows)


def _run_key(t: TimelineRow) -> tuple[object, ...]:
    r = t.resolution
    src = (t.source or {}).get("scraper", "")
    return (t.release.torch_minor, r.status, r.kernel, r.aclnn, r.via, r.reason, src,
            t.release.kernel_source == "op_plugin_branch")


def timeline_runs(timeline: list[TimelineRow]) -> list[TimelineRun]:
    runs: list[list[TimelineRow]] = []
    for t in timeline:
        if runs and _run_key(runs[-1][-1]) == _run_key(t):
            runs[-1].append(t)
        else:
            runs.append([t])
    return [TimelineRun(tuple(r)) for r in runs]


@dataclass
class OpPage:
    op: str
    known: bool
    namespace: str = ""
    kernel_kind: str = ""
    structured_delegate: str = ""
    schema: str = ""
    dispatch: tuple[str, ...] = ()
    operator_source: dict[str, str] | None = None
    timeline: list[TimelineRow] = field(default_factory=list)  # newest first
    matrix_only: list[str] = field(default_factory=list)  # releases without a kernel list
    lines: list[dict[str, str]] = field(default_factory=list)  # per torch line summary
    first_npu: str = ""
    workarounds: list[dict[str, str]] = field(default_factory=list)
    deprecated_for: list[str] = field(default_factory=list)
    suggestions: list[str] = field(default_factory=list)
    api: ApiMatrix | None = None  # None: the catalog has no per-API documentation tables

    @property
    def runs(self) -> list[TimelineRun]:
        return timeline_runs(self.timeline)

    def to_json(self) -> dict[str, Any]:
        return {
            "schema_version": 1, "op": self.op, "known": self.known,
            "kernel_kind": self.kernel_kind, "structured_delegate": self.structured_delegate,
            "first_npu_release": self.first_npu,
            "releases": [
                {"torch_npu": t.release.torch_npu, "torch": t.release.torch,
                 "cann": t.release.cann, "status": t.resolution.status,
                 "kernel": t.resolution.kernel, "aclnn": t.resolution.aclnn,
                 "via": list(t.resolution.via), "reason": t.resolution.reason}
                for t in self.timeline
            ],
            "matrix_only_releases": self.matrix_only,
            "workarounds": [w["id"] for w in self.workarounds],
            "deprecated_for": self.deprecated_for,
            "apis": self.api.to_json() if self.api else None,
        }


@dataclass
class ApiMatrix:
    """Python APIs that call an op × hardware products, from the newest doc set that covers
    each pair: documented facts, shown as the docs state them."""

    products: list[str]  # "" = the doc names no product
    rows: list[tuple[str, dict[str, dict[str, str]]]]  # api → product → cell
    restrictions: list[dict[str, str]]

    def to_json(self) -> dict[str, Any]:
        return {"products": self.products,
                "apis": {api: cells for api, cells in self.rows},
                "restrictions": self.restrictions}


def api_matrix(state: ServeState, op: str) -> ApiMatrix | None:
    from opcheck.core.versions import release_key

    if not state.has_api_docs:
        return None
    conn = state.connect()
    try:
        rows = conn.execute(
            "SELECT a.api, a.doc_version, a.hardware, a.supported, a.only_dtypes, "
            "a.unsupported_dtypes, a.arg_limits, a.restriction, s.url "
            "FROM api_op o JOIN api_support a ON a.api = o.api "
            "LEFT JOIN source s ON s.id = a.source_id "
            "WHERE o.op = ? AND a.feature = '' ORDER BY a.api", (op,)).fetchall()
    finally:
        conn.close()
    newest: dict[tuple[str, str], sqlite3.Row] = {}
    for r in rows:
        key = (r["api"], r["hardware"])
        if key not in newest or (release_key(r["doc_version"] or "0")
                                 > release_key(newest[key]["doc_version"] or "0")):
            newest[key] = r
    products = sorted({hw for _, hw in newest}, key=lambda h: (h == "", h))
    by_api: dict[str, dict[str, dict[str, str]]] = {}
    restrictions = []
    for (api, hw), r in sorted(newest.items()):
        sup = r["supported"]
        mark = "yes" if sup == 1 else "no" if sup == 0 else "?"
        dtypes = (f"only {r['only_dtypes']}" if r["only_dtypes"] else "") + (
            f" not {r['unsupported_dtypes']}" if r["unsupported_dtypes"] else "")
        by_api.setdefault(api, {})[hw] = {"supported": mark, "dtypes": dtypes.strip(),
                                          "doc_version": r["doc_version"]}
        if r["only_dtypes"] or r["unsupported_dtypes"] or r["arg_limits"] or r["restriction"]:
            restrictions.append({
                "api": api, "hardware": hw, "doc_version": r["doc_version"],
                "only_dtypes": r["only_dtypes"], "unsupported_dtypes": r["unsupported_dtypes"],
                "arg_limits": r["arg_limits"], "restriction": r["restriction"],
                "link": r["url"] or "",
            })
    return ApiMatrix(products, sorted(by_api.items()), restrictions)


def op_page(state: ServeState, op: str) -> OpPage:
    """Everything the op page shows; statuses come from the resolver, one per release."""
    from opcheck.core.opname import canonical

    try:
        name = canonical(op)
    except OpcheckError:
        name = op.strip()
    cat = state.catalog
    info = cat.operators.get(name)
    has_kernel = bool(cat.kernel_releases([name])) if info is None else True
    if info is None and not has_kernel:
        stem = name.split(".", 1)[0]
        sugg = sorted(o for o in cat.operators if o == stem or o.startswith(stem + "."))
        if not sugg and len(stem) >= 3:
            short = stem.split("::")[-1]
            sugg = sorted(o for o in cat.operators if short in o)
        return OpPage(name, known=False, suggestions=sugg[:30])
    page = OpPage(name, known=True)
    if info is not None:
        page.namespace, page.kernel_kind = info.namespace, info.kernel_kind
        page.structured_delegate, page.schema = info.structured_delegate, info.schema
        page.dispatch = info.dispatch
    conn = state.connect()
    try:
        row = conn.execute("SELECT source_id FROM operator WHERE op = ?", (name,)).fetchone()
        ksrc = {rel: sid for rel, sid in conn.execute(
            "SELECT release, source_id FROM npukernel WHERE op = ?", (name,))}
    finally:
        conn.close()
    if row and row[0] is not None:
        page.operator_source = state.sources.get(row[0])
    by_line: dict[str, list[TimelineRow]] = {}
    for rel in cat.releases:
        if not rel.has_kernels:
            page.matrix_only.append(rel.torch_npu)
            continue
        res = Resolver(cat, rel.torch_npu).resolve(name)
        sid = ksrc.get(rel.torch_npu)
        trow = TimelineRow(rel, res, state.sources.get(sid) if sid is not None else None)
        page.timeline.append(trow)
        by_line.setdefault(rel.torch_minor, []).append(trow)
        if not page.first_npu and res.status == "npu":
            page.first_npu = rel.torch_npu
    page.timeline.reverse()
    for minor, rows in reversed(by_line.items()):
        first = next((t.release.torch_npu for t in rows if t.resolution.status == "npu"), "")
        page.lines.append({"torch": minor, "releases": str(len(rows)),
                           "oldest": rows[0].release.torch_npu,
                           "newest": rows[-1].release.torch_npu,
                           "first_npu": first, "latest_status": rows[-1].resolution.status,
                           "latest_kernel": rows[-1].resolution.kernel})
    page.api = api_matrix(state, name)
    page.workarounds = workarounds_for(state, name)
    page.deprecated_for = state.deprecations.get(name, [])
    return page


# --- the op-list page -----------------------------------------------------------------------


@dataclass(frozen=True)
class Submission:
    text: str  # the op list JSON, pasted or uploaded
    release: str
    cpu_fallback: bool = True
    hardware: str = ""  # product name or part of it; "" = limits that hold on every product


def parse_form(content_type: str, body: bytes) -> dict[str, str]:
    """Form fields of a POST: urlencoded or multipart (an uploaded file is read as text)."""
    if len(body) > MAX_UPLOAD:
        raise UsageError(f"the upload is larger than {MAX_UPLOAD // (1024 * 1024)} MB: "
                         "an op list is far smaller")
    ctype = content_type.split(";", 1)[0].strip().lower()
    if ctype == "multipart/form-data":
        head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode()
        msg = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + body)
        fields: dict[str, str] = {}
        for part in msg.iter_parts():
            name = part.get_param("name", header="content-disposition")
            if not isinstance(name, str):
                continue
            payload = part.get_payload(decode=True)
            raw = payload if isinstance(payload, bytes) else b""
            fields[name] = _as_text(raw)
        return fields
    if ctype in ("application/x-www-form-urlencoded", ""):
        return {k: v[-1] for k, v in parse_qs(body.decode("utf-8", "replace"),
                                              keep_blank_values=True).items()}
    raise UsageError(f"unsupported content type {ctype!r}")


def _as_text(raw: bytes) -> str:
    # Model archives and pickles are refused by their first bytes: this page reads op lists
    # only and never loads a model.
    if raw.startswith((b"PK\x03\x04", b"\x80\x02", b"\x80\x03", b"\x80\x04", b"\x80\x05")):
        raise UsageError("that looks like a model file: this page takes the op-list JSON "
                         "written by `opcheck trace MODEL -o ops.json`, never a model")
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise UsageError("the upload is not UTF-8 text: expected an op-list JSON") from None


def submission_from_fields(fields: dict[str, str]) -> Submission:
    text = fields.get("file", "").strip() or fields.get("oplist", "").strip()
    if not text:
        raise UsageError("paste an op list or choose a file (the JSON from `opcheck trace`)")
    return Submission(text, fields.get("release", "").strip(),
                      cpu_fallback=fields.get("no_cpu_fallback", "") == "",
                      hardware=fields.get("hardware", "").strip())


def run_check(state: ServeState, sub: Submission) -> Report:
    """The checker's report for a submitted op list, exactly as ``opcheck check`` makes it."""
    from opcheck.checker.queries import select_target
    from opcheck.checker.restrictions import restriction_lookup
    from opcheck.contrib.workarounds import workaround_lookup
    from opcheck.core.oplist import OpList

    try:
        doc = json.loads(sub.text)
    except json.JSONDecodeError as exc:
        raise UsageError(f"not JSON ({exc.msg} at line {exc.lineno}): expected the op list "
                         "written by `opcheck trace`") from None
    oplist = OpList.from_json(doc, source="the submitted op list")
    target = select_target(state.catalog, torch_npu=sub.release or None)
    return check(state.catalog, oplist, target, cpu_fallback=sub.cpu_fallback,
                 workarounds=workaround_lookup(state.catalog),
                 restrictions=(restriction_lookup(state.catalog, sub.hardware or None)
                               if state.has_api_docs else None))



# --- a real server for browser tests and benchmarks -----------------------------------------


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


@contextmanager
def running_server(catalog: Path, *, port: int | None = None, workers: int = 1,
                   timeout: float = 30.0) -> Iterator[str]:
    """Serve ``catalog`` on 127.0.0.1 in a child process; yields the base URL once every
    worker has started, and stops the child on exit. Loopback only: tests and benchmarks
    never expose the server."""
    import subprocess
    import threading
    import time
    import urllib.request

    port = port or free_port()
    code = ("import sys; from pathlib import Path; from opcheck.web.serve import serve; "
            "serve(Path(sys.argv[1]), host='127.0.0.1', port=int(sys.argv[2]), "
            "workers=int(sys.argv[3]))")
    proc = subprocess.Popen([sys.executable, "-c", code, str(catalog), str(port), str(workers)],
                            stderr=subprocess.PIPE, text=True)
    all_ready = threading.Event()

    def relay() -> None:  # the child's messages still reach the terminal
        assert proc.stderr is not None
        for line in proc.stderr:
            if "worker processes ready" in line:
                all_ready.set()
            else:
                sys.stderr.write(line)

    threading.Thread(target=relay, daemon=True).start()
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + timeout
        while True:
            if proc.poll() is not None:
                raise OpcheckError(f"the server exited with code {proc.returncode}")
            try:
                if workers <= 1 or all_ready.is_set():
                    with urllib.request.urlopen(url + "/-/versions.json", timeout=2):
                        break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise OpcheckError(f"the server did not answer on {url} within "
                                   f"{timeout:.0f} s")
            time.sleep(0.1)
        yield url
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


# --- response cache ---------------------------------------------------------------------------


class ResponseCache:
    """A bounded LRU of complete GET responses in front of Datasette (ASGI middleware).

    Only anonymous GETs without cookies or an Authorization header are cached, only 200s, and
    never the op-list page. Safe because the served catalog is immutable. Requests for a page
    that is being rendered wait for that render instead of starting their own: when a link
    goes round a team, twenty visitors cost one render, not twenty."""

    def __init__(self, entries: int, max_bytes: int) -> None:
        from collections import OrderedDict

        self.entries = entries
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.store: OrderedDict[bytes, tuple[dict[str, Any], bytes]] = OrderedDict()
        self.rendering: dict[bytes, asyncio.Event] = {}  # renders in progress, by key

    def wrap(self, app: Any) -> Any:
        async def cached(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if self.entries <= 0 or not self._cacheable(scope):
                await app(scope, receive, send)
                return
            key = scope.get("raw_path", scope["path"].encode()) + b"?" + scope.get("query_string", b"")
            pending = self.rendering.get(key)
            if pending is not None:
                await pending.wait()  # then a hit, unless that response was not cacheable
            if await self._replay(key, send):
                return
            done = self.rendering.setdefault(key, asyncio.Event())
            try:
                await self._render(app, key, scope, receive, send)
            finally:
                if self.rendering.get(key) is done:
                    del self.rendering[key]
                done.set()

        return cached

    async def _replay(self, key: bytes, send: Any) -> bool:
        hit = self.store.get(key)
        if hit is None:
            return False
        self.store.move_to_end(key)
        self.hits += 1
        await send(hit[0])
        await send({"type": "http.response.body", "body": hit[1]})
        return True

    async def _render(self, app: Any, key: bytes, scope: dict[str, Any], receive: Any,
                      send: Any) -> None:
        start: dict[str, Any] = {}
        chunks: list[bytes] = []

        async def capture(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                start.update(message)
            elif message["type"] == "http.response.body":
                chunks.append(message.get("body", b""))
            await send(message)

        await app(scope, receive, capture)
        body = b"".join(chunks)
        # A response that sets a cookie (Datasette's CSRF token) belongs to one visitor.
        personal = any(k.lower() == b"set-cookie" for k, _ in start.get("headers", []))
        if start.get("status") == 200 and not personal and len(body) <= self.max_bytes // 8:
            self._put(key, start, body)

    @staticmethod
    def _cacheable(scope: dict[str, Any]) -> bool:
        if scope.get("type") != "http" or scope.get("method") != "GET":
            return False
        if scope.get("path", "").startswith("/-/check"):
            return False
        names = {k.lower() for k, _ in scope.get("headers", [])}
        return b"cookie" not in names and b"authorization" not in names

    def _put(self, key: bytes, start: dict[str, Any], body: bytes) -> None:
        self.store[key] = (start, body)
        self.bytes += len(body)
        while self.store and (len(self.store) > self.entries or self.bytes > self.max_bytes):
            _, (_, old) = self.store.popitem(last=False)
            self.bytes -= len(old)
