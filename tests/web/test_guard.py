"""Serving defences in process (no network): who may run SQL, what the log gets, page-cache
keys, body caps and rationing. The same attacks against a live server: test_attacks.py."""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest

pytest.importorskip("datasette")

from opcheck.web import pages, server
from opcheck.web.app import export, make_datasette
from opcheck.web.cache import cache_key
from opcheck.web.guard import FaultLog, Guard, Ration, runs_arbitrary_sql

SLOW = "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c) SELECT count(*) FROM c"


@pytest.fixture(scope="module")
def served(bundled_catalog: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("guard") / "catalog.sqlite"
    shutil.copyfile(bundled_catalog, path)
    return path


class Site:
    def __init__(self, ds: Any) -> None:
        self.ds = ds
        self.loop = asyncio.new_event_loop()
        self.loop.run_until_complete(ds.invoke_startup())

    def get(self, path: str, **kw: Any) -> Any:
        return self.loop.run_until_complete(self.ds.client.get(path, **kw))


@pytest.fixture(scope="module")
def no_sql(served: Path) -> Iterator[Site]:
    site = Site(make_datasette(served, allow_sql=False))
    yield site
    site.loop.close()


# --- visitor-written SQL ---------------------------------------------------------------------


@pytest.mark.parametrize(("host", "allowed"), [
    ("127.0.0.1", True), ("localhost", True), ("::1", True), ("[::1]", True),
    ("0.0.0.0", False), ("::", False), ("192.168.1.7", False), ("catalog.example.com", False),
])
def test_sql_is_on_by_default_only_on_loopback(host: str, allowed: bool) -> None:
    assert server.sql_allowed_by_default(host) is allowed


def test_without_sql_tables_queries_and_search_still_work(no_sql: Site) -> None:
    for path in ("/catalog.json?" + urlencode({"sql": "SELECT 1"}),
                 "/catalog?" + urlencode({"sql": "SELECT 1"}),
                 "/catalog/release.json?" + urlencode({"_where": "1=1"})):
        assert no_sql.get(path).status_code == 403, path
    for path in ("/", "/catalog", "/catalog/release_matrix.json",
                 "/catalog/npukernel.json?release=2.6.0.post5&_facet=status",
                 "/catalog/operator.json?_search=repeat_interleave",
                 "/-/op/aten::add.Tensor", "/-/check"):
        assert no_sql.get(path).status_code == 200, path
    # The page no longer offers a SQL box to type into.
    assert 'name="sql"' not in no_sql.get("/catalog").text


def test_serve_command_passes_the_sql_choice(served: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import typer
    from typer.testing import CliRunner

    from opcheck.cli import commands_serve

    calls: list[dict[str, Any]] = []
    monkeypatch.setattr(server, "serve", lambda path, **kw: calls.append(kw))
    app = typer.Typer()
    commands_serve.register(app)
    app.command("noop")(lambda: None)
    for args, want in (([], None), (["--allow-sql"], True), (["--no-allow-sql"], False)):
        r = CliRunner().invoke(app, ["serve", "--catalog", str(served), "--host", "0.0.0.0",
                                     *args])
        assert r.exit_code == 0, r.output
        assert calls[-1]["allow_sql"] is want and calls[-1]["host"] == "0.0.0.0"


def test_export_turns_sql_off_unless_asked(served: Path, tmp_path: Path) -> None:
    args = export(served, tmp_path / "public")
    assert args[args.index("default_allow_sql") + 1] == "false"
    args = export(served, tmp_path / "open", allow_sql=True)
    assert args[args.index("default_allow_sql") + 1] == "true"


def test_sql_params_are_recognised() -> None:
    def scope(query: str) -> dict[str, Any]:
        return {"query_string": query.encode()}

    assert runs_arbitrary_sql(scope("sql=select+1"))
    assert runs_arbitrary_sql(scope("_size=5&_where=1%3D1"))
    assert not runs_arbitrary_sql(scope("release=2.6.0.post5&op_api=1"))
    assert not runs_arbitrary_sql(scope(""))


def test_ration_per_client_and_in_all() -> None:
    r = Ration("queries", per_client=2, in_flight=3)
    assert r.enter("a") is None and r.enter("a") is None
    refused = r.enter("a")
    assert refused is not None and refused[0] == 429
    assert r.enter("b") is None
    refused = r.enter("c")
    assert refused is not None and refused[0] == 503
    r.leave("a")
    assert r.enter("c") is None
    for client in ("a", "b", "c"):
        r.leave(client)
    assert r.by_client == {}


# --- the log ---------------------------------------------------------------------------------


def test_client_errors_log_one_line_server_faults_a_traceback(
        served: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
        capsys: pytest.CaptureFixture[str]) -> None:
    from opcheck.web.pages.base import Page

    async def broken(datasette: Any, request: Any) -> Any:
        raise RuntimeError("a real bug")

    page = Page("opcheck-broken", r"^/-/broken$", "/-/broken", "opcheck_op.html", broken)
    monkeypatch.setattr(pages, "PAGES", (*pages.PAGES, page))
    site = Site(make_datasette(served))
    try:
        with caplog.at_level(logging.INFO, logger="opcheck.web"):
            for path in ("/wp-admin/setup.php", "/catalog/nope",
                         "/catalog.json?" + urlencode({"sql": "SELEC nonsense"}),
                         "/catalog.json?" + urlencode({"sql": SLOW})):
                assert site.get(path).status_code in (400, 404), path
            assert [r.name for r in caplog.records] == ["opcheck.web.access"] * 4
            assert all(r.exc_info is None for r in caplog.records)
            caplog.clear()
            assert site.get("/-/broken").status_code == 500
        faults = [r for r in caplog.records if r.name == "opcheck.web.error"]
        assert len(faults) == 1 and faults[0].exc_info is not None
        assert json.loads(faults[0].getMessage())["fault"] == "RuntimeError"
        access = [json.loads(r.getMessage()) for r in caplog.records
                  if r.name == "opcheck.web.access"]
        assert [(a["path"], a["status"]) for a in access] == [("/-/broken", 500)]
        # Nothing printed around the log either (Datasette's handler printed rich tracebacks,
        # its SQL errors an "ERROR: conn=..." line).
        out = capsys.readouterr()
        assert "Traceback" not in out.err + out.out and "ERROR: conn" not in out.err
    finally:
        site.loop.close()


def test_fault_tracebacks_are_rate_limited(caplog: pytest.LogCaptureFixture) -> None:
    log = FaultLog(per_minute=3)
    with caplog.at_level(logging.ERROR, logger="opcheck.web.error"):
        for i in range(50):
            try:
                raise ValueError(i)
            except ValueError as exc:
                log.report(exc, "/x")
    assert len(caplog.records) == 3
    assert log.suppressed == 47
    log.window_start -= 61  # a minute later: the next one says how many were left out
    try:
        raise ValueError("again")
    except ValueError as exc:
        with caplog.at_level(logging.ERROR, logger="opcheck.web.error"):
            log.report(exc, "/x")
    assert json.loads(caplog.records[-1].getMessage())["untraced_since_last"] == 47


# --- page cache keys and body caps -----------------------------------------------------------


def test_cache_key_has_scheme_and_host() -> None:
    def scope(host: bytes, scheme: str = "http") -> dict[str, Any]:
        return {"type": "http", "method": "GET", "path": "/", "raw_path": b"/",
                "query_string": b"", "scheme": scheme, "headers": [(b"host", host)]}

    keys = {cache_key(scope(b"catalog.example.com")), cache_key(scope(b"evil.example.com")),
            cache_key(scope(b"catalog.example.com", "https"))}
    assert len(keys) == 3
    assert cache_key(scope(b"Catalog.Example.com")) == cache_key(scope(b"catalog.example.com"))


def test_own_pages_key_only_the_parameters_they_read() -> None:
    """A cache-busting flood (`?x=1`, `?x=2`, ...) of an op page is one render; `_format`
    still tells the JSON form apart, and Datasette's pages keep their whole query."""
    def key(path: str, query: bytes) -> bytes:
        return cache_key({"type": "http", "method": "GET", "path": path,
                          "raw_path": path.encode(), "query_string": query, "scheme": "http",
                          "headers": [(b"host", b"catalog.example.com")]})

    op = "/-/op/aten::mm"
    assert key(op, b"x=1") == key(op, b"x=2") == key(op, b"")
    assert key(op, b"_format=json&x=1") == key(op, b"x=2&_format=json") != key(op, b"")
    assert key("/-/aclnn/aclnnMm", b"y=1") == key("/-/aclnn/aclnnMm", b"")
    assert key("/catalog/operator", b"x=1") != key("/catalog/operator", b"x=2")


def test_poisoned_host_is_not_served_to_others(served: Path) -> None:
    site = Site(make_datasette(served))
    try:
        evil = site.get("/", headers={"host": "evil.example.com"})
        assert evil.status_code == 200
        assert "evil.example.com" not in site.get("/").text
    finally:
        site.loop.close()


def test_body_caps_per_path() -> None:
    from opcheck.web.pages.check import MAX_UPLOAD

    assert pages.body_limit("/-/check") == MAX_UPLOAD
    assert pages.body_limit("/") == pages.body_limit("/-/permissions") == pages.DEFAULT_MAX_BODY


def run_guard(guard: Guard, headers: list[tuple[bytes, bytes]], chunks: list[bytes]
              ) -> tuple[int, int, int]:
    """(status, bytes the app saw, messages read from the client) for one POST."""
    seen = {"bytes": 0}
    sent: list[dict[str, Any]] = []
    reads = {"n": 0}
    feed = [{"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)]

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        while True:
            m = await receive()
            seen["bytes"] += len(m.get("body", b""))
            if not m.get("more_body"):
                break
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    async def receive() -> dict[str, Any]:
        reads["n"] += 1
        return feed.pop(0) if feed else {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {"type": "http", "method": "POST", "path": "/-/check", "query_string": b"",
             "headers": headers, "client": ("127.0.0.1", 1)}
    asyncio.run(guard.wrap(app)(scope, receive, send))
    return int(sent[0]["status"]), seen["bytes"], reads["n"]


def test_guard_reads_bodies_against_the_cap() -> None:
    guard = Guard(lambda path: 1000, methods=lambda path: frozenset({"GET", "POST"}))
    # Declared too large: refused before a byte is read.
    assert run_guard(guard, [(b"content-length", b"5000")], [b"x" * 1000] * 5) == (413, 0, 0)
    # Not declared (chunked): read until it passes the cap, never further.
    status, seen, reads = run_guard(guard, [(b"transfer-encoding", b"chunked")],
                                    [b"x" * 400] * 50)
    assert (status, seen, reads) == (413, 0, 3)
    # Within the cap: the app gets the whole body.
    assert run_guard(guard, [(b"content-length", b"800")], [b"x" * 400] * 2) == (200, 800, 2)
    assert run_guard(guard, [(b"content-length", b"many")], [b"x"])[0] == 400



def test_methods_a_path_does_not_take_are_405_before_the_body() -> None:
    guard = Guard(lambda path: 1000)  # the site's default: GET and HEAD
    assert run_guard(guard, [(b"content-length", b"800")], [b"x" * 400] * 2) == (405, 0, 0)


# --- issue 39: fair admission to the op-list check, rations of renders -------------------------


def test_fair_ration_serves_the_least_used_client_first() -> None:
    import asyncio

    from opcheck.web.guard import FairRation

    async def scenario() -> list[str]:
        r = FairRation("checks", per_client=1, in_flight=2, wait=5)
        order: list[str] = []
        for _ in range(3):  # f3 has held the checker lately, v never
            assert r.enter("f3") is None
            await asyncio.sleep(0.02)
            r.leave("f3")
        for flooder in ("f1", "f2"):  # both slots held; each has used its share
            assert r.enter(flooder) is None

        async def ask(client: str) -> None:
            assert await r.admit(client) is None
            order.append(client)
            await asyncio.sleep(0.01)
            r.leave(client)

        # v is admitted first though f3 asked first
        waiting = [asyncio.ensure_future(ask("f3")), asyncio.ensure_future(ask("v"))]
        await asyncio.sleep(0.01)
        assert len(r.waiting) == 2
        assert (r.enter("f1") or (0, ""))[0] == 429  # one at a time
        assert r.enter("x") is not None  # nobody jumps the queue synchronously
        r.leave("f1")
        await asyncio.sleep(0.05)
        r.leave("f2")
        await asyncio.gather(*waiting)
        assert not r.by_client and not r.waiting
        return order

    assert asyncio.run(scenario()) == ["v", "f3"]


def test_fair_ration_gives_up_after_its_wait() -> None:
    import asyncio

    from opcheck.web.guard import FairRation

    async def scenario() -> tuple[int, str] | None:
        r = FairRation("checks", per_client=1, in_flight=1, wait=0.05)
        assert r.enter("a") is None
        refused = await r.admit("b")
        assert not r.waiting and r.by_client == {"a": 1}
        return refused

    refused = asyncio.run(scenario())
    assert refused is not None and refused[0] == 503


def test_rated_ration_allows_a_burst_then_a_rate() -> None:
    from opcheck.web.guard import RatedRation

    r = RatedRation("renders", per_client=5, in_flight=50, per_second=0.001, burst=3)
    admitted = 0
    for _ in range(10):
        if r.enter("a") is None:
            admitted += 1
            r.leave("a")
    assert admitted == 3
    assert r.enter("b") is None  # another client has its own budget


def test_renders_of_a_page_for_another_host_spend_a_budget() -> None:
    import asyncio

    from opcheck.web.cache import ResponseCache
    from opcheck.web.guard import RatedRation, Ration

    calls: list[bytes] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        calls.append(dict(scope["headers"])[b"host"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"page"})

    cache = ResponseCache(64, 1 << 20, renders=Ration("renders", 3, 16),
                          rehosts=RatedRation("rehosts", 3, 16, per_second=0.001, burst=5))
    wrapped = cache.wrap(app)
    statuses: list[int] = []

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            statuses.append(message["status"])

    def get(path: str, host: bytes) -> None:
        scope = {"type": "http", "method": "GET", "path": path, "query_string": b"",
                 "client": ("127.0.0.5", 1), "headers": [(b"host", host)]}
        asyncio.run(wrapped(scope, None, send))

    for n in range(20):
        get("/catalog/operator", f"localhost:{n}".encode())
    assert len(calls) == 1 + 5 and statuses.count(429) == 14  # the first, then the budget
    for n in range(20):  # other pages: a visitor's first looks are never counted
        get(f"/catalog/t{n}", b"localhost:1")
    assert len(calls) == 26
    for n in range(20):  # opcheck's own page: one render whatever the Host
        get("/-/op/aten::mm", f"localhost:{n}".encode())
    assert len(calls) == 27
