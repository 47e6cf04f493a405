"""The bundled snapshot: the catalog's facts as sorted, diffable TSV files in ``data/snapshot/``.

Files (tab-separated, header first, rows sorted, no upstream prose):

- one plain file per record list (``opcheck.db.schema.FILES``: a column per record field):
  ``sources.tsv`` (no fetch time), ``releases.tsv`` (the version chain and kernel provenance),
  ``operators.tsv``, ``api_ops.tsv``, ``deprecations.tsv``, ``pythons.tsv``
- ``kernels.tsv``: op, the ``KernelFacts`` fields, releases — one row per op and set of
  identical facts; ``releases`` lists every torch_npu release that has them
- ``api_support.tsv``: the ``ApiFacts`` fields, docs — one row per set of identical facts;
  ``docs`` lists ``source_id:line:doc_version`` of every doc that states them
- ``meta.tsv``
- ``atlas.tsv`` (optional): ``opcheck atlas``'s coverage of every architecture of the model
  libraries per run of releases, written by ``opcheck atlas --snapshot DIR`` (``make catalog``).
- ``zoo.tsv`` (optional): the retired zoo table's coverage of the nine well-known models per
  release, left in place by a sync. Nothing writes it now: ``opcheck zoo`` is ``opcheck atlas
  zoo``, whose rows go to ``atlas.tsv`` (library ``zoo``). Both files go through
  :func:`write_rows` / :func:`read_rows`.

Every kernel fact's provenance is its release's kernel source (or native source for
registrations torch_npu makes itself), so it is not repeated per row.
"""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from opcheck.core.errors import CatalogError
from opcheck.core.versions import release_key
from opcheck.db.data import (
    ApiFacts,
    ApiSupportRec,
    CatalogData,
    KernelFacts,
    KernelRec,
)
from opcheck.db.schema import ATLAS_FILE, FILES, ZOO_FILE, Column, File, column_of, record_fields

SNAPSHOT_FORMAT = "1"
# Fused attention ops have schemas of several KiB; never let csv reject a long field.
csv.field_size_limit(1 << 24)
_FACT_COLS = list(record_fields(KernelFacts))
_KERNEL_COLS = ["op", *_FACT_COLS, "releases"]
_API_FACT_COLS = list(record_fields(ApiFacts))
_API_COLS = [*_API_FACT_COLS, "docs"]
_META_COLS = ["key", "value"]


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    if "\t" in text or "\n" in text or "\r" in text:
        raise CatalogError(f"snapshot value contains a tab or newline: {text[:60]!r}")
    return text


def _value(column: Column) -> Callable[[str], Any]:
    """The parser of a cell for ``column`` (the inverse of ``_cell``)."""
    parse: Callable[[str], Any]
    if column.type is bool:
        parse = _bool
    elif column.type is int:
        parse = int
    else:
        return str
    if column.nullable:
        return lambda text: parse(text) if text else None
    return parse


def _bool(text: str) -> bool:
    return text == "1"


def _write(folder: Path, name: str, header: list[str], rows: list[list[Any]]) -> None:
    lines = ["\t".join(header)]
    lines += sorted("\t".join(_cell(v) for v in row) for row in rows)
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _write_file(folder: Path, spec: File, records: Sequence[Any]) -> None:
    attrs = [c.path for c in spec.columns]
    if spec.keep is not None:
        records = [r for r in records if spec.keep(r)]
    _write(folder, spec.name, spec.header, [[getattr(r, a) for a in attrs] for r in records])


def write_snapshot(data: CatalogData, folder: Path) -> None:
    """Write all snapshot files into ``folder`` (replacing the folder's TSV files at once)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=folder.parent))
    kept = set()
    try:
        for spec in FILES:
            records = getattr(data, spec.attr)
            if spec.optional and not records:
                kept.add(spec.name)
                continue
            _write_file(staging, spec, records)
        grouped: dict[tuple[str, KernelFacts], list[str]] = defaultdict(list)
        for k in data.kernels:
            grouped[(k.op, k.facts)].append(k.release)
        _write(staging, "kernels.tsv", _KERNEL_COLS, [
            [op, *(getattr(f, c) for c in _FACT_COLS), ",".join(sorted(rels, key=release_key))]
            for (op, f), rels in grouped.items()
        ])
        docs: dict[ApiFacts, list[str]] = defaultdict(list)
        for a in data.api_support:
            # The doc's prose stays upstream; the snapshot keeps the parsed facts and where
            # they came from (source id, line, doc version).
            docs[a.facts].append(f"{a.source_id or ''}:{a.line}:{a.doc_version}")
        _write(staging, "api_support.tsv", _API_COLS, [
            [*(getattr(f, c) for c in _API_FACT_COLS), ",".join(sorted(tokens))]
            for f, tokens in docs.items()
        ])
        meta = {**data.meta, "snapshot_format": SNAPSHOT_FORMAT}
        _write(staging, "meta.tsv", _META_COLS, [[k, v] for k, v in meta.items()])
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.tsv"):
            if old.name not in kept and not (staging / old.name).exists():
                old.unlink()
        for new in staging.glob("*.tsv"):
            os.replace(new, folder / new.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _read(folder: Path, name: str, header: list[str]) -> list[list[str]]:
    """The rows of one file, cells in ``header`` order (lists, not dicts: first use reads
    ~60k rows)."""
    path = folder / name
    try:
        with path.open(encoding="utf-8", newline="") as fh:
            reader = csv.reader(fh, delimiter="\t", quoting=csv.QUOTE_NONE)
            found = next(reader, None)
            if found != header:
                raise CatalogError(f"{path}:1: unexpected header {found!r}, expected {header!r}")
            out = []
            for lineno, row in enumerate(reader, start=2):
                if len(row) != len(header):
                    raise CatalogError(
                        f"{path}:{lineno}: {len(row)} fields, expected {len(header)}"
                    )
                out.append(row)
            return out
    except OSError as exc:
        raise CatalogError(f"cannot read snapshot file {path}: {exc.strerror}") from None


def _read_file(folder: Path, spec: File) -> list[Any]:
    names = [c.path for c in spec.columns]
    parsers = [_value(c) for c in spec.columns]
    return [
        spec.record(**dict(zip(names, [p(v) for p, v in zip(parsers, r, strict=True)],
                               strict=True)))
        for r in _read(folder, spec.name, spec.header)
    ]


@cache
def _parsers(cls: type) -> tuple[Callable[[str], Any], ...]:
    return tuple(_value(column_of(cls, name)) for name in record_fields(cls))


def _facts(cls: type, cells: Sequence[str]) -> Any:
    """A facts record from its cells in field order."""
    return cls(*[parse(v) for parse, v in zip(_parsers(cls), cells, strict=True)])


def read_snapshot(folder: Path) -> CatalogData:
    data = CatalogData()
    try:
        for spec in FILES:
            if spec.optional and not (folder / spec.name).is_file():
                continue
            setattr(data, spec.attr, _read_file(folder, spec))
        release_source = {
            rel.torch_npu: (rel.kernel_source_id, rel.native_source_id) for rel in data.releases
        }
        for r in _read(folder, "kernels.tsv", _KERNEL_COLS):
            op = r[0]
            facts: KernelFacts = _facts(KernelFacts, r[1:-1])
            only_native = facts.native and not (facts.op_api or facts.acl_op)
            for rel_name in r[-1].split(","):
                if rel_name not in release_source:
                    raise CatalogError(f"{folder / 'kernels.tsv'}: unknown release {rel_name!r}")
                kernel_sid, native_sid = release_source[rel_name]
                sid = native_sid if only_native and native_sid else kernel_sid
                data.kernels.append(KernelRec(op, rel_name, facts, sid))
        refs = {s.id: s.ref for s in data.sources}
        for r in _read(folder, "api_support.tsv", _API_COLS):
            api_facts: ApiFacts = _facts(ApiFacts, r[:-1])
            for token in r[-1].split(","):
                sid_text, line, doc_version = token.split(":", 2)
                sid = int(sid_text) if sid_text else None
                data.api_support.append(ApiSupportRec(
                    api_facts, doc_version, refs.get(sid, "") if sid else "", "", int(line), sid))
        data.meta = {k: v for k, v in _read(folder, "meta.tsv", _META_COLS)}
    except (KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"snapshot in {folder} is malformed: {exc}") from None
    data.meta.pop("snapshot_format", None)
    return data


def write_rows(spec: File, rows: Sequence[Any], folder: Path) -> Path:
    """Replace ``folder/<spec's file>`` (an optional file a trace writes, not a sync: the
    atlas's, the zoo's) with ``rows`` atomically; returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=f".{Path(spec.name).stem}-", dir=folder))
    try:
        _write_file(staging, spec, list(rows))
        os.replace(staging / spec.name, folder / spec.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder / spec.name


def read_rows(spec: File, folder: Path) -> list[Any]:
    """The rows of an optional snapshot file; none when the folder has no such file."""
    if not (folder / spec.name).is_file():
        return []
    try:
        return _read_file(folder, spec)
    except (KeyError, ValueError, TypeError) as exc:
        raise CatalogError(f"{folder / spec.name} is malformed: {exc}") from None


def snapshot_equal(a: Path, b: Path) -> list[str]:
    """Names of snapshot files that differ between two folders (empty when equal).

    zoo.tsv is left out: it comes from tracing models, not from upstream, so a snapshot a sync
    writes never has it."""
    names = {p.name for p in a.glob("*.tsv")} | {p.name for p in b.glob("*.tsv")}
    names.discard(ZOO_FILE.name)
    names.discard(ATLAS_FILE.name)
    diff = []
    for n in sorted(names):
        pa, pb = a / n, b / n
        if not (pa.is_file() and pb.is_file()) or pa.read_bytes() != pb.read_bytes():
            diff.append(n)
    return diff
