"""The Datasette site: metadata, facets, search, every canned query, the op page and the
op-list page, through Datasette's own test client (no network)."""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import shutil
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
import yaml
from live_server import running_server
from sqlalchemy import text

if not os.environ.get("CI"):  # CI installs the serve extra: there a missing Datasette fails
    pytest.importorskip("datasette")

from opcheck.checker.queries import op_history, release_diff
from opcheck.checker.resolve import kernel_label
from opcheck.contrib.workaround_catalog import workaround_lookup
from opcheck.core.oplist import OpList, OpUse
from opcheck.db import search
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine
from opcheck.web import pages, server
from opcheck.web.app import DATASETTE_DIR, make_datasette, metadata_for
from opcheck.web.cache import ResponseCache
from opcheck.web.pages import op as op_module
from opcheck.web.state import state_for

OLD, NEW = "2.1.0.post10", "2.1.0.post17"
TARGET = "2.6.0.post5"


@pytest.fixture(scope="module")
def served(bundled_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The bundled catalog (search indexes included, as `db/build.py` writes them) under a
    cache-style file name, which the site must serve as ``catalog``."""
    path = tmp_path_factory.mktemp("serve") / "catalog-0123abcd.sqlite"
    shutil.copyfile(bundled_catalog, path)
    assert search.search_tables(path) == set(search.SEARCH_INDEXES)
    return path


@pytest.fixture(scope="module")
def cat(served: Path) -> Catalog:
    return Catalog.load(make_engine(served))


class Client:
    """Datasette's in-process client on one event loop for the whole module."""

    def __init__(self, ds: Any) -> None:
        self.ds = ds
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(ds.invoke_startup())

    def get(self, path: str) -> Any:
        return self.loop.run_until_complete(self.ds.client.get(path))

    def post(self, path: str, **kw: Any) -> Any:
        return self.loop.run_until_complete(self.ds.client.post(path, **kw))

    def rows(self, path: str) -> list[dict[str, Any]]:
        sep = "&" if "?" in path else "?"
        r = self.get(f"{path}{sep}_shape=array&_size=max")
        assert r.status_code == 200, r.text[:500]
        return list(r.json())


@pytest.fixture(scope="module")
def client(served: Path) -> Iterator[Client]:
    c = Client(make_datasette(served))
    yield c
    c.loop.close()


def oplist_doc() -> dict[str, Any]:
    ol = OpList(model="tiny.py", method="runtime", ir="runtime-dispatch", torch_version="2.6.0",
                ops=[OpUse("aten::relu", 4, ["float32"]),
                     OpUse("aten::add.Tensor", 2, ["float32"]),
                     OpUse("aten::isin.Tensor_Tensor", 3, ["int64"], locations=["model.py:42"]),
                     OpUse("aten::repeat_interleave.self_Tensor", 1),
                     OpUse("mylib::custom", 1)])
    return ol.to_json()


# --- the instance -----------------------------------------------------------------------------


def test_catalog_is_immutable_and_named_catalog(client: Client, served: Path) -> None:
    before = hashlib.sha256(served.read_bytes()).hexdigest()
    db = client.ds.databases["catalog"]
    assert db.is_mutable is False
    r = client.get("/catalog.json?sql=" + "DELETE FROM meta")
    assert r.status_code == 400
    assert hashlib.sha256(served.read_bytes()).hexdigest() == before


def test_home_page_explains_how_to_read(client: Client) -> None:
    r = client.get("/")
    assert r.status_code == 200
    assert "How to read this" in r.text
    assert "/-/check" in r.text and "BSD-3-Clause" in r.text


def test_every_table_and_column_is_described(served: Path) -> None:
    meta, _ = metadata_for(served)
    tables = meta["databases"]["catalog"]["tables"]
    conn = sqlite3.connect(served)
    names = [r[0] for r in conn.execute(
        "SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'"
        " AND name NOT LIKE '%_fts_%' AND name NOT LIKE 'sqlite_%'")]
    for name in names:
        assert tables[name].get("description"), name
        cols = [r[1] for r in conn.execute(f"PRAGMA table_info({name})")]
        described = tables[name].get("columns", {})
        assert sorted(cols) == sorted(described), name
        assert all(described.values()), name
    conn.close()


def test_description_and_configuration_are_kept_apart() -> None:
    described = yaml.safe_load((DATASETTE_DIR / "metadata.yaml").read_text())
    configured = yaml.safe_load((DATASETTE_DIR / "config.yaml").read_text())
    for table in described["databases"]["catalog"]["tables"].values():
        assert set(table) <= {"description", "columns"}
    assert "queries" not in described["databases"]["catalog"]
    assert "plugins" not in described
    for table in configured["databases"]["catalog"]["tables"].values():
        assert "description" not in table and "columns" not in table


def test_catalog_without_search_index_still_serves(bundled_catalog: Path,
                                                   tmp_path: Path) -> None:
    meta, _ = metadata_for(bundled_catalog)
    tables = meta["databases"]["catalog"]["tables"]
    assert any("fts_table" in t for t in tables.values())  # the build adds the search index
    assert "unsupported_apis_on_hardware" in meta["databases"]["catalog"]["queries"]
    old = tmp_path / "old.sqlite"  # a catalog from before the search index and per-API tables
    shutil.copyfile(bundled_catalog, old)
    conn = sqlite3.connect(old)
    conn.executescript("DROP TABLE api_op; DROP TABLE api_support;" + "".join(
        f"DROP TABLE {fts};" for fts in search.SEARCH_INDEXES))
    conn.close()
    old_tables = metadata_for(old)[0]["databases"]["catalog"]["tables"]
    assert not any("fts_table" in t for t in old_tables.values())
    meta, _ = metadata_for(old)
    assert "unsupported_apis_on_hardware" not in meta["databases"]["catalog"]["queries"]
    assert "release_diff" in meta["databases"]["catalog"]["queries"]
    c = Client(make_datasette(old))
    try:
        assert c.get("/-/op/aten::add.Tensor").status_code == 200
        r = c.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": TARGET})
        assert r.status_code == 200 and "Verdict:" in r.text
    finally:
        c.loop.close()
    c = Client(make_datasette(bundled_catalog))
    try:
        assert c.get("/catalog/operator?_facet=namespace").status_code == 200
    finally:
        c.loop.close()


# --- facets and search ------------------------------------------------------------------------


def test_facets_configured_and_applied(client: Client, cat: Catalog) -> None:
    r = client.get(f"/catalog/npukernel.json?release={TARGET}&_facet=status")
    assert r.status_code == 200
    doc = r.json()
    counts = {f["value"]: f["count"] for f in doc["facet_results"]["status"]["results"]}
    expected: dict[str, int] = {}
    for facts in cat.kernels(TARGET).values():
        expected[facts.status] = expected.get(facts.status, 0) + 1
    assert counts == expected
    html = client.get("/catalog/release").text
    assert 'data-column="kernel_source"' in html or "kernel_source" in html


@pytest.mark.parametrize(("table", "term", "expect"), [
    ("operator", "interleave", "aten::repeat_interleave.self_Tensor"),
    ("npukernel", "AddRelu", "aten::_add_relu.Tensor"),
    ("workaround", "float64", "float64-rotary-tables-dtype-cast"),
])
def test_full_text_search(client: Client, table: str, term: str, expect: str) -> None:
    rows = client.rows(f"/catalog/{table}.json?_search={term}")
    assert rows
    assert any(expect in json.dumps(r) for r in rows), rows[:3]


# --- canned queries ---------------------------------------------------------------------------


def test_query_release_matrix(client: Client, cat: Catalog) -> None:
    rows = client.rows("/catalog/release_matrix.json")
    assert [r["torch_npu"] for r in rows] == [r.torch_npu for r in reversed(cat.releases)]
    by = {r["torch_npu"]: r for r in rows}
    assert by[TARGET]["kernels"] == sum(f.status == "kernel" for f in cat.kernels(TARGET).values())


def test_query_ops_without_kernel(client: Client, cat: Catalog) -> None:
    rows = client.rows(f"/catalog/ops_without_kernel.json?release={TARGET}")
    kernels = {op for op, f in cat.kernels(TARGET).items() if f.status == "kernel"}
    expected = sorted(op for op, info in cat.operators.items()
                      if info.namespace == "aten" and op not in kernels
                      and info.kernel_kind != "CompositeImplicitAutograd")
    assert [r["op"] for r in rows] == expected
    matrix_only = next(r.torch_npu for r in cat.releases if not r.has_kernels)
    assert client.rows(f"/catalog/ops_without_kernel.json?release={matrix_only}") == []


def test_query_release_diff_matches_library(client: Client, cat: Catalog) -> None:
    rows = client.rows(f"/catalog/release_diff.json?old={OLD}&new={NEW}")
    diff = release_diff(cat, OLD, NEW)
    got = {(r["change"], r["op"], r["old_family"], r["new_family"]) for r in rows}
    want = ({("added", op, "", kernel_label(cat.kernels(NEW)[op])) for op in diff.added}
            | {("removed", op, kernel_label(cat.kernels(OLD)[op]), "") for op in diff.removed}
            | {("family changed", op, a, b) for op, a, b in diff.family_changed})
    assert got == want
    assert got


def test_query_kernel_family_changes(client: Client, cat: Catalog) -> None:
    rows = client.rows("/catalog/kernel_family_changes.json?torch=2.1.0")
    assert rows
    order = [r.torch_npu for r in cat.releases]
    for r in rows[:50]:
        assert r["torch"] == "2.1.0"
        assert order.index(r["old_release"]) < order.index(r["release"])
        assert kernel_label(cat.kernels(r["old_release"])[r["op"]]) == r["old_family"]
        assert kernel_label(cat.kernels(r["release"])[r["op"]]) == r["new_family"]
        assert r["old_family"] != r["new_family"]
    one = rows[0]["op"]
    only = client.rows(f"/catalog/kernel_family_changes.json?op={one}")
    assert only and {r["op"] for r in only} == {one}


def test_query_workarounds_for_op(client: Client) -> None:
    rows = client.rows("/catalog/workarounds_for_op.json?op=aten::normal_.Tensor_float")
    assert "complex32-to-complex64-dtype-cast" in {r["id"] for r in rows}
    rows = client.rows("/catalog/workarounds_for_op.json?op=aten::isin")
    assert {"isin-tensor-tensor-rewrite", "isin-tensor-tensor-upgrade"} <= {r["id"] for r in rows}
    assert client.rows("/catalog/workarounds_for_op.json?op=aten::nonexistent") == []
    html = client.get("/catalog/workarounds_for_op?op=aten::isin.Tensor_Tensor").text
    assert '<a href="/-/op/aten::isin.Tensor_Tensor">' in html  # op cells link to the op page
    assert "<code>" in html  # the Markdown plugin renders problem/fix


def test_query_aclnn_for_cann(client: Client, cat: Catalog) -> None:
    rows = client.rows("/catalog/aclnn_for_cann.json?cann=8.3.rc1")
    releases = [r.torch_npu for r in cat.releases if r.cann == "8.3.RC1" and r.has_kernels]
    want = {(f.aclnn, op) for rel in releases for op, f in cat.kernels(rel).items()
            if f.op_api and f.status == "kernel"}
    assert {(r["aclnn"], r["op"]) for r in rows} == want
    for r in rows:
        only_aclnn = all(not cat.kernels(rel)[r["op"]].acl_op for rel in r["releases"].split()
                         if r["op"] in cat.kernels(rel))
        assert (r["needs_aclnn"] == "yes") == only_aclnn


def test_query_ops_without_graph_converter(client: Client, cat: Catalog) -> None:
    from opcheck.db.graph import converters, graph_pins

    pins = graph_pins(cat.engine)
    read = [r for r, p in pins.items() if p.known and cat.release(r).has_kernels]
    if not read:
        pytest.skip("the bundled snapshot has no torchair converters yet")
    rel = read[-1]
    kernels = {op for op, f in cat.kernels(rel).items() if f.status == "kernel"}
    conv = converters(cat.engine, pins[rel], kernels)
    want = {(op, conv[op].status if op in conv else "no_converter") for op in kernels
            if op not in conv or conv[op].status == "raises"}
    rows = client.rows(f"/catalog/ops_without_graph_converter.json?release={rel}")
    assert {(r["op"], r["graph"]) for r in rows} == want and want
    unknown = next((r for r, p in pins.items() if not p.known), None)
    if unknown is not None:
        assert client.rows(f"/catalog/ops_without_graph_converter.json?release={unknown}") == []


def test_query_aclnn_without_dtype_matches_library(client: Client, cat: Catalog) -> None:
    from opcheck.db.contract import function_docs

    rows = client.rows("/catalog/aclnn_without_dtype.json?product=910A&dtype=BFLOAT16"
                       "&cann=9.1.0")
    if not rows:
        pytest.skip("the bundled snapshot has no aclnn docs yet")

    def lacks(function: str) -> bool | None:  # None: not supported on 910A at 9.1.0
        doc = function_docs(cat.engine, function).get("9.1.0")
        if doc is None or "910A" not in doc.supported:
            return None
        listed = [p for p in doc.params if "BFLOAT16" in p.dtypes]
        whole = [e for e in doc.exceptions if e.kind == "not" and not e.params
                 and not e.conditional and "910A" in e.products and "BFLOAT16" in e.dtypes]
        return not listed or bool(whole)

    found = {r["function"] for r in rows}
    assert "aclnnCast" in found  # 不支持BFLOAT16 on Atlas 训练系列产品
    assert all(lacks(f) for f in found)
    with cat.engine.connect() as conn:
        others = [r[0] for r in conn.execute(text(
            "SELECT function FROM aclnn_function WHERE cann = '9.1.0' "
            "AND instr(supported, '910A') > 0 ORDER BY function LIMIT 60"))]
    assert all(lacks(f) is False for f in others if f not in found)


def test_query_aclnn_changes_for_op_matches_library(client: Client, cat: Catalog) -> None:
    from opcheck.db.contract import FunctionDoc, function_docs, op_functions

    op = "aten::index.Tensor"
    functions = op_functions(cat.engine, op)
    if not functions:
        pytest.skip("the bundled snapshot has no op → aclnn links yet")
    rows = client.rows(f"/catalog/aclnn_changes_for_op.json?op={op}&old=9.0.0&new=9.1.0")
    got = {(r["change"], r["function"], r["subject"], frozenset(r["detail"].split(",")) - {""})
           for r in rows if r["what"] == "param"}
    want = set()
    for fn in functions:
        docs = function_docs(cat.engine, fn)

        def facts(docs: dict[str, FunctionDoc], version: str) -> set[
                tuple[str, str, frozenset[str], tuple[str, ...], str, bool | None]]:
            doc = docs.get(version)
            return {(p.param, p.direction, p.dtypes, p.formats, p.ranks, p.non_contiguous)
                    for p in (doc.params if doc else [])}

        old, new = facts(docs, "9.0.0"), facts(docs, "9.1.0")
        want |= {("added", fn, f[0], f[2]) for f in new - old}
        want |= {("removed", fn, f[0], f[2]) for f in old - new}
    assert got == want


def test_every_canned_query_is_tested() -> None:
    configured = yaml.safe_load((DATASETTE_DIR / "config.yaml").read_text())
    names = set(configured["databases"]["catalog"]["queries"])
    tested = {n[len("test_query_"):].replace("_matches_library", "")
              for n in globals() if n.startswith("test_query_")}
    assert names == tested


# --- the op page ------------------------------------------------------------------------------


def test_op_page_statuses_come_from_the_resolver(client: Client, cat: Catalog) -> None:
    op = "aten::repeat_interleave.self_Tensor"
    r = client.get(f"/-/op/{op}?_format=json")
    assert r.status_code == 200
    doc = r.json()
    want = [(h.release.torch_npu, h.resolution.status if h.resolution else None,
             h.resolution.kernel if h.resolution else None) for h in op_history(cat, op)]
    assert [(x["torch_npu"], x["status"], x["kernel"]) for x in doc["releases"]] == want
    assert any(x["status"] is None for x in doc["releases"])  # releases without a kernel list
    html = client.get(f"/-/op/{op}").text
    assert 'id="timeline"' in html and "By PyTorch line" in html


def test_op_page_workarounds_sources_and_via(client: Client) -> None:
    html = client.get("/-/op/aten::isin.Tensor_Tensor").text
    assert "isin-tensor-tensor-rewrite" in html or "isin" in html
    assert "<code>" in html  # Markdown rendered
    assert "github.com" in html  # upstream source links
    # A structured op runs its .out form: the chain links to that op's page.
    html = client.get("/-/op/aten::add.Tensor").text
    assert "/-/op/aten::add.out" in html


@pytest.mark.parametrize("op", ["aten::isin.Tensor_Tensor", "aten::add.Tensor",
                                "aten::_thnn_fused_lstm_cell"])
def test_op_page_json_is_the_op_command_document(client: Client, served: Path,
                                                 cli: Callable[..., Any], op: str) -> None:
    """One op-history document: the page's JSON and `opcheck op --format json` are equal."""
    page = client.get(f"/-/op/{op}?_format=json").json()
    r = cli("op", op, "--catalog", str(served), "--format", "json")
    assert r.exit_code == 0, r.output
    assert json.loads(r.output) == page
    assert page["schema_version"] == 2 and page["known"] is True
    assert set(page["releases"][0]) == {"torch_npu", "torch", "train", "cann", "kernel_source",
                                        "status", "kernel", "aclnn", "via", "reason"}


@pytest.mark.parametrize(("op", "key"), [
    ("aten::isin.Tensor_Tensor", "aten::isin.Tensor_Tensor"),  # filed for the op itself
    ("aten::normal_", "aten::normal_"),
    ("aten::linalg_lstsq", "aten::linalg_lstsq.out"),  # filed for one of its overloads
])
def test_op_page_workarounds_come_from_the_workaround_lookup(client: Client, cat: Catalog,
                                                             op: str, key: str) -> None:
    lookup = workaround_lookup(cat)
    want = sorted({ref.id for rel in cat.releases for ref in lookup(key, rel)})
    assert want
    doc = client.get(f"/-/op/{op}?_format=json").json()
    assert doc["workarounds"] == want
    html = client.get(f"/-/op/{op}").text
    assert all(f'id="w-{w}"' in html for w in want)
    assert html.count('class="workaround"') == len(want)


def test_op_page_unknown_op(client: Client) -> None:
    r = client.get("/-/op/aten::add")  # no op, but a name with overloads: they are listed
    assert r.status_code == 200
    assert "/-/op/aten::add.Tensor" in r.text
    r = client.get("/-/op/mylib::nothing?_format=json")
    assert r.status_code == 404 and r.json()["known"] is False


# --- the op-list page -------------------------------------------------------------------------


def test_check_page_form(client: Client, cat: Catalog) -> None:
    r = client.get("/-/check")
    assert r.status_code == 200
    newest = [x for x in cat.releases if x.has_kernels][-1].torch_npu
    assert f'<option value="{newest}" selected>' in r.text
    assert 'type="file"' in r.text


def _expected(cat: Catalog, release: str) -> dict[str, Any]:
    """The report the check use case makes of the same request."""
    from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded
    from opcheck.web.pages.check import HOW_WEB

    request = CheckRequest(Recorded(OpList.from_json(oplist_doc())), torch_npu=release,
                           how=HOW_WEB)
    report = CheckUseCase(cat, workarounds=workaround_lookup(cat)).run(request).report
    return dict(json.loads(json.dumps(report.to_json())))


def test_check_paste(client: Client, cat: Catalog) -> None:
    r = client.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": TARGET})
    assert r.status_code == 200, r.text[:2000]
    want = _expected(cat, TARGET)
    assert f"Verdict: {want['verdict']}" in r.text
    for op in want["ops"]:
        assert op["op"] in r.text
    assert "mylib::custom" in r.text and "unknown" in r.text


def test_check_page_capture_partial(client: Client, cat: Catalog) -> None:
    from opcheck.checker.usecase import CheckRequest, CheckUseCase, Recorded

    r = client.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": TARGET,
                                      "capture": "1"})
    assert r.status_code == 200, r.text[:2000]
    request = CheckRequest(Recorded(OpList.from_json(oplist_doc())), torch_npu=TARGET,
                           capture=True)
    cap = CheckUseCase(cat).run(request).report.capture
    assert cap is not None and 'id="capture"' in r.text
    assert f"Capture: {cap['verdict']} on torch_npu {TARGET}" in r.text
    plain = client.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": TARGET})
    assert 'id="capture"' not in plain.text


def test_check_upload(client: Client, cat: Catalog) -> None:
    files = {"file": ("ops.json", json.dumps(oplist_doc()).encode(), "application/json")}
    r = client.post("/-/check", data={"release": OLD, "oplist": ""}, files=files)
    assert r.status_code == 200, r.text[:2000]
    want = _expected(cat, OLD)
    assert f"Verdict: {want['verdict']}" in r.text
    assert f"torch_npu {OLD}" in r.text


def test_check_json_api_equals_checker(client: Client, cat: Catalog) -> None:
    r = client.post(f"/-/check?release={TARGET}", content=json.dumps(oplist_doc()),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200
    assert r.json() == _expected(cat, TARGET)


def test_check_json_api_says_which_release_a_prefix_meant(client: Client, cat: Catalog) -> None:
    line = TARGET.rsplit(".", 2)[0]  # 2.6.0.post5 → 2.6
    newest = max((r for r in cat.releases if r.has_kernels and r.torch_npu.startswith(line + ".")),
                 key=lambda r: r.sort_key).torch_npu
    r = client.post(f"/-/check?release={line}", content=json.dumps(oplist_doc()),
                    headers={"content-type": "application/json"})
    assert r.status_code == 200
    doc = r.json()
    assert doc["target"]["torch_npu"] == newest
    assert f"torch_npu {line} → {newest}" in doc["notes"][0]
    exact = client.post(f"/-/check?release={newest}", content=json.dumps(oplist_doc()),
                        headers={"content-type": "application/json"}).json()
    assert not any("→" in n for n in exact["notes"])


@pytest.mark.parametrize(("payload", "message"), [
    ("{not json", "not JSON"),
    (json.dumps({"kind": "something"}), "not an opcheck op list"),
    ("", "paste an op list"),
])
def test_check_bad_paste(client: Client, payload: str, message: str) -> None:
    r = client.post("/-/check", data={"oplist": payload, "release": TARGET})
    assert r.status_code == 400
    assert message in r.text


def test_check_refuses_model_files_and_unknown_releases(client: Client) -> None:
    files = {"file": ("model.pt2", b"PK\x03\x04" + b"\0" * 64, "application/octet-stream")}
    r = client.post("/-/check", data={"release": TARGET}, files=files)
    assert r.status_code == 400 and "never a model" in r.text
    r = client.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": "9.9.9"})
    assert r.status_code == 400 and "unknown torch_npu release" in r.text
    r = client.post("/-/check?release=9.9.9", content=json.dumps(oplist_doc()),
                    headers={"content-type": "application/json"})
    assert r.status_code == 400 and "error" in r.json()


def test_response_cache_serves_repeat_gets_only() -> None:
    calls: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        headers = [(b"set-cookie", b"x=1")] if scope["path"] == "/cookie" else []
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    cache = ResponseCache(entries=2, max_bytes=1 << 20, uncached=pages.uncached_paths())
    wrapped = cache.wrap(app)
    sent: list[dict[str, Any]] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    def get(path: str, method: str = "GET", headers: list[tuple[bytes, bytes]] | None = None) -> None:
        scope = {"type": "http", "method": method, "path": path, "query_string": b"",
                 "headers": headers or []}
        asyncio.run(wrapped(scope, None, send))

    for path in ("/a", "/a", "/-/check", "/-/check", "/cookie", "/cookie"):
        get(path)
    get("/a", headers=[(b"cookie", b"ds_actor=1")])
    get("/a", method="POST")
    assert calls == ["/a", "/-/check", "/-/check", "/cookie", "/cookie", "/a", "/a"]
    assert cache.hits == 1 and sent[-1]["body"] == b"/a"
    get("/b")
    get("/c")  # two entries at most: /a is evicted
    get("/a")
    assert calls[-1] == "/a" and len(cache.store) == 2


def test_response_cache_renders_a_page_once_for_concurrent_visitors() -> None:
    calls: list[str] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        calls.append(scope["path"])
        await asyncio.sleep(0.05)  # a render in progress while the others arrive
        headers = [(b"set-cookie", b"x=1")] if scope["path"] == "/cookie" else []
        status = 500 if scope["path"] == "/error" else 200
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": scope["path"].encode()})

    cache = ResponseCache(entries=8, max_bytes=1 << 20)
    wrapped = cache.wrap(app)

    async def visit(path: str) -> bytes:
        got: list[bytes] = []

        async def send(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                got.append(message["body"])

        scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
                 "headers": []}
        await wrapped(scope, None, send)
        return b"".join(got)

    async def crowd(path: str, n: int) -> list[bytes]:
        return list(await asyncio.gather(*(visit(path) for _ in range(n))))

    assert asyncio.run(crowd("/op", 10)) == [b"/op"] * 10
    assert calls == ["/op"] and cache.hits == 9
    # Responses that cannot be shared are rendered for every visitor, as before.
    for path in ("/cookie", "/error"):
        calls.clear()
        assert asyncio.run(crowd(path, 4)) == [path.encode()] * 4
        assert calls == [path] * 4
    assert not cache.rendering  # nothing left waiting


# --- the command ------------------------------------------------------------------------------


def test_serve_command_export(served: Path, tmp_path: Path) -> None:
    import typer
    from typer.testing import CliRunner

    from opcheck.cli import commands_serve

    app = typer.Typer()
    commands_serve.register(app)
    app.command("noop")(lambda: None)  # a second command keeps `serve` a sub-command
    out = tmp_path / "site"
    r = CliRunner().invoke(app, ["serve", "--catalog", str(served), "--export", str(out)])
    assert r.exit_code == 0, r.output
    assert r.output.startswith("datasette serve -i ")
    assert (out / "catalog.sqlite").is_file() and (out / "metadata.json").is_file()
    assert (out / "plugins" / "opcheck_pages.py").is_file()
    assert (out / "templates" / "opcheck_op.html").is_file()
    r = CliRunner().invoke(app, ["serve", "--catalog", str(tmp_path / "missing.sqlite")])
    assert r.exit_code == 2
    r = CliRunner().invoke(app, ["serve", "--catalog", str(served), "--port", "0"])
    assert r.exit_code == 2


def test_serve_binds_loopback_by_default() -> None:
    import inspect

    from opcheck.cli.commands_serve import serve as command

    assert inspect.signature(server.serve).parameters["host"].default == "127.0.0.1"
    assert inspect.signature(command).parameters["host"].default == "127.0.0.1"


def test_query_unsupported_apis_on_hardware(client: Client, served: Path) -> None:
    rows = client.rows("/catalog/unsupported_apis_on_hardware.json?hardware=A2&doc_version=2.7.1")
    conn = sqlite3.connect(served)
    want = {r for r in conn.execute(
        "SELECT api, hardware, feature FROM api_support WHERE supported = 0 "
        "AND doc_version = '2.7.1' AND (hardware = '' OR hardware LIKE '%A2%')")}
    conn.close()
    assert want
    assert {(r["api"], r["hardware"], r["feature"]) for r in rows} == want


def test_op_page_api_matrix_and_restrictions(client: Client, served: Path) -> None:
    conn = sqlite3.connect(served)
    op, api = conn.execute(
        "SELECT o.op, o.api FROM api_op o JOIN api_support a ON a.api = o.api "
        "WHERE a.unsupported_dtypes != '' AND a.feature = '' ORDER BY o.op LIMIT 1").fetchone()
    conn.close()
    doc = client.get(f"/-/op/{op}?_format=json").json()
    assert api in doc["apis"]["apis"]
    assert any(r["api"] == api and r["unsupported_dtypes"] for r in doc["apis"]["restrictions"])
    html = client.get(f"/-/op/{op}").text
    assert 'id="api-matrix"' in html and "Restrictions" in html


def test_check_with_hardware(client: Client) -> None:
    r = client.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": TARGET,
                                      "hardware": "Atlas A2 训练系列产品"})
    assert r.status_code == 200, r.text[:1000]
    assert "Verdict:" in r.text
    r = client.post("/-/check", data={"oplist": json.dumps(oplist_doc()), "release": TARGET,
                                      "hardware": "no such product"})
    assert r.status_code == 400 and "no hardware product matches" in r.text


# --- several worker processes -----------------------------------------------------------------


def _server_processes(catalog: Path) -> set[int]:
    """PIDs of live processes whose command line names ``catalog`` (the server and its
    workers; workers are spawned and carry it as an argument of the parent only, so their
    parent link is followed too)."""
    pids: set[int] = set()
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes()
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
        if str(catalog).encode() in cmd:
            pids.add(int(entry.name))
    grew = True
    while grew:
        kids = {pid for pid, ppid in parents.items() if ppid in pids} - pids
        pids |= kids
        grew = bool(kids)
    return pids


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="reads /proc (Linux)")
def test_workers_share_the_port_and_stop_together(served: Path, cat: Catalog) -> None:
    import urllib.request

    from opcheck.core.errors import UsageError

    with running_server(served, workers=2) as base:
        pids = _server_processes(served)
        assert len(pids) >= 3  # the supervisor and two workers
        port = int(base.rsplit(":", 1)[1])
        # Every connection is answered, whichever worker's socket the kernel picks.
        for i in range(12):
            with urllib.request.urlopen(f"{base}/-/op/aten::add.Tensor?_format=json&n={i}") as r:
                assert json.load(r)["op"] == "aten::add.Tensor"
        body = json.dumps(oplist_doc()).encode()
        req = urllib.request.Request(f"{base}/-/check?release={TARGET}", data=body,
                                     headers={"content-type": "application/json"})
        with urllib.request.urlopen(req) as r:
            assert json.load(r) == _expected(cat, TARGET)
        # SO_REUSEPORT would let a second server of this user join the port: it is refused.
        with pytest.raises(UsageError, match="already serves"):
            server.serve(served, host="127.0.0.1", port=port, workers=2)
        with pytest.raises(UsageError, match="cannot listen"):
            server.serve(served, host="127.0.0.1", port=port, workers=1)
    import time

    deadline = time.monotonic() + 10
    while _server_processes(served) & pids and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not _server_processes(served) & pids  # no worker outlives the server


def test_serve_command_rejects_bad_worker_counts(served: Path) -> None:
    from typer.testing import CliRunner

    from opcheck.cli.app import app

    for bad in ("0", "-1", "65"):
        r = CliRunner().invoke(app, ["serve", "--catalog", str(served), "--workers", bad])
        assert r.exit_code == 2 and "--workers must be 1-64" in r.output, r.output
    assert 1 <= server.default_workers() <= 4


# --- the op page's timeline -------------------------------------------------------------------


@pytest.mark.parametrize("op", ["aten::repeat_interleave.self_Tensor", "aten::isin.Tensor_Tensor",
                                "aten::_thnn_fused_lstm_cell", "aten::add.Tensor"])
def test_timeline_runs_cover_every_release_once(client: Client, served: Path, op: str) -> None:
    page = op_module.op_page(state_for(str(served)), op)
    runs = page.runs
    assert [t for run in runs for t in run.rows] == page.timeline  # in order, none lost
    for a, b in itertools.pairwise(runs):
        assert op_module.run_key(a.rows[-1]) != op_module.run_key(b.head)  # runs are maximal
    for run in runs:
        assert len({op_module.run_key(t) for t in run.rows}) == 1
        assert len({t.release.torch_minor for t in run.rows}) == 1
    html = client.get(f"/-/op/{op}").text
    body = html.split('id="timeline"', 1)[1].split("</table>", 1)[0]
    assert body.count("<tr>") == len(runs) + 1  # one row per run, plus the header
    # The newest run starts at the newest release with a kernel list.
    assert runs[0].head.release.torch_npu == page.timeline[0].release.torch_npu
    assert f'<td data-column="torch_npu">{runs[-1].releases}</td>' in body


def test_served_connections_turn_nagle_off() -> None:
    """Keep-alive responses are written in pieces: with Nagle's algorithm on, each one waits
    for the client's delayed ACK (~40 ms). asyncio turns it off only on sockets that say
    they are TCP, so the listening socket must."""
    import socket

    async def main() -> int:
        sock = server._listening_socket("127.0.0.1", 0, reuse_port=False)
        seen: asyncio.Future[int] = asyncio.get_running_loop().create_future()

        async def on_connect(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            peer = writer.get_extra_info("socket")
            seen.set_result(peer.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        listener = await asyncio.start_server(on_connect, sock=sock)
        port = sock.getsockname()[1]
        _, writer = await asyncio.open_connection("127.0.0.1", port)
        try:
            return await asyncio.wait_for(seen, 5)
        finally:
            writer.close()
            listener.close()

    assert asyncio.run(main()) != 0


def test_runaway_sql_is_stopped_by_the_time_limit(client: Client) -> None:
    """A runaway visitor query is cut off by the configured limit on the SQL pool's thread,
    and the worker serves the next request normally."""
    sql = "with recursive r(i) as (select 1 union all select i + 1 from r) select count(*) from r"
    r = client.get("/catalog.json?" + urlencode({"sql": sql}))
    assert r.status_code == 400
    assert "interrupted" in r.text.lower() or "time limit" in r.text.lower(), r.text[:300]
    assert client.get("/catalog/release.json?_size=1").status_code == 200


# --- statuses and the page registry -----------------------------------------------------------


def test_every_status_is_explained_and_styled(client: Client) -> None:
    """Statuses come from the vocabulary: a new one appears on the home page and gets a badge
    rule without an edit in web/."""
    from opcheck.core.vocab import Status

    home = client.get("/").text
    op_page = client.get("/-/op/aten::add.Tensor").text
    check_page = client.get("/-/check").text
    for s in Status:
        assert f"<code>{s.value}</code>: {s.label}" in home.replace("&#39;", "'"), s
        assert f".st-{s.value} {{ background:" in op_page, s
        assert f".st-{s.value} {{ background:" in check_page, s
    # The explanation and the badge rules are not written out by hand anywhere in web/.
    described = (DATASETTE_DIR / "metadata.yaml").read_text()
    styles = "".join(p.read_text() for p in (DATASETTE_DIR / "templates").glob("*.html"))
    assert "{statuses}" in described
    for s in Status:
        assert f"<code>{s.value}</code>" not in described
        assert f".st-{s.value}" not in styles


def test_pages_come_from_the_registry(client: Client) -> None:
    for page in pages.PAGES:
        assert (DATASETTE_DIR / "templates" / page.template).is_file()
        assert page.view_name in pages.view_names()
    assert pages.uncached_paths() == ("/-/check", "/-/explain")
    assert pages.csrf_exempt("/-/check") and not pages.csrf_exempt("/-/op/aten::add.Tensor")
    routes = {r for r, _ in pages.routes()}
    assert routes == {p.route for p in pages.PAGES}


def test_a_new_page_is_one_registration(served: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A page added to the registry is routed, gets the shared template variables, is kept
    by the page cache unless it says not to, and may take POSTs without a token."""
    from datasette.utils.asgi import Response

    from opcheck.web.pages.base import Page

    renders: list[str] = []

    async def hello(datasette: Any, request: Any) -> Any:
        renders.append(request.path)
        template = datasette.jinja_env.from_string(
            "{% include '_opcheck_style.html' %}<p>{{ op_url('aten::relu') }}</p>")
        html = await datasette.render_template(template, {}, request=request,
                                               view_name="opcheck-hello")
        return Response.html(html)

    for cached in (True, False):
        renders.clear()
        page = Page("opcheck-hello", r"^/-/hello$", "/-/hello", "opcheck_op.html", hello,
                    cached=cached, csrf_exempt=True,
                    methods=frozenset({"GET", "HEAD", "POST"}))
        monkeypatch.setattr(pages, "PAGES", (*pages.PAGES, page))
        c = Client(make_datasette(served))
        try:
            for _ in range(2):
                r = c.get("/-/hello")
                assert r.status_code == 200
                assert "/-/op/aten::relu" in r.text and ".st-npu" in r.text
            assert renders == (["/-/hello"] if cached else ["/-/hello"] * 2)
            # A visitor with a cookie and no CSRF token: refused unless the page is exempt.
            r = c.post("/-/hello", data={"x": "1"}, cookies={"ds_csrftoken": "x"})
            assert r.status_code == 200, r.text[:300]
        finally:
            c.loop.close()
