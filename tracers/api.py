"""The tracers' one entry point for the CLI: ``trace()`` a model, ``trace_log()`` a runtime log.

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
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import OpList
from opcheck.tracers import sandbox, static
from opcheck.tracers.inputs import InputSpec, resolve
from opcheck.tracers.sniff import Sniffed, sniff

__all__ = ["InputSpec", "resolve", "trace", "trace_log"]


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
) -> OpList:
    """The op list of a model file or a model given as code. Raises TraceError (one line)."""
    spec = inputs or InputSpec()
    if model_spec:
        if static_only:
            raise TraceError("--static-only needs a .pt2 or TorchScript file, not --model code")
        return _runtime(
            {"model_spec": model_spec, "label": model_spec},
            spec, train=train, timeout=timeout, memory_mb=memory_mb, static=None,
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
            return listing
        if not trust:
            listing.notes.append(
                "runtime trace skipped: loading a .pt2 can unpickle code (sample inputs); "
                "pass --trust to run it in the sandbox"
            )
            return listing
        return _runtime(
            {"target": str(path.resolve()), "kind": sn.kind, "trust": True, "label": label},
            spec, train=train, timeout=timeout, memory_mb=memory_mb, static=listing,
        )  # fmt: skip
    if sn.kind == "torchscript":
        listing = static.list_torchscript(path, label=label)
        if trust and not static_only:
            listing.notes.append(
                "runtime tracing of TorchScript is not supported yet: static listing"
            )
        return listing
    content = sn.content or sn.kind
    if content == "pickled_module":
        if static_only:
            raise TraceError(f"{sn.message()} (a pickle has no static graph)")
        if not trust:
            raise TraceError(sn.message())
        return _runtime(
            {"target": str(path.resolve()), "kind": sn.kind, "trust": True, "label": label},
            spec, train=train, timeout=timeout, memory_mb=memory_mb, static=None,
        )  # fmt: skip
    raise TraceError(sn.message())


def _runtime(
    request: dict[str, Any],
    inputs: InputSpec,
    *,
    train: bool,
    timeout: float,
    memory_mb: int,
    static: OpList | None,
) -> OpList:
    request = {**request, "inputs": inputs.to_json(), "train": train, "cwd": os.getcwd()}
    result = sandbox.run_worker(request, timeout=timeout, memory_mb=memory_mb)
    if result.get("ok"):
        return OpList.from_json(result.get("oplist"), source="tracer worker")
    error = str(result.get("error", "unknown error"))
    if result.get("data_dependent"):
        if static is not None:
            static.notes.insert(
                0, f"runtime trace incomplete: {error}; static listing used instead"
            )
            return static
        if result.get("partial"):
            partial = OpList.from_json(result["partial"], source="tracer worker")
            partial.mode = "train" if train else "inference"
            partial.notes.insert(
                0,
                f"INCOMPLETE: {error}; ops up to that point are listed, the rest of the model "
                "was not traced (give inputs that avoid the branch, or export with torch.export)",
            )
            return partial
    if static is not None:
        static.notes.insert(0, f"runtime trace failed: {error}; static listing used instead")
        return static
    label = request.get("label", "")
    raise TraceError(f"{label}: {error}" if label and str(label) not in error else error)


def trace_log(path: str | Path) -> OpList:
    """Turn a torch_npu / CANN runtime log into an op list (streamed, bounded memory)."""
    from opcheck.tracers import logs

    return logs.parse_log(Path(path))


def describe(path: str | Path) -> Sniffed:
    """What a file is (stdlib sniffing only); for ``opcheck trace --what`` style output."""
    return sniff(path)
