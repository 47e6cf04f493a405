"""How an acl_op call runs inside CANN: the op types its kernel runs, their engine and their
binaries on the product.

Where a call takes the acl_op path (910A/310P with jit compile on, internal formats; see
:mod:`opcheck.checker.kernel_path`), the aclnn function's launches do not apply: op-plugin's
acl_op kernel builds graph commands by op type (``OpCommand cmd; cmd.Name("IndexPutV2")``,
read per release into ``op_acl_type``) and CANN compiles and runs each one. Per op type:

* engine: ``aicpu`` when the command excludes the AI Core (``_exclude_engines``); else what
  CANN's own level-0 code does with that op type (``engine_site``: launched only on the AI
  Core, only on the AI CPU, or on either by dtype/shape: ``maybe_aicpu``); ``unknown`` when
  the open sources never launch it (a closed built-in op type);
* binaries: whether CANN's open libraries build the op type for the SoC (``op_binary``); an op
  type they do not define for it is a closed built-in there: labelled, never a finding.

Each op type keeps the kernel's branch that leads to it (``condition``) with file:line.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from opcheck.checker.check import Restriction
from opcheck.checker.engine import SOC_OF_PRODUCT, choose_version
from opcheck.core.vocab import Engine
from opcheck.db import aclops as db
from opcheck.db import cann_engine as db_engine
from opcheck.db.aclops import AclTypeRow
from opcheck.db.catalog import Catalog, ReleaseInfo

SOURCE = "aclop_engine"


@dataclass(frozen=True)
class TypeFacts:
    """One op type on one SoC and CANN version."""

    op_type: str
    engine: str  # an Engine value
    why: str
    kernel: str  # binary | none | closed
    socs: tuple[str, ...]  # SoCs the open libraries build it for
    basis: str


def type_facts(cat: Catalog, op_types: Iterable[str], soc: str, cann: str
               ) -> dict[str, TypeFacts]:
    """Engine and binaries of each op type on ``soc`` from CANN's open sources."""
    types = sorted(set(op_types))
    sites = _sites_by_type(cat, types)
    bins = db_engine.binary_rows(cat.engine, types) if db_engine.has_engine_facts(cat.engine) \
        else {}
    out: dict[str, TypeFacts] = {}
    for t in types:
        engines = {e for e, _ in sites.get(t, [])}
        where = next((w for e, w in sites.get(t, []) if e == Engine.AICPU.value), "")
        if engines == {Engine.AICPU.value}:
            engine, why = Engine.AICPU.value, f"CANN launches {t} on the AI CPU only ({where})"
        elif Engine.AICPU.value in engines:
            engine = Engine.MAYBE_AICPU.value
            why = f"CANN's level-0 code runs {t} on the AI CPU for some dtypes or shapes ({where})"
        elif engines:
            engine, why = Engine.AICORE.value, f"CANN launches {t} on the AI Core"
        else:
            engine, why = Engine.UNKNOWN.value, f"{t} is not launched by CANN's open op_api code"
        rows = bins.get(t, [])
        chosen = choose_version((r.cann for r in rows), cann)
        if chosen is None:
            out[t] = TypeFacts(t, engine, why, "closed", (),
                               "not defined in CANN's open libraries (a closed built-in op type)")
            continue
        version, basis = chosen
        at = [r for r in rows if r.cann == version]
        has = any((r.binaries or r.configured) for r in at if r.soc == soc)
        socs = tuple(sorted({r.soc for r in at if r.binaries or r.configured}))
        out[t] = TypeFacts(t, engine, why, "binary" if has else "closed", socs, basis)
    return out


def _sites_by_type(cat: Catalog, types: list[str]) -> dict[str, list[tuple[str, str]]]:
    if not db_engine.has_engine_facts(cat.engine):
        return {}
    return db_engine.launches_of_types(cat.engine, types)


def _type_json(row: AclTypeRow, facts: TypeFacts, soc: str) -> dict[str, Any]:
    engine = Engine.AICPU.value if row.engine == Engine.AICPU.value else facts.engine
    why = (f"the kernel excludes the AI Core engine for this command ({row.path}:{row.line})"
           if row.engine == Engine.AICPU.value else facts.why)
    out: dict[str, Any] = {"op_type": row.op_type, "engine": engine, "why": why,
                           "at": f"{row.path}:{row.line}", "kernel": facts.kernel, "soc": soc}
    if row.link:
        out["url"] = row.link
    if row.condition:
        out["when"] = row.condition
    if row.via:
        out["via"] = row.via
    if facts.kernel == "closed":
        out["note"] = (f"closed built-in op type on {soc}" + (
            f" (the open libraries build it for {', '.join(facts.socs)} only)"
            if facts.socs else " (not defined in CANN's open libraries)"))
    return out


def ordered(op: str, rows: list[AclTypeRow]) -> list[AclTypeRow]:
    """The kernel's own commands before those reached through an ATen call it makes (a
    zero_ inside), and among them the op's own op type (index_put_ → IndexPutV2) before the
    broadcasts and casts around it."""
    base = op.split("::")[-1].split(".")[0].replace("_", "").lower()
    return sorted(rows, key=lambda r: (not r.direct, not r.op_type.lower().startswith(base[:6]),
                                       r.op_type, r.line))


def acl_op_engine(cat: Catalog, op: str, release: ReleaseInfo, product: str
                  ) -> tuple[dict[str, Any], list[Restriction]] | None:
    """The engine document and findings of an op whose calls take the acl_op path on
    ``product``; None when the catalog does not know the op types its kernel runs."""
    soc = SOC_OF_PRODUCT.get(product)
    rows = db.types_of_ops(cat.engine, [op], release.torch_npu).get(op, [])
    if soc is None or not rows:
        return None
    # the kernel's own commands first; commands reached through an ATen call the dispatcher
    # routes (a zero_ inside) are listed after them
    rows = ordered(op, rows)
    facts = type_facts(cat, (r.op_type for r in rows), soc, release.cann)
    types = [_type_json(r, facts[r.op_type], soc) for r in rows if r.direct] or \
        [_type_json(r, facts[r.op_type], soc) for r in rows]
    # an AI CPU command on one branch of the kernel is a "may" for the call as a whole
    worst = max((Engine.MAYBE_AICPU if t["engine"] == Engine.AICPU.value and t.get("when")
                 else Engine(t["engine"]) for t in types), key=lambda e: e.severity)
    doc: dict[str, Any] = {"path": "acl_op", "product": product, "soc": soc,
                           "engine": worst.value, "label": worst.label, "op_types": types,
                           "calls": [], "aicpu_calls": 0, "maybe_aicpu_calls": 0,
                           "host_syncs": 0,
                           "basis": "op-plugin's acl_op kernel at the release's pin; CANN's "
                                    "open level-0 launches and binary lists"}
    names = ", ".join(dict.fromkeys(t["op_type"] for t in types))
    parts = []
    for t in types[:6]:
        bit = f"{t['op_type']} [{Engine(t['engine']).label}]"
        bit += f" if {t['when']}" if t.get("when") else ""
        bit += f" ({t['at']})"
        if t.get("note"):
            bit += f" [{t['note']}]"
        parts.append(bit)
    text = (f"{product}: the acl_op kernel runs CANN op type{'s' if len(types) > 1 else ''} "
            f"{names}: " + "; ".join(parts))
    aicpu = [t for t in types if t["engine"] in (Engine.AICPU.value, Engine.MAYBE_AICPU.value)]
    restriction = Restriction(
        op, text, (), types[0].get("url", ""), product, source=SOURCE,
        basis="op-plugin acl_op sources", slow=bool(aicpu), inferred=False)
    return doc, [restriction]


@dataclass(frozen=True)
class OpTypeUsers:
    """The ATen ops whose acl_op kernels run one CANN op type in a release (explain: a log
    naming an op type, "Current working aclop is Fill", back to the calls that run it)."""

    op_type: str
    release: str
    ops: tuple[str, ...]  # the kernel runs it itself (or through its helpers / acl_op kernels)
    through: tuple[str, ...]  # through an ATen call its kernel makes (zeros → zero_ → …)
    aicpu: tuple[str, ...]  # ops whose command pins it to the AI CPU
    sites: tuple[tuple[str, str], ...]  # (path:line, url) of the commands, first few
    aicpu_sites: tuple[str, ...] = ()  # path:line of the commands pinned to the AI CPU

    def as_dict(self) -> dict[str, Any]:
        return {"op_type": self.op_type, "release": self.release, "ops": list(self.ops),
                "through": list(self.through), "aicpu": list(self.aicpu),
                "sites": [{"at": at, "url": url} for at, url in self.sites],
                "aicpu_sites": list(self.aicpu_sites)}

    def summary(self, limit: int = 8) -> str:
        def names(ops: tuple[str, ...]) -> str:
            shown = ", ".join(o.removeprefix("aten::") for o in ops[:limit])
            return shown + (f", +{len(ops) - limit} more" if len(ops) > limit else "")

        text = (f"acl_op kernels that run {self.op_type} in torch_npu {self.release}: "
                f"{names(self.ops) or 'none directly'}")
        if self.through:
            text += f"; through an ATen call: {names(self.through)}"
        if self.sites:
            text += f" ({', '.join(at for at, _ in self.sites[:2])})"
        return text


def acl_op_users(cat: Catalog, op_type: str, release: str | None) -> OpTypeUsers | None:
    """Who runs ``op_type`` on the acl_op path in ``release`` (None: the newest release
    whose kernels run it); None when no acl_op kernel of the catalog runs it."""
    rows = db.ops_running(cat.engine, op_type)
    if not rows:
        return None
    if release is None or not any(release in r.releases for r in rows):
        order = [r.torch_npu for r in sorted(cat.releases, key=lambda r: r.sort_key)]
        have = {rel for r in rows for rel in r.releases}
        newest = [r for r in order if r in have]
        if not newest:
            return None
        release = newest[-1]
    rows = [r for r in rows if release in r.releases]
    def rank(op: str) -> tuple[bool, bool, str]:
        # the op named after the op type first (Fill → fill_), then the plain ATen names
        # before the dunder and private ones
        base = op.split("::")[-1].split(".")[0].strip("_").replace("_", "")
        t = op_type.lower()
        return (not (t.startswith(base) or base.startswith(t)), op.split("::")[-1][0] == "_", op)

    direct = tuple(sorted({r.op for r in rows if r.direct}, key=rank))
    through = tuple(sorted({r.op for r in rows if not r.direct} - set(direct), key=rank))
    aicpu = tuple(sorted({r.op for r in rows if r.engine == Engine.AICPU.value}, key=rank))
    sites = tuple({f"{r.path}:{r.line}": r.link for r in rows if r.direct}.items())
    pinned = tuple(dict.fromkeys(f"{r.path}:{r.line}" for r in rows
                                 if r.engine == Engine.AICPU.value))
    return OpTypeUsers(rows[0].op_type, release, direct, through, aicpu, sites[:4], pinned[:4])
