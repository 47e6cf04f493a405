"""Contributed data: ``workaround new|lint|verify|schema`` and ``explain`` for runtime logs."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from opcheck.cli.common import CatalogOpt, FormatOpt, handle_errors

workaround_app = typer.Typer(help="Contributed workaround entries (data/workarounds/).",
                             no_args_is_help=True)

DirOpt = Annotated[Path | None, typer.Option("--dir", help="Entries folder (default: the bundled data/workarounds)", show_default=False)]


def _known(catalog: Path | None) -> tuple[Any, set[str], list[str]]:
    from opcheck.db.catalog import Catalog
    from opcheck.db.engine import open_catalog

    cat = Catalog.load(open_catalog(catalog))
    return cat, set(cat.operators), [r.torch_npu for r in cat.releases]


@workaround_app.command("new")
def new(
    op: Annotated[str, typer.Argument(help="The op the entry is about, e.g. aten::isin.Tensor_Tensor")],
    author: Annotated[str, typer.Option("--author")] = "your-github-handle",
    output: Annotated[Path | None, typer.Option("--output", "-o", help="Write here instead of stdout", show_default=False)] = None,
) -> None:
    """Scaffold a valid entry for OP to fill in."""
    with handle_errors():
        from opcheck.contrib.workarounds import scaffold

        text = scaffold(op, author=author)
        if output is None:
            typer.echo(text, nl=False)
        else:
            if output.exists():
                from opcheck.core.errors import UsageError

                raise UsageError(f"{output} exists; not overwriting it")
            output.write_text(text, encoding="utf-8")
            typer.echo(f"wrote {output}", err=True)


@workaround_app.command("lint")
def lint_cmd(folder: DirOpt = None, catalog: CatalogOpt = None) -> None:
    """Check every entry: schema, duplicate ids, op names and release ranges against the catalog."""
    with handle_errors():
        from opcheck.contrib.workarounds import default_workarounds_dir, lint

        _cat, ops, releases = _known(catalog)
        problems = lint(folder or default_workarounds_dir(), known_ops=ops, known_releases=releases)
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
    catalog: CatalogOpt = None,
) -> None:
    """Run each rewrite against the original on the CPU, then check the ops it uses run on the
    NPU on every release the entry applies to."""
    with handle_errors():
        from opcheck.checker.resolve import Resolver
        from opcheck.contrib.verify import fake_npu_trace_ops, verify_all
        from opcheck.contrib.workarounds import default_workarounds_dir, load_dir
        from opcheck.core.errors import UsageError

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
        results = verify_all(entries, op_status=op_status, releases=releases,
                             trace_ops=fake_npu_trace_ops,
                             ok_statuses=frozenset({"npu", "composite"}))
        if fmt == "json":
            typer.echo(json.dumps([{"id": r.entry, "ok": r.ok, "cases": r.cases,
                                    "ops": sorted(r.ops), "problems": r.problems,
                                    "skipped": r.skipped} for r in results], indent=2))
        else:
            for r in results:
                mark = "ok  " if r.ok else "FAIL"
                typer.echo(f"{mark} {r.entry}: {r.cases} cases, {len(r.ops)} ops")
                for p in r.problems:
                    typer.echo(f"     {p}")
        if not all(r.ok for r in results):
            raise typer.Exit(1)


@workaround_app.command("schema")
def schema_cmd(
    output: Annotated[Path | None, typer.Option("--output", "-o", show_default=False)] = None,
) -> None:
    """The entries' JSON Schema (for editors)."""
    with handle_errors():
        from opcheck.contrib.workarounds import json_schema

        text = json.dumps(json_schema(), indent=2) + "\n"
        if output is None:
            typer.echo(text, nl=False)
        else:
            output.write_text(text, encoding="utf-8")


def explain(
    log: Annotated[str, typer.Argument(help="A torch_npu/CANN log file, or - for stdin")] = "-",
    torch_npu: Annotated[str | None, typer.Option("--torch-npu", help="Release to judge the ops against (default as for check)", show_default=False)] = None,
    fmt: FormatOpt = "table",
    catalog: CatalogOpt = None,
) -> None:
    """Explain a runtime log: each known problem once with its fix, and for every op named in
    CPU-fallback warnings its catalog status and workarounds."""
    with handle_errors():
        from opcheck.checker.check import check
        from opcheck.checker.queries import select_target
        from opcheck.cli.commands_check import _installed_torch
        from opcheck.contrib.troubleshoot import explain as run_explain
        from opcheck.contrib.troubleshoot import explain_file, iter_lines
        from opcheck.contrib.workarounds import workaround_lookup
        from opcheck.core.oplist import OpList, OpUse
        from opcheck.db.catalog import Catalog
        from opcheck.db.engine import open_catalog

        result = (run_explain(iter_lines(sys.stdin.buffer)) if log == "-"
                  else explain_file(Path(log)))
        cat = Catalog.load(open_catalog(catalog))
        target = select_target(cat, torch_npu=torch_npu, installed_torch=_installed_torch())
        oplist = OpList(model=log, method="log", ir="log",
                        ops=[OpUse(o.op, o.count, locations=[f"{log}:{o.first_line}"])
                             for o in result.ops.values()])
        report = check(cat, oplist, target, workarounds=workaround_lookup(cat))
        if fmt == "json":
            doc = result.as_dict()
            doc["target"] = report.target
            doc["op_status"] = [{"op": f.op, "status": f.status, "kernel": f.kernel,
                                 "first_npu_release": f.first_npu_release,
                                 "workarounds": [w.id for w in f.workarounds]}
                                for f in report.ops]
            typer.echo(json.dumps(doc, indent=2, ensure_ascii=False))
            return
        from rich.console import Console
        from rich.markdown import Markdown

        con = Console()
        if not result.hits:
            con.print(f"no known problem in {result.lines} lines")
        for hit in result.hits.values():
            sig = hit.signature
            con.print(f"[bold]{sig.title}[/bold]  ({sig.category.value}; {hit.count}× "
                      f"from line {hit.first_line})")
            con.print(f"  [dim]{hit.first_text[:160]}[/dim]")
            con.print(f"  cause: {sig.cause}")
            con.print(Markdown(sig.fix))
            if sig.workarounds:
                con.print(f"  workarounds: {', '.join(sig.workarounds)}")
        if report.ops:
            con.print(f"\nops named in the log, on torch_npu {target.torch_npu} "
                      f"(CANN {target.cann or '?'}):")
            for f in report.ops:
                first = f.first_npu_release or f.first_npu_release_any or "none"
                wa = ", ".join(w.id for w in f.workarounds)
                con.print(f"  {f.op}: {f.status} {f.kernel}  first NPU release: {first}"
                          + (f"  workarounds: {wa}" if wa else ""))


def register(app: typer.Typer) -> None:
    app.add_typer(workaround_app, name="workaround")
    app.command()(explain)
