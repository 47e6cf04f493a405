"""Catalog commands: ``op``, ``releases``, ``diff``, ``sync``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.cli.common import CatalogOpt, QuietOpt, handle_errors, release_arg


def _catalog(path: Path | None) -> Any:
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    return Catalog.load(open_catalog(path))


def _check_format(fmt: str, allowed: tuple[str, ...] = ("table", "json")) -> None:
    from opcheck.core.errors import UsageError

    if fmt not in allowed:
        raise UsageError(f"unknown format {fmt!r} (choose from {', '.join(allowed)})")


TableFormatOpt = Annotated[str, typer.Option("--format", "-f", help="table | csv | json")]
TABLE_FORMATS = ("table", "csv", "json")


def _op_list(cat: Any, match: Any, fmt: str) -> None:
    """An op name that stands for several ops (overloads, a Python API, an aclnn function):
    each with its status on the default target."""
    from opcheck.checker.queries import select_target
    from opcheck.checker.resolve import Resolver
    from opcheck.cli.render import Column, Grid, show_grid, status_style

    target = select_target(cat)
    resolver = Resolver(cat, target.torch_npu)
    statuses = [resolver.resolve(o) for o in match.ops]
    if fmt == "json":
        typer.echo(json.dumps({"schema_version": 1, "query": match.query, "kind": match.kind,
                               "name": match.name, "release": target.torch_npu,
                               "ops": [{"op": o, "status": r.status, "kernel": r.kernel}
                                       for o, r in zip(match.ops, statuses, strict=True)]},
                              indent=2))
        return
    grid = Grid([Column("op"), Column(f"on {target.torch_npu}", style=status_style),
                 Column("kernel", compact=False)])
    for o, r in zip(match.ops, statuses, strict=True):
        grid.add(o, str(r.status), r.kernel)
    if fmt == "table":
        typer.echo(f"{match.describe()}: `opcheck op NAME` for one op's history", err=True)
    show_grid(grid, fmt)


def _collective_rows(op: str, rows: list[dict[str, Any]], fmt: str) -> None:
    """A c10d collective per release on HCCL (opcheck.checker.hccl.collective_history)."""
    if fmt == "json":
        typer.echo(json.dumps({"op": op, "releases": rows}, indent=2))
        return
    from opcheck.cli.render import Column, Grid, show_grid, status_style

    grid = Grid([Column("torch_npu"), Column("torch"), Column("status", style=status_style),
                 Column("on HCCL"), Column("dtypes", compact=False),
                 Column("ReduceOps", compact=False), Column("why", wrap=True)])
    for r in rows:
        ops = " ".join(f"{k}:{v}" for k, v in r["reduce_ops"].items())
        grid.add(r["torch_npu"], r["torch"], r["status"],
                 r["how"] + (" (inferred)" if r["inferred"] else ""),
                 " ".join(r["dtypes"]), ops,
                 "; ".join([r["why"], *(x.rsplit(" https://", 1)[0] for x in r["rules"])]))
    show_grid(grid, fmt)


def op(
    name: Annotated[str, typer.Argument(help="Operator (aten::isin.Tensor_Tensor, isin, "
                                        "aten::add), Python API (torch.isin, F.interpolate, "
                                        "Tensor.isin) or aclnn function")],
    fmt: TableFormatOpt = "table",
    catalog: CatalogOpt = None,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Also the kernel path (aclnn, acl_op, per-tensor slow path …) on this product per release: 910A, 910B, 910C, 310P, 310B, 950", show_default=False)] = None,
    jit_compile: Annotated[str | None, typer.Option("--jit-compile", help="on | off (with --hardware); default: torch_npu's default on the product", show_default=False)] = None,
) -> None:
    """An op's history across releases: status and kernel family per release. A name that
    stands for several ops (an op's overloads, a Python API) lists them."""
    with handle_errors():
        _check_format(fmt, TABLE_FORMATS)
        from opcheck.checker.history import HistoryFacts, describe_op
        from opcheck.checker.names import Names
        from opcheck.contrib.workaround_catalog import workaround_lookup
        from opcheck.core.errors import UsageError

        cat = _catalog(catalog)
        if name.startswith("c10d::"):
            from opcheck.checker.hccl import collective_history

            rows_c = collective_history(cat, name)
            if rows_c:
                _collective_rows(name, rows_c, fmt)
                return
        match = Names(cat).match(name)
        if match.kind == "none":
            hint = (f"; did you mean {', '.join(match.suggestions)}?" if match.suggestions
                    else " (ops look like aten::name.overload)")
            raise UsageError(f"{match.describe()}{hint}")
        if not match.single:
            _op_list(cat, match, fmt)
            return
        opname = match.single
        if match.kind != "op":
            typer.echo(f"note: {match.describe()}: {opname}", err=True)
        hist = describe_op(HistoryFacts.load(cat, workaround_lookup(cat)), opname)
        if not hist.known:
            from opcheck.contrib.workaround_catalog import entry_ids_for

            ids = entry_ids_for(cat, opname)
            if not ids:
                raise UsageError(f"{opname} is not in the catalog "
                                 "(check the spelling: aten::name.overload)")
            # an op outside PyTorch's universe (torchvision::nms) that entries name
            from opcheck.cli.render import wide_console

            console = wide_console()
            console.print(f"{opname}: not in the catalog's ops (PyTorch's operators and "
                          "torch_npu's registrations), so no history; entries name it")
            _print_workarounds(console, cat, ids)
            return
        rows = hist.rows
        paths: dict[str, Any] = {}
        if hardware:
            from opcheck.checker.kernel_path import Settings, on_off, release_paths

            paths = release_paths(cat, opname, (
                (h.release, h.resolution.status if h.resolution else None,
                 h.resolution.kernel if h.resolution else "") for h in rows), hardware,
                Settings(on_off(jit_compile, "--jit-compile")))
        _print_history(cat, opname, hist, paths, hardware, fmt)


def _print_history(cat: Any, opname: str, hist: Any, paths: dict[str, Any],
                   hardware: str | None, fmt: str) -> None:
    """`op`'s answer for one op: its history as JSON, CSV or a table with the notes after it."""
    rows, info, first_any = hist.rows, hist.info, hist.first_npu
    if fmt == "json":
        doc = hist.to_json()
        for entry in doc["releases"] if hardware else ():
            d = paths.get(entry["torch_npu"])
            entry["path"] = {d.product: d.path} if d else {}
            entry["path_why"] = d.why if d else ""
            entry["path_inferred"] = d.inferred if d else False
        typer.echo(json.dumps(doc, indent=2))
        return
    from opcheck.cli.render import Column, Grid, show_grid, status_style, wide_console

    grid = Grid([Column("torch_npu"), Column("torch"), Column("train"),
                 Column("CANN"), Column("status", style=status_style),
                 Column("kernel", compact=False),
                 Column("aclnn / via", compact=False),
                 *([Column(f"path on {hardware}")] if hardware else [])])
    matrix_only = []
    for h in rows:
        r = h.resolution
        if r is None:
            matrix_only.append(h.release.torch_npu)
            continue
        note = " → ".join(r.via[1:]) if len(r.via) > 1 else (r.aclnn or "")
        d = paths.get(h.release.torch_npu)
        path = [(d.path + (" (inferred)" if d.inferred else "")) if d else ""]
        grid.add(h.release.torch_npu, h.release.torch, h.release.train, h.release.cann,
                 str(r.status), r.kernel, note, *(path if hardware else []))
    if fmt == "csv":
        show_grid(grid, "csv")
        return
    console = wide_console()
    kind = ""
    if info and info.kernel_kind:
        delegate = (f", delegates to {info.structured_delegate}"
                    if info.structured_delegate else "")
        kind = f"  ({info.kernel_kind}{delegate})"
    console.print(f"[bold]{opname}[/bold]{kind}")
    console.print(f"first release with an NPU kernel: [bold]{first_any or 'none'}[/bold]")
    console.file.flush()
    show_grid(grid)
    if matrix_only:
        n = len(matrix_only)
        span = matrix_only[0] if n == 1 else f"{matrix_only[0]} … {matrix_only[-1]}"
        console.print(f"{n} older release{' has' if n == 1 else 's have'} no kernel list "
                      f"in the catalog ({span})", style="dim")
    _print_history_extras(console, hist.to_json())
    _print_workarounds(console, cat, hist.workarounds)
    newest = next((paths[h.release.torch_npu] for h in reversed(rows)
                   if h.release.torch_npu in paths), None)
    if newest is not None:
        console.print(f"path on {hardware}, newest release: {newest.path}: {newest.why}")


def _print_workarounds(console: Any, cat: Any, ids: list[str]) -> None:
    """The op's workaround entries, each with its fix's first line."""
    from rich.markup import escape

    from opcheck.checker.formats.text import FixHint
    from opcheck.contrib.workaround_catalog import entry_detail

    if not ids:
        return
    console.print(f"workarounds ({len(ids)}; `opcheck workaround show ID` prints one whole):")
    for i in ids:
        d = entry_detail(cat, i)
        hint = FixHint(d.id, d.title, d.fix, tuple(d.ops))
        console.print(f"  {escape(d.id)} ({escape(d.kind)}): {escape(hint.summary)}")


def _print_history_extras(console: Any, doc: dict[str, Any]) -> None:
    """The CANN side (the aclnn functions the kernel calls, their documented products and
    dtypes per CANN version) and graph-mode status, runs of releases folded."""
    from rich.markup import escape

    from opcheck.checker.history import aclnn_lines, release_runs

    for item in doc.get("aclnn") or []:
        for indent, text, link in aclnn_lines(item):
            line = f"{indent}{'aclnn ' if not indent else ''}{escape(text)}"
            console.print(line + (f"  [dim]{escape(link)}[/dim]" if link else ""))
    graph = doc.get("graph") or []
    if graph:
        console.print("graph mode (torchair):")
        for run in release_runs(graph, ("status", "message", "condition")):
            span = run["first"] if run["count"] == 1 else f"{run['first']} … {run['last']}"
            why = run["message"] or run["condition"] or ""
            console.print(f"  {escape(span)}: {escape(str(run['status']))}"
                          + (f" ({escape(why[:120])})" if why else ""))


def releases(fmt: TableFormatOpt = "table", catalog: CatalogOpt = None) -> None:
    """The release matrix: torch_npu ↔ PyTorch ↔ CANN ↔ Python, and where kernel facts come from."""
    with handle_errors():
        _check_format(fmt, TABLE_FORMATS)
        cat = _catalog(catalog)
        if fmt == "json":
            typer.echo(json.dumps({"schema_version": 1, "releases": [
                {"torch_npu": r.torch_npu, "torch": r.torch, "train": r.train, "cann": r.cann,
                 "pythons": [p for p in r.pythons.split(",") if p], "tag": r.tag,
                 "cpu_fallback": r.has_cpu_fallback, "kernel_source": r.kernel_source,
                 "date": r.date, "cann_inferred": r.cann_inferred,
                 "op_plugin_commit": r.op_plugin_commit,
                 "kernel_source_note": r.kernel_source_note}
                for r in cat.releases]}, indent=2))
            return
        from opcheck.cli.render import show_grid

        show_grid(releases_grid(cat.releases), fmt)


def releases_grid(rels: list[Any]) -> Any:
    from opcheck.cli.render import Column, Grid

    grid = Grid([Column("torch_npu"), Column("torch"), Column("train"), Column("CANN"),
                 Column("Python", wrap=True, compact=False), Column("tag", compact=False),
                 Column("kernels from", compact=False)])
    for r in rels:
        # inferred (hotfix train, no table names it) and approximate facts say so in the cell
        grid.add(r.torch_npu, r.torch, r.train,
                 (r.cann + " (inferred)" if r.cann_inferred else r.cann) or "?",
                 r.pythons.replace(",", " "), r.tag,
                 r.kernel_source + (" (approximate)" if r.kernel_source == "op_plugin_branch"
                                    else "")
                 + (f" @{r.op_plugin_commit[:8]}" if r.op_plugin_commit else ""))
    return grid


# what a removed kernel becomes, in the words of `opcheck diff`
_INSTEAD = {"composite": "composite (runs through other NPU ops)",
            "cpu_fallback": "a CPU fallback (host round-trip per call)",
            "unsupported": "an error (unsupported)", "npu": "npu (another kernel)"}


def diff(
    old: Annotated[str, typer.Argument(help="Older torch_npu release (2.5 = the newest 2.5 release)")],
    new: Annotated[str, typer.Argument(help="Newer torch_npu release")],
    fmt: TableFormatOpt = "table",
    catalog: CatalogOpt = None,
) -> None:
    """Kernels added, removed (and what happens instead: composite, CPU fallback or an
    error), or whose family changed between two releases."""
    with handle_errors():
        _check_format(fmt, TABLE_FORMATS)
        from opcheck.checker.queries import release_diff, removed_outcomes

        cat = _catalog(catalog)
        old_rel = cat.release(release_arg(cat, old)).torch_npu
        new_rel = cat.release(release_arg(cat, new)).torch_npu
        d = release_diff(cat, old_rel, new_rel)
        instead = removed_outcomes(cat, new_rel, d.removed)
        if fmt == "json":
            typer.echo(json.dumps({"schema_version": 2, "old": old_rel, "new": new_rel,
                                   "added": d.added, "removed": d.removed,
                                   "removed_instead": instead,
                                   "family_changed": [list(x) for x in d.family_changed]},
                                  indent=2))
            return
        from opcheck.cli.render import Column, Grid, show_grid

        grid = Grid([Column("change"), Column("op"), Column("detail", wrap=True)])
        for op_name in d.added:
            grid.add("+", op_name, "kernel added")
        for op_name in d.removed:
            now = instead.get(op_name, "?")
            grid.add("-", op_name, f"kernel removed: now {_INSTEAD.get(now, now)}")
        for op_name, a, b in d.family_changed:
            grid.add("~", op_name, f"{a} → {b}")
        if fmt == "table":
            counts: dict[str, int] = {}
            for v in instead.values():
                counts[v] = counts.get(v, 0) + 1
            how = ", ".join(f"{n} {k}" for k, n in sorted(counts.items()))
            typer.echo(f"{old_rel} → {new_rel}: {len(d.added)} kernels added, "
                       f"{len(d.removed)} removed" + (f" ({how})" if how else "")
                       + f", {len(d.family_changed)} changed family", err=False)
        show_grid(grid, fmt)


def sync(
    mirror: Annotated[list[Path] | None, typer.Option("--mirror", help="Read upstream files from a mirror directory (the ../shared/upstream layout); repeat it to add mirrors: each upstream repository is read whole from the first mirror that has it", show_default=False)] = None,
    live: Annotated[bool, typer.Option("--live", help="Fetch upstream files over HTTP")] = False,
    host: Annotated[str, typer.Option("--host", help="Live source: github | gitcode")] = "github",
    wheels: Annotated[str, typer.Option("--wheels", help="Live: which published wheels to read with pip download: all | none | V1,V2")] = "all",
    save_mirror: Annotated[Path | None, typer.Option("--save-mirror", help="Also save every fetched file into DIR (an offline mirror)", show_default=False)] = None,
    snapshot: Annotated[Path | None, typer.Option("--snapshot", help="Also write the diffable snapshot into DIR", show_default=False)] = None,
    catalog: CatalogOpt = None,
    quiet: QuietOpt = False,
) -> None:
    """Rebuild the catalog from upstream (a mirror directory or live), atomically.

    Every source is tried; failures are listed at the end with exit code 1 and the previous
    catalog stays in place.
    """
    with handle_errors():
        from rich.console import Console
        from rich.markup import escape

        from opcheck.contrib.workaround_catalog import attach
        from opcheck.sync.pipeline import SyncOptions, run_sync

        opts = SyncOptions(mirror=tuple(mirror or ()), live=live, host=host, wheels=wheels,
                           save_mirror=save_mirror, snapshot=snapshot, catalog=catalog)
        # soft_wrap: a failure is one line naming file:line; wrapping at the console width
        # would cut the path in two (CI logs). escape: upstream text is not rich markup.
        err = Console(stderr=True, soft_wrap=True)
        from opcheck.cli.render import progress

        with progress("sync", quiet=quiet) as update:
            out = run_sync(opts, progress=update, before_write=attach)
        result = out.result
        for note in result.notes:
            err.print(f"note: {escape(note)}")
        if out.catalog is None:
            for f in result.failures:
                err.print(f"[red]failed:[/red] {escape(f)}")
            err.print(f"{len(result.failures)} source(s) failed; the catalog was not replaced")
            raise typer.Exit(1)
        d = result.data
        usable = sum(1 for r in d.releases if r.kernel_source != "none")
        err.print(f"catalog {out.catalog}: {len(d.releases)} releases ({usable} with kernel lists), "
                  f"{len(d.operators)} operators, {len(d.kernels)} kernel facts, "
                  f"{len(d.sources)} sources; {len(result.conflicts)} table conflicts resolved")
        if out.snapshot is not None:
            err.print(f"snapshot written to {out.snapshot}")


def register(app: typer.Typer) -> None:
    app.command()(op)
    app.command()(releases)
    app.command()(diff)
    app.command()(sync)
