"""Contributed data: ``workaround new|lint|verify|schema`` and ``explain`` for runtime logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.cli.common import CatalogOpt, FormatOpt, handle_errors, release_arg

workaround_app = typer.Typer(help="Contributed workaround entries (data/workarounds/).",
                             no_args_is_help=True)

DirOpt = Annotated[Path | None, typer.Option("--dir", help="Entries folder (default: the bundled data/workarounds)", show_default=False)]


def _known(catalog: Path | None) -> tuple[Any, set[str], list[str]]:
    from opcheck.cli.common import open_catalog
    from opcheck.db.catalog import Catalog

    cat = Catalog.load(open_catalog(catalog))
    return cat, set(cat.operators), [r.torch_npu for r in cat.releases]


@workaround_app.command("new")
def new(
    op: Annotated[str, typer.Argument(help="The op the entry is about, e.g. aten::isin.Tensor_Tensor")],
    author: Annotated[str, typer.Option("--author")] = "your-github-handle",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout", show_default=False)] = None,
    folder: DirOpt = None,
) -> None:
    """Scaffold a valid entry for OP to fill in, with an id no entry in the folder has."""
    with handle_errors():
        from opcheck.cli.common import ensure_writable, write_output
        from opcheck.contrib.workaround_lint import existing_ids, scaffold
        from opcheck.contrib.workarounds import default_workarounds_dir
        from opcheck.core.errors import UsageError

        ensure_writable(output)
        text = scaffold(op, author=author, taken=existing_ids(folder or default_workarounds_dir()))
        if output is None:
            typer.echo(text, nl=False)
        else:
            if output.exists():
                raise UsageError(f"{output} exists; not overwriting it")
            write_output(output, text)
            typer.echo(f"wrote {output}", err=True)


def _op_history(cat: Any) -> Any:
    """op → [(release, status)] on every release with a kernel list, oldest first: what lint
    checks release ranges and ``fixed_in`` claims against."""
    from opcheck.checker.resolve import Resolver

    resolvers = [(r.torch_npu, Resolver(cat, r.torch_npu)) for r in cat.releases if r.has_kernels]

    def history(op: str) -> list[tuple[str, str]]:
        return [(rel, str(res.resolve(op).status)) for rel, res in resolvers]

    return history


@workaround_app.command("lint")
def lint_cmd(folder: DirOpt = None, catalog: CatalogOpt = None) -> None:
    """Check every entry: schema, placeholders left from `workaround new`, duplicate ids, op
    names, and release ranges and `fixed_in` against the catalog."""
    with handle_errors():
        from opcheck.contrib.workaround_lint import lint
        from opcheck.contrib.workarounds import default_workarounds_dir

        cat, ops, releases = _known(catalog)
        problems = lint(folder or default_workarounds_dir(), known_ops=ops, known_releases=releases,
                        op_history=_op_history(cat))
        for p in problems:
            where = f"{p.file}:{p.line}" if p.line else p.file
            typer.echo(f"{where}: {p.code}: {p.message}", err=True)
        if problems:
            raise typer.Exit(1)
        typer.echo("workarounds: all entries pass lint", err=True)


@workaround_app.command("verify")
def verify_cmd(
    ids: Annotated[list[str] | None, typer.Argument(help="Entry ids (default: every entry with a rewrite)", show_default=False)] = None,
    folder: DirOpt = None,
    fmt: FormatOpt = "table",
    timeout: Annotated[float, typer.Option("--timeout", help="Seconds each entry's code may run")] = 120.0,
    memory_mb: Annotated[int, typer.Option("--memory-mb", help="Memory limit of each entry's process")] = 4096,
    catalog: CatalogOpt = None,
) -> None:
    """Run each rewrite against the original on the CPU (in a child process with a timeout and
    a memory limit: entry code is contributed code), then check the ops it uses run on the NPU
    on every release the entry applies to."""
    failed = False
    with handle_errors():
        from opcheck.checker.resolve import Resolver
        from opcheck.contrib.verify import verify_all_isolated
        from opcheck.contrib.workarounds import default_workarounds_dir, load_dir
        from opcheck.core.errors import UsageError

        if fmt not in ("table", "json"):
            raise UsageError(f"unknown format {fmt!r} (choose from table, json)")
        cat, _ops, _rels = _known(catalog)
        entries = load_dir(folder or default_workarounds_dir())
        if ids:
            unknown = set(ids) - {e.id for e in entries}
            if unknown:
                raise UsageError(f"no workaround entry {', '.join(sorted(unknown))}")
            entries = [e for e in entries if e.id in ids]
        entries = [e for e in entries if e.rewrite is not None]
        resolvers: dict[str, Resolver] = {}

        def op_status(op: str, release: str) -> str:
            if release not in resolvers:
                resolvers[release] = Resolver(cat, release)
            return resolvers[release].resolve(op).status

        releases = [r.torch_npu for r in cat.releases if r.has_kernels]
        results = verify_all_isolated(entries, op_status=op_status, releases=releases,
                                      fake_npu=True, timeout=timeout, memory_mb=memory_mb,
                                      ok_statuses=frozenset({"npu", "composite"}))
        # decided before writing: a reader closing stdout early must not change the exit code
        failed = not all(r.ok for r in results)
        if fmt == "json":
            typer.echo(json.dumps([{"id": r.entry, "ok": r.ok, "cases": r.cases,
                                    "edge_cases": r.edge_cases,
                                    "ops": sorted(r.ops), "problems": r.problems,
                                    "skipped": r.skipped} for r in results], indent=2))
        else:
            for r in results:
                mark = "ok  " if r.ok else "FAIL"
                typer.echo(f"{mark} {r.entry}: {r.cases} cases (+{r.edge_cases} edge cases), "
                           f"{len(r.ops)} ops")
                for p in r.problems:
                    typer.echo(f"     {p}")
    if failed:
        raise typer.Exit(1)


@workaround_app.command("schema")
def schema_cmd(
    output: Annotated[Path | None, typer.Option("--output", "-o", show_default=False)] = None,
) -> None:
    """The entries' JSON Schema (for editors)."""
    with handle_errors():
        from opcheck.cli.common import ensure_writable, write_output
        from opcheck.contrib.workaround_lint import json_schema

        ensure_writable(output)
        text = json.dumps(json_schema(), indent=2) + "\n"
        if output is None:
            typer.echo(text, nl=False)
        else:
            write_output(output, text)


@workaround_app.command("show")
def show_cmd(
    entry_id: Annotated[str, typer.Argument(metavar="ID", help="Entry id, as reports list it (e.g. isin-tensor-tensor-rewrite)")],
    fmt: FormatOpt = "table",
    catalog: CatalogOpt = None,
) -> None:
    """One entry whole: the problem, the fix, its rewrite code, the releases and products it
    applies to, how it was verified, and its sources."""
    with handle_errors():
        from opcheck.cli.common import open_catalog
        from opcheck.contrib.workaround_catalog import entry_detail
        from opcheck.core.errors import UsageError
        from opcheck.db.catalog import Catalog

        if fmt not in ("table", "json"):
            raise UsageError(f"unknown format {fmt!r} (choose from table, json)")
        d = entry_detail(Catalog.load(open_catalog(catalog)), entry_id)
        if fmt == "json":
            typer.echo(json.dumps({"schema_version": 1, **d.as_dict()}, indent=2,
                                  ensure_ascii=False))
            return
        from opcheck.cli.render import print_entry

        print_entry(d)


def fix(
    name: Annotated[str, typer.Argument(help="The op of a finding (aten::isin.Tensor_Tensor, isin, torch.isin, F.grid_sample)")],
    torch_npu: Annotated[str | None, typer.Option("--torch-npu", help="Release the fix is for, e.g. 2.1.0.post4 or 2.1 (default as for check)", show_default=False)] = None,
    hardware: Annotated[str | None, typer.Option("--hardware", help="Only entries for this product (910A, 910B, 910C, 310P, 310B, 950)", show_default=False)] = None,
    fmt: FormatOpt = "table",
    catalog: CatalogOpt = None,
) -> None:
    """The fixes for an op on the target release: every workaround entry that applies there,
    printed whole (`opcheck workaround show ID` prints one). Exit 1 when there is none."""
    found = False
    with handle_errors():
        from opcheck.checker.names import Names
        from opcheck.checker.queries import select_target
        from opcheck.cli.commands_check import _installed_torch
        from opcheck.cli.common import open_catalog
        from opcheck.contrib.workaround_catalog import entry_detail, workaround_lookup
        from opcheck.core.errors import UsageError
        from opcheck.db.catalog import Catalog

        if fmt not in ("table", "json"):
            raise UsageError(f"unknown format {fmt!r} (choose from table, json)")
        cat = Catalog.load(open_catalog(catalog))
        match = Names(cat).match(name)
        if match.kind == "none":
            hint = f"; did you mean {', '.join(match.suggestions)}?" if match.suggestions else ""
            raise UsageError(f"{match.describe()}{hint}")
        if torch_npu:
            torch_npu = release_arg(cat, torch_npu)
        target = select_target(cat, torch_npu=torch_npu, installed_torch=_installed_torch())
        lookup = workaround_lookup(cat, hardware)
        ids = list(dict.fromkeys(w.id for op in match.ops for w in lookup(op, target)))
        found = bool(ids)
        details = [entry_detail(cat, i) for i in ids]
        if fmt == "json":
            typer.echo(json.dumps({"schema_version": 1, "query": name, "ops": match.ops,
                                   "torch_npu": target.torch_npu, "hardware": hardware,
                                   "workarounds": [d.as_dict() for d in details]},
                                  indent=2, ensure_ascii=False))
        else:
            from opcheck.cli.render import print_entry

            what = match.single or match.name or name
            if not details:
                typer.echo(f"no workaround entry for {what} on torch_npu {target.torch_npu}"
                           + (f" on {hardware}" if hardware else "")
                           + f" (`opcheck op {name}` shows its status per release)", err=True)
            else:
                typer.echo(f"{len(details)} fix{'es' if len(details) > 1 else ''} for {what} "
                           f"on torch_npu {target.torch_npu}", err=True)
            for i, d in enumerate(details):
                if i:
                    typer.echo("")
                print_entry(d)
    if not found:
        raise typer.Exit(1)


def explain(
    log: Annotated[str, typer.Argument(help="A torch_npu/CANN log file, or - for stdin")] = "-",
    torch_npu: Annotated[str | None, typer.Option("--torch-npu", help="Release to judge the ops against, e.g. 2.6.0.post5 or 2.6 (default as for check)", show_default=False)] = None,
    fmt: FormatOpt = "table",
    catalog: CatalogOpt = None,
) -> None:
    """Explain a runtime log: each failure once with its log line (the aclnn function, error
    code, CANN message and the rule it broke), known problems with their fix, and the catalog
    status of every op the log names. Reads UTF-8 and UTF-16 logs, and logs without newlines."""
    with handle_errors():
        from opcheck.cli.commands_check import _installed_torch
        from opcheck.cli.common import open_catalog
        from opcheck.contrib.explain.facts import message_index
        from opcheck.contrib.explain.report import report_log
        from opcheck.contrib.explain.scan import explain_file, explain_stream
        from opcheck.db.catalog import Catalog

        progress = None
        if log != "-" and sys.stderr.isatty():
            size = max(Path(log).stat().st_size, 1) if Path(log).is_file() else 1

            def progress(n: int) -> None:
                typer.echo(f"\rreading {log}: {n >> 20} of {size >> 20} MB", err=True, nl=False)

        cat = Catalog.load(open_catalog(catalog))
        index = message_index(cat)
        result = (explain_stream(sys.stdin.buffer, messages=index) if log == "-"
                  else explain_file(Path(log), progress=progress, messages=index))
        if progress is not None:
            typer.echo("\r\x1b[K", err=True, nl=False)
        if torch_npu:  # 2.6 → the newest 2.6 release, said on stderr
            torch_npu = release_arg(cat, torch_npu)
        rep = report_log(result, cat, torch_npu=torch_npu, installed_torch=_installed_torch())
        if fmt == "json":
            typer.echo(json.dumps(rep.as_dict(), indent=2, ensure_ascii=False))
            return
        _print_explained(rep)


def _print_explained(rep: Any) -> None:
    from opcheck.cli.render import wide_console
    from opcheck.contrib.explain.render import render

    render(rep, wide_console())  # piped: lines never wrapped, so an id is never cut in two


def register(app: typer.Typer) -> None:
    app.add_typer(workaround_app, name="workaround")
    app.command()(explain)
    app.command()(fix)
