"""The tracers' one entry point for the CLI: ``trace()`` a model.

A runtime log is read by :func:`opcheck.contrib.logs.parse_log` (``opcheck trace --log``), the
reader ``opcheck explain`` uses too: contrib sits above tracers.

Importing this module does not import torch. Decisions (what a file is, whether it may be
loaded) are made here with stdlib-only code; anything that executes model code runs in the
sandboxed worker.

Paths:

=====================  ===========================================================
input                  listing
=====================  ===========================================================
``--model spec``       runtime trace (sandbox) of the factory's model
pickled nn.Module      runtime trace, only with ``trust`` (else a one-line refusal)
``.pt2``               static pre-dispatch listing; runtime trace with ``trust``
                       (falls back to the static listing on data-dependent control flow)
TorchScript            static listing of the archive's code
op list ``.json``      read back as is
state_dict, ONNX, ...  TraceError saying what the file is and what to give instead
=====================  ===========================================================
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import OpList
from opcheck.tracers import sandbox, static
from opcheck.tracers.atlas_build import ModelSkip
from opcheck.tracers.composites import watched_composites
from opcheck.tracers.inputs import InputSpec, resolve
from opcheck.tracers.sniff import Sniffed, sniff

__all__ = ["InputSpec", "resolve", "trace"]


def trace(
    target: str | Path | None,
    *,
    model_spec: str | None = None,
    inputs: InputSpec | None = None,
    trust: bool = False,
    train: bool = False,
    timeout: float = sandbox.DEFAULT_TIMEOUT,
    memory_mb: int = sandbox.DEFAULT_MEMORY_MB,
    static_only: bool = False,
    composites: Iterable[str] | None = None,
    fast: bool = False,
) -> OpList:
    """The op list of a model file or a model given as code. Raises TraceError (one line).

    ``composites``: the CompositeImplicitAutograd ops a runtime trace records at both levels
    (default: those with an NPU kernel in some release of the bundled catalog). ``fast``: a
    runtime trace traces repeated blocks a few times and extrapolates the counts
    (:mod:`opcheck.tracers.repeat`); a static listing notes that it did not apply."""
    spec = inputs or InputSpec()
    watch = None if composites is None else list(composites)
    if model_spec:
        if static_only:
            raise TraceError("--static-only needs a .pt2 or TorchScript file, not --model code")
        return _runtime(
            {"model_spec": model_spec, "label": model_spec},
            spec, train=train, timeout=timeout, memory_mb=memory_mb, static=None, watch=watch,
            fast=fast,
        )  # fmt: skip
    if target is None:
        raise TraceError("nothing to trace: give a model file or --model pkg.module:Class")
    path = Path(target)
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    if path.is_dir():
        raise TraceError(f"{path}: is a directory (give the model file inside it)")
    sn = sniff(path)
    label = path.name
    if sn.kind == "oplist_json":
        return OpList.load(path)
    if sn.kind == "export_pt2":
        listing = static.list_pt2(path, label=label)
        if train:
            listing.notes.append(
                "--train needs a runtime trace: the static listing is the exported graph only"
            )
        if static_only:
            return _not_fast(listing, fast)
        if not trust:
            listing.notes.append(
                "runtime trace skipped: loading a .pt2 can unpickle code (sample inputs); "
                "pass --trust to run it in the sandbox"
            )
            return _not_fast(listing, fast)
        return _runtime(
            {"target": str(path.resolve()), "kind": sn.kind, "trust": True, "label": label},
            spec, train=train, timeout=timeout, memory_mb=memory_mb, static=listing, watch=watch,
            fast=fast,
        )  # fmt: skip
    if sn.kind == "torchscript":
        listing = static.list_torchscript(path, label=label)
        if trust and not static_only:
            listing.notes.append(
                "runtime tracing of TorchScript is not supported yet: static listing"
            )
        return _not_fast(listing, fast)
    content = sn.content or sn.kind
    if content == "pickled_module":
        if static_only:
            raise TraceError(f"{sn.message()} (a pickle has no static graph)")
        if not trust:
            raise TraceError(sn.message())
        return _runtime(
            {"target": str(path.resolve()), "kind": sn.kind, "trust": True, "label": label},
            spec, train=train, timeout=timeout, memory_mb=memory_mb, static=None, watch=watch,
            fast=fast,
        )  # fmt: skip
    raise TraceError(sn.message())


def _not_fast(listing: OpList, fast: bool) -> OpList:
    if fast:
        listing.notes.append("--fast applies to runtime traces only: this is a static listing")
    return listing


def _runtime(
    request: dict[str, Any],
    inputs: InputSpec,
    *,
    train: bool,
    timeout: float,
    memory_mb: int,
    static: OpList | None,
    watch: list[str] | None,
    fast: bool = False,
) -> OpList:
    # only runtime traces need the catalog's CIA set (opening the catalog costs ~0.2 s)
    composites = list(watched_composites()) if watch is None else watch
    request = {**request, "inputs": inputs.to_json(), "train": train, "cwd": os.getcwd(),
               "composites": composites, "fast": fast}  # fmt: skip
    result = sandbox.run_worker(request, timeout=timeout, memory_mb=memory_mb)
    if result.get("ok"):
        return OpList.from_json(result.get("oplist"), source="tracer worker")
    error = str(result.get("error", "unknown error"))
    if result.get("stopped") and static is None:
        # the worker died (crash, timeout, memory): what it streamed before, marked incomplete
        partial = OpList.from_json(result["partial"], source="tracer worker")
        partial.mode = "train" if train else "inference"
        partial.stopped = f"{error}; {partial.stopped}"
        partial.complete = False
        # the checker states INCOMPLETE with `stopped`; this says what the list holds
        partial.notes.insert(0, "the distinct ops seen until the trace stopped are listed "
                             "(counts are not final)")
        return partial
    if result.get("data_dependent"):
        if static is not None:
            static.notes.insert(
                0, f"runtime trace incomplete: {error}; static listing used instead"
            )
            return static
        if result.get("partial"):
            partial = OpList.from_json(result["partial"], source="tracer worker")
            partial.mode = "train" if train else "inference"
            partial.complete = False
            partial.stopped = partial.stopped or error
            return partial
    if static is not None:
        static.notes.insert(0, f"runtime trace failed: {error}; static listing used instead")
        return static
    label = request.get("label", "")
    if result.get("skip"):  # an atlas architecture that cannot be built here: why, one line
        raise ModelSkip(error)
    raise TraceError(f"{label}: {error}" if label and str(label) not in error else error)


def describe(path: str | Path) -> Sniffed:
    """What a file is (stdlib sniffing only); for ``opcheck trace --what`` style output."""
    return sniff(path)
