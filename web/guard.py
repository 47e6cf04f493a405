"""What stands between the internet and Datasette (ASGI middleware): one access-log line per
request, the methods each path answers (405 for the rest), security headers on every response,
request bodies read against a size cap, and arbitrary SQL and Datasette's costly views
(full-table exports, many facets, pattern filters) rationed per client and run off the event
loop.

A shared catalog server meets scanners, oversized uploads and slow queries; none of them may
cost a well-behaved visitor more than a few milliseconds, nor the log more than one line.
"""

from __future__ import annotations

import asyncio
import json
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable
from contextvars import ContextVar
from typing import Any
from urllib.parse import parse_qsl

ACCESS = logging.getLogger("opcheck.web.access")
ERRORS = logging.getLogger("opcheck.web.error")

# Set while a request that runs visitor-written SQL is handled: the catalog database runs its
# queries on the SQL pool instead of the event loop (opcheck.web.sqlpool).
ARBITRARY_SQL: ContextVar[bool] = ContextVar("opcheck_arbitrary_sql", default=False)

# Query parameters whose value is SQL written by the visitor (``_where`` is a WHERE clause).
SQL_PARAMS = frozenset({"sql", "_where"})
# Datasette table filters that scan every row (no index serves a pattern).
SCAN_FILTERS = frozenset({"glob", "contains", "notcontains", "like", "notlike", "endswith",
                          "startswith", "arraycontains", "arraynotcontains"})
MAX_CHEAP_FACETS = 2  # the configured facets of a table view; more is a visitor's choice
READ_METHODS = frozenset({"GET", "HEAD"})
# Sent with every response: no sniffing of content types, no framing by other sites, no
# referrer leaks, and scripts, styles and images only from this site (Datasette's pages use
# inline scripts and styles).
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),
    (b"content-security-policy",
     b"default-src 'self'; script-src 'self' 'unsafe-inline'; style-src 'self' 'unsafe-inline'; "
     b"img-src 'self' data:; object-src 'none'; base-uri 'self'; frame-ancestors 'none'; "
     b"form-action 'self'"),
)
LOGGED_PATH_CHARS = 300  # a scanner's 8 kB URL must not make an 8 kB log line

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]
App = Callable[[dict[str, Any], Receive, Send], Awaitable[None]]


class FaultLog:
    """Tracebacks of real server faults, at most ``per_minute`` a minute: a fault that every
    request triggers must not turn the log into the attack's amplifier. The next traceback
    logged says how many were left out."""

    def __init__(self, per_minute: int = 10) -> None:
        self.per_minute = per_minute
        self.window_start = 0.0
        self.in_window = 0
        self.suppressed = 0

    def report(self, exc: BaseException, where: str) -> None:
        now = time.monotonic()
        if now - self.window_start >= 60:
            self.window_start, self.in_window = now, 0
        if self.in_window >= self.per_minute:
            self.suppressed += 1
            return
        self.in_window += 1
        line = {"time": now_utc(), "fault": type(exc).__name__, "path": where[:LOGGED_PATH_CHARS],
                "untraced_since_last": self.suppressed}
        self.suppressed = 0
        ERRORS.error(json.dumps(line, ensure_ascii=False), exc_info=exc)


FAULTS = FaultLog()


def now_utc() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def header(scope: dict[str, Any], name: bytes) -> bytes | None:
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value)
    return None


def host_name(scope: dict[str, Any]) -> str:
    """The Host header's name, without its port, lower case ("" when absent: HTTP/1.0)."""
    value = (header(scope, b"host") or b"").decode("latin-1").strip().lower()
    if value.startswith("["):  # [::1]:8001
        return value[1:value.find("]")] if "]" in value else value
    return value.rsplit(":", 1)[0] if value.count(":") == 1 else value


def allowed_host_names(names: Iterable[str]) -> frozenset[str]:
    """``names`` as :func:`host_name` reads them; a request without a Host (HTTP/1.0) names
    none, and is answered."""
    return frozenset({"", *(n.strip().lower().strip("[]") for n in names)})


def runs_arbitrary_sql(scope: dict[str, Any]) -> bool:
    query = scope.get("query_string", b"")
    if not query:
        return False
    return any(k in SQL_PARAMS for k, _ in parse_qsl(query.decode("latin-1"),
                                                   keep_blank_values=True))


def costly_view(scope: dict[str, Any]) -> bool:
    """A Datasette view whose cost a visitor chooses: a CSV export or a streamed/maximal page,
    facets beyond the configured ones, or filters that scan every row."""
    path = str(scope.get("path", ""))
    query = scope.get("query_string", b"")
    if path.endswith(".csv"):
        return True
    if not query:
        return False
    facets = 0
    for key, value in parse_qsl(query.decode("latin-1"), keep_blank_values=True):
        if key in ("_stream", "_dl") or (key == "_size" and value == "max"):
            return True
        if key.startswith("_facet"):
            facets += 1
        elif "__" in key and key.rsplit("__", 1)[1] in SCAN_FILTERS:
            return True
    return facets > MAX_CHEAP_FACETS


def client_of(scope: dict[str, Any]) -> str:
    client = scope.get("client")
    return str(client[0]) if client else "-"


async def plain(send: Send, status: int, text: str, *, close: bool = False) -> None:
    body = (text + "\n").encode()
    headers = [(b"content-type", b"text/plain; charset=utf-8"),
               (b"content-length", str(len(body)).encode())]
    if close:
        # The rest of an oversized upload is never read: the connection cannot be reused.
        headers.append((b"connection", b"close"))
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


class Ration:
    """At most ``per_client`` requests of one kind in flight per client address and
    ``in_flight`` in all (per worker process): the rest are refused at once, which costs
    nothing, instead of queueing work that would delay every other visitor."""

    def __init__(self, what: str, per_client: int, in_flight: int) -> None:
        self.what = what
        self.per_client = per_client
        self.in_flight = in_flight
        self.by_client: dict[str, int] = {}

    def enter(self, client: str) -> tuple[int, str] | None:
        """None: admitted (call ``leave`` when done); else the (status, message) to send."""
        if self.by_client.get(client, 0) >= self.per_client:
            return 429, (f"at most {self.per_client} {self.what} at a time per client: "
                         "wait for one to finish")
        if sum(self.by_client.values()) >= self.in_flight:
            return 503, f"too many {self.what} in progress: try again shortly"
        self.by_client[client] = self.by_client.get(client, 0) + 1
        return None

    def leave(self, client: str) -> None:
        left = self.by_client.get(client, 0) - 1
        if left > 0:
            self.by_client[client] = left
        else:
            self.by_client.pop(client, None)


class RatedRation(Ration):
    """A :class:`Ration` that also spends a per-client budget: ``burst`` admissions at once,
    refilled at ``per_second``. Concurrency alone does not bound a client that sends one
    request after another over a keep-alive connection, each one a render."""

    def __init__(self, what: str, per_client: int, in_flight: int, *, per_second: float,
                 burst: float) -> None:
        super().__init__(what, per_client, in_flight)
        self.per_second = per_second
        self.burst = burst
        self.budget: dict[str, tuple[float, float]] = {}  # client → (tokens, when)

    def enter(self, client: str) -> tuple[int, str] | None:
        now = time.monotonic()
        tokens, when = self.budget.get(client, (self.burst, now))
        tokens = min(self.burst, tokens + (now - when) * self.per_second)
        if tokens < 1:
            return 429, (f"more than {self.per_second:g} {self.what} a second from one client: "
                         "slow down")
        refused = super().enter(client)
        if refused is None:
            tokens -= 1
        if len(self.budget) > 10_000:  # forget the clients whose budget is whole again
            self.budget = {c: b for c, b in self.budget.items()
                           if b[0] + (now - b[1]) * self.per_second < self.burst}
        self.budget[client] = (tokens, now)
        return refused


class FairRation(Ration):
    """A :class:`Ration` whose requests beyond ``in_flight`` wait (at most ``queue`` of them,
    at most ``wait`` seconds) instead of being refused, and are admitted by how little of it
    their client has used lately (seconds held, forgotten over ``memory`` seconds), not by who
    asks first when a slot frees: four addresses that flood it with long checks take turns
    behind a visitor whose short checks used next to none of it, however loaded the machine.
    ``per_client`` counts a client's waiting requests too. One per event loop (worker)."""

    def __init__(self, what: str, per_client: int, in_flight: int, *, queue: int = 16,
                 wait: float = 20.0, memory: float = 60.0) -> None:
        super().__init__(what, per_client, in_flight)
        self.queue = queue
        self.wait = wait
        self.memory = memory
        self.used: dict[str, tuple[float, float]] = {}  # client → (decayed seconds, when)
        self.since: dict[str, list[float]] = {}  # client → when each of its admissions began
        self.waiting: list[tuple[int, str, asyncio.Future[None]]] = []
        self._seq = 0

    def usage(self, client: str, now: float) -> float:
        """Seconds ``client`` held a slot lately, what it holds now included."""
        held, when = self.used.get(client, (0.0, now))
        running = sum(now - t for t in self.since.get(client, ()))
        return held * math.exp(-(now - when) / self.memory) + running

    def _admitted(self, client: str) -> None:
        self.by_client[client] = self.by_client.get(client, 0) + 1
        self.since.setdefault(client, []).append(time.monotonic())

    def enter(self, client: str) -> tuple[int, str] | None:
        """Admitted only when nobody waits (a synchronous caller cannot queue)."""
        mine = sum(1 for e in self.waiting if e[1] == client)
        if self.by_client.get(client, 0) + mine >= self.per_client:
            return 429, (f"at most {self.per_client} {self.what} at a time per client: "
                         "wait for one to finish")
        if self.waiting or sum(self.by_client.values()) >= self.in_flight:
            return 503, f"too many {self.what} in progress: try again shortly"
        self._admitted(client)
        return None

    async def admit(self, client: str) -> tuple[int, str] | None:
        """Like :meth:`enter`, but waits its turn for a slot; None: admitted."""
        refused = self.enter(client)
        if refused is None or refused[0] == 429 or len(self.waiting) >= self.queue:
            return refused
        self._seq += 1
        turn: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (self._seq, client, turn)
        self.waiting.append(entry)
        try:
            await asyncio.wait_for(asyncio.shield(turn), self.wait)
        except asyncio.TimeoutError:
            if turn.done():  # admitted just as the wait ended: it holds a slot
                self.leave(client)
            return refused
        except BaseException:  # the visitor went away while waiting
            if turn.done() and not turn.cancelled():
                self.leave(client)
            raise
        finally:
            if entry in self.waiting:
                self.waiting.remove(entry)
        return None

    def leave(self, client: str) -> None:
        now = time.monotonic()
        began = self.since.get(client)
        if began:
            held = now - began.pop(0)
            if not began:
                del self.since[client]
            self.used[client] = (self.usage(client, now) + held, now)
        if len(self.used) > 10_000:
            self.used = {c: u for c, u in self.used.items() if self.usage(c, now) > 0.001}
        super().leave(client)
        while self.waiting and sum(self.by_client.values()) < self.in_flight:
            entry = min(self.waiting, key=lambda e: (self.usage(e[1], now), e[0]))
            self.waiting.remove(entry)
            self._admitted(entry[1])
            entry[2].set_result(None)


class Guard:
    """The middleware. ``body_limit(path)`` is the largest request body a path accepts;
    ``sql_per_client`` and ``sql_in_flight`` ration visitor-written SQL requests (a query
    holds a pool thread for up to the time limit). ``host_names``: the names the server
    answers for (None: any); a request for another Host is refused with 400, as
    TrustedHostMiddleware does."""

    def __init__(self, body_limit: Callable[[str], int], *, sql_per_client: int = 2,
                 sql_in_flight: int = 8,
                 methods: Callable[[str], frozenset[str]] = lambda path: READ_METHODS,
                 costly_per_client: int = 1, costly_in_flight: int = 2,
                 host_names: frozenset[str] | None = None) -> None:
        self.body_limit = body_limit
        self.host_names = host_names
        self.methods = methods
        self.sql = Ration("SQL queries", sql_per_client, sql_in_flight)
        self.costly = Ration("exports, facet or pattern-filter views", costly_per_client,
                             costly_in_flight)

    def wrap(self, app: App) -> App:
        async def guarded(scope: dict[str, Any], receive: Receive, send: Send) -> None:
            if scope.get("type") != "http":
                await app(scope, receive, send)
                return
            start = time.perf_counter()
            sent = {"status": 0, "bytes": 0}

            async def counting(message: dict[str, Any]) -> None:
                if message["type"] == "http.response.start":
                    sent["status"] = int(message["status"])
                    message = with_security_headers(message)
                elif message["type"] == "http.response.body":
                    sent["bytes"] += len(message.get("body", b""))
                await send(message)

            try:
                await self._handle(app, scope, receive, counting)
            finally:
                access_line(scope, sent["status"], sent["bytes"], time.perf_counter() - start)

        return guarded

    async def _handle(self, app: App, scope: dict[str, Any], receive: Receive,
                      send: Send) -> None:
        allowed = self.methods(scope.get("path", ""))
        if scope.get("method", "GET") not in allowed:
            await not_allowed(send, allowed)
            return
        if self.host_names is not None and host_name(scope) not in self.host_names:
            await plain(send, 400, "this server does not answer for that Host")
            return
        limit = self.body_limit(scope.get("path", ""))
        declared = header(scope, b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await plain(send, 400, "bad Content-Length", close=True)
                return
            if length > limit:
                await plain(send, 413, too_large(limit), close=True)
                return
        if (declared is not None and declared != b"0") or header(scope, b"transfer-encoding"):
            body = await read_body(receive, limit)
            if body is None:
                await plain(send, 413, too_large(limit), close=True)
                return
            receive = replay(body, receive)
        if runs_arbitrary_sql(scope):
            ration = self.sql
        elif costly_view(scope):
            ration = self.costly
        else:
            await app(scope, receive, send)
            return
        client = client_of(scope)
        refused = ration.enter(client)
        if refused is not None:
            await plain(send, *refused)
            return
        token = ARBITRARY_SQL.set(True)
        try:
            await app(scope, receive, send)
        finally:
            ARBITRARY_SQL.reset(token)
            ration.leave(client)


def with_security_headers(message: dict[str, Any]) -> dict[str, Any]:
    headers = list(message.get("headers", []))
    present = {bytes(k).lower() for k, _ in headers}
    headers += [(k, v) for k, v in SECURITY_HEADERS if k not in present]
    return {**message, "headers": headers}


async def not_allowed(send: Send, allowed: frozenset[str]) -> None:
    body = b"method not allowed\n"
    await send({"type": "http.response.start", "status": 405, "headers": [
        (b"content-type", b"text/plain; charset=utf-8"),
        (b"content-length", str(len(body)).encode()),
        (b"allow", ", ".join(sorted(allowed)).encode()),
        # a CONNECT or other odd request leaves the connection in a state not worth keeping
        (b"connection", b"close"),
    ]})
    await send({"type": "http.response.body", "body": body})


def too_large(limit: int) -> str:
    size = f"{limit // (1024 * 1024)} MB" if limit >= 1024 * 1024 else f"{limit // 1024} kB"
    return f"request body larger than {size}: this page accepts no more"


async def read_body(receive: Receive, limit: int) -> list[dict[str, Any]] | None:
    """The request's messages, read until the body ends; None as soon as it passes ``limit``
    (the rest is never read, so memory stays at most ``limit`` whatever the client sends)."""
    messages: list[dict[str, Any]] = []
    total = 0
    while True:
        message = await receive()
        messages.append(message)
        if message["type"] != "http.request":
            return messages  # the client went away: the app sees the disconnect
        total += len(message.get("body", b""))
        if total > limit:
            return None
        if not message.get("more_body", False):
            return messages


def replay(messages: list[dict[str, Any]], receive: Receive) -> Receive:
    pending = list(messages)

    async def replayed() -> dict[str, Any]:
        return pending.pop(0) if pending else await receive()

    return replayed


def access_line(scope: dict[str, Any], status: int, size: int, seconds: float) -> None:
    if not ACCESS.isEnabledFor(logging.INFO):
        return
    path = scope.get("path", "")
    query = scope.get("query_string", b"").decode("latin-1")
    if query:
        path += "?" + query
    ACCESS.info(json.dumps({
        "time": now_utc(),
        "client": client_of(scope), "method": scope.get("method", ""),
        "path": path[:LOGGED_PATH_CHARS], "status": status, "bytes": size,
        "ms": round(seconds * 1000, 1),
    }, ensure_ascii=False))


def configure_logging() -> None:
    """Access lines and fault reports on stderr, one line each (tracebacks aside), for a
    serving process; idempotent."""
    import sys

    root = logging.getLogger("opcheck.web")
    if any(getattr(h, "opcheck_web", False) for h in root.handlers):
        return
    handler = logging.StreamHandler(sys.stderr)
    handler.opcheck_web = True  # type: ignore[attr-defined]
    handler.setFormatter(logging.Formatter("%(message)s"))
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    root.propagate = False
