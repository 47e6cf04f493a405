"""``opcheck serve``: uvicorn on a listening socket, or one worker process per core, each with
its own SO_REUSEPORT socket on the same port.

Nothing in this module imports Datasette or uvicorn at import time.
"""

from __future__ import annotations

import os
import socket
import sys
from pathlib import Path
from typing import Any

from opcheck.core.errors import OpcheckError, UsageError
from opcheck.db.search import search_tables
from opcheck.web.app import asgi_app

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
# A request's head (request line and headers) arrives in one packet from any real client:
# a connection still short of a whole head after this long is closed (half-sent headers held
# 1,500 connections open and slowed new visitors 2.5x). uvicorn times out idle keep-alive
# connections only.
HEADER_SECONDS = 5.0


def _h11_with_header_deadline() -> type:
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderDeadline(H11Protocol):
        _head_timer: Any = None

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._arm()

        def _waiting(self) -> bool:
            return self.cycle is None or bool(self.cycle.response_complete)

        def _arm(self) -> None:
            if self._head_timer is None:
                self._head_timer = self.loop.call_later(HEADER_SECONDS, self._head_expired)

        def _disarm(self) -> None:
            if self._head_timer is not None:
                self._head_timer.cancel()
                self._head_timer = None

        def data_received(self, data: bytes) -> None:
            if self._waiting():
                self._arm()
            super().data_received(data)
            if not self._waiting():
                self._disarm()

        def _head_expired(self) -> None:
            self._head_timer = None
            if self._waiting() and not self.transport.is_closing():
                self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            self._disarm()
            super().connection_lost(exc)

    return HeaderDeadline


def sql_allowed_by_default(host: str) -> bool:
    """Visitor-written SQL is on only for a server nobody else can reach: the time limit and
    per-client rationing bound what it costs, but on a shared server canned queries, table
    views, facets and search are what visitors need, and nothing else is exposed."""
    return host.strip().lower().strip("[]") in LOOPBACK_HOSTS


WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", ""})


def host_names_for(host: str, names: list[str] | None) -> list[str] | None:
    """The Host names the server answers for: ``names`` (``--host-name``) and localhost's;
    by default the bound address and localhost's. A server bound to every interface cannot
    know the names it is reached by: without ``--host-name`` it answers any (None)."""
    local = ["localhost", "127.0.0.1", "::1"]
    if names:
        return [*names, *local]
    if host.strip().strip("[]") in WILDCARD_HOSTS:
        return None
    return [host, *local]


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


def _run(catalog: Path, sock: socket.socket, ready: Any = None, *,
         allow_sql: bool = False, trust_proxy: bool = False,
         host_names: list[str] | None = None) -> None:
    import uvicorn

    from opcheck.web.guard import configure_logging

    configure_logging()
    # Op-list checks and visitor SQL run on threads: a shorter GIL switch interval lets the
    # event loop thread get back to waiting visitors within a millisecond, not five.
    sys.setswitchinterval(0.001)
    # uvicorn's own access log is off: the guard writes one structured line per request.
    # X-Forwarded-For is believed only when the operator says a proxy sets it: uvicorn trusts it
    # from 127.0.0.1 by default, which let one client on the machine pose as many and get a
    # share of every ration per made-up address. h11 answers what httptools mishandles (an
    # unknown method): a 400/405, never a traceback.
    config = uvicorn.Config(asgi_app(catalog, ready, allow_sql=allow_sql, host_names=host_names),
                            log_level="warning",
                            access_log=False, lifespan="on", proxy_headers=trust_proxy,
                            forwarded_allow_ips="*" if trust_proxy else None,
                            http=_h11_with_header_deadline())
    uvicorn.Server(config).run(sockets=[sock])


def _worker(catalog: str, host: str, port: int, ready: Any, allow_sql: bool,
            trust_proxy: bool, host_names: list[str] | None) -> None:
    _run(Path(catalog), _listening_socket(host, port, reuse_port=True), ready,
         allow_sql=allow_sql, trust_proxy=trust_proxy, host_names=host_names)


def serve(catalog: Path, *, host: str = "127.0.0.1", port: int = 8001,
          workers: int = 1, allow_sql: bool | None = None, trust_proxy: bool = False,
          host_names: list[str] | None = None) -> None:
    """Serve ``catalog``; ``allow_sql`` None: visitor-written SQL only on a loopback host;
    ``trust_proxy``: client addresses from X-Forwarded-For (behind a reverse proxy);
    ``host_names``: the Host names answered besides localhost's (:func:`host_names_for`)."""
    if allow_sql is None:
        allow_sql = sql_allowed_by_default(host)
    names = host_names_for(host, host_names)
    if not search_tables(catalog):
        print("opcheck serve: this catalog has no search index (rebuild it with a newer "
              "opcheck to search op names and workarounds)", file=sys.stderr)
    if workers <= 1 or not hasattr(socket, "SO_REUSEPORT") or not sys.platform.startswith("linux"):
        sock = _listening_socket(host, port, reuse_port=False)
        _announce(catalog, host, port, 1, allow_sql)
        _run(catalog, sock, allow_sql=allow_sql, trust_proxy=trust_proxy, host_names=names)
        return
    _serve_workers(catalog, host, port, workers, allow_sql, trust_proxy, names)


def _announce(catalog: Path, host: str, port: int, workers: int, allow_sql: bool) -> None:
    sql = ("visitors may run their own SQL" if allow_sql else
           "visitor-written SQL off (--allow-sql turns it on)")
    print(f"opcheck: serving {catalog} read-only at http://{host}:{port}/ with {workers} "
          f"worker process{'es' if workers > 1 else ''}, {sql} (Ctrl-C stops)",
          file=sys.stderr, flush=True)


def _serve_workers(catalog: Path, host: str, port: int, workers: int,
                   allow_sql: bool, trust_proxy: bool, host_names: list[str] | None) -> None:
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
    _announce(catalog, host, port, workers, allow_sql)
    ctx = multiprocessing.get_context("spawn")
    events = [ctx.Event() for _ in range(workers)]
    procs = [ctx.Process(target=_worker,
                         args=(str(catalog), host, port, ev, allow_sql, trust_proxy,
                               host_names),
                         daemon=True)
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
