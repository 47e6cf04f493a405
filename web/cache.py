"""The page cache: complete GET responses kept in memory in front of Datasette."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from typing import Any

# opcheck's own pages that read only these query parameters: a key keeps those alone, so
# `/-/op/aten::mm?x=1`, `?x=2`, ... (a cache-busting flood) is one render, not one per request
PAGE_PARAMS: dict[str, tuple[bytes, ...]] = {
    "/-/op/": (b"_format",), "/-/aclnn/": (b"_format",),
    "/-/atlas": (b"_format", b"q", b"page", b"library", b"task", b"product", b"verdict"),
}


def cache_key(scope: dict[str, Any]) -> bytes:
    """Everything a page depends on: path and query, and the scheme and Host the visitor used
    (Datasette writes absolute links, e.g. ``<link rel="alternate">``, from them). Without
    the Host, one request with ``Host: evil.example.com`` would put that name into the page
    every later visitor gets."""
    host = b""
    for name, value in scope.get("headers", []):
        if name.lower() == b"host":
            host = bytes(value).lower()
            break
    query = scope.get("query_string", b"")
    path = scope["path"]
    reads = next((v for k, v in PAGE_PARAMS.items() if path.startswith(k)), None)
    if reads is not None and query:
        query = b"&".join(sorted(q for q in query.split(b"&")
                                 if q.split(b"=", 1)[0] in reads))
    return b" ".join((scope.get("scheme", "http").encode(), host,
                      scope.get("raw_path", path.encode()) + b"?" + query))


class ResponseCache:
    """A bounded LRU of complete GET responses in front of Datasette (ASGI middleware).

    Only anonymous GETs without cookies or an Authorization header are cached, only 200s, and
    never a path under one of ``uncached`` (pages whose answer depends on what is posted).
    Safe because the served catalog is immutable. Requests for a page that is being rendered
    wait for that render instead of starting their own: when a link goes round a team, twenty
    visitors cost one render, not twenty."""

    def __init__(self, entries: int, max_bytes: int, uncached: tuple[str, ...] = ()) -> None:
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
                await app(scope, receive, send)
                return
            key = cache_key(scope)
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
