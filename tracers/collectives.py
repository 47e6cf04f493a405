"""The ``torch.distributed`` calls of an ``opcheck run``, recorded as c10d ops for the checker.

The script runs as one process (``opcheck.tracers.redirect`` turns the NCCL process group into
a one-rank one): a collective is not executed, it is recorded with what decides whether HCCL
takes it (the c10d op it reaches, its input's dtype and shape, its ``ReduceOp``, even or uneven
splits, the group size) and the script's line, then stubbed so the script goes on (outputs
filled as one rank would see them). The group size is the world size ``--world-size`` gave
(``OPCHECK_WORLD_SIZE``), else the ``world_size=`` the script passed to
``init_process_group``, else the launcher's ``WORLD_SIZE``; 0 when none said it.
"""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass, field
from typing import Any

from opcheck.core.oplist import OpUse, Signature

# the Python API → (c10d op it reaches, index of its input tensor argument)
OPS: dict[str, tuple[str, int]] = {
    "all_reduce": ("c10d::allreduce_", 0), "reduce": ("c10d::reduce_", 0),
    "broadcast": ("c10d::broadcast_", 0), "all_gather": ("c10d::allgather_", 1),
    "all_gather_into_tensor": ("c10d::_allgather_base_", 1),
    "reduce_scatter": ("c10d::reduce_scatter_", 1),
    "reduce_scatter_tensor": ("c10d::_reduce_scatter_base_", 1),
    "all_to_all": ("c10d::alltoall_", 1), "all_to_all_single": ("c10d::alltoall_base_", 1),
    "gather": ("c10d::gather_", 0), "scatter": ("c10d::scatter_", 0),
    "send": ("c10d::send", 0), "isend": ("c10d::send", 0), "recv": ("c10d::recv_", 0),
    "irecv": ("c10d::recv_", 0), "barrier": ("c10d::barrier", -1),
    # objects are pickled into uint8 tensors and go through the tensor collective
    "all_gather_object": ("c10d::allgather_", -1), "gather_object": ("c10d::gather_", -1),
    "broadcast_object_list": ("c10d::broadcast_", -1),
    "scatter_object_list": ("c10d::scatter_", -1),
}  # fmt: skip
# the positional index of the ReduceOp argument
_OP_ARG = {"all_reduce": 1, "reduce": 2, "reduce_scatter": 2, "reduce_scatter_tensor": 2}
_TENSOR_KW = ("tensor", "input", "input_tensor", "input_tensor_list", "scatter_list")


@dataclass
class CollectiveCall:
    api: str
    op: str
    dtype: str
    shape: list[int] | None
    reduce_op: str = ""
    splits: str = ""  # "even" | "uneven" (all_to_all_single)
    group_size: int = 0
    location: str = ""


@dataclass
class Collectives:
    """What the run's collectives were, in call order (one record per distinct call)."""

    calls: list[CollectiveCall] = field(default_factory=list)
    world_size: int = 0  # from init_process_group(world_size=...)

    def group_size(self) -> int:
        for raw in (os.environ.get("OPCHECK_WORLD_SIZE"), self.world_size or None,
                    os.environ.get("WORLD_SIZE")):  # fmt: skip
            with contextlib.suppress(TypeError, ValueError):
                if raw is not None and int(raw) > 0:
                    return int(raw)
        return 0

    def record(self, api: str, args: tuple[Any, ...], kwargs: dict[str, Any],
               where: str) -> None:  # fmt: skip
        op, at = OPS[api]
        tensor = _first_tensor(args[at] if 0 <= at < len(args) else None)
        if tensor is None:
            tensor = next((t for k in _TENSOR_KW
                           if (t := _first_tensor(kwargs.get(k))) is not None), None)
        if api == "recv" and (args[1] if len(args) > 1 else kwargs.get("src")) is None:
            op = "c10d::recv_any_source_"
        dtype = str(tensor.dtype).removeprefix("torch.") if tensor is not None else (
            "uint8" if api.endswith(("_object", "_object_list")) else "")
        shape = list(tensor.shape) if tensor is not None else None
        raw_op = args[_OP_ARG[api]] if api in _OP_ARG and len(args) > _OP_ARG[api] else (
            kwargs.get("op"))
        reduce_op = str(raw_op).rsplit(".", 1)[-1] if raw_op is not None else (
            "SUM" if api in _OP_ARG else "")
        splits = ""
        if api == "all_to_all_single":
            given = [args[i] if len(args) > i else kwargs.get(k)
                     for i, k in ((2, "output_split_sizes"), (3, "input_split_sizes"))]
            splits = "uneven" if any(g is not None and len(set(g)) > 1 for g in given) else "even"
        call = CollectiveCall(api, op, dtype, shape, reduce_op, splits, self.group_size(), where)
        if call not in self.calls:
            self.calls.append(call)

    def merge_into(self, ops: list[OpUse]) -> str:
        """Add the calls' records to a run's ``ops`` (collectives were stubbed, not
        dispatched: the recorder never saw them); returns the note on the group size."""
        if not self.calls:
            return ""
        known = {u.op for u in ops}
        ops += [u for u in self.ops() if u.op not in known]
        size = self.group_size()
        return (f"collectives checked for a group of {size} ranks (one process here)" if size
                else "collectives checked without a group size (the script gave no world_size "
                "and WORLD_SIZE is unset): pass --world-size N")

    def ops(self) -> list[OpUse]:
        """The calls as op records (one per c10d op, a signature per distinct call)."""
        out: dict[str, OpUse] = {}
        for c in self.calls:
            use = out.setdefault(c.op, OpUse(op=c.op))
            use.count += 1
            if c.dtype and c.dtype not in use.dtypes:
                use.dtypes.append(c.dtype)
            if c.shape is not None and c.shape not in use.shapes:
                use.shapes.append(c.shape)
            if c.location and c.location not in use.locations:
                use.locations.append(c.location)
            args: dict[str, Any] = {"group_size": c.group_size}
            if c.reduce_op:
                args["op"] = c.reduce_op
            if c.splits:
                args["splits"] = c.splits
            if c.shape is not None:
                args["shape"] = c.shape
            use.signatures.append(Signature(inputs={"tensor": c.dtype} if c.dtype else {},
                                            args=args, count=1,
                                            apis=[f"torch.distributed.{c.api}"]))
        return list(out.values())


def _first_tensor(x: Any) -> Any:
    import torch

    if isinstance(x, torch.Tensor):
        return x
    if isinstance(x, list | tuple):
        return next((t for t in map(_first_tensor, x) if t is not None), None)
    return None


def stub(api: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Fill the outputs as the only rank of a group would see them, so the script goes on
    (a shape the group size changes is left as the script made it)."""
    with contextlib.suppress(RuntimeError, IndexError, TypeError, AttributeError):
        if api == "all_gather" and len(args) > 1:
            for out in args[0]:
                out.copy_(args[1])
        elif api == "all_gather_into_tensor" and len(args) > 1:
            args[0].copy_(args[1].reshape(args[0].shape))
        elif api in ("gather", "scatter"):
            lst = args[1] if len(args) > 1 else kwargs.get(f"{api}_list")
            if api == "gather" and lst:
                for out in lst:
                    out.copy_(args[0])
            elif lst:
                args[0].copy_(lst[0])
        elif api in ("all_to_all", "reduce_scatter") and len(args) > 1:
            outs = args[0] if isinstance(args[0], list) else [args[0]]
            for out, inp in zip(outs, args[1], strict=False):
                out.copy_(inp)
        elif api in ("all_to_all_single", "reduce_scatter_tensor") and len(args) > 1:
            args[0].copy_(args[1].reshape(-1)[:args[0].numel()].reshape(args[0].shape))
        elif api == "all_gather_object" and len(args) > 1:
            args[0][:] = [args[1]] * len(args[0])
        elif api == "gather_object":
            lst = args[1] if len(args) > 1 else kwargs.get("object_gather_list")
            if lst is not None:
                lst[:] = [args[0]] * len(lst)
        elif api == "scatter_object_list" and len(args) > 1 and args[1]:
            args[0][0] = args[1][0]
