"""Distributed on HCCL: which of torch_npu's process-group facts apply to a release, and what
each c10d collective is there (runs on HCCL, emulated by torch_npu, refused).

The facts come from torch_npu's own sources (``opcheck.scrapers.hccl``, table ``hccl_fact``):
the C++ process group (``ProcessGroupHCCL.cpp``, ``HCCLUtils.cpp``, ``HcclCompile.h``) and the
Python layer (``distributed_c10d.py``). A release whose own tag was not read takes the nearest
read tag of its torch line, per side, and every answer says so (``inferred``). The resolver
asks :meth:`HcclRelease.decide`; per-call limits are ``opcheck.checker.hccl``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from opcheck.core.vocab import Status
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.hccl import HcclFact, fact_files, facts_at
from opcheck.scrapers import hccl as h


@dataclass(frozen=True)
class Collective:
    method: str  # the ProcessGroupHCCL method that serves it
    api: str  # the torch.distributed function users call
    reduces: bool = False  # takes a ReduceOp


# c10d ops as torch's dispatcher names them → the method and API
COLLECTIVES: dict[str, Collective] = {
    "c10d::allreduce_": Collective("allreduce", "all_reduce", reduces=True),
    "c10d::allreduce_coalesced_": Collective("allreduce_coalesced", "all_reduce_coalesced",
                                             reduces=True),
    "c10d::reduce_": Collective("reduce", "reduce", reduces=True),
    "c10d::broadcast_": Collective("broadcast", "broadcast"),
    "c10d::allgather_": Collective("allgather", "all_gather"),
    "c10d::_allgather_base_": Collective("_allgather_base", "all_gather_into_tensor"),
    "c10d::reduce_scatter_": Collective("reduce_scatter", "reduce_scatter", reduces=True),
    "c10d::_reduce_scatter_base_": Collective("_reduce_scatter_base", "reduce_scatter_tensor",
                                              reduces=True),
    "c10d::alltoall_": Collective("alltoall", "all_to_all"),
    "c10d::alltoall_base_": Collective("alltoall_base", "all_to_all_single"),
    "c10d::gather_": Collective("gather", "gather"),
    "c10d::scatter_": Collective("scatter", "scatter"),
    "c10d::send": Collective("send", "send"),
    "c10d::recv_": Collective("recv", "recv"),
    "c10d::recv_any_source_": Collective("recvAnysource", "recv"),
    "c10d::barrier": Collective("barrier", "barrier"),
}
# the Python API → the op its call reaches (the *_object variants move pickled bytes as uint8)
API_OPS: dict[str, str] = {c.api: op for op, c in COLLECTIVES.items() if op != "c10d::recv_any_source_"}
API_OPS.update({"all_gather_object": "c10d::allgather_", "gather_object": "c10d::gather_",
                "broadcast_object_list": "c10d::broadcast_",
                "scatter_object_list": "c10d::scatter_", "isend": "c10d::send",
                "irecv": "c10d::recv_"})

@dataclass
class HcclRelease:
    """The HCCL facts that apply to one release: the C++ side and the Python side, each from
    the release's own tag or the nearest read tag of its torch line (``*_inferred``)."""

    release: ReleaseInfo
    cpp_tag: str = ""
    py_tag: str = ""
    cpp_inferred: bool = False
    py_inferred: bool = False
    facts: list[HcclFact] = field(default_factory=list)

    @property
    def known(self) -> bool:
        return bool(self.cpp_tag or self.py_tag)

    def basis(self, fact: HcclFact | None = None) -> str:
        """Where a fact comes from, said plainly (inferred when another tag's)."""
        tags = [fact.tag] if fact is not None else [t for t in (self.cpp_tag, self.py_tag) if t]
        parts = []
        for tag in dict.fromkeys(tags):
            own = tag == self.release.tag
            parts.append(f"torch_npu sources at {tag}" if own else
                         f"inferred from {tag} (nearest tag of torch {self.release.torch_minor} "
                         f"with these facts; none read at {self.release.tag or 'its tag'})")
        return "; ".join(parts)

    def of(self, kind: str, subject: str | None = None) -> list[HcclFact]:
        return [f for f in self.facts if f.kind == kind and (subject is None or f.subject == subject)]

    def decide(self, op: str) -> tuple[Status, str] | None:
        """The op's status and reason on this release; None when no facts apply."""
        coll = COLLECTIVES.get(op)
        if coll is None or not self.known:
            return None
        emulated = self.of(h.EMULATED, coll.api)
        if emulated:
            e = emulated[0]
            return Status.NPU, (f"emulated by torch_npu: {e.message} ({e.url}; "
                                f"{self.basis(e)})")
        refused = [f for f in self.of(h.REFUSED, coll.method)]
        if refused and self.cpp_tag:
            r = refused[0]
            when = f" when {r.value}" if r.value else ""
            return Status.UNSUPPORTED, f"{r.message}{when} ({r.url}; {self.basis(r)})"
        method = self.of(h.COLLECTIVE, coll.method)
        if method:
            calls = [f.value for f in self.of(h.CALLS, coll.method)]
            via = f" → {', '.join(calls)}" if calls else ""
            return Status.NPU, (f"HCCL collective: ProcessGroupHCCL::{coll.method}{via} "
                                f"({method[0].url}; {self.basis(method[0])})")
        return None


def nearest_tag(cat: Catalog, release: ReleaseInfo, read: dict[str, set[str]],
                files: tuple[str, ...]) -> tuple[str, bool]:  # fmt: skip
    """The release's own tag when its ``files`` were read, else the read tag of the same torch
    line nearest in release order (ties: the newer); ("", False) when none."""
    have = {t for t, paths in read.items() if paths & set(files)}
    if release.tag in have:
        return release.tag, False
    line = [r for r in cat.releases if r.torch == release.torch]
    order = {r.tag: i for i, r in enumerate(line) if r.tag}
    here = next((i for i, r in enumerate(line) if r.torch_npu == release.torch_npu), None)
    cands = [t for t in have if t in order]
    if here is None or not cands:
        return "", False
    best = min(cands, key=lambda t: (abs(order[t] - here), -order[t]))
    return best, True


def for_release(cat: Catalog, release: ReleaseInfo) -> HcclRelease:
    read = fact_files(cat.engine)
    out = HcclRelease(release)
    if not read:
        return out
    out.cpp_tag, out.cpp_inferred = nearest_tag(cat, release, read, h.CPP_FILES)
    out.py_tag, out.py_inferred = nearest_tag(cat, release, read, h.PY_FILES)
    if out.cpp_tag:
        out.facts += facts_at(cat.engine, out.cpp_tag, frozenset(h.CPP_FILES))
    if out.py_tag:
        out.facts += facts_at(cat.engine, out.py_tag, frozenset(h.PY_FILES))
    return out
