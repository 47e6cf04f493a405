"""Parsers for what a published torch-npu wheel says about itself.

* ``torch_npu/csrc/aten/npu_native_functions_by_codegen.yaml``: the exact op list compiled
  into the wheel: op-plugin's entries for the wheel's torch version, already filtered and
  flattened to ``impl_ns: acl_op | op_api | acl_op, op_api`` (``dvm`` may be added), merged
  with torch_npu's own ``npu_native_functions.yaml`` entries, which carry no ``impl_ns``
  (rows with ``native=True``). Sections and namespace rule as in
  :mod:`opcheck.scrapers.npu_native`. Rows have ``torch=None`` (one release per file).
* ``WHEEL-FACTS.txt`` (``Version:`` and the torch ``Requires-Dist:`` from the wheel METADATA;
  spellings seen: ``torch (==2.6.0+cpu)``, ``torch ==2.12.0``, ``torch==2.13.0.*``).
* ``torch_npu/version.py`` (``__version__``, ``git_version``).

Pure parse functions; fetching (pip download, zip members) lives in ``sync/sources.py``.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.npu_native import parse_registry
from opcheck.scrapers.rows import KernelRow, Origin, WheelFacts

__all__ = ["parse_codegen", "parse_version_py", "parse_wheel_facts", "wheel_facts"]


def parse_codegen(text: str, *, origin: Origin, torch: str | None = None) -> list[KernelRow]:
    """Rows of a wheel's ``npu_native_functions_by_codegen.yaml``."""
    return parse_registry(text, origin=origin, torch=torch, codegen=True)


# "torch (==2.6.0+cpu)", "torch ==2.12.0", "torch==2.13.0.*", "torch (>=2.1) ; extra == 'x'"
_REQ = re.compile(
    r"^torch(?![\w.-])\s*(?:\((?P<paren>[^)]*)\)|(?P<bare>[^;]*))\s*(?:;(?P<marker>.*))?$"
)
_PIN = re.compile(r"^==\s*(?P<v>\d+(?:\.\d+)*)(?:\.\*)?(?:\+[\w.]+)?$")


def parse_wheel_facts(text: str, *, origin: Origin) -> WheelFacts:
    """``Version:`` and torch's ``Requires-Dist:`` → WheelFacts (git_commit empty).

    ``torch_version`` is the pinned release without local tag or wildcard (``2.6.0``); a
    requirement that is not an ``==`` pin leaves it empty (the raw text stays in
    ``torch_requirement``). A file without ``Version:`` or without a torch requirement, or with
    two torch requirements, is an error.
    """
    version = ""
    requirement: tuple[str, int] | None = None
    for lineno, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        key, sep, value = line.partition(":")
        if not sep:
            raise ScrapeError(
                f"expected 'Key: value', got {line!r}", source=origin.path, line=lineno
            )
        key, value = key.strip(), value.strip()
        if key == "Version":
            if version:
                raise ScrapeError("two Version: lines", source=origin.path, line=lineno)
            version = value
        elif key == "Requires-Dist":
            m = _REQ.match(value)
            if m is None:
                continue  # another distribution (torch-npu's other requirements)
            spec = (m["paren"] if m["paren"] is not None else m["bare"] or "").strip()
            spec = re.sub(r"\s+", "", spec)
            if m["marker"] and "extra" in m["marker"]:
                continue  # an optional extra does not pin the runtime torch
            if requirement is not None:
                raise ScrapeError(
                    f"two torch requirements (first at line {requirement[1]})",
                    source=origin.path,
                    line=lineno,
                )
            requirement = (spec, lineno)
    if not version:
        raise ScrapeError("no Version: line", source=origin.path)
    if requirement is None:
        raise ScrapeError("no Requires-Dist: torch line", source=origin.path)
    pin = _PIN.match(requirement[0])
    return WheelFacts(
        torch_npu_version=version,
        torch_requirement=requirement[0],
        torch_version=pin["v"] if pin else "",
    )


def parse_version_py(text: str, *, origin: Origin) -> tuple[str, str]:
    """``(__version__, git_version)`` from ``torch_npu/version.py`` (read, never executed)."""
    try:
        tree = ast.parse(text)
    except SyntaxError as e:
        raise ScrapeError(f"not Python: {e.msg}", source=origin.path, line=e.lineno) from e
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if (
                isinstance(target, ast.Name)
                and target.id in ("__version__", "git_version")
                and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)
            ):
                found[target.id] = node.value.value
    if "__version__" not in found:
        raise ScrapeError("no __version__ = '...' assignment", source=origin.path)
    git = found.get("git_version", "")
    if git and not re.fullmatch(r"[0-9a-f]{7,40}", git):
        raise ScrapeError(f"git_version is not a commit: {git!r}", source=origin.path)
    return found["__version__"], git


def wheel_facts(
    facts: WheelFacts,
    *,
    version_py: tuple[str, str] | None = None,
    kernels: Iterable[KernelRow] = (),
    origin: Origin | None = None,
) -> WheelFacts:
    """Combine the three parsed files of one wheel; their versions must agree."""
    commit = facts.git_commit
    if version_py is not None:
        if version_py[0] != facts.torch_npu_version:
            raise ScrapeError(
                f"version.py says {version_py[0]} but METADATA says {facts.torch_npu_version}",
                source=origin.path if origin else "",
            )
        commit = version_py[1]
    return WheelFacts(
        torch_npu_version=facts.torch_npu_version,
        torch_requirement=facts.torch_requirement,
        torch_version=facts.torch_version,
        git_commit=commit,
        kernels=tuple(kernels),
    )
