"""What the catalog tells explain: an aclnn function's ATen ops and documented return codes,
the message index (templates and the sites printing each), and an op type's engines, binaries
and ATen ops. :class:`CatalogFacts` and :class:`MessageFacts` are the protocols the pure parts
take (tests hand in fakes); :func:`catalog_facts` reads them from a catalog.

An op type's facts are gathered in :meth:`_SqlFacts.op_type` (aclnn launches and binary lists
and op-plugin's acl_op kernels at the target release: op type → ATen ops), into
:class:`OpTypeFacts`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from opcheck.contrib.explain.templates import MessageIndex

if TYPE_CHECKING:
    from opcheck.db.catalog import Catalog
    from opcheck.db.messages import MessageRow


@dataclass(frozen=True)
class DocCode:
    """A return-code row of the CANN docs (the catalog's ``aclnn_code``)."""

    function: str
    code: str
    name: str
    triggers: str
    params: str
    line: int
    url: str


class CatalogFacts(Protocol):
    def aclnn_ops(self, function: str) -> list[str]: ...

    def aclnn_codes(self, function: str, code: str) -> list[DocCode]: ...


@dataclass
class _SqlFacts:
    cat: Catalog
    release: str | None = None  # the target torch_npu release (acl_op kernels are per pin)

    def aclnn_ops(self, function: str) -> list[str]:
        from opcheck.db import messages

        return messages.ops_reaching(self.cat.engine, function)

    def aclnn_codes(self, function: str, code: str) -> list[DocCode]:
        """The function's own rows for ``code`` and the shared table's row for it (or its
        family): newest source first, one row per distinct trigger."""
        from opcheck.db import reads

        family = code[:3] + "xxx" if len(code) == 6 else code
        out: dict[tuple[str, str, str, str], DocCode] = {}
        for r in reads.aclnn_code_rows(self.cat.engine, function, code, family):
            d = DocCode(r.function, r.code, r.name, r.triggers, r.params, r.line, r.url)
            out.setdefault((d.function, d.code, d.triggers, d.params), d)
        return list(out.values())


    def message_sites(self, template: str) -> list[MessageRow]:
        from opcheck.db import messages

        return messages.same_template(self.cat.engine, template)

    def ops_reaching(self, function: str) -> list[str]:
        from opcheck.db import messages

        return messages.ops_reaching(self.cat.engine, function)

    def paths_of(self, function: str) -> list[str]:
        from opcheck.db import messages

        return messages.paths_of(self.cat.engine, function)

    def op_type(self, op_type: str) -> OpTypeFacts:
        from opcheck.db import cann_engine, messages

        launches = messages.launches_of(self.cat.engine, op_type)
        bins = cann_engine.binary_rows(self.cat.engine, [op_type]).get(op_type, [])
        engines: dict[str, set[str]] = {}
        for la in launches:
            engines.setdefault(la.engine, set()).add(la.aclnn)
        fns = sorted({la.aclnn for la in launches})
        ops = sorted({op for fn in fns for op in self.ops_reaching(fn)})
        socs: dict[str, set[str]] = {}
        for b in bins:
            if b.binaries or b.configured:
                socs.setdefault(b.soc, set()).add(b.cann)
        url = next((f"{b.base_url}{b.path}" for b in bins if b.base_url and b.path), "")
        return OpTypeFacts(op_type, {e: sorted(f) for e, f in engines.items()},
                           {s: sorted(v) for s, v in socs.items()}, ops,
                           sorted({b.cann for b in bins}), url, acl_op=self._acl_op(op_type))

    def _acl_op(self, op_type: str) -> AclOpUsers | None:
        """The ATen ops whose acl_op kernels run the op type in the target release."""
        from opcheck.checker.aclop import acl_op_users

        got = acl_op_users(self.cat, op_type, self.release)
        if got is None:
            return None
        return AclOpUsers(got.release, list(got.ops), list(got.through), list(got.aicpu),
                          [at for at, _ in got.sites], next((u for _, u in got.sites if u), ""),
                          list(got.aicpu_sites))


def catalog_facts(cat: Catalog, release: str | None = None) -> _SqlFacts:
    return _SqlFacts(cat, release)


def message_index(cat: Catalog) -> MessageIndex | None:
    """The catalog's message index for :func:`explain` (None when the catalog has none)."""
    from opcheck.db import messages

    if not messages.has_messages(cat.engine):
        return None
    return MessageIndex(messages.templates(cat.engine))


class MessageFacts(Protocol):
    """What the message index and the engine facts say (the catalog's ``message_template``,
    ``engine_site`` and ``op_binary``)."""

    def message_sites(self, template: str) -> list[MessageRow]: ...

    def op_type(self, op_type: str) -> OpTypeFacts: ...

    def ops_reaching(self, function: str) -> list[str]: ...


@dataclass
class AclOpUsers:
    """The ATen ops whose acl_op kernels (op-plugin's ``OpCommand``) run an op type."""

    release: str  # the torch_npu release whose op-plugin pin was read
    ops: list[str]  # their kernels run it (themselves or through helpers / acl_op kernels)
    through: list[str]  # through an ATen call their kernels make
    aicpu: list[str]  # the command pins it to the AI CPU (_exclude_engines)
    sites: list[str]  # path:line of the commands (under op_plugin/)
    url: str = ""
    aicpu_sites: list[str] = field(default_factory=list)  # the commands pinned to the AI CPU

    def as_dict(self) -> dict[str, Any]:
        return {"release": self.release, "ops": self.ops, "through": self.through,
                "aicpu": self.aicpu, "sites": self.sites, "url": self.url,
                "aicpu_sites": self.aicpu_sites}


@dataclass
class OpTypeFacts:
    """A CANN op type a log names (a kernel, a missing binary, a rejected opType)."""

    op_type: str
    engines: dict[str, list[str]]  # engine → aclnn functions launching it there
    socs: dict[str, list[str]]  # SoC → CANN versions with a binary or an AI Core config
    ops: list[str]  # ATen ops reaching it (through those aclnn functions)
    canns: list[str]  # CANN versions whose open libraries list binaries for it
    url: str = ""
    acl_op: AclOpUsers | None = None  # the ATen ops whose acl_op kernels run it

    @property
    def known(self) -> bool:
        return bool(self.engines or self.socs or self.canns)

    def as_dict(self) -> dict[str, Any]:
        return {"op_type": self.op_type, "engines": self.engines, "socs": self.socs,
                "ops": self.ops, "canns": self.canns, "url": self.url,
                **({"acl_op": self.acl_op.as_dict()} if self.acl_op else {})}
