"""Model loading for a runtime trace (in the sandboxed worker): a factory or module given as
code (``--model``), and model files (pickled modules, ``torch.export`` archives) when trusted."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.tracers.atlas_build import SPEC_PREFIX, build, parse_spec


def load_factory(spec: str) -> Callable[..., Any]:
    """``pkg.module:Name`` or ``path/to/file.py:Name`` -> the class, factory or nn.Module.

    A file is imported under its own module name, never as ``__main__``: its
    ``if __name__ == "__main__":`` block (training loops, downloads) does not run."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr:
        raise TraceError(f"--model {spec!r}: expected pkg.module:ClassOrFactory or file.py:factory")
    try:
        if target.endswith(".py") or os.sep in target or "/" in target:
            path = Path(target)
            if not path.is_absolute():  # relative to the caller, not the sandbox's scratch dir
                path = Path(os.environ.get("OPCHECK_TRACE_CWD") or os.getcwd()) / path
            path = path.resolve()
            if not path.is_file():
                raise TraceError(f"--model {spec!r}: file {target} not found")
            mod_name = "opcheck_model_" + path.stem
            s = importlib.util.spec_from_file_location(mod_name, path)
            if s is None or s.loader is None:
                raise TraceError(f"--model {spec!r}: cannot import {target}")
            module = importlib.util.module_from_spec(s)
            sys.modules[mod_name] = module
            sys.path.insert(0, str(path.parent))
            s.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except (TraceError, MemoryError):
        raise
    except Exception as exc:
        raise TraceError(
            f"--model {spec!r}: importing {target} failed: {type(exc).__name__}: {exc}"
        ) from None
    obj = module
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise TraceError(f"--model {spec!r}: {target} has no attribute {attr!r}")
        obj = getattr(obj, part)
    if not callable(obj):
        raise TraceError(f"--model {spec!r}: {attr} is not a class or function")
    return obj  # type: ignore[no-any-return,unused-ignore]


def build_from_factory(spec: str) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Call the factory on the meta device. It may return a module or (module, example_args)
    or (module, example_args, example_kwargs). ``NAME`` may also be a module-level nn.Module
    instance (built when the file was imported; its tensors are replaced by fakes)."""
    import torch

    if spec.startswith(SPEC_PREFIX):  # atlas:LIBRARY/NAME, built by the library's conventions
        return build(*parse_spec(spec))
    factory = load_factory(spec)
    if isinstance(factory, torch.nn.Module):
        return factory, (), {}
    try:
        with torch.device("meta"):
            made = factory()
    except MemoryError:
        raise
    except Exception as exc:
        raise TraceError(
            f"--model {spec!r}: building the model failed: {type(exc).__name__}: {exc}"
        ) from None
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if isinstance(made, tuple):
        model = made[0]
        if len(made) > 1:
            args = tuple(made[1]) if isinstance(made[1], (tuple, list)) else (made[1],)
        if len(made) > 2 and isinstance(made[2], dict):
            kwargs = dict(made[2])
    else:
        model = made
    if not isinstance(model, torch.nn.Module):
        raise TraceError(f"--model {spec!r}: returned {type(model).__name__}, not an nn.Module")
    return model, args, kwargs


def load_model_file(
    path: str, kind: str, trust: bool
) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """Load a model file for a runtime trace. Only called in the sandbox; gated by ``trust``."""
    import torch

    if kind in ("pickled_module", "legacy_torch"):
        if not trust:
            raise TraceError(
                f"{path}: loading a pickled nn.Module runs arbitrary code: pass --trust"
            )
        try:
            obj = torch.load(path, map_location="meta", weights_only=False)
        except Exception as exc:
            raise TraceError(f"{path}: torch.load failed: {type(exc).__name__}: {exc}") from None
        if isinstance(obj, dict):
            # checkpoints often pickle the whole model under a key: {"model": model, "epoch": 3}
            found = [v for v in obj.values() if isinstance(v, torch.nn.Module)]
            if len(found) == 1:
                obj = found[0]
        if not isinstance(obj, torch.nn.Module):
            raise TraceError(f"{path}: holds a {type(obj).__name__}, not an nn.Module")
        return obj, (), {}
    if kind == "export_pt2":
        if not trust:
            raise TraceError(f"{path}: torch.export.load can unpickle code: pass --trust")
        try:
            ep = torch.export.load(path)
        except Exception as exc:
            raise TraceError(
                f"{path}: torch.export.load failed: {type(exc).__name__}: {exc}"
            ) from None
        ex_args: tuple[Any, ...] = ()
        ex_kwargs: dict[str, Any] = {}
        if ep.example_inputs is not None:
            ex_args, ex_kwargs = ep.example_inputs
        return ep.module(), tuple(ex_args), dict(ex_kwargs)
    raise TraceError(f"{path}: no runtime loader for {kind} files")
