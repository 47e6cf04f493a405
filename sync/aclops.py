"""The CANN op types of acl_op kernels: :class:`AclOpSources` reads op-plugin's acl_op kernel
sources (``op_plugin/ops/aclops/*.cpp`` and their helpers in
``op_plugin/utils/custom_functions/aclops/*.cpp``) at every pinned commit a release names, with
:mod:`opcheck.scrapers.aclops`, and links each ATen overload of a release to the op types its
acl_op kernel runs (``op_acl_type``).

A fact that several releases state identically is one record listing those releases, citing
the file and line at the newest one's pin (as ``op_aclnn`` does).
"""

from __future__ import annotations

from functools import partial

from opcheck.core.errors import OpcheckError
from opcheck.db.data import OpAclTypeRec
from opcheck.scrapers import aclops, opplugin
from opcheck.scrapers.aclops import AclFunction
from opcheck.sync.context import SyncContext
from opcheck.sync.pins import OP_PLUGIN, ReleaseGroups, releases_by_pin
from opcheck.sync.sources import Fetched

_FOLDERS = ("ops/aclops", "utils/custom_functions/aclops")


class AclOpSources:
    name = "aclop_sources"
    reads = (f"{OP_PLUGIN}/<pinned commit>/op_plugin/ops/aclops/*.cpp, "
             "utils/custom_functions/aclops/*.cpp and config/op_plugin_functions.yaml")
    parser = "opcheck.scrapers.aclops"
    adds = "op_acl_type (the CANN op types each ATen overload's acl_op kernel runs, per release)"

    def collect(self, ctx: SyncContext) -> None:
        ctx.progress("op-plugin acl_op kernel sources")
        by_pin = releases_by_pin(ctx, "ops/aclops")
        fetched = ctx.prefetch_paths(
            (p for pin in sorted(by_pin) for p in self._paths(ctx, pin)), aclops.parse_aclop_source)
        memo: dict[str, tuple[AclFunction, ...]] = {}
        groups: ReleaseGroups[tuple[str, str, str, str, str, str]] = ReleaseGroups(
            ctx.data.releases)
        for pin in sorted(by_pin):
            try:
                link, sid = self._link(ctx, pin, memo, fetched)
            except OpcheckError as exc:
                ctx.failures.append(str(exc))
                continue
            groups.add_pin(
                by_pin[pin], link.rows,
                lambda r: (r.op, r.op_type, r.engine, r.condition, r.via, r.match),
                partial(_cite, sid))
        ctx.data.op_acl_types = sorted(
            (OpAclTypeRec(op=key[0], op_type=key[1], engine=key[2], condition=key[3],
                          via=key[4], match=key[5], releases=releases, path=path, line=line,
                          source_id=sid)
             for key, releases, path, line, sid in groups.items()),
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


def _cite(sid: int, r: aclops.AclTypeRow) -> tuple[str, int, int]:
    return r.path.split("/op_plugin/", 1)[-1], r.line, sid
