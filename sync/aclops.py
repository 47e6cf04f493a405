"""The CANN op types of acl_op kernels: :class:`AclOpSources` reads op-plugin's acl_op kernel
sources (``op_plugin/ops/aclops/*.cpp`` and their helpers in
``op_plugin/utils/custom_functions/aclops/*.cpp``) at every pinned commit a release names, with
:mod:`opcheck.scrapers.aclops`, and links each ATen overload of a release to the op types its
acl_op kernel runs (``op_acl_type``).

A fact that several releases state identically is one record listing those releases, citing
the file and line at the newest one's pin (as ``op_aclnn`` does).
"""

from __future__ import annotations

from collections import defaultdict

from packaging.version import Version

from opcheck.core.errors import OpcheckError
from opcheck.core.versions import release_key, torch_minor
from opcheck.db.data import OpAclTypeRec, ReleaseRec
from opcheck.scrapers import aclops, opplugin
from opcheck.scrapers.aclops import AclFunction
from opcheck.sync.context import SyncContext
from opcheck.sync.sources import Fetched

OP_PLUGIN = "github/Ascend/op-plugin"
_FOLDERS = ("ops/aclops", "utils/custom_functions/aclops")


class AclOpSources:
    name = "aclop_sources"
    reads = (f"{OP_PLUGIN}/<pinned commit>/op_plugin/ops/aclops/*.cpp, "
             "utils/custom_functions/aclops/*.cpp and config/op_plugin_functions.yaml")
    parser = "opcheck.scrapers.aclops"
    adds = "op_acl_type (the CANN op types each ATen overload's acl_op kernel runs, per release)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("op-plugin acl_op kernel sources")
        mirrored = {ref for ref in ctx.ls(OP_PLUGIN)
                    if ctx.ls(f"{OP_PLUGIN}/{ref}/op_plugin/ops/aclops")}
        by_pin: dict[str, list[ReleaseRec]] = defaultdict(list)
        for rel in ctx.data.releases:
            pin = rel.op_plugin_commit
            full = next((m for m in mirrored if pin and m.startswith(pin)), None)
            if full is not None:
                by_pin[full].append(rel)
        order = {r.torch_npu: release_key(r.torch_npu) for r in ctx.data.releases}
        fetched = ctx.prefetch_paths(
            (p for pin in sorted(by_pin) for p in self._paths(ctx, pin)), aclops.parse_aclop_source)
        memo: dict[str, tuple[AclFunction, ...]] = {}
        Key = tuple[str, str, str, str, str, str]
        grouped: dict[Key, list[str]] = defaultdict(list)
        at: dict[Key, tuple[str, int, int, Version]] = {}
        for pin in sorted(by_pin):
            try:
                link, sid = self._link(ctx, pin, memo, fetched)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            for rel in by_pin[pin]:
                minor = torch_minor(rel.torch)
                rkey = order[rel.torch_npu]
                for r in link.rows:
                    if minor not in r.torch:
                        continue
                    key = (r.op, r.op_type, r.engine, r.condition, r.via, r.match)
                    if rel.torch_npu in grouped[key]:
                        continue
                    grouped[key].append(rel.torch_npu)
                    if key not in at or rkey > at[key][3]:
                        where = r.path.split("/op_plugin/", 1)[-1]
                        at[key] = (where, r.line, sid, rkey)
        ctx.data.op_acl_types = sorted(
            (OpAclTypeRec(op=key[0], op_type=key[1], engine=key[2], condition=key[3],
                          via=key[4], match=key[5],
                          releases=",".join(sorted(rels, key=order.__getitem__)),
                          path=at[key][0], line=at[key][1], source_id=at[key][2])
             for key, rels in grouped.items()),
            key=lambda r: (r.op, r.op_type, r.via, r.condition, r.engine))

    @staticmethod
    def _paths(ctx: SyncContext, pin: str) -> list[str]:
        base = f"{OP_PLUGIN}/{pin}/op_plugin"
        return [f"{base}/{folder}/{name}" for folder in _FOLDERS
                for name in sorted(ctx.ls(f"{base}/{folder}")) if name.endswith(".cpp")]

    def _link(self, ctx: SyncContext, pin: str, memo: dict[str, tuple[AclFunction, ...]],
              fetched: dict[str, Fetched]) -> tuple[aclops.PinLink, int]:
        base = f"{OP_PLUGIN}/{pin}/op_plugin"
        config = f"{base}/config/op_plugin_functions.yaml"
        yaml = ctx.source.fetch(config)
        cpps = [fetched.get(path) or ctx.source.fetch(path) for path in self._paths(ctx, pin)]

        def link_files() -> aclops.PinLink:
            kernels = ctx.parsed(yaml, opplugin.parse_functions)
            for got in cpps:
                if got.text not in memo:
                    memo[got.text] = ctx.parsed(got, aclops.parse_aclop_source)
            return aclops.link_pin([(g.origin, g.text) for g in cpps], kernels, parsed=memo)

        # a pin's link depends on its files only: a later sync reads it back whole
        link = ctx.combined([yaml, *cpps], aclops.link_pin, link_files)
        sid = ctx.data.add_source(self.name, f"{base}",
                                  url=f"https://github.com/Ascend/op-plugin/blob/{pin}/op_plugin/",
                                  ref=pin, commit=pin, rows=len(link.rows))
        return link, sid
