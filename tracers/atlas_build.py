"""The model atlas's builders: every architecture a model library ships, built from its config
alone (no weights, no hub download) with inputs made the library's own way.

Runs inside the sandboxed tracer (``--model atlas:LIBRARY/NAME``, :mod:`opcheck.tracers.loading`)
and as ``python -m opcheck.tracers.atlas_build list LIBRARY`` (JSON on stdout), which the atlas
command runs in a subprocess because listing imports the library. torch and the libraries are
imported lazily; one module per library (``atlas_hf``, ``atlas_diffusers``, ``atlas_vision``)
holds the library's own conventions, this module the shared parts.

Rows of :func:`architectures`: ``name`` (unique within the library), ``model_class``, ``task``,
``family`` and, when the architecture cannot be built here for a reason about the model (an
extra package it needs, a tokenizer file, weights), ``skip``: that reason, one line.
"""

from __future__ import annotations

import importlib
import json
import sys
from typing import Any

from opcheck.core.errors import TraceError

LIBRARIES = ("transformers", "timm", "torchvision", "diffusers")
SPEC_PREFIX = "atlas:"
# the module holding each library's conventions (imported on use: each imports its library)
_MODULES = {
    "transformers": "opcheck.tracers.atlas_hf",
    "diffusers": "opcheck.tracers.atlas_diffusers",
    "timm": "opcheck.tracers.atlas_vision",
    "torchvision": "opcheck.tracers.atlas_vision",
}

Built = tuple[Any, tuple[Any, ...], dict[str, Any]]


class ModelSkip(TraceError):
    """The architecture cannot be built here for a reason about the model (one line): it needs
    a package that is not installed, a tokenizer file, weights. Not a tracer failure."""


class InputsRefused(ModelSkip):
    """The forward refused the inputs a config alone gives (made from its docstring): they
    need its processor. Raised by the real-data build too, where the fake build's probe could
    not run the forward (values the meta device lacks): still a reason about the model."""


def parse_spec(spec: str) -> tuple[str, str]:
    """``atlas:transformers/llama`` -> ("transformers", "llama")."""
    body = spec.removeprefix(SPEC_PREFIX)
    library, sep, name = body.partition("/")
    if not sep or not name or library not in LIBRARIES:
        raise TraceError(
            f"--model {spec!r}: expected atlas:LIBRARY/NAME with LIBRARY one of "
            + ", ".join(LIBRARIES)
        )
    return library, name


def _module(library: str) -> Any:
    if library not in _MODULES:
        raise TraceError(f"unknown model library {library!r} (one of {', '.join(LIBRARIES)})")
    return importlib.import_module(_MODULES[library])


def library_version(library: str) -> str:
    """The installed version of ``library``, "" when it is not installed (no import)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(library)
    except PackageNotFoundError:
        return ""


def preload(library: str) -> tuple[str, ...]:
    """What a fork-server template imports once for tracing ``library``'s architectures
    (``sandbox.shared_imports(preload("transformers"))``): each child then imports only its
    model's own modules."""
    heavy = {"transformers": ("transformers", "transformers.modeling_utils")}.get(
        library, (library,))
    return ("torch", "opcheck.tracers.runtime", "opcheck.tracers.atlas_trace",
            _MODULES.get(library, "opcheck.tracers.atlas_build"), *heavy)  # fmt: skip


def architectures(library: str) -> list[dict[str, Any]]:
    """Every architecture ``library`` ships: dicts with ``name``, ``model_class``, ``task``,
    ``family`` and, where it cannot be built here, ``skip`` (a one-line reason)."""
    mod = _module(library)
    rows: list[dict[str, Any]] = mod.architectures(library)
    return rows


def build(
    library: str, name: str, *, train: bool = False, real: bool = False, shrink: int | None = None
) -> Built:
    """``(model, args, kwargs)`` for one architecture: config only, small sizes, the library's
    own inputs. ``real``: built with real (random) weights and inputs on the CPU, for the
    real-data recorder; else on the meta device, for the fake-tensor trace. ``shrink``: how
    small to make the config first (library-specific levels; None: the library's default for
    ``real``), smaller levels tried when one does not build. Raises ModelSkip
    (a reason about the model) or TraceError (one line)."""
    mod = _module(library)
    try:
        made: Built = mod.build(library, name, train=train, real=real, shrink=shrink)
    except (TraceError, MemoryError):
        raise
    except Exception as exc:
        raise TraceError(f"atlas:{library}/{name}: building failed: {one_line(exc)}") from None
    return made


def repair_after(library: str, name: str, why: str) -> bool:
    """Whether the library's builder changed the next build of ``name`` after a trace stopped
    with ``why`` (a config field the default leaves unset, read on the failing line)."""
    fix = getattr(_module(library), "repair_after", None)
    return bool(fix(name, why)) if callable(fix) else False


def every_layer_level(library: str) -> int | None:
    """The ``shrink`` level of ``library``'s builds that narrows widths but keeps every layer
    (the real-data fallback's last try after a narrowed build fails on a shape), or None."""
    level = getattr(_module(library), "EVERY_LAYER", None)
    return level if isinstance(level, int) else None


def one_line(exc: BaseException) -> str:
    text = str(exc).strip()
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    return f"{type(exc).__name__}: {first}"[:300].rstrip(": ")


def missing_package(exc: BaseException) -> str:
    """The package an import error says is missing, "" when it is not one."""
    if isinstance(exc, ModuleNotFoundError) and exc.name:
        return exc.name.split(".")[0]
    text = str(exc)
    for marker in ("requires the ", "requires "):
        at = text.find(marker)
        if at >= 0 and "library" in text[at:]:
            return text[at + len(marker):].split()[0].strip("`'\"")
    return ""


def main(argv: list[str]) -> int:
    """``list LIBRARY``: the architectures as a JSON array on stdout; a library that is not
    installed (or does not import) is one line on stderr and exit 2, never a traceback."""
    if len(argv) != 2 or argv[0] != "list":
        print("usage: python -m opcheck.tracers.atlas_build list LIBRARY", file=sys.stderr)
        return 2
    library = argv[1]
    try:
        rows = architectures(library)
    except TraceError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    except Exception as exc:  # the library itself failed to import
        print(f"{library}: cannot list architectures: {one_line(exc)}", file=sys.stderr)
        return 2
    doc = {"library": library, "version": library_version(library), "architectures": rows}
    json.dump(doc, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
