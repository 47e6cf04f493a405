"""``opcheck serve``: browse the catalog and check op lists in a browser (Datasette)."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Annotated

import typer

from opcheck.cli.common import CatalogOpt, handle_errors


def serve(
    port: Annotated[int, typer.Option("--port", "-p", help="TCP port")] = 8001,
    host: Annotated[str, typer.Option(
        "--host", help="Interface to bind; 127.0.0.1 keeps it on this machine, 0.0.0.0 "
                       "serves everyone who can reach it")] = "127.0.0.1",
    export: Annotated[Path | None, typer.Option(
        "--export", help="Write catalog, metadata, templates and plugins into DIR for "
                         "`datasette publish` or a container image, print the datasette "
                         "arguments, and exit", show_default=False)] = None,
    workers: Annotated[int | None, typer.Option(
        "--workers", "-w", help="Server processes (default: one per CPU core, at most 4); "
                                "each renders pages on its own core", show_default=False)] = None,
    allow_sql: Annotated[bool | None, typer.Option(
        "--allow-sql/--no-allow-sql",
        help="Let visitors run their own read-only SQL (time-limited, rationed per client). "
             "Default: on for a loopback --host, off otherwise and for --export; canned "
             "queries, tables, facets and search work either way", show_default=False)] = None,
    trust_proxy: Annotated[bool, typer.Option(
        "--trust-proxy", help="Take client addresses from X-Forwarded-For (only behind a "
                              "reverse proxy that sets it): rations are per client")] = False,
    host_name: Annotated[list[str] | None, typer.Option(
        "--host-name", help="A name visitors reach the server by (repeatable); requests for "
                            "any other Host are refused (400). Default: the --host address "
                            "and localhost; any name when --host is 0.0.0.0 or ::",
        show_default=False)] = None,
    catalog: CatalogOpt = None,
) -> None:
    """Serve the catalog read-only with Datasette: tables, canned queries, a page per op
    (/-/op/OP) and an op-list checker (/-/check)."""
    with handle_errors():
        from opcheck.cli.common import open_catalog, resolve_catalog_path
        from opcheck.core.errors import UsageError

        try:
            import datasette  # noqa: F401

            from opcheck.web import app as site
            from opcheck.web import server
        except ImportError:
            raise UsageError("Datasette is not installed: pip install 'datasette>=0.65,<1' "
                             "datasette-render-markdown") from None
        path = resolve_catalog_path(catalog)
        open_catalog(path).dispose()  # schema check: one clear error before the server starts
        if export is not None:
            args = site.export(path, export, allow_sql=bool(allow_sql))
            typer.echo("datasette serve " + shlex.join(args))
            return
        if not 0 < port < 65536:
            raise UsageError(f"--port must be 1-65535, not {port}")
        n = server.default_workers() if workers is None else workers
        if not 1 <= n <= 64:
            raise UsageError(f"--workers must be 1-64, not {n}")
        server.serve(path, host=host, port=port, workers=n, allow_sql=allow_sql,
                     trust_proxy=trust_proxy, host_names=host_name or None)


def register(app: typer.Typer) -> None:
    app.command()(serve)
