"""Which kernel runs a call on a product: aclnn (op_api), acl_op, PyTorch's per-tensor slow
path, or the CPU, and what that means for the aclnn contract.

The decision, per (op, release, product, settings), follows the release's own sources (facts
read by :mod:`opcheck.scrapers.kernel_path`):

* an op with only an op_api kernel runs aclnn, unless op-plugin's kernel checks the SoC and
  hands the call elsewhere there (``_foreach_*``: ``is_support_nd_out`` false → PyTorch's
  ``foreach_tensor_*_slow``, one launch per tensor; some kernels call an ``acl_op::`` kernel on
  older SoCs);
* an op with only an acl_op kernel runs acl_op;
* an op with both runs op_api only when jit compile is disabled and the inputs are in base
  (ND) format (op-plugin's generated wrapper), else acl_op. Jit compile's default is the
  release's ``CheckJitDisableInner`` (2.6-era: disabled only for SoC ≥ Ascend910B1). Releases
  whose torch_npu reads CANN's own ``ACL_OP_JIT_COMPILE`` default at init instead of writing a
  rule are judged on the nearest release that writes one, and say so (inferred).

The user's settings override the defaults: ``jit_compile`` (``torch.npu.set_compile_mode``)
and ``internal_format`` (inputs in an internal format such as NZ: never assumed by default).

Where aclnn does not run, the aclnn contract does not decide: its findings for that product
are kept listed but not counted ("acl_op path: contract not published", labelled), except the
chip-level fact that 910A and 310P have no bfloat16, which holds on every path. acl_op kernels
on SoCs below the precision rule's threshold compile with ``allow_fp32_to_fp16`` (float32
math may run in float16): a labelled note on float32 calls.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, replace

from opcheck.checker.check import Finding, PathHook, Restriction
from opcheck.core.errors import UsageError
from opcheck.core.oplist import OpUse, Signature
from opcheck.core.products import canonical_alias
from opcheck.core.versions import release_key, torch_minor
from opcheck.core.vocab import Status
from opcheck.db import kernel_path as db
from opcheck.db.catalog import Catalog, ReleaseInfo
from opcheck.db.kernel_path import PathRuleRow, SocCheckRow
from opcheck.scrapers.kernel_path import CALL_PREFIX, soc_holds

ACLNN = "aclnn"
ACL_OP = "acl_op"
FOREACH_SLOW = "per-tensor slow path"
CPU = "cpu"
NATIVE = "torch_npu"
UNKNOWN = "unknown"

# The SoC enum names (NpuVariables.h) of each product alias: the chips a product ships with.
_PRODUCT_SOCS: dict[str, re.Pattern[str]] = {
    "910A": re.compile(r"Ascend910(?:PremiumA|ProA|A|ProB|B)"),
    "910B": re.compile(r"Ascend910B\d\w*"),
    "910C": re.compile(r"Ascend910_93\d+"),
    "310P": re.compile(r"Ascend310P\d+"),
    "310B": re.compile(r"Ascend310B\d+"),
    "950": re.compile(r"Ascend950\w*"),
}
JUDGED = tuple(_PRODUCT_SOCS)
# Chip-level: no bfloat16 units on these products, whichever kernel path runs.
NO_BFLOAT16 = ("910A", "310P")

PYTORCH_URL = "https://github.com/Ascend/pytorch/blob"
_ENV = "torch_npu/csrc/framework/interface/EnvVariables.cpp"
_LAZY = "torch_npu/csrc/framework/LazyInitAclops.cpp"
_VARS = "torch_npu/csrc/core/npu/NpuVariables.cpp"


@dataclass(frozen=True)
class Settings:
    """The user's settings; None: torch_npu's default on the product."""

    jit_compile: bool | None = None
    internal_format: bool | None = None


def on_off(text: str | None, option: str) -> bool | None:
    """``on``/``off`` (CLI option text) → bool; None when not given."""
    if text is None:
        return None
    if text.lower() not in ("on", "off"):
        raise UsageError(f"{option} must be on or off")
    return text.lower() == "on"


@dataclass(frozen=True)
class Decision:
    product: str
    path: str
    why: str  # the rule, with its file and line
    link: str = ""
    inferred: bool = False
    fallback: str = ""  # the function run instead (slow path, acl_op by SoC)


@dataclass(frozen=True)
class _Rules:
    rec: PathRuleRow
    enum: dict[str, int]
    label: str  # "" when the release's own, else why another release's rules stand for it


class KernelPaths:
    """Decides kernel paths on one catalog (rules read once, fallbacks read once)."""

    def __init__(self, cat: Catalog, settings: Settings = Settings()) -> None:
        self.cat = cat
        self.settings = settings
        self.rules = db.rules(cat.engine)
        checks: dict[str, list[SocCheckRow]] = (
            db.soc_checks_all(cat.engine) if self.rules else {})
        self.checks = checks
        self.urls = db.source_urls(cat.engine, [
            *(r.codegen_source_id for r in self.rules.values()),
            *(c.source_id for cs in checks.values() for c in cs)])
        self._resolved: dict[str, _Rules | None] = {}

    @property
    def known(self) -> bool:
        return bool(self.rules)

    def rules_for(self, release: ReleaseInfo) -> _Rules | None:
        """The release's rules, else the nearest release's of the same torch line (the next,
        else the newest before), else of any line, labelled."""
        if release.torch_npu in self._resolved:
            return self._resolved[release.torch_npu]
        out: _Rules | None = None
        rec = self.rules.get(release.torch_npu)
        label = ""
        if rec is None and self.rules:
            pool = sorted(self.rules, key=release_key)
            same = [r for r in pool if _minor(r) == release.torch_minor]
            key = release_key(release.torch_npu)
            if same:
                after = [r for r in same if release_key(r) >= key]
                name = after[0] if after else same[-1]
            else:
                before = [r for r in pool if release_key(r) <= key]
                name = before[-1] if before else pool[0]
            rec = self.rules[name]
            label = (f"torch_npu {name}'s sources stand for {release.torch_npu} (no mirrored "
                     f"tag for it)")
        if rec is not None:
            enum = {k: int(v) for k, v in (x.split("=") for x in rec.socs.split(",") if x)}
            out = _Rules(rec, enum, label)
        self._resolved[release.torch_npu] = out
        return out

    def _jit_default(self, rules: _Rules, socs: list[str]) -> tuple[bool | None, str, str, bool]:
        """(jit compile disabled by default on these SoCs — None when they differ, why, link,
        inferred)."""
        rec = rules.rec
        link = f"{PYTORCH_URL}/{rec.tag}/{_ENV}#L{rec.jit_line}"
        inferred = bool(rules.label)
        if rec.jit_kind == "soc":
            held = {soc_holds(rec.jit_condition, rules.enum, s) for s in socs}
            why = (f"jit compile disabled by default where {rec.jit_condition} "
                   f"(CheckJitDisableInner, {rec.tag} {_ENV}:{rec.jit_line})")
            if ":" in rec.acl_default:
                why += (f"; CANN's own ACL_OP_JIT_COMPILE default, taken at the first acl_op "
                        f"use ({rec.acl_default}), can override it")
            return (held.pop() if len(held) == 1 else None), why, link, inferred
        why = (f"jit compile option defaults to {rec.jit_default!r} "
               f"({rec.tag} {_ENV}:{rec.jit_line})")
        if rec.acl_default != "none":
            # CANN's own default decides at run time (or may: the file that would read it is
            # not mirrored at this tag); the rule torch_npu later wrote down stands for it
            later = sorted((r for r in self.rules.values() if r.jit_kind == "soc"),
                           key=lambda r: release_key(r.torch_npu))
            if later:
                ref = later[0]
                held = {soc_holds(ref.jit_condition, rules.enum, s) for s in socs}
                read = (f"at init torch_npu takes CANN's ACL_OP_JIT_COMPILE default "
                        f"({rec.acl_default})" if rec.acl_default else
                        "whether torch_npu takes CANN's ACL_OP_JIT_COMPILE default at init is "
                        "not in the files mirrored at this tag (later tags and the newest of "
                        "its torch line do)")
                why += (f"; {read}, not written in these sources: inferred from the rule "
                        f"{ref.torch_npu} writes down ({ref.jit_condition})")
                return (held.pop() if len(held) == 1 else None), why, link, True
        return rec.jit_default == "disable", why, link, inferred

    def decide(self, op: str, status: Status, kernel: str, release: ReleaseInfo,
               product: str) -> Decision:
        if status is Status.CPU_FALLBACK:
            return Decision(product, CPU, "no NPU kernel: torch_npu's CPU fallback")
        if status is not Status.NPU:
            return Decision(product, "", "")
        if kernel.startswith("torch_npu"):
            return Decision(product, NATIVE, "torch_npu's own kernel")
        if kernel == "HCCL":
            return Decision(product, "", "")  # a collective: no kernel path (checker.hccl)
        rules = self.rules_for(release)
        if rules is None:
            return Decision(product, UNKNOWN, "no kernel-path facts in the catalog",
                            inferred=True)
        socs = [s for s in rules.enum if _PRODUCT_SOCS[product].fullmatch(s)]
        if not socs:
            return Decision(product, UNKNOWN, f"torch_npu {rules.rec.torch_npu} names no "
                                              f"{product} SoC", inferred=True)
        op_api, acl_op = kernel.startswith("aclnn"), "acl_op" in kernel
        label = f"; {rules.label}" if rules.label else ""
        if acl_op and not op_api:
            return Decision(product, ACL_OP, "only an acl_op kernel" + label)
        if op_api and acl_op:
            rec = rules.rec
            only = bool(rec.aclnn_only) and all(soc_holds(rec.aclnn_only, rules.enum, s)
                                                for s in socs)
            if only:
                why = (f"{product} runs aclnn operators only (IsAclnnOnly: {rec.aclnn_only}, "
                       f"{_VARS}:{rec.aclnn_only_line}; jit compile and internal formats "
                       f"forced off)")
                return self._soc_fallback(op, rules, socs, Decision(
                    product, ACLNN, why + label,
                    f"{PYTORCH_URL}/{rec.tag}/{_VARS}#L{rec.aclnn_only_line}",
                    bool(rules.label)))
            cg = ("op-plugin's wrapper calls op_api only with jit compile disabled"
                  + (" and inputs in base format" if rec.codegen_base_format else "")
                  + (f" ({rec.codegen_path}:{rec.codegen_line})" if rec.codegen_path else ""))
            if self.settings.jit_compile is not None:
                disabled: bool | None = not self.settings.jit_compile
                jwhy, link, inferred = (f"jit compile {'on' if self.settings.jit_compile else 'off'}"
                                        f" (your setting)"), "", bool(rules.label)
            else:
                disabled, jwhy, link, inferred = self._jit_default(rules, socs)
            if disabled is None:
                return Decision(product, f"{ACLNN} or {ACL_OP}",
                                f"{cg}; {jwhy}: differs between {product} chips" + label,
                                link, True)
            if not disabled:
                return Decision(product, ACL_OP, f"{cg}; {jwhy}" + label, link, inferred)
            if self.settings.internal_format and rec.codegen_base_format:
                return Decision(product, ACL_OP, f"{cg}; inputs in an internal format (your "
                                                 f"setting)" + label, link, inferred)
            note = ("" if self.settings.internal_format is not None
                    else "; inputs assumed in base format")
            return self._soc_fallback(op, rules, socs, Decision(
                product, ACLNN, f"{cg}; {jwhy}{note}" + label, link, inferred))
        return self._soc_fallback(op, rules, socs,
                                  Decision(product, ACLNN, "only an op_api kernel" + label,
                                           inferred=bool(rules.label)))

    def _soc_fallback(self, op: str, rules: _Rules, socs: list[str],
                      base: Decision) -> Decision:
        """op-plugin's own SoC check in the op's op_api kernel, when it fires on the product."""
        rel = rules.rec.torch_npu
        for c in self.checks.get(op, []):
            if rel not in c.releases.split(",") or c.when.startswith(CALL_PREFIX):
                continue
            fires = {soc_holds(c.when, rules.enum, s) for s in socs}
            if fires != {True}:
                continue
            url = self.urls.get(c.source_id or -1, "")
            link = f"{url}/{c.path}#L{c.line}" if url else ""
            where = f"{c.path}:{c.line}"
            cond = f"where {c.when}" if c.when else "on every SoC"
            if c.fallback.startswith("acl_op::"):
                return Decision(base.product, ACL_OP,
                                f"op-plugin's {c.kernel} calls {c.fallback} {cond} ({where})",
                                link, base.inferred, c.fallback)
            return Decision(base.product, FOREACH_SLOW,
                            f"op-plugin's {c.kernel} falls back to PyTorch's {c.fallback} "
                            f"{cond} ({where}): one kernel launch per tensor, slower, not "
                            f"unsupported", link, base.inferred, c.fallback)
        return base

    def acl_op_by_soc(self, op: str, release: ReleaseInfo, product: str) -> Decision | None:
        """op-plugin's SoC check in ``op``'s op_api kernel that sends every chip of
        ``product`` to its acl_op kernel at ``release``; None when no check does."""
        rules = self.rules_for(release)
        if rules is None or product not in _PRODUCT_SOCS:
            return None
        socs = [s for s in rules.enum if _PRODUCT_SOCS[product].fullmatch(s)]
        if not socs:
            return None
        d = self._soc_fallback(op, rules, socs, Decision(product, "", ""))
        return d if d.fallback.startswith("acl_op::") else None

    def per_call(self, use: OpUse, release: ReleaseInfo,
                 base: Decision) -> tuple[Decision, Restriction | None]:
        """op-plugin's per-call fallback where the aclnn foreach kernel would run: the calls
        whose tensor lists cannot take it (integer tensors, mixed dtypes) run PyTorch's
        per-tensor path. Every recorded call → the product's path; some → a slow note."""
        rules = self.rules_for(release)
        if base.path != ACLNN or rules is None or not use.signatures:
            return base, None
        rel = rules.rec.torch_npu
        for c in self.checks.get(use.op, []):
            if not c.when.startswith(CALL_PREFIX) or rel not in c.releases.split(","):
                continue
            slow = [(s, why) for s in use.signatures if (why := call_falls_back(c.when, s))]
            if not slow:
                continue
            url = self.urls.get(c.source_id or -1, "")
            link = f"{url}/{c.path}#L{c.line}" if url else ""
            calls = sum(s.count or 1 for s, _ in slow)
            why = (f"op-plugin's {c.kernel} falls back to PyTorch's {c.fallback} for calls "
                   f"whose {slow[0][1]} ({c.path}:{c.line}, condition "
                   f"{c.when.removeprefix(CALL_PREFIX)}): one kernel launch per tensor, slower, "
                   f"not unsupported")
            inferred = base.inferred or any("inferred" in w for _, w in slow)
            if len(slow) == len(use.signatures):
                return Decision(base.product, FOREACH_SLOW, why, link, inferred,
                                c.fallback), None
            shown = "; ".join(_signature(s.inputs) for s, _ in slow[:4])
            return base, Restriction(
                use.op, f"{base.product}: {FOREACH_SLOW} for {calls} of the calls ({shown}): "
                        f"{why}", (), link, base.product, inferred=inferred,
                source="kernel_path", basis="kernel path (per call)", slow=True)
        return base, None

    def precision(self, release: ReleaseInfo, product: str) -> tuple[str, str] | None:
        """(mode, why) when acl_op kernels on ``product`` compile with a precision mode that
        lets float32 run in float16; None otherwise or when unknown."""
        rules = self.rules_for(release)
        if rules is None or not rules.rec.precision_condition:
            return None
        rec = rules.rec
        socs = [s for s in rules.enum if _PRODUCT_SOCS[product].fullmatch(s)]
        if not socs:
            return None
        modes = {rec.precision_true if soc_holds(rec.precision_condition, rules.enum, s)
                 else rec.precision_false for s in socs}
        if modes != {"allow_fp32_to_fp16"}:
            return None
        return ("allow_fp32_to_fp16",
                f"SetPrecisionMode: {rec.precision_true} where {rec.precision_condition}, else "
                f"{rec.precision_false} ({rec.tag} {_LAZY}:{rec.precision_line})")


def _minor(version: str) -> str:
    try:
        return torch_minor(version)
    except ValueError:
        return ""


def kernel_path_hook(cat: Catalog, hardware: str | None,
                     settings: Settings = Settings()) -> PathHook | None:
    """A hook for ``check``: sets each finding's ``path`` per product judged and keeps the
    aclnn contract's findings only where aclnn runs. None when the catalog has no
    kernel-path facts (then the report is as before)."""
    paths = KernelPaths(cat, settings)
    if not paths.known:
        return None
    wanted = canonical_alias(hardware) if hardware else None
    products = [wanted] if wanted in _PRODUCT_SOCS else ([] if wanted else list(JUDGED))

    def hook(use: OpUse, release: ReleaseInfo, f: Finding) -> None:
        decisions = [paths.decide(use.op, f.status, f.kernel, release, p) for p in products]
        decisions = [d for d in decisions if d.path]
        if not decisions:
            return
        judged = [paths.per_call(use, release, d) for d in decisions]
        decisions = [d for d, _ in judged]
        f.path = {d.product: d.path for d in decisions}
        f.restrictions = _apply(paths, use, release, decisions, f.restrictions)
        f.restrictions += [r for _, r in judged if r is not None]
        if wanted is not None and f.status is Status.NPU:
            _acl_op_engine(cat, use, release, decisions, f)
        f.restricted = any(r.violated for r in f.restrictions)

    return hook


def _acl_op_engine(cat: Catalog, use: OpUse, release: ReleaseInfo, decisions: list[Decision],
                   f: Finding) -> None:
    """On the one product judged, an op whose calls take the acl_op path gets the engine and
    binaries of the op types its acl_op kernel runs instead of the aclnn function's."""
    from opcheck.checker.aclop import acl_op_engine

    for d in decisions:
        if d.path != ACL_OP:
            continue
        got = acl_op_engine(cat, use.op, release, d.product)
        if got is None:
            continue
        doc, found = got
        f.engine = doc
        f.binaries = list({t["op_type"]: {"op_type": t["op_type"], "soc": t["soc"],
                                          "kernel": t["kernel"],
                                          **({"note": t["note"]} if t.get("note") else {})}
                           for t in doc["op_types"]}.values())
        f.restrictions += found


# Findings about what the aclnn function launches inside CANN (checker.engine): they hold only
# where the aclnn function runs.
ENGINE_SOURCES = ("cann_engine", "cann_binary")


def _engine_gated(r: Restriction, not_aclnn: dict[str, Decision]) -> Restriction:
    failing = r.products_failing or ((r.hardware,) if r.hardware else ())
    moved = [p for p in failing if p in not_aclnn]
    if not moved or len(moved) < len(failing):
        return r
    where = "; ".join(f"{p}: {not_aclnn[p].path}" for p in moved)
    return replace(r, unsupported=False, dtypes_seen_outside=(), slow=False, products_failing=(),
                   text=f"{r.text} [not counted: the aclnn function does not run there ({where})]")


def _apply(paths: KernelPaths, use: OpUse, release: ReleaseInfo, decisions: list[Decision],
           found: list[Restriction]) -> list[Restriction]:
    not_aclnn = {d.product: d for d in decisions if d.path != ACLNN}
    out: list[Restriction] = []
    for r in found:
        if r.source in ENGINE_SOURCES and not_aclnn:
            out.append(_engine_gated(r, not_aclnn))
            continue
        if r.source != "cann" or not r.violated or not not_aclnn:
            out.append(r)
            continue
        failing = r.products_failing or ((r.hardware,) if r.hardware else ())
        keep, moved, chip = [], [], []
        for p in failing:
            if p not in not_aclnn:
                keep.append(p)
            elif p in NO_BFLOAT16 and "BFLOAT16" in r.dtypes_seen_outside:
                chip.append(p)
            else:
                moved.append(p)
        if not moved:
            if chip:
                out.append(replace(r, text=f"{r.text} [chip-level on {', '.join(chip)}: no "
                                           f"bfloat16 there on any kernel path]"))
            else:
                out.append(r)
            continue
        counted = tuple(keep + chip)
        where = "; ".join(f"{p}: {not_aclnn[p].path}" for p in moved)
        unpublished = any(not_aclnn[p].path != FOREACH_SLOW for p in moved)
        note = (f" [not counted on {', '.join(moved)}: the aclnn function does not run there "
                f"({where})" + ("; acl_op path: contract not published]" if unpublished
                                else "; PyTorch's per-tensor ops run instead]"))
        if counted:
            out.append(replace(r, products_failing=counted, hardware=",".join(counted),
                               text=r.text + note))
        else:
            out.append(replace(r, dtypes_seen_outside=(), unsupported=False, text=r.text + note))
    fp32 = any("float32" in d for s in use.signatures for d in s.inputs.values()) or (
        not use.signatures and "float32" in use.dtypes)
    calls = len(use.signatures) or 1
    shown = "; ".join(_signature(s.inputs) for s in use.signatures[:4]) + (
        f"; +{len(use.signatures) - 4} more" if len(use.signatures) > 4 else "")
    for d in decisions:
        if d.path in (ACL_OP, f"{ACLNN} or {ACL_OP}"):
            out.append(Restriction(
                use.op, f"{d.product}: {d.path} path for {calls} call signature"
                        f"{'s' if calls > 1 else ''}" + (f" ({shown})" if shown else "")
                        + f": {d.why}; acl_op path: contract not published, dtype limits "
                          f"unknown", (), d.link, d.product,
                inferred=True, source="kernel_path", basis="kernel path"))
            prec = paths.precision(release, d.product) if fp32 else None
            if prec is not None:
                out.append(Restriction(
                    use.op, f"{d.product}: float32 math may run in float16 on the acl_op "
                            f"path ({prec[0]}: {prec[1]}) unless you change the precision mode",
                    (), "", d.product, inferred=True, source="kernel_path",
                    basis="precision mode"))
        elif d.path == FOREACH_SLOW:
            out.append(Restriction(
                use.op, f"{d.product}: {d.path} ({d.why})", (), d.link, d.product,
                inferred=d.inferred, source="kernel_path", basis="kernel path", slow=True))
    return out


_INTEGRAL = frozenset({"int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"})


def call_falls_back(when: str, sig: Signature) -> str:
    """Why one recorded call meets a per-call fallback condition (``call:…`` from
    :mod:`opcheck.scrapers.kernel_path`), "" when it does not. The fast route is judged on
    dtypes only (one dtype across the lists); devices, strides and density are not recorded."""
    values = list(sig.inputs.values())
    for term in when.removeprefix(CALL_PREFIX).split("||"):
        if term == "!fast_route":
            seen = {d for v in values for d in v.split(",") if d and d != "None"}
            if len(seen) > 1:
                return (f"tensor lists mix dtypes ({', '.join(sorted(seen))}): PyTorch's "
                        f"can_use_fast_route needs one dtype and device (inferred from the "
                        f"recorded dtypes)")
            continue
        kind, _, pos = term.partition("@")
        if not pos.isdigit() or int(pos) >= len(values):
            continue
        wanted = _INTEGRAL | ({"bool"} if kind == "integral_or_bool" else set())
        hit = sorted(set(values[int(pos)].split(",")) & wanted)
        if hit:
            name = list(sig.inputs)[int(pos)]
            return f"{name} holds {'/'.join(hit)} tensors (has_integral_tensor)"
    return ""


def _signature(inputs: dict[str, str]) -> str:
    return ", ".join(f"{k}={v}" for k, v in inputs.items()) or "no tensor input"


def brief(path: dict[str, str]) -> str:
    """The paths of a finding in a few characters: ``acl_op`` or ``910B aclnn, 310P acl_op``."""
    values = set(path.values())
    if not values:
        return ""
    if len(values) == 1:
        return values.pop()
    return ", ".join(f"{p} {v}" for p, v in path.items())


def release_paths(cat: Catalog, op: str,
                  rows: Iterable[tuple[ReleaseInfo, Status | None, str]], hardware: str,
                  settings: Settings = Settings()) -> dict[str, Decision]:
    """``op``'s kernel path on one product in each release (``opcheck op X --hardware P``):
    ``rows`` are (release, status, kernel label) as the op's history resolves them."""
    product = canonical_alias(hardware)
    if product is None:
        raise UsageError(f"no hardware product matches {hardware!r} (aliases: "
                         f"{', '.join(JUDGED)})")
    paths = KernelPaths(cat, settings)
    if not paths.known or product not in _PRODUCT_SOCS:
        return {}
    out: dict[str, Decision] = {}
    for release, status, kernel in rows:
        if status is None:
            continue
        d = paths.decide(op, status, kernel, release, product)
        if d.path:
            out[release.torch_npu] = d
    return out
