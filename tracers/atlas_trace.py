"""Tracing one atlas architecture (``--model atlas:LIBRARY/NAME``) in the sandboxed worker:
fake tensors first, and where the model's code wants real values (a cache that checks a
tensor, a router that reads its top-k, a dtype check on real data) the real-data recorded
device of ``opcheck run`` (:mod:`opcheck.tracers.realdevice`) on the same architecture built
small with random weights. The OpList's ``recorder`` says which one produced it.

Generic by design: the fallback is decided by the failure, never by the model's name.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import RECORDER_REAL, OpList
from opcheck.tracers import atlas_audio
from opcheck.tracers.atlas_build import (
    InputsRefused,
    ModelSkip,
    build,
    every_layer_level,
    one_line,
    parse_spec,
    repair_after,
)
from opcheck.tracers.atlas_inputs import forward_path
from opcheck.tracers.inputs import InputSpec
from opcheck.tracers.recorder import Recorder, Stream

REPAIRS = 3  # fake traces built again, each with the unset config fields the last stopped on


def trace_atlas(
    spec: str,
    inputs: InputSpec,
    *,
    train: bool = False,
    label: str = "",
    composites: Iterable[str] = (),
    stream: Stream | None = None,
) -> OpList:
    """The op list of one atlas architecture. Raises ModelSkip (a reason about the model),
    TraceError or runtime.PartialTrace when both recorders failed. A multimodal model whose
    whole forward fails is traced again on its text path (``OpList.forward`` says so)."""
    from opcheck.tracers import atlas_inputs

    atlas_inputs.FED.clear()
    try:
        return _trace_both(spec, inputs, train=train, label=label, composites=composites,
                           stream=stream)  # fmt: skip
    except TraceError as exc:
        if not atlas_inputs.FED:
            raise
        why = one_line(exc)
        skip = str(exc).strip() if isinstance(exc, ModelSkip) else ""
    try:
        with atlas_inputs.text_only():
            ol = _trace_both(spec, inputs, train=train, label=label, composites=composites,
                             stream=stream)  # fmt: skip
    except (TraceError, ModelSkip) as exc:
        if skip and isinstance(exc, ModelSkip):
            # both paths need what only a processor or a package gives: a reason, no failure
            raise ModelSkip(skip) from None
        # the whole forward's failure first: the text path's alone hides why the towers failed
        raise TraceError(f"{why}; on the text path only: {one_line(exc)}") from None
    ol.notes.insert(0, f"the whole forward (towers fed) failed ({why}): traced on the text "
                    "path only")  # fmt: skip
    return ol


def _trace_both(
    spec: str,
    inputs: InputSpec,
    *,
    train: bool,
    label: str,
    composites: Iterable[str],
    stream: Stream | None,
) -> OpList:
    from opcheck.tracers import runtime

    library, name = parse_spec(spec)
    label = label or spec
    composites = list(composites)
    for attempt in range(REPAIRS + 1):
        model, args, kwargs = build(library, name, train=train)
        model_modules = {type(m).__module__ for m in model.modules()}
        try:
            traced = runtime.trace_module(
                model, inputs, example_args=args, example_kwargs=kwargs, train=train,
                label=label, composites=composites, stream=stream,
            )  # fmt: skip
            traced.forward = forward_path(model)  # which towers of a multimodal model ran
            traced.notes.extend(atlas_audio.notes(model))  # the audio layout the ladder chose
            return traced
        except runtime.PartialTrace as exc:
            why = str(exc)
            if not exc.same_on_real:
                break
            # a field the default config leaves to the checkpoint, read where the trace
            # stopped: built once more with it set, the same line would stop a real run too
            if attempt < REPAIRS and repair_after(library, name, why):
                del model, args, kwargs
                continue
            # a shape or an argument wrong whatever the values: the real-data recorder would
            # build the model again only to stop at the same line (tens of seconds per model)
            raise TraceError(why) from None
    del model, args, kwargs
    forget_cached_values(model_modules)
    ol: OpList | None = None
    real_whys: list[str] = []
    built: Any = None
    shrinks: list[int | None] = [None, 2]  # narrowed first (fast); the default widths next
    for shrink in shrinks:
        try:
            built = build(library, name, train=train, real=True, shrink=shrink)
            ol = record_real(*built, train=train, label=label, composites=composites,
                             stream=stream)  # fmt: skip
            ol.forward = forward_path(built[0])
            ol.notes.extend(atlas_audio.notes(built[0]))
            break
        except (MemoryError, InputsRefused):
            # the inputs a config gives, refused once the real forward ran: a skip's reason
            raise
        except TraceError as exc:  # each attempt's reason: the narrowed build's is the telling one
            real_whys.append(str(exc))
            every = every_layer_level(library)
            if shrink is None and every is not None and runtime.same_on_real(
                    str(exc).removeprefix(f"{label}: ")):  # fmt: skip
                # a shape error of the narrowed build: two layers may break a count the model
                # compares with its layers; every layer, narrowed, before the default widths
                shrinks.insert(1, every)
        finally:
            built = None  # the first model's memory back before the second is built
    if ol is None:
        real_why = "; then ".join(dict.fromkeys(real_whys))
        # each reason clipped on its own (REASON_CHARS): a long fake-trace reason would
        # otherwise fill the row and hide the real-data one, usually the telling one
        raise TraceError(f"{_clip(why)}; the real-data recorder failed too: "
                         f"{_clip(real_why)}") from None
    ol.notes.insert(0, f"fake-tensor trace stopped ({why}): recorded on the real-data device "
                    "instead (random weights, small real inputs)")  # fmt: skip
    return ol


# an atlas row keeps 500 characters of error (checker.zoo.ERROR_CHARS): room for both reasons
REASON_CHARS = 225


def _clip(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= REASON_CHARS else text[:REASON_CHARS - 1].rstrip() + "…"


def forget_cached_values(modules: set[str]) -> int:
    """Empty the ``functools.lru_cache`` caches of the functions defined in ``modules`` (the
    model's own): a helper cached on its arguments alone (patch coordinates by grid size and
    device) keeps the fake trace's FakeTensors, which the real-data run would then get back
    for the same arguments. The number of caches emptied.

    Found through the modules' namespaces and their classes' (methods cached as static or
    class methods), not ``gc.get_objects()``: the sandbox's template freezes the collector
    before forking (``gc.freeze``), and frozen objects are not listed."""
    import functools
    import sys

    def cached(ns: Mapping[str, Any]) -> Iterator[Any]:
        for v in list(ns.values()):
            v = getattr(v, "__func__", v)  # staticmethod / classmethod
            if isinstance(v, functools._lru_cache_wrapper):
                yield v
            # a decorator's wrapper holding the cache in its closure (transformers'
            # compile_compatible_method_lru_cache: the cache skipped while compiling)
            for cell in getattr(v, "__closure__", None) or ():
                try:
                    inner = cell.cell_contents
                except ValueError:  # an empty cell
                    continue
                if isinstance(inner, functools._lru_cache_wrapper):
                    yield inner

    emptied = 0
    for name in modules:
        module = sys.modules.get(name)
        if module is None:
            continue
        spaces = [vars(module)] + [vars(c) for c in list(vars(module).values())
                                   if isinstance(c, type) and c.__module__ == name]
        for ns in spaces:
            for fn in cached(ns):
                if getattr(fn, "__module__", None) in modules and fn.cache_info().currsize:
                    fn.cache_clear()
                    emptied += 1
    return emptied


def _to_device(x: Any, device: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(_to_device(v, device) for v in x)
    if isinstance(x, dict):
        return {k: _to_device(v, device) for k, v in x.items()}
    return x


def record_real(
    model: Any,
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    *,
    train: bool,
    label: str,
    composites: Iterable[str] = (),
    stream: Stream | None = None,
) -> OpList:
    """One forward (and with ``train`` a backward and an AdamW step) of a CPU-built model on
    the real-data npu device, recorded as ``opcheck run`` records a script."""
    import torch

    from opcheck.tracers import composite_kernels, realdevice
    from opcheck.tracers.device import DEVICE
    from opcheck.tracers.fake import _floating_outputs

    _drop_escape_kernels()
    realdevice.install()
    watched = frozenset(composites)
    composite_kernels.install_composite_kernels(watched)
    recorder = Recorder()
    recorder.stream = stream
    recorder.watched = watched & composite_kernels._COMPOSITE_INSTALLED
    session = realdevice.Session(recorder)
    try:
        with session.active():
            model.to(DEVICE)
            model.train(train)
            args = _to_device(args, DEVICE)
            kwargs = _to_device(kwargs, DEVICE)
            grad = torch.enable_grad() if train else torch.no_grad()
            with grad:
                out = model(*args, **kwargs)
                if train:
                    outs = _floating_outputs(out)
                    if not outs:
                        raise TraceError(f"{label}: --train: the model returned no "
                                         "differentiable tensor")  # fmt: skip
                    loss = sum(o.float().sum() for o in outs)
                    loss.backward()
                    params = [p for p in model.parameters() if p.requires_grad]
                    torch.optim.AdamW(params, lr=1e-3, foreach=True).step()
    except (TraceError, MemoryError):
        raise
    except Exception as exc:
        raise TraceError(f"{label}: {one_line(exc)}") from None
    finally:
        realdevice.uninstall()  # the next fake trace in this process meets no real kernel
    notes = ["recorded on a real-data npu device (CPU kernels); kernels torch_npu picks by "
             "shape at run time and numerical differences are not visible"]  # fmt: skip
    if train:
        notes.append("train: loss = sum of the outputs; backward and one AdamW step traced")
    return OpList(
        model=label, method="runtime", ir="runtime-dispatch",
        torch_version=torch.__version__.split("+")[0],
        mode="train" if train else "inference", notes=notes, ops=recorder.sorted_ops(),
        recorder=RECORDER_REAL,
    )  # fmt: skip


def _drop_escape_kernels() -> None:
    """The fake trace's PrivateUse1 kernels answer with FakeTensors of an active fake mode; the
    real-data device registers its own for the same ops, so a fallback in the same process
    first unregisters the fake ones (reinstalled by the next fake trace)."""
    from opcheck.tracers import dispatch

    while dispatch._ESCAPE_LIB:
        dispatch._ESCAPE_LIB.pop()._destroy()
