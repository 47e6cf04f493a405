"""The kernel path of a call: torch_npu's rules per release tag and op-plugin's per pin.

:class:`KernelPathRules` reads, for every release with a mirrored tag, torch_npu's
``EnvVariables.cpp`` (jit-compile default), ``LazyInitAclops.cpp`` (CANN's default read at init,
the precision mode), ``NpuVariables.h|.cpp`` (the SoC enum, aclnn-only SoCs) and the op-plugin
pin's ``codegen/gen.py`` or ``torchnpugen/gen.py`` (the op_api condition of the generated
wrapper), and the SoC fallbacks in the pin's op_api kernels (``_foreach_*``: PyTorch's per-tensor
slow path) and their per-call fallbacks (lists mixing dtypes or holding integer tensors), linked
to the ATen overloads they implement. Runs after the release matrix and the
kernels (``ctx.data.releases``).
"""

from __future__ import annotations

from collections import defaultdict

from packaging.version import Version

from opcheck.core.errors import OpcheckError
from opcheck.core.versions import release_key, torch_minor
from opcheck.db.data import KernelPathRuleRec, KernelSocCheckRec, ReleaseRec
from opcheck.scrapers import kernel_path as kp
from opcheck.scrapers import opplugin
from opcheck.scrapers.opapi_sources import cpp_kernel_name, schema_arg_classes
from opcheck.scrapers.rows import KernelRow
from opcheck.sync.context import SyncContext

PYTORCH = "github/Ascend/pytorch"
OP_PLUGIN = "github/Ascend/op-plugin"
CSRC = "torch_npu/csrc"
_FILES = {
    "env": "framework/interface/EnvVariables.cpp",
    "lazy": "framework/LazyInitAclops.cpp",
    "enum": "core/npu/NpuVariables.h",
    "vars": "core/npu/NpuVariables.cpp",
    "sysctrl": "core/npu/sys_ctrl/npu_sys_ctrl.cpp",  # mirrored at one tag per torch line
}
_CODEGEN = ("torchnpugen/gen.py", "codegen/gen.py")


def _same(cpp: tuple[str, ...], schema: tuple[str, ...]) -> bool:
    loose = {("T?[]", "T[]"), ("T[]", "T?[]"), ("i[]", "i[]?"), ("i[]?", "i[]")}
    return len(cpp) == len(schema) and all(
        c == s or (c, s) in loose or c.startswith("?") or s.startswith("?")
        for c, s in zip(cpp, schema, strict=True))


class KernelPathRules:
    name = "kernel_path"
    reads = (f"{PYTORCH}/<tag>/{CSRC}/{{{', '.join(_FILES.values())}}}; "
             f"{OP_PLUGIN}/<pin>/{{codegen,torchnpugen}}/gen.py and op_plugin/ops/opapi/*.cpp")
    parser = "opcheck.scrapers.kernel_path"
    adds = "kernel_path_rules (per release), kernel_soc_checks (per op and release)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("kernel path rules")
        tags = set(ctx.ls(PYTORCH))
        pins = {ref for ref in ctx.ls(OP_PLUGIN) if len(ref) == 40}
        rules: list[KernelPathRuleRec] = []
        by_pin: dict[str, list[ReleaseRec]] = defaultdict(list)
        for rel in ctx.data.releases:
            pin = next((p for p in pins if rel.op_plugin_commit
                        and p.startswith(rel.op_plugin_commit)), "")
            if pin:
                by_pin[pin].append(rel)
            if not rel.tag or rel.tag not in tags:
                continue
            try:
                rec = self._rules(ctx, rel, pin)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            if rec is not None:
                rules.append(rec)
        ctx.data.kernel_path_rules = sorted(rules, key=lambda r: release_key(r.torch_npu))
        ctx.data.kernel_soc_checks = self._soc_checks(ctx, by_pin)

    def _rules(self, ctx: SyncContext, rel: ReleaseRec, pin: str) -> KernelPathRuleRec | None:
        base = f"{PYTORCH}/{rel.tag}/{CSRC}"
        present = {k: f"{base}/{p}" for k, p in _FILES.items()
                   if ctx.source.exists(f"{base}/{p}")}
        if "env" not in present:
            return None
        env, sid = ctx.fetch(present["env"], self.name)
        jit = ctx.parsed(env, kp.parse_jit_rule)
        if jit is None:
            return None
        rec = KernelPathRuleRec(torch_npu=rel.torch_npu, tag=rel.tag, jit_kind=jit.kind,
                                jit_condition=jit.condition, jit_default=jit.default,
                                jit_line=jit.line, source_id=sid)
        read_by: list[str] = []  # where torch_npu takes CANN's jit default, "" where not
        for key in ("lazy", "sysctrl"):
            if key in present:
                got, _ = ctx.fetch(present[key], self.name)
                line = ctx.parsed(got, kp.parse_acl_default)
                read_by.append(f"{_FILES[key].rsplit('/', 1)[-1]}:{line}" if line else "")
        rec.acl_default = next((w for w in read_by if w), "none" if "sysctrl" in present else "")
        if "lazy" in present:
            lazy, _ = ctx.fetch(present["lazy"], self.name)
            prec = ctx.parsed(lazy, kp.parse_precision)
            if prec is not None:
                rec.precision_condition, rec.precision_true = prec.condition, prec.when_true
                rec.precision_false, rec.precision_line = prec.when_false, prec.line
        if "enum" in present:
            enum_text, _ = ctx.fetch(present["enum"], self.name)
            enum = ctx.parsed(enum_text, kp.parse_soc_enum)
            rec.socs = ",".join(f"{k}={v}" for k, v in enum.items())
        if "vars" in present:
            vars_text, _ = ctx.fetch(present["vars"], self.name)
            only = ctx.parsed(vars_text, kp.parse_aclnn_only)
            if only is not None:
                rec.aclnn_only, rec.aclnn_only_line = only.condition, only.line
        for name in _CODEGEN if pin else ():
            path = f"{OP_PLUGIN}/{pin}/{name}"
            if ctx.source.exists(path):
                got, csid = ctx.fetch(path, self.name)
                cg = ctx.parsed(got, kp.parse_codegen)
                rec.codegen_path, rec.codegen_line, rec.codegen_source_id = name, cg.line, csid
                rec.codegen_base_format, rec.codegen_force_aclnn = cg.base_format, cg.force_aclnn
                rec.codegen_aclnn_only_raises = cg.aclnn_only_raises
                rec.codegen_internal_format_opapi = cg.internal_format_opapi
                break
        return rec

    def _soc_checks(self, ctx: SyncContext,
                    by_pin: dict[str, list[ReleaseRec]]) -> list[KernelSocCheckRec]:
        grouped: dict[tuple[str, str, str, str], list[str]] = defaultdict(list)
        at: dict[tuple[str, str, str, str], tuple[str, int, int, Version]] = {}
        for pin in sorted(by_pin):
            base = f"{OP_PLUGIN}/{pin}/op_plugin"
            names = [n for n in ctx.ls(f"{base}/ops/opapi") if n.endswith(".cpp")]
            yaml_path = f"{base}/config/op_plugin_functions.yaml"
            if not names or not ctx.source.exists(yaml_path):
                continue
            try:
                kernels: list[KernelRow] = list(ctx.parsed(yaml_path, opplugin.parse_functions))
                checks = []
                for n in sorted(names):
                    got = ctx.text(f"{base}/ops/opapi/{n}")
                    if "GetSocVersion" in got.text or "foreach_tensor_" in got.text:
                        checks += [(n, c) for c in ctx.parsed(got, kp.parse_soc_checks)]
                        checks += [(n, c) for c in ctx.parsed(got, kp.parse_call_checks)]
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            if not checks:
                continue
            sid = ctx.data.add_source(self.name, f"{base}/ops/opapi",
                                      url=f"https://github.com/Ascend/op-plugin/blob/{pin}/op_plugin/ops/opapi",
                                      ref=pin, commit=pin)
            named: dict[str, list[KernelRow]] = defaultdict(list)
            for k in kernels:
                if k.op_api and k.schema and k.status == "kernel":
                    named[cpp_kernel_name(k.schema, k.section)].append(k)
            for rel in by_pin[pin]:
                minor = torch_minor(rel.torch)
                rkey = release_key(rel.torch_npu)
                for fname, c in checks:
                    ops = {k.op for k in named.get(c.function, [])
                           if k.torch in (minor, None)
                           and _same(c.params, schema_arg_classes(k.schema))}
                    for op in ops:
                        key = (op, c.function, c.when, c.fallback)
                        if rel.torch_npu in grouped[key]:
                            continue
                        grouped[key].append(rel.torch_npu)
                        if key not in at or rkey > at[key][3]:
                            at[key] = (fname, c.line, sid, rkey)
        return sorted(
            (KernelSocCheckRec(op=key[0], kernel=key[1], when=key[2], fallback=key[3],
                               releases=",".join(sorted(rels, key=release_key)),
                               path=at[key][0], line=at[key][1], source_id=at[key][2])
             for key, rels in grouped.items()),
            key=lambda r: (r.op, r.kernel, r.when, r.fallback))
