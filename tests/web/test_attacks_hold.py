"""Issue 39, the fourth round, replayed against a live server on 127.0.0.1 (one worker process):
Host-header cache busting and `/-/check` floods on a loaded machine. Bounded in requests and
time; loopback addresses only (127.0.0.x stand for distinct clients)."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from urllib.parse import urlencode

import pytest
from test_attacks import (
    DATASETTE_P95,
    OPLIST_HEAD,
    P95_LIMIT,
    Live,
    all_ops_oplist,
    in_threads,
    live,
    p95,
    visitor,
)

__all__ = ["live"]  # the module's own server (the fixture is module-scoped)

MM_PAGE = "/-/op/aten::mm"


def host_flood(live: Live, path: str, hosts: list[str], per_client: int = 400,
               clients: int = 4) -> list[int]:
    """``clients`` addresses, each sending ``per_client`` requests for ``path`` over one
    keep-alive connection, each request with the next Host of ``hosts``."""
    statuses: list[int] = []

    def client(i: int) -> None:
        conn = live.connect(source=f"127.0.6.{i + 2}")
        try:
            for j in range(per_client):
                conn.request("GET", path, headers={"Host": hosts[(i * per_client + j)
                                                              % len(hosts)]})
                r = conn.getresponse()
                r.read()
                statuses.append(r.status)
                if r.getheader("connection", "").lower() == "close":
                    conn.close()
                    conn = live.connect(source=f"127.0.6.{i + 2}")
        finally:
            conn.close()

    in_threads(clients, client)
    return statuses


def test_host_flood_of_names_the_server_answers_for_is_one_render(live: Live) -> None:
    # Every Host differs (another port of localhost, in varied case): the op page is keyed
    # without it, so the flood is served from the cache, not rendered 1,600 times.
    hosts = [f"{'LocalHost' if n % 2 else 'localhost'}:{10000 + n}" for n in range(1600)]
    with visitor(live, MM_PAGE) as latencies:
        statuses = host_flood(live, MM_PAGE, hosts)
    assert statuses == [200] * 1600
    print(f"allowed-Host flood: visitor p95 {p95(latencies) * 1000:.0f} ms")
    assert p95(latencies) <= P95_LIMIT, f"visitor p95 {p95(latencies) * 1000:.0f} ms"


def test_host_flood_of_other_names_is_refused(live: Live) -> None:
    hosts = [f"evil{n}.example.com" for n in range(1600)]
    with visitor(live, MM_PAGE) as latencies:
        statuses = host_flood(live, MM_PAGE, hosts)
    assert statuses == [400] * 1600
    print(f"foreign-Host flood: visitor p95 {p95(latencies) * 1000:.0f} ms")
    assert p95(latencies) <= P95_LIMIT, f"visitor p95 {p95(latencies) * 1000:.0f} ms"


def test_host_flood_of_a_datasette_page_is_rationed(live: Live) -> None:
    # Datasette's pages keep the Host in their key (they write absolute links): each request
    # is a render, within its client's ration (a burst, then a few a second: it was kept for another Host).
    hosts = [f"localhost:{20000 + n}" for n in range(400)]
    start = time.monotonic()
    with visitor(live, MM_PAGE) as latencies:
        statuses = host_flood(live, "/catalog/operator?_size=50", hosts, per_client=100)
    seconds = time.monotonic() - start
    assert set(statuses) <= {200, 429}, set(statuses)
    print(f"Datasette-page Host flood: {statuses.count(200)} rendered of {len(statuses)}, "
          f"visitor p95 {p95(latencies) * 1000:.0f} ms")
    assert 4 * 30 <= statuses.count(200) <= 4 * (30 + 5 * seconds) + 4, statuses.count(200)
    assert p95(latencies) <= DATASETTE_P95, f"visitor p95 {p95(latencies) * 1000:.0f} ms"


# --- /-/check beside a CPU burner -------------------------------------------------------------

BURNER = "import time\nend = time.monotonic() + float(__import__('sys').argv[1])\n" \
         "while time.monotonic() < end:\n    pass\n"


@pytest.fixture
def cpu_burner() -> Iterator[None]:
    """A process burning a core beside the server for at most 60 s (stopped at the end)."""
    proc = subprocess.Popen([sys.executable, "-c", BURNER, "60"])
    try:
        time.sleep(0.3)
        yield
    finally:
        proc.kill()
        proc.wait()


def test_a_visitor_checks_beside_four_flooders_on_a_loaded_machine(live: Live,
                                                                   cpu_burner: None) -> None:
    # Each flooding check is 400 ops of the catalog (a second or more of CPU on a loaded
    # machine): the four addresses hold the checker all the time. The visitor's has used none.
    doc = json.loads(all_ops_oplist(live.catalog))
    heavy = json.dumps({**doc, "ops": doc["ops"][:400]}).encode()
    good = urlencode({"oplist": (OPLIST_HEAD + '[{"op": "aten::add.Tensor", "count": 1}]}')})
    statuses: list[int] = []
    stop = threading.Event()

    def flood(i: int) -> None:
        while not stop.is_set():
            conn = live.connect(source=f"127.0.7.{i % 4 + 10}", timeout=5)
            try:
                conn.request("POST", "/-/check", body=heavy,
                             headers={"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                status = r.status
            except OSError:  # still queued when the test ends: the flood gives up
                continue
            finally:
                conn.close()
            statuses.append(status)
            if status != 200:
                stop.wait(0.05)  # refused at once: the flood's own CPU need not spin the test

    # four addresses, two connections each: every address always has a check in flight
    threads = [threading.Thread(target=flood, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    try:
        time.sleep(1.0)
        mine = []
        for _ in range(5):
            conn = live.connect(source="127.0.7.99", timeout=90)
            try:
                conn.request("POST", "/-/check", body=good.encode(),
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
                r = conn.getresponse()
                r.read()
                mine.append(r.status)
            finally:
                conn.close()
    finally:
        stop.set()
        for t in threads:
            t.join(timeout=120)
    print(f"visitor: {mine.count(200)} of {len(mine)} checks answered; flood: "
          f"{statuses.count(200)} served, {len(statuses) - statuses.count(200)} refused")
    assert mine.count(200) >= 4, mine
    assert set(statuses) <= {200, 429, 503}, statuses
    assert 429 in statuses  # one check at a time per address, waiting ones included


# --- visitor SQL bounded per result -----------------------------------------------------------


def test_visitor_sql_result_bytes_are_capped(live: Live) -> None:
    from opcheck.web.sqlpool import RESULT_BYTES, VALUE_LIMIT

    # Each value is under the per-value limit; together they would be ~3.5 GB.
    rows = 3500
    sql = (f"WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c LIMIT {rows}) "
           f"SELECT x, zeroblob({VALUE_LIMIT - 1000}) AS b FROM c")
    before = live.rss_kb()
    status, body, seconds = live.request("GET", "/catalog.json?" + urlencode({"sql": sql}))
    assert status == 400, body[:300]
    assert seconds < 10  # refused as the cap is passed, not after building 3.5 GB
    assert b"MB" in body and len(body) < 20_000
    assert live.rss_kb() - before < 3 * RESULT_BYTES // 1024 + 50_000  # kB
    # a result under the cap is served whole
    small = sql.replace(f"LIMIT {rows}", "LIMIT 3")
    status, body, _ = live.request("GET", "/catalog.json?" + urlencode({"sql": small}))
    assert status == 200, body[:300]
