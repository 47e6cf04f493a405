"""Runtime tracing: run a model on fake tensors that live on a renamed PrivateUse1 device.

This module is the entry point (``trace_module``); the parts live beside it, each importing
torch lazily, inside functions: ``device`` (the renamed device, op names, dtypes), ``recorder``
(what is kept per op), ``callsite`` (the Python API a line called), ``signature`` (a call's
signature), ``dispatch`` (the recording mode, escape kernels), ``composite_kernels`` (composite
ops at both levels), ``fake`` (fake parameters and inputs) and ``loading`` (factories and model
files). It runs inside the sandboxed worker (``opcheck.tracers.worker``), never in the CLI
process for untrusted files.

How it works: the model is built on the meta device (no weights allocated); parameters, buffers
and inputs are replaced by FakeTensors whose device is ``npu`` (PrivateUse1 renamed, with a
Python device guard and hooks registered so library code can create tensors on ``x.device``).
A recording TorchDispatchMode sits above the FakeTensorMode, so it sees exactly the ops that
leave autograd and CompositeImplicitAutograd decomposition, i.e. what a PrivateUse1 backend
receives, with the device-type-dependent choices (dropout, SDPA, RNN) made for PrivateUse1.

Per op it records the call count, input dtypes, the shape of the first tensor argument, the
nn.Module path (``backward``/``optimizer`` outside forward), the first source line outside
torch and the distinct call signatures (dtypes per argument name, output dtypes, ``dtype=``,
non-tensor arguments). Watched CompositeImplicitAutograd ops are recorded at two levels (the op
and, tagged with it as parent, its decomposition; see ``install_composite_kernels``). Only ops touching an ``npu`` tensor are kept: host-only work never reaches the backend.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from opcheck.core.errors import TraceError
from opcheck.core.oplist import RECORDER_FAKE, OpList
from opcheck.tracers import realdevice_host
from opcheck.tracers.composite_kernels import _COMPOSITE_INSTALLED, install_composite_kernels
from opcheck.tracers.device import _TRACER_DIR, DEVICE, _short_path, _torch_dirs, setup_device
from opcheck.tracers.dispatch import (
    DataDependent,
    _install_escape_kernels,
    _make_mode,
    _watch_functions,
)
from opcheck.tracers.fake import _convert_example, _fake_from_spec, _floating_outputs, move_module
from opcheck.tracers.inputs import InputSpec
from opcheck.tracers.loading import build_from_factory, load_factory, load_model_file
from opcheck.tracers.recorder import _ACTIVE, Recorder, Stream

# What the worker, the script runner, the workaround verifier, tests and benchmarks use from
# here (the parts are importable on their own too).
__all__ = [
    "DEVICE", "DataDependent", "OpList", "PartialTrace", "Recorder", "Stream",
    "build_from_factory", "load_factory", "load_model_file", "setup_device", "trace_module",
]


def _module_hooks(model: Any, recorder: Recorder) -> list[Any]:
    """Track the module path with *global* hooks: hooks on the modules themselves disable
    fast paths (TransformerEncoderLayer checks for them) and would change the op list."""
    from torch.nn.modules.module import (
        register_module_forward_hook,
        register_module_forward_pre_hook,
    )

    names = {id(m): n for n, m in model.named_modules()}

    def pre(mod: Any, _args: Any) -> None:
        recorder.enter_module(names.get(id(mod)), type(mod).__name__)

    def post(mod: Any, _args: Any, _out: Any) -> None:
        if recorder.module_stack:
            recorder.module_stack.pop()

    return [
        register_module_forward_pre_hook(pre),
        register_module_forward_hook(post, always_call=True),
    ]


def trace_module(
    model: Any,
    inputs: InputSpec,
    *,
    example_args: tuple[Any, ...] = (),
    example_kwargs: dict[str, Any] | None = None,
    train: bool = False,
    label: str = "",
    method: str = "runtime",
    composites: Iterable[str] = (),
    stream: Stream | None = None,
) -> OpList:
    """Trace one forward (and, with ``train``, backward + optimizer step) of ``model``.

    ``composites``: CompositeImplicitAutograd ops to record at both levels (the op and its
    decomposition); ``stream``: where records go as they are made (crash-proof partial result).
    """
    import torch
    from torch._subclasses.fake_tensor import FakeTensorMode
    from torch.fx.experimental.symbolic_shapes import ShapeEnv

    setup_device()
    _install_escape_kernels()
    realdevice_host.install_meta()  # the GRU cell's shapes (torch has no Meta kernel for it)
    composites = frozenset(composites)
    install_composite_kernels(composites)
    recorder = Recorder()
    recorder.watched = composites & _COMPOSITE_INSTALLED
    recorder.stream = stream
    notes: list[str] = []
    fake_mode = FakeTensorMode(shape_env=ShapeEnv(), allow_non_fake_inputs=True)
    if inputs.empty and not example_args and not example_kwargs:
        raise TraceError(
            f"{label or 'model'}: no inputs: give --input-shape 1,3,224,224 or --input-spec "
            "(or a factory returning (model, example_args))"
        )
    with fake_mode:
        move_module(model)
        args, kwargs = _fake_inputs(inputs, example_args, example_kwargs or {})
        try:
            model.train(train)
        except NotImplementedError:
            # torch.export's unlifted module refuses train()/eval(): it keeps export's mode
            notes.append("the exported program keeps the train/eval mode it was exported in")
        handles = _module_hooks(model, recorder)
        _ACTIVE.append((fake_mode, recorder))
        mode = _make_mode(recorder)
        try:
            grad = torch.enable_grad() if train else torch.no_grad()
            with grad, _watch_functions(recorder), mode:
                out = model(*args, **kwargs)
                if train:
                    _backward_and_step(model, out, recorder, label, stream)
                    notes.append(
                        "train: loss = sum of the outputs; backward and one AdamW step traced"
                    )
        except (TraceError, MemoryError):
            raise
        except Exception as exc:
            partial = _partial(recorder, label, method, inputs)
            raise _classify_failure(exc, partial) from None
        finally:
            _ACTIVE.pop()
            for h in handles:
                h.remove()
    ol = OpList(
        model=label,
        method=method,
        ir="runtime-dispatch",
        torch_version=torch.__version__.split("+")[0],
        mode="train" if train else "inference",
        notes=notes,
        ops=recorder.sorted_ops(),
        recorder=RECORDER_FAKE,
    )
    if any(-1 in s for u in ol.ops for s in u.shapes):
        ol.notes.append(
            "data-dependent output shapes (e.g. nonzero, boolean masking) traced symbolically "
            "(shape -1): supported on NPU but slow on graph paths"
        )
    return ol


def _fake_inputs(
    inputs: InputSpec, example_args: tuple[Any, ...], example_kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The forward's arguments as fake tensors (inside the fake mode): from the input spec
    when one is given, else the factory's examples converted."""
    import torch

    if inputs.empty:
        args = tuple(_convert_example(a) for a in example_args)
        return args, {k: _convert_example(v) for k, v in example_kwargs.items()}
    args = tuple(_fake_from_spec(s) for s in inputs.args)
    # the factory's non-tensor options (use_cache=...) still apply
    kwargs = {
        k: v
        for k, v in example_kwargs.items()
        if not isinstance(v, torch.Tensor) and k not in inputs.kwargs
    }
    kwargs.update({k: _fake_from_spec(v) for k, v in inputs.kwargs.items()})
    return args, kwargs


def _backward_and_step(
    model: Any, out: Any, recorder: Recorder, label: str, stream: Stream | None
) -> None:
    """``--train``: loss = sum of the floating outputs (not recorded), its backward and one
    AdamW step, each recorded under its phase."""
    import torch

    recorder.enabled = False
    outs = _floating_outputs(out)
    if not outs:
        raise TraceError(f"{label}: --train: the model returned no differentiable tensor")
    loss = sum(o.sum() for o in outs)
    recorder.enabled = True
    recorder.phase = "backward"
    if stream is not None:
        stream.event({"phase": "backward"})
    _mark_nodes(loss.grad_fn, recorder)
    loss.backward()
    recorder.phase = "optimizer"
    if stream is not None:
        stream.event({"phase": "optimizer"})
    params = [p for p in model.parameters() if p.requires_grad]
    # FakeTensor parameters are not plain Tensors, so AdamW would pick its
    # per-tensor loop; on npu (a foreach-capable device) it uses _foreach_ ops.
    opt = torch.optim.AdamW(params, lr=1e-3, foreach=True)
    opt.step()


def _mark_nodes(root: Any, recorder: Recorder) -> None:
    """Hook every autograd node so the recorder knows when a backward formula is running:
    ops outside any node are the engine's own gradient accumulation."""
    seen: set[int] = set()
    stack = [root]

    def pre(*_: Any) -> None:
        recorder.in_node += 1

    def post(*_: Any) -> None:
        recorder.in_node -= 1

    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        node.register_prehook(pre)
        node.register_hook(post)
        stack.extend(fn for fn, _ in node.next_functions)


class PartialTrace(Exception):
    """A trace stopped early; carries what was recorded and why. ``same_on_real``: the failure
    is one a run on real values raises the same way (a shape or an argument the model's code
    gets wrong), so recording on the real-data device instead would only repeat it."""

    def __init__(self, message: str, partial: OpList, *, same_on_real: bool = False) -> None:
        super().__init__(message)
        self.partial = partial
        self.same_on_real = same_on_real


# What the CPU kernels and Python say about shapes and arguments whatever the tensors hold.
# Matched on the failure's text; a text naming fake or meta tensors, symbolic sizes or guards is
# the fake trace's own failure whatever else it says.
_SAME_ON_REAL = re.compile(
    r"must have same reduction dim|cannot be multiplied|Attempting to broadcast|"
    r"must match the size of tensor|expected input\[.*\] to have|normalized_shape|"
    r"(not enough|too many) values to unpack|split_with_sizes expects|k not in range|"
    r"is invalid for input of size|Sizes of tensors must match|index out of range|"
    r"out of bounds for dimension|object has no attribute|unexpected keyword argument|"
    r"missing \d+ required positional argument|must be (int|real number), not NoneType|"
    r"object is not (callable|subscriptable|iterable)|unsupported operand type|"
    r"Dimension out of range|'NoneType'|\(unbatched\) or \dD \(batched\) input to|"
    # the model's own checks of its inputs and config, and lookups in Python containers
    r"^(ValueError|IndexError|KeyError): "
)
_FAKE_WORDS = re.compile(r"fake|meta|symbolic|sym(int|bool|float)|guard|data.dependent|"
                         r"real tensor|data pointer|item\(\)|numpy", re.IGNORECASE)


def same_on_real(text: str) -> bool:
    """Whether a fake trace's failure (its one-line text) is about shapes or arguments, one a
    run on real values raises the same way, rather than about the fake tensors."""
    return bool(_SAME_ON_REAL.search(text)) and not _FAKE_WORDS.search(text)


def _partial(recorder: Recorder, label: str, method: str, inputs: InputSpec) -> OpList:
    import torch

    return OpList(
        model=label,
        method=method,
        ir="runtime-dispatch",
        torch_version=torch.__version__.split("+")[0],
        ops=recorder.sorted_ops(),
    )


def _user_frame(tb: Any) -> str:
    """Innermost traceback frame outside torch: the line whose control flow failed."""
    dirs = _torch_dirs()
    where = ""
    while tb is not None:
        fn = tb.tb_frame.f_code.co_filename
        if not fn.startswith(dirs) and not fn.startswith(_TRACER_DIR):
            where = f"{_short_path(fn)}:{tb.tb_lineno}"
        tb = tb.tb_next
    return where


def _classify_failure(exc: Exception, partial: OpList) -> Exception:
    name = type(exc).__name__
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else name
    where = _user_frame(exc.__traceback__)
    if isinstance(exc, DataDependent):
        text = str(exc)
    data_dep = isinstance(exc, DataDependent) or name in (
        "GuardOnDataDependentSymNode", "DataDependentOutputException",
        "DynamicOutputShapeException", "UserError",
    ) or "data-dependent" in text.lower() or "data dependent" in text.lower()  # fmt: skip
    if data_dep:
        what = text if isinstance(exc, DataDependent) or text == name else f"{name}: {text}"
        msg = (
            f"data-dependent control flow at {where or 'an unknown line'}: the branch depends on "
            f"tensor values the fake trace does not have ({what})"
        )
        partial.complete, partial.stopped = False, msg
        return PartialTrace(msg, partial)
    msg = f"tracing failed at {where or '?'}: {name}: {text}"
    partial.complete, partial.stopped = False, msg
    return PartialTrace(msg, partial, same_on_real=same_on_real(f"{name}: {text}"))
