"""The page cache: complete GET responses kept in memory in front of Datasette."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

from opcheck.web.guard import ARBITRARY_SQL, Ration, client_of, plain

# Files Datasette serves as they are on disk: no render to ration.
STATIC_PREFIXES = ("/-/static/", "/-/static-plugins/")

# opcheck's own pages that read only these query parameters: a key keeps those alone, so
# `/-/op/aten::mm?x=1`, `?x=2`, ... (a cache-busting flood) is one render, not one per request
PAGE_PARAMS: dict[str, tuple[bytes, ...]] = {
    "/-/op/": (b"_format",), "/-/aclnn/": (b"_format",),
    "/-/atlas": (b"_format", b"q", b"page", b"library", b"task", b"product", b"verdict"),
}


def _host(scope: dict[str, Any]) -> bytes:
    for name, value in scope.get("headers", []):
        if name.lower() == b"host":
            return bytes(value).lower()
    return b""


def own_page(path: str) -> tuple[bytes, ...] | None:
    """The query parameters an opcheck page reads; None for a page that is Datasette's."""
    return next((v for k, v in PAGE_PARAMS.items() if path.startswith(k)), None)


def cache_key(scope: dict[str, Any], *, with_host: bool | None = None) -> bytes:
    """Everything a page depends on: path and query, and the scheme and Host the visitor used
    (Datasette writes absolute links, e.g. ``<link rel="alternate">``, from them). Without
    the Host, one request with ``Host: evil.example.com`` would put that name into the page
    every later visitor gets.

    opcheck's own pages (``PAGE_PARAMS``) write no absolute link: their key is the path and
    the parameters they read, so a flood of made-up Hosts is one render, not one per request
    (``with_host`` True asks for the Host-keyed form all the same, for a page found to hold
    its Host after all)."""
    query = scope.get("query_string", b"")
    path = scope["path"]
    reads = own_page(path)
    if reads is not None and query:
        query = b"&".join(sorted(q for q in query.split(b"&")
                                 if q.split(b"=", 1)[0] in reads))
    if with_host is None:
        with_host = reads is None
    host = _host(scope) if with_host else b"*"
    return b" ".join((scope.get("scheme", "http").encode(), host,
                      scope.get("raw_path", path.encode()) + b"?" + query))


def mentions_host(scope: dict[str, Any], start: dict[str, Any], body: bytes) -> bool:
    """Whether a response links to the Host it was asked with (an absolute link)."""
    host = _host(scope)
    if not host:
        return False
    needle = b"://" + host
    return needle in body.lower() or any(needle in bytes(v).lower()
                                         for _, v in start.get("headers", []))


class ResponseCache:
    """A bounded LRU of complete GET responses in front of Datasette (ASGI middleware).

    Only anonymous GETs without cookies or an Authorization header are cached, only 200s, and
    never a path under one of ``uncached`` (pages whose answer depends on what is posted).
    Safe because the served catalog is immutable. Requests for a page that is being rendered
    wait for that render instead of starting their own: when a link goes round a team, twenty
    visitors cost one render, not twenty.

    ``renders``: a ration of the renders a cache miss starts (and of GETs the cache may not
    keep), per client: Datasette's pages are keyed by Host, so a flood of made-up Hosts or
    cookies would otherwise render on the event loop once per request. ``rehosts``: the ration
    of a miss for a page already kept for another Host (a Host flood's signature: a budget a
    second, where a visitor's first look at a page is never counted)."""

    def __init__(self, entries: int, max_bytes: int, uncached: tuple[str, ...] = (),
                 renders: Ration | None = None, rehosts: Ration | None = None) -> None:
        self.renders = renders
        self.rehosts = rehosts
        # pages (scheme, path and query) already rendered for some Host, most recent last
        self.hosted: OrderedDict[bytes, None] = OrderedDict()
        self.entries = entries
        self.uncached = uncached
        self.max_bytes = max_bytes
        self.bytes = 0
        self.hits = 0
        self.store: OrderedDict[bytes, tuple[dict[str, Any], bytes]] = OrderedDict()
        self.rendering: dict[bytes, asyncio.Event] = {}  # renders in progress, by key

    def wrap(self, app: Any) -> Any:
        async def cached(scope: dict[str, Any], receive: Any, send: Any) -> None:
            if self.entries <= 0 or not self._cacheable(scope):
                await self._rationed(app, scope, receive, send)
                return
            key = cache_key(scope)
            pending = self.rendering.get(key)
            if pending is not None:
                await pending.wait()  # then a hit, unless that response was not cacheable
            if await self._replay(key, send):
                return
            if key != (hosted := cache_key(scope, with_host=True)) and await self._replay(
                    hosted, send):
                return
            done = self.rendering.setdefault(key, asyncio.Event())
            try:
                await self._rationed(app, scope, receive, send, key)
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

    async def _rationed(self, app: Any, scope: dict[str, Any], receive: Any, send: Any,
                        key: bytes | None = None) -> None:
        """Render (and keep, with a ``key``), within the client's ration of renders."""
        ration = self.renders
        if key is not None and self.rehosts is not None and self._rehost(scope, key):
            ration = self.rehosts
        if (ration is None or scope.get("type") != "http"
                or scope.get("method") not in ("GET", "HEAD")
                or scope.get("path", "").startswith(STATIC_PREFIXES)
                or (self.uncached and scope.get("path", "").startswith(self.uncached))):
            await (app(scope, receive, send) if key is None
                   else self._render(app, key, scope, receive, send))
            return
        client = client_of(scope)
        refused = ration.enter(client)
        if refused is not None:
            await plain(send, *refused)
            return
        # A Host flood's renders run their queries on the SQL pool's threads: their SQL (a
        # table page's facet counts take 0.1-0.3 s) must not hold the event loop the cached
        # pages are served from. A visitor's first look at a page stays on the loop.
        token = ARBITRARY_SQL.set(True) if ration is self.rehosts else None
        try:
            await (app(scope, receive, send) if key is None
                   else self._render(app, key, scope, receive, send))
        finally:
            if token is not None:
                ARBITRARY_SQL.reset(token)
            ration.leave(client)

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
            hosted = cache_key(scope, with_host=True)
            if key != hosted and mentions_host(scope, start, body):
                key = hosted  # it links to the Host it was asked with, after all
            self._put(key, start, body)
            if key == hosted:
                page = cache_key(scope, with_host=False)
                self.hosted[page] = None
                self.hosted.move_to_end(page)
                while len(self.hosted) > self.entries:
                    self.hosted.popitem(last=False)

    def _rehost(self, scope: dict[str, Any], key: bytes) -> bool:
        return key == cache_key(scope, with_host=True) and (
            cache_key(scope, with_host=False) in self.hosted)

    def _cacheable(self, scope: dict[str, Any]) -> bool:
        if scope.get("type") != "http" or scope.get("method") != "GET":
            return False
        if self.uncached and scope.get("path", "").startswith(self.uncached):
            return False
        names = {k.lower() for k, _ in scope.get("headers", [])}
        return b"cookie" not in names and b"authorization" not in names

    def _put(self, key: bytes, start: dict[str, Any], body: bytes) -> None:
        self.store[key] = (start, body)
        self.bytes += len(body)
        while self.store and (len(self.store) > self.entries or self.bytes > self.max_bytes):
            _, (_, old) = self.store.popitem(last=False)
            self.bytes -= len(old)
