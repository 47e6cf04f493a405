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

    @property
    def single(self) -> str:
        return self.ops[0] if len(self.ops) == 1 else ""

    def describe(self) -> str:
        if self.kind == "overloads":
            return f"{self.name} has {len(self.ops)} overload{'s' if len(self.ops) > 1 else ''}"
        if self.kind == "api":
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
        self.ops = sorted(cat.operators.keys() | cat.registered_ops())
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
                    return NameMatch(query, "api", self.apis[api], api)
        for api in (q, "torch." + q):
            if api in self.apis:
                return NameMatch(query, "api", self.apis[api], api)
        if "." in q and "::" not in q:
            # a method the docs list only as a function (Tensor.isin → torch.isin), or an API
            # the docs do not list at all: the ATen op of the same name
            last = q.rsplit(".", 1)[1]
            if "torch." + last in self.apis:
                return NameMatch(query, "api", self.apis["torch." + last], "torch." + last)
            if last in self._short:
                return NameMatch(query, "overloads", self._short[last], f"aten::{last}")
        fn = self.aclnn.get(q.lower())
        if fn:
            return NameMatch(query, "aclnn", sorted(set(fn)), q)
        if q in self._short:  # a name without namespace in another namespace (npu_gelu)
            return NameMatch(query, "overloads", self._short[q], q)
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
