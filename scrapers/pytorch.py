"""The PyTorch op universe: ``native_functions.yaml`` (+ ``tags.yaml``) as torchgen reads them.

The installed torch wheel ships both files under ``torchgen/packaged``; other torch versions
come from PyTorch's repository through a :class:`~opcheck.sync.sources.Source`.  Nothing
here imports torch: :func:`dispatcher_facts` asks a separate interpreter.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import re
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import yaml

from opcheck.core.errors import ScrapeError, UsageError
from opcheck.core.opname import OpName
from opcheck.scrapers.rows import OperatorRow, Origin
from opcheck.sync.sources import Fetched, Source

try:
    _Loader: type[Any] = yaml.CSafeLoader
except AttributeError:  # PyYAML built without libyaml: ~10x slower, still correct
    _Loader = yaml.SafeLoader

# Keys torchgen's NativeFunction.from_yaml pops (torch 2.x), plus keys older torch releases
# used that it no longer knows; anything else means the format moved on.
KNOWN_KEYS = frozenset(
    {
        "func", "cpp_no_default_args", "use_const_ref_for_mutable_tensors", "variants",
        "manual_kernel_registration", "manual_cpp_binding", "device_guard", "device_check",
        "structured", "structured_delegate", "structured_inherits", "python_module",
        "category_override", "precomputed", "tags", "dispatch", "autogen", "ufunc_inner_loop",
    }
)  # fmt: skip
LEGACY_KEYS = frozenset(
    {
        "use_c10_dispatcher", "matches_jit_signature", "requires_tensor",
        "supports_named_tensor", "abstract", "named_guard", "legacy_indexing",
    }
)  # fmt: skip

CIA = "CompositeImplicitAutograd"
CEA = "CompositeExplicitAutograd"
CEA_NF = "CompositeExplicitAutogradNonFunctional"
BACKEND = "backend"

REPO_PREFIX = "github/pytorch/pytorch"
NATIVE_FUNCTIONS = "aten/src/ATen/native/native_functions.yaml"
TAGS_YAML = "aten/src/ATen/native/tags.yaml"


def _load(text: str, origin: Origin) -> Any:
    try:
        return yaml.load(text, Loader=_Loader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        line = mark.line + 1 if mark is not None else None
        msg = str(getattr(e, "problem", None) or e).splitlines()[0]
        raise ScrapeError(f"YAML error: {msg}", source=origin.path, line=line) from None


def _entry_lines(text: str, count: int) -> list[int]:
    """Line of each top-level list item.

    CSafeLoader gives no marks on the loaded data; the top-level items of this file are the
    ``- `` lines at column 0, which is much cheaper than composing the node tree.
    """
    lines = [i + 1 for i, ln in enumerate(text.splitlines()) if ln.startswith("- ")]
    if len(lines) == count:
        return lines
    node = yaml.compose(text, Loader=_Loader)
    if isinstance(node, yaml.SequenceNode):
        return [n.start_mark.line + 1 for n in node.value]
    return [0] * count


def parse_tags(text: str, *, origin: Origin) -> set[str]:
    """The tag names declared in ``tags.yaml``."""
    data = _load(text, origin)
    if not isinstance(data, list):
        raise ScrapeError("tags.yaml is not a list", source=origin.path)
    out: set[str] = set()
    for i, e in enumerate(data):
        if not isinstance(e, dict) or not isinstance(e.get("tag"), str):
            raise ScrapeError(f"entry {i + 1} has no tag: name", source=origin.path)
        out.add(e["tag"])
    return out


def _canonical(name: str, origin: Origin, line: int) -> str:
    try:
        return str(OpName.from_schema(name, "aten"))
    except UsageError as e:
        raise ScrapeError(str(e), source=origin.path, line=line) from None


def kernel_kind(
    dispatch: Iterable[str] | None, *, structured: bool, structured_delegate: bool
) -> str:
    """torchgen's rule: no dispatch table, not structured, no delegate → CompositeImplicit.

    ``dispatch`` is None when the YAML has no ``dispatch:`` key; an explicit empty table
    (``dispatch: {}``) means "no kernel here", not CompositeImplicit.
    """
    if dispatch is None:
        return BACKEND if structured or structured_delegate else CIA
    keys = set(dispatch)
    if CIA in keys:
        return CIA
    if CEA in keys:
        return CEA
    if CEA_NF in keys:
        return CEA_NF
    return BACKEND


def parse_native_functions(
    text: str,
    *,
    origin: Origin,
    tags_text: str | None = None,
    include_autogen: bool = True,
) -> list[OperatorRow]:
    """Rows for every ``func:`` of a torchgen-style native_functions.yaml.

    ``tags`` are those written in the YAML (torchgen adds ``pt2_compliant_tag``/``out``/
    ``inplace`` implicitly; those are not repeated here).  With ``tags_text`` (tags.yaml) an
    undeclared tag is an error, as in torchgen.  ``include_autogen`` adds the ops named by
    ``autogen:`` (torchgen generates them with a CompositeExplicitAutograd kernel and the
    ``generated`` tag, or no kernel at all when the parent is CompositeImplicit; their schema
    is derived by torchgen and left empty here).
    """
    data = _load(text, origin)
    if not isinstance(data, list):
        raise ScrapeError("expected a YAML list of functions", source=origin.path, line=1)
    valid_tags = parse_tags(tags_text, origin=origin) if tags_text is not None else None
    lines = _entry_lines(text, len(data))
    rows: list[OperatorRow] = []
    generated: list[tuple[str, int, str]] = []
    for entry, line in zip(data, lines, strict=True):
        if not isinstance(entry, dict):
            raise ScrapeError("list item is not a mapping", source=origin.path, line=line)
        # repr without quotes: a key may hold a line break (the message must stay one line)
        unknown = sorted(repr(str(k))[1:-1] for k in entry if k not in KNOWN_KEYS and k not in LEGACY_KEYS)
        if unknown:
            raise ScrapeError(
                f"unknown key(s) {', '.join(unknown)}", source=origin.path, line=line
            )
        func = entry.get("func")
        if not isinstance(func, str):
            raise ScrapeError("entry has no func: string", source=origin.path, line=line)
        op = _canonical(func, origin, line)

        raw_tags = entry.get("tags", [])
        if not (
            raw_tags is None
            or isinstance(raw_tags, str)
            or (isinstance(raw_tags, list) and all(isinstance(t, str) for t in raw_tags))
        ):
            raise ScrapeError("tags: is not a name or a list of names", source=origin.path, line=line)
        tags = (raw_tags,) if isinstance(raw_tags, str) else tuple(raw_tags or ())
        if valid_tags is not None:
            bad = [t for t in tags if t not in valid_tags]
            if bad:
                raise ScrapeError(
                    f"tag(s) not in tags.yaml: {', '.join(repr(str(t))[1:-1] for t in bad)}",
                    source=origin.path,
                    line=line,
                )

        raw_dispatch = entry.get("dispatch")
        dispatch: list[str] = []
        if raw_dispatch is not None:
            if not isinstance(raw_dispatch, dict):
                raise ScrapeError("dispatch: is not a mapping", source=origin.path, line=line)
            for ks in raw_dispatch:
                for k in str(ks).split(","):
                    if k.strip() and k.strip() not in dispatch:
                        dispatch.append(k.strip())

        delegate_raw = entry.get("structured_delegate")
        delegate = _canonical(str(delegate_raw), origin, line) if delegate_raw else None
        structured = bool(entry.get("structured", False))
        kind = kernel_kind(
            None if raw_dispatch is None else dispatch,
            structured=structured,
            structured_delegate=delegate is not None,
        )
        rows.append(
            OperatorRow(
                op=op,
                schema=func.strip(),
                tags=tags,
                dispatch=tuple(dispatch),
                kernel_kind=kind,
                structured_delegate=delegate,
                line=line,
            )
        )
        autogen = entry.get("autogen")
        if include_autogen and autogen:
            generated.extend((n.strip(), line, kind) for n in str(autogen).split(",") if n.strip())
    # Several entries may autogen the same op (foo.out from both foo and foo_).
    seen = {r.op for r in rows}
    for name, line, parent_kind in generated:
        op = _canonical(name, origin, line)
        if op in seen:
            continue
        seen.add(op)
        # torchgen registers no kernel for ops generated from a CompositeImplicit parent.
        gen_kind = BACKEND if parent_kind == CIA else CEA
        rows.append(
            OperatorRow(
                op=op,
                schema="",
                tags=("generated",),
                dispatch=(gen_kind,) if gen_kind == CEA else (),
                kernel_kind=gen_kind,
                structured_delegate=None,
                line=line,
            )
        )
    return rows


# --- the installed torch, without importing it ------------------------------------------------


def installed_torch_files() -> tuple[Path, Path] | None:
    """``native_functions.yaml`` and ``tags.yaml`` packaged with the installed torch, if any."""
    roots: list[Path] = []
    try:
        spec = importlib.util.find_spec("torchgen")
    except (ImportError, ValueError):
        spec = None
    if spec is not None and spec.submodule_search_locations:
        roots.extend(Path(p) for p in spec.submodule_search_locations)
    if not roots:
        try:
            dist = importlib.metadata.distribution("torch")
            roots.append(Path(str(dist.locate_file("torchgen"))))
        except importlib.metadata.PackageNotFoundError:
            return None
    for root in roots:
        native = root / "packaged" / "ATen" / "native"
        nf, tags = native / "native_functions.yaml", native / "tags.yaml"
        if nf.is_file() and tags.is_file():
            return nf, tags
    return None


def installed_torch_version() -> str | None:
    """``2.13.0+cpu`` as the installed distribution's metadata says; None without torch."""
    try:
        return importlib.metadata.version("torch")
    except importlib.metadata.PackageNotFoundError:
        return None


def installed_operators() -> tuple[list[OperatorRow], Origin] | None:
    """Parse the installed torch's op universe; None when torch is not installed."""
    files = installed_torch_files()
    if files is None:
        return None
    nf, tags = files
    version = installed_torch_version() or ""
    origin = Origin(path=str(nf), ref=version)
    rows = parse_native_functions(
        nf.read_text(encoding="utf-8"), origin=origin, tags_text=tags.read_text(encoding="utf-8")
    )
    return rows, origin


# --- another torch version through a source ----------------------------------------------------


def torch_tag(version: str) -> str:
    """``2.6.0+cpu`` / ``v2.6.0`` → the PyTorch git tag ``v2.6.0``."""
    m = re.match(r"^v?(\d+\.\d+\.\d+)", version.strip())
    if not m:
        raise UsageError(f"not a torch version: {version!r} (expected e.g. 2.6.0)")
    return f"v{m[1]}"


def fetch_torch_files(source: Source, version: str) -> tuple[Fetched, Fetched]:
    """native_functions.yaml and tags.yaml of torch ``version`` (PyTorch repo at ``vX.Y.Z``)."""
    base = f"{REPO_PREFIX}/{torch_tag(version)}"
    return source.fetch(f"{base}/{NATIVE_FUNCTIONS}"), source.fetch(f"{base}/{TAGS_YAML}")


def operators_for(source: Source, version: str) -> tuple[list[OperatorRow], Origin]:
    nf, tags = fetch_torch_files(source, version)
    return parse_native_functions(nf.text, origin=nf.origin, tags_text=tags.text), nf.origin


# --- the runtime dispatcher, in a subprocess ---------------------------------------------------

DISPATCH_KEYS = (CIA, CEA, CEA_NF, "CPU", "Meta", "PrivateUse1")

_PROBE = r"""
import json, sys
import torch
req = json.load(sys.stdin)
out = {}
for op in req["ops"]:
    got = []
    for key in req["keys"]:
        try:
            if torch._C._dispatch_has_kernel_for_dispatch_key(op, key):
                got.append(key)
        except Exception:
            pass
    out[op] = got
json.dump(out, sys.stdout)
"""


def dispatcher_facts(
    ops: Iterable[str],
    *,
    keys: Iterable[str] = DISPATCH_KEYS,
    python: str | None = None,
    timeout: float = 300.0,
) -> dict[str, set[str]]:
    """Which of ``keys`` each op has a kernel for, asked of torch in a child interpreter.

    torch is never imported here: importing it costs seconds and hundreds of MB, and the
    catalog code must run without it.  Ops unknown to that torch map to an empty set.
    """
    req = {"ops": [str(OpName.parse(o, default_namespace="aten")) for o in ops], "keys": list(keys)}
    cmd = [python or sys.executable, "-c", _PROBE]
    try:
        proc = subprocess.run(
            cmd, input=json.dumps(req), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise ScrapeError(f"dispatcher probe failed: {e}", source=cmd[0]) from None
    if proc.returncode != 0:
        tail = [ln for ln in proc.stderr.splitlines() if ln.strip()]
        raise ScrapeError(
            f"dispatcher probe failed: {tail[-1] if tail else proc.returncode}", source=cmd[0]
        )
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise ScrapeError("dispatcher probe printed no JSON", source=cmd[0]) from None
    return {str(op): set(v) for op, v in data.items()}
