"""What a name typed by a user stands for: an op, an op's overloads, a Python API's ops, or an
aclnn function's ops, with close spellings when it is none of them.

``opcheck op``, the web's search box and op pages all ask here, so ``isin``, ``aten::add``,
``torch.isin``, ``F.interpolate``, ``Tensor.isin`` and ``aclnnIsIn`` mean the same everywhere.
"""

from __future__ import annotations

import difflib
import functools
import re
from dataclasses import dataclass, field

from opcheck.core.errors import OpcheckError
from opcheck.core.opname import canonical
from opcheck.db import reads
from opcheck.db.catalog import Catalog

# how people abbreviate module paths in code (``import torch.nn.functional as F``)
API_ALIASES = (("F.", "torch.nn.functional."), ("nn.", "torch.nn."),
               ("torch.Tensor.", "Tensor."), ("Tensor.", "Tensor."))
MAX_SUGGESTIONS = 8


@dataclass(frozen=True)
class NameMatch:
    """``kind``: ``op`` (one op, ``ops[0]``), ``overloads`` (the overloads of an op name),
    ``api`` (the ops a Python API calls), ``aclnn`` (the ops calling an aclnn function) or
    ``none`` (then ``suggestions`` holds close names)."""

    query: str
    kind: str
    ops: list[str] = field(default_factory=list)
    name: str = ""  # the op, API or function the query was read as
    suggestions: list[str] = field(default_factory=list)
    # CompositeImplicitAutograd ops the API calls, each with the backend ops it runs as where
    # no kernel takes it whole (inferred from the op names: ``grid_sampler`` → ``grid_sampler_2d``)
    decomposed: dict[str, list[str]] = field(default_factory=dict)

    @property
    def single(self) -> str:
        return self.ops[0] if len(self.ops) == 1 else ""

    def describe(self) -> str:
        if self.kind == "overloads":
            return f"{self.name} has {len(self.ops)} overload{'s' if len(self.ops) > 1 else ''}"
        if self.kind == "api":
            if self.decomposed:
                runs = "; ".join(f"{cia}, which runs as {' or '.join(parts)} where no "
                                 "kernel takes it whole" for cia, parts in self.decomposed.items())
                return f"{self.name} calls {runs} (inferred from the op names)"
            return f"{self.name} calls {len(self.ops)} ATen op(s)"
        if self.kind == "aclnn":
            return f"{len(self.ops)} op(s) call {self.name}"
        if self.kind == "none":
            return f"{self.query!r} is no op, Python API or aclnn function in the catalog"
        return self.name


class Names:
    """The catalog's names, read once (a server answers many searches)."""

    def __init__(self, cat: Catalog) -> None:
        self.cat = cat
        # ops the catalog has no schema for but a workaround entry names (torchvision::nms)
        # are names people look up too
        self.ops = sorted(cat.operators.keys() | cat.registered_ops()
                          | {w.op for w in reads.workaround_ops(cat.engine)})
        self._apis: dict[str, list[str]] | None = None
        self._aclnn: dict[str, list[str]] | None = None

    @property
    def apis(self) -> dict[str, list[str]]:
        if self._apis is None:
            self._apis = {}
            for api, op in reads.api_op_links(self.cat.engine):
                self._apis.setdefault(api, []).append(op)
        return self._apis

    @property
    def aclnn(self) -> dict[str, list[str]]:
        if self._aclnn is None:
            self._aclnn = {}
            for fn, op in reads.aclnn_op_links(self.cat.engine):
                for name in re.split(r"[,\s]+", fn):
                    if name:
                        self._aclnn.setdefault(name.lower(), []).append(op)
        return self._aclnn

    @functools.cached_property
    def _short(self) -> dict[str, list[str]]:
        """``isin`` → its ops: the name without namespace or overload."""
        out: dict[str, list[str]] = {}
        for op in self.ops:
            out.setdefault(op.split("::", 1)[-1].split(".", 1)[0], []).append(op)
        return out

    @functools.cached_property
    def _tails(self) -> dict[str, list[str]]:
        """``grid_sample`` → the APIs of that last name (``torch.nn.functional.grid_sample``),
        torch.* first, then nn.functional, then methods: what a bare name most likely means."""
        out: dict[str, list[str]] = {}
        for api in self.apis:
            out.setdefault(api.rsplit(".", 1)[-1], []).append(api)

        def rank(api: str) -> tuple[int, str]:
            order = ("torch.", "torch.nn.functional.", "Tensor.", "torch.nn.")
            head = api.rsplit(".", 1)[0] + "."
            return (order.index(head) if head in order else len(order), api)

        return {k: sorted(v, key=rank) for k, v in out.items()}

    def _api(self, query: str, api: str) -> NameMatch:
        """An API's ops; a CompositeImplicitAutograd op (which the NPU receives decomposed on
        every release without a kernel for it) is followed by the backend ops of its name
        (``grid_sampler`` → ``grid_sampler_2d``, ``grid_sampler_3d``): inferred from the
        names, and said so by ``describe``."""
        ops = list(self.apis[api])
        decomposed: dict[str, list[str]] = {}
        for op in self.apis[api]:
            info = self.cat.operators.get(op)
            if info is None or info.kernel_kind != "CompositeImplicitAutograd":
                continue
            base = op.split("::", 1)[-1].split(".", 1)[0]
            parts = [o for o in self._short_after(base) if o not in ops]
            if parts:
                decomposed[op] = parts
                ops += parts
        return NameMatch(query, "api", ops, api, decomposed=decomposed)

    def _short_after(self, base: str) -> list[str]:
        """The per-rank backend ops of a composite's name (``grid_sampler`` →
        ``grid_sampler_2d``, ``grid_sampler_3d``): not composite, no out= variant."""
        out = []
        rank = re.compile(rf"^{re.escape(base)}_?[123]d$")
        for short, ops in self._short.items():
            if not rank.match(short):
                continue
            for o in ops:
                info = self.cat.operators.get(o)
                if (o.startswith("aten::") and not o.endswith(".out") and info is not None
                        and not info.kernel_kind.startswith("Composite")):
                    out.append(o)
        return sorted(out)

    def match(self, query: str) -> NameMatch:
        q = query.strip()
        if not q:
            return NameMatch(query, "none")
        try:
            op = canonical(q)
        except OpcheckError:
            op = ""
        known = set(self.ops)
        if op in known:
            return NameMatch(query, "op", [op], op)
        if op:
            overloads = [o for o in self.ops if o.startswith(op + ".")]
            if overloads:
                return NameMatch(query, "overloads", overloads, op)
        for short, full in API_ALIASES:
            if q.startswith(short):
                api = full + q[len(short):]
                if api in self.apis:
                    return self._api(query, api)
        for api in (q, "torch." + q):
            if api in self.apis:
                return self._api(query, api)
        if "." in q and "::" not in q:
            # a method the docs list only as a function (Tensor.isin → torch.isin), or an API
            # the docs do not list at all: the ATen op of the same name
            last = q.rsplit(".", 1)[1]
            if "torch." + last in self.apis:
                return self._api(query, "torch." + last)
            if last in self._short:
                return NameMatch(query, "overloads", self._short[last], f"aten::{last}")
        for fn_name in (q, "aclnn" + q):  # aclnnGridSampler2D, or without its prefix
            fn = self.aclnn.get(fn_name.lower())
            if fn:
                return NameMatch(query, "aclnn", sorted(set(fn)), fn_name)
        if q in self._short:  # a name without namespace in another namespace (npu_gelu)
            return NameMatch(query, "overloads", self._short[q], q)
        if "." not in q and ":" not in q and q in self._tails:
            # a bare Python name (grid_sample): the API of that name
            return self._api(query, self._tails[q][0])
        return NameMatch(query, "none", suggestions=self.suggest(q))

    def suggest(self, q: str) -> list[str]:
        """Close op, API and aclnn names (difflib), closest first."""
        stem = q.split("::", 1)[-1].split(".", 1)[0].lower()
        shorts = difflib.get_close_matches(stem, list(self._short), n=MAX_SUGGESTIONS,
                                           cutoff=0.75)
        out = [self._short[s][0] if len(self._short[s]) == 1 else f"aten::{s}"
               if any(o.startswith("aten::") for o in self._short[s]) else self._short[s][0]
               for s in shorts]
        out += difflib.get_close_matches(q, list(self.apis), n=3, cutoff=0.8)
        tails: dict[str, str] = {}
        for api in self.apis:
            tails.setdefault(api.rsplit(".", 1)[-1].lower(), api)
        out += [tails[t] for t in difflib.get_close_matches(
            q.rsplit(".", 1)[-1].lower(), list(tails), n=3, cutoff=0.8)]
        return list(dict.fromkeys(out))[:MAX_SUGGESTIONS]
