"""The bundled snapshot: the catalog's facts as sorted, diffable TSV files in ``data/snapshot/``.

Files (tab-separated, header first, rows sorted, no upstream prose):

- ``sources.tsv``: id, scraper, path, url, ref, commit, sha256, rows
- ``releases.tsv``: one row per torch_npu release (the version chain and kernel provenance)
- ``operators.tsv``: op, namespace, name, overload, schema, tags, dispatch, kernel_kind,
  structured_delegate, source_id
- ``kernels.tsv``: op, status, op_api, acl_op, native, aclnn, releases — one row per op and
  set of identical facts; ``releases`` lists every torch_npu release that has them
- ``deprecations.tsv``, ``pythons.tsv``, ``meta.tsv``
- ``zoo.tsv`` (optional): ``opcheck zoo``'s coverage of well-known architectures per release.
  It is written by ``opcheck zoo --snapshot DIR``, not by a sync, which leaves it in place.

Every kernel fact's provenance is its release's kernel source (or native source for
registrations torch_npu makes itself), so it is not repeated per row.
"""

from __future__ import annotations

import csv
import os
import shutil
import tempfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import fields
from pathlib import Path
from typing import Any

from opcheck.core.errors import CatalogError
from opcheck.core.versions import release_key
from opcheck.db.data import (
    ApiFacts,
    ApiOpRec,
    ApiSupportRec,
    CatalogData,
    DeprecationRec,
    KernelFacts,
    KernelRec,
    OperatorRec,
    PythonRec,
    ReleaseRec,
    SourceRec,
    ZooRec,
)

SNAPSHOT_FORMAT = "1"
# Fused attention ops have schemas of several KiB; never let csv reject a long field.
csv.field_size_limit(1 << 24)
_SOURCE_COLS = ["id", "scraper", "path", "url", "ref", "commit", "sha256", "rows"]
_KERNEL_COLS = ["op", "status", "op_api", "acl_op", "native", "aclnn", "releases"]
_API_COLS = ["api", "feature", "hardware", "supported", "only_dtypes", "unsupported_dtypes",
             "arg_limits", "generation", "docs"]
_API_OP_COLS = ["api", "op", "via"]
ZOO_FILE = "zoo.tsv"


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "1" if value else "0"
    text = str(value)
    if "\t" in text or "\n" in text or "\r" in text:
        raise CatalogError(f"snapshot value contains a tab or newline: {text[:60]!r}")
    return text


def _write(folder: Path, name: str, header: list[str], rows: list[list[Any]]) -> None:
    lines = ["\t".join(header)]
    lines += sorted("\t".join(_cell(v) for v in row) for row in rows)
    (folder / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def _field_names(cls: type) -> list[str]:
    return [f.name for f in fields(cls)]


def _write_records(folder: Path, name: str, cls: type, records: Sequence[Any]) -> None:
    """A file with one column per field of the record class, in field order."""
    cols = _field_names(cls)
    _write(folder, name, cols, [[getattr(r, c) for c in cols] for r in records])


def write_snapshot(data: CatalogData, folder: Path) -> None:
    """Write all snapshot files into ``folder`` (replacing the folder's TSV files at once)."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".snapshot-", dir=folder.parent))
    try:
        _write(staging, "sources.tsv", _SOURCE_COLS,
               [[getattr(s, c) for c in _SOURCE_COLS] for s in data.sources])
        _write_records(staging, "releases.tsv", ReleaseRec, data.releases)
        _write_records(staging, "operators.tsv", OperatorRec, data.operators)
        grouped: dict[tuple[str, KernelFacts], list[str]] = defaultdict(list)
        for k in data.kernels:
            grouped[(k.op, k.facts)].append(k.release)
        _write(staging, "kernels.tsv", _KERNEL_COLS, [
            [op, f.status, f.op_api, f.acl_op, f.native, f.aclnn,
             ",".join(sorted(rels, key=release_key))]
            for (op, f), rels in grouped.items()
        ])
        docs: dict[ApiFacts, list[str]] = defaultdict(list)
        for a in data.api_support:
            # The doc's prose stays upstream; the snapshot keeps the parsed facts and where
            # they came from (source id, line, doc version).
            docs[a.facts].append(f"{a.source_id or ''}:{a.line}:{a.doc_version}")
        _write(staging, "api_support.tsv", _API_COLS, [
            [f.api, f.feature, f.hardware, "" if f.supported is None else f.supported,
             f.only_dtypes, f.unsupported_dtypes, f.arg_limits, f.generation,
             ",".join(sorted(tokens))]
            for f, tokens in docs.items()
        ])
        _write(staging, "api_ops.tsv", _API_OP_COLS,
               [[x.api, x.op, x.via] for x in data.api_ops])
        _write_records(staging, "deprecations.tsv", DeprecationRec, data.deprecations)
        _write_records(staging, "pythons.tsv", PythonRec, data.pythons)
        meta = {**data.meta, "snapshot_format": SNAPSHOT_FORMAT}
        _write(staging, "meta.tsv", ["key", "value"], [[k, v] for k, v in meta.items()])
        if data.zoo:
            _write_zoo(staging, data.zoo)
        folder.mkdir(parents=True, exist_ok=True)
        for old in folder.glob("*.tsv"):
            # zoo.tsv comes from tracing models, which a sync does not do: keep it
            if old.name == ZOO_FILE and not data.zoo:
                continue
            if not (staging / old.name).exists():
                old.unlink()
        for new in staging.glob("*.tsv"):
            os.replace(new, folder / new.name)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _read(folder: Path, name: str, header: list[str]) -> list[dict[str, str]]:
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
                out.append(dict(zip(header, row, strict=True)))
            return out
    except OSError as exc:
        raise CatalogError(f"cannot read snapshot file {path}: {exc.strerror}") from None


def _opt_int(text: str) -> int | None:
    return int(text) if text else None


def _bool(text: str) -> bool:
    return text == "1"


def read_snapshot(folder: Path) -> CatalogData:
    data = CatalogData()
    try:
        for r in _read(folder, "sources.tsv", _SOURCE_COLS):
            data.sources.append(SourceRec(
                id=int(r["id"]), scraper=r["scraper"], path=r["path"], url=r["url"],
                ref=r["ref"], commit=r["commit"], sha256=r["sha256"], rows=int(r["rows"]),
            ))
        release_source: dict[str, tuple[int | None, int | None]] = {}
        for r in _read(folder, "releases.tsv", _field_names(ReleaseRec)):
            rel = ReleaseRec(
                torch_npu=r["torch_npu"], torch=r["torch"], train=r["train"], cann=r["cann"],
                pythons=r["pythons"], tag=r["tag"], branch=r["branch"],
                op_plugin_commit=r["op_plugin_commit"], op_plugin_branch=r["op_plugin_branch"],
                date=r["date"], sort_key=int(r["sort_key"]),
                has_cpu_fallback=_bool(r["has_cpu_fallback"]), kernel_source=r["kernel_source"],
                source_id=_opt_int(r["source_id"]),
                kernel_source_id=_opt_int(r["kernel_source_id"]),
                native_source_id=_opt_int(r["native_source_id"]),
            )
            data.releases.append(rel)
            release_source[rel.torch_npu] = (rel.kernel_source_id, rel.native_source_id)
        for r in _read(folder, "operators.tsv", _field_names(OperatorRec)):
            data.operators.append(OperatorRec(
                op=r["op"], namespace=r["namespace"], name=r["name"], overload=r["overload"],
                schema=r["schema"], tags=r["tags"], dispatch=r["dispatch"],
                kernel_kind=r["kernel_kind"], structured_delegate=r["structured_delegate"],
                source_id=_opt_int(r["source_id"]),
            ))
        for r in _read(folder, "kernels.tsv", _KERNEL_COLS):
            facts = KernelFacts(
                status=r["status"], op_api=_bool(r["op_api"]), acl_op=_bool(r["acl_op"]),
                native=_bool(r["native"]), aclnn=r["aclnn"],
            )
            only_native = facts.native and not (facts.op_api or facts.acl_op)
            for rel_name in r["releases"].split(","):
                if rel_name not in release_source:
                    raise CatalogError(f"{folder / 'kernels.tsv'}: unknown release {rel_name!r}")
                kernel_sid, native_sid = release_source[rel_name]
                sid = native_sid if only_native and native_sid else kernel_sid
                data.kernels.append(KernelRec(r["op"], rel_name, facts, sid))
        refs = {s.id: s.ref for s in data.sources}
        for r in _read(folder, "api_support.tsv", _API_COLS):
            api_facts = ApiFacts(
                api=r["api"], feature=r["feature"], hardware=r["hardware"],
                supported=None if r["supported"] == "" else _bool(r["supported"]),
                only_dtypes=r["only_dtypes"], unsupported_dtypes=r["unsupported_dtypes"],
                arg_limits=r["arg_limits"], generation=r["generation"],
            )
            for token in r["docs"].split(","):
                sid_text, line, doc_version = token.split(":", 2)
                sid = _opt_int(sid_text)
                data.api_support.append(ApiSupportRec(
                    api_facts, doc_version, refs.get(sid, "") if sid else "", "", int(line), sid))
        for r in _read(folder, "api_ops.tsv", _API_OP_COLS):
            data.api_ops.append(ApiOpRec(r["api"], r["op"], r["via"]))
        for r in _read(folder, "deprecations.tsv", _field_names(DeprecationRec)):
            data.deprecations.append(DeprecationRec(r["op"], r["replacement"],
                                                    _opt_int(r["source_id"])))
        for r in _read(folder, "pythons.tsv", _field_names(PythonRec)):
            data.pythons.append(PythonRec(r["torch"], r["python"], _opt_int(r["source_id"])))
        data.meta = {r["key"]: r["value"] for r in _read(folder, "meta.tsv", ["key", "value"])}
    except (KeyError, ValueError) as exc:
        raise CatalogError(f"snapshot in {folder} is malformed: {exc}") from None
    data.meta.pop("snapshot_format", None)
    data.zoo = read_zoo(folder)
    return data


def _write_zoo(folder: Path, rows: list[ZooRec]) -> None:
    cols = _field_names(ZooRec)
    _write(folder, ZOO_FILE, cols, [[getattr(r, c) for c in cols] for r in rows])


def write_zoo(rows: list[ZooRec], folder: Path) -> Path:
    """Replace ``folder/zoo.tsv`` with ``rows`` (atomically); returns its path."""
    folder.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=".zoo-", dir=folder))
    try:
        _write_zoo(staging, rows)
        os.replace(staging / ZOO_FILE, folder / ZOO_FILE)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return folder / ZOO_FILE


def read_zoo(folder: Path) -> list[ZooRec]:
    """The zoo rows of a snapshot folder; none when it has no zoo.tsv."""
    if not (folder / ZOO_FILE).is_file():
        return []
    try:
        return [
            ZooRec(
                model=r["model"], torch_npu=r["torch_npu"], verdict=r["verdict"],
                npu=int(r["npu"]), composite=int(r["composite"]),
                cpu_fallback=int(r["cpu_fallback"]), unsupported=int(r["unsupported"]),
                unknown=int(r["unknown"]), fallback_calls=int(r["fallback_calls"]),
                problem_ops=r["problem_ops"], error=r["error"], traced_with=r["traced_with"],
            )
            for r in _read(folder, ZOO_FILE, _field_names(ZooRec))
        ]
    except (KeyError, ValueError) as exc:
        raise CatalogError(f"{folder / ZOO_FILE} is malformed: {exc}") from None


def snapshot_equal(a: Path, b: Path) -> list[str]:
    """Names of snapshot files that differ between two folders (empty when equal).

    zoo.tsv is left out: it comes from tracing models, not from upstream, so a snapshot a sync
    writes never has it."""
    names = {p.name for p in a.glob("*.tsv")} | {p.name for p in b.glob("*.tsv")}
    names.discard(ZOO_FILE)
    diff = []
    for n in sorted(names):
        pa, pb = a / n, b / n
        if not (pa.is_file() and pb.is_file()) or pa.read_bytes() != pb.read_bytes():
            diff.append(n)
    return diff

