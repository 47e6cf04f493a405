"""What a run's script set that costs time on an NPU (``OpList.settings``, recorded by
``opcheck.tracers.settings``), as speed findings at the script's lines, each with the rule it
follows: the vendor profiling advisor's (msprof-analyze, Ascend/mstt ``advisor/rules/``:
``dataloader.yaml``, ``sync_batchnorm.yaml``, ``environment_variable_info.yaml``, its
synchronize and anomaly checks), the migration tool's (msTransplant,
``precision_performance_advice.json``: DistributedDataParallel's ``bucket_cap_mb`` and
``no_sync()``, ``non_blocking`` copies, anomaly detection) and torch_npu's.

Also the cause of host syncs no user line made (the sync ran inside torch: anomaly mode's NaN
checks, GradScaler's inf check, SyncBatchNorm's statistics), named from the settings the run
recorded, labelled inferred.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from opcheck.checker.speed import SpeedFinding
from opcheck.db.advisor import AdvisorRule
from opcheck.scrapers.transplant_advice import KIND_PREFIX as TRANSPLANT_KIND
from opcheck.scrapers.transplant_advice import PARAM_API

DDP = "torch.nn.parallel.DistributedDataParallel"
# torch's default bucket size (MB) when bucket_cap_mb is not given
DDP_BUCKET_MB = 25

RULES = "https://github.com/Ascend/mstt/blob/master/profiler/msprof_analyze/advisor/rules/"
KIND = "setting"
# the environment variables the advisor checks: (bad when, why, instead)
_ENV: Mapping[str, tuple[Any, str, str]] = {
    "ASCEND_LAUNCH_BLOCKING": (
        lambda v: v.strip() == "1",
        "every operator runs synchronously: the host waits for each kernel",
        "unset it (or `ASCEND_LAUNCH_BLOCKING=0`) outside debugging"),
    "ASCEND_GLOBAL_LOG_LEVEL": (
        lambda v: v.strip() in ("0", "1"),
        "debug or info logging on the host slows every operator launch",
        "`ASCEND_GLOBAL_LOG_LEVEL=3` (error level)"),
    "TASK_QUEUE_ENABLE": (
        lambda v: v.strip() == "0",
        "the task queue is off: operators are launched from the Python thread one by one",
        "`TASK_QUEUE_ENABLE=1` (or 2 where the release supports it)"),
    "HCCL_ALGO": (
        lambda v: bool(v.strip()),
        "a fixed cross-server communication algorithm instead of the one chosen per chip, "
        "node count and size", "unset HCCL_ALGO"),
    "PYTORCH_NPU_ALLOC_CONF": (
        lambda v: "expandable_segments:true" not in v.replace(" ", "").lower(),
        "the caching allocator runs without expandable segments: memory fragments when "
        "tensor sizes change from step to step",
        "`PYTORCH_NPU_ALLOC_CONF=expandable_segments:True`"),
    "HOST_CACHE_CAPACITY": (
        lambda v: v.strip() == "0",
        "the dynamic-shape cache is off: each recurring input shape is prepared on the host "
        "again", "`HOST_CACHE_CAPACITY=20` (a non-zero count of cached shapes)"),
}
# the rule a setting follows: (advisor file stem + key, a word its text contains); the
# advisor's own suggestion for ASCEND_LAUNCH_BLOCKING at the pinned commit says "=1" (the
# synchronize rule says to unset it), so that variable cites the synchronize rule
_CITES: Mapping[str, tuple[str, str]] = {
    "pin_memory": ("dataloader.solution", "pin_memory"),
    "num_workers": ("dataloader.solution", "num_workers"),
    "sync_batchnorm": ("sync_batchnorm.problem", "SyncBatchNorm"),
    "ASCEND_LAUNCH_BLOCKING": ("synchronize.solution", "ASCEND_LAUNCH_BLOCKING"),
}


def cite(rules: Iterable[AdvisorRule], key: str) -> AdvisorRule | None:
    """The advisor rule row behind a setting's finding (``key``: a setting or a variable)."""
    api, word = _CITES.get(key, (key, ""))
    for r in rules:
        if r.kind in ("advice", "env") and r.api == api and word in r.pattern:
            return r
    return None


def transplant(rules: Iterable[AdvisorRule], api: str) -> AdvisorRule | None:
    """The migration tool's advice row keyed by ``api`` (``TRANSPLANT_KIND`` rows)."""
    return next((r for r in rules if r.kind.startswith(TRANSPLANT_KIND) and r.api == api),
                None)


def _finding(what: str, where: str, count: int, steps: int, why: str, instead: str,
             rule: str | AdvisorRule | None, *, inferred: bool = False) -> SpeedFinding:
    per = round(count / steps, 2) if steps > 1 else float(count)
    if isinstance(rule, AdvisorRule) and rule.kind.startswith(TRANSPLANT_KIND):
        source, link = f"migration tool (msTransplant) advice {rule.path}:{rule.line}", rule.url
    elif isinstance(rule, AdvisorRule):  # the catalog's row: its file and line
        source, link = f"profiling advisor rule {rule.path}:{rule.line}", rule.url
    elif rule and rule.endswith(".yaml"):  # a catalog without the advisor's rule files
        source, link = f"profiling advisor rule {rule}", RULES + rule
    else:
        source, link = f"opcheck's rule ({rule}: the advisor has no rule file for it)", ""
    return SpeedFinding(KIND, what, count, per, [where] if where else [], [], why=why,
                        instead=instead, source=source, link=link, inferred=inferred)


def setting_findings(settings: Sequence[Mapping[str, Any]], steps: int,
                     rules: Sequence[AdvisorRule] = ()) -> list[SpeedFinding]:
    """One finding per setting that costs time (see the module doc); ``rules``: the catalog's
    advisor rules, cited where one covers the setting."""
    out: list[SpeedFinding] = []
    for s in settings:
        kind, where = s.get("kind"), str(s.get("where", ""))
        if kind == "dataloader" and (not s.get("pin_memory") or not s.get("num_workers")):
            out.append(_finding(
                f"DataLoader(pin_memory={s.get('pin_memory')}, num_workers="
                f"{s.get('num_workers')})", where, 1, 1,
                "batches are loaded in the training process"
                + (" and copied from pageable memory" if not s.get("pin_memory") else "")
                + ": the device waits for the host between steps",
                "`DataLoader(..., pin_memory=True, num_workers=N)` (N: a few per device), "
                "then `x.to(device, non_blocking=True)`",
                cite(rules, "pin_memory" if not s.get("pin_memory") else "num_workers")
                or "dataloader.yaml"))
        elif kind == "to":
            n = int(s.get("count", 1))
            out.append(_finding(
                "Tensor.to(device) without non_blocking", where, n, steps,
                "each host-to-device copy blocks the host until it is done",
                "`x.to(device, non_blocking=True)` with a pinned-memory DataLoader "
                "(`pin_memory=True`)", transplant(rules, "to(non_blocking=True)")
                or "blocking copies"))
        elif kind == "anomaly":
            out.append(_finding(
                _anomaly_call(str(s.get("api", "torch.autograd.set_detect_anomaly"))), where,
                1, 1,
                "anomaly mode checks every backward output for NaN on the host (a host sync "
                "per autograd function) and records a traceback per forward op",
                "turn it off outside debugging (`torch.autograd.set_detect_anomaly(False)`)",
                transplant(rules, str(s.get("api", ""))) or "anomaly detection"))
        elif kind == "ddp":
            out += ddp_findings(s, settings, rules)
        elif kind == "sync_batchnorm":
            n = int(s.get("count", 1))
            out.append(_finding(
                f"nn.SyncBatchNorm ({n} layer{'s' if n > 1 else ''})", where, 1, 1,
                "SyncBatchNorm layers dispatch slowly from Python and communicate between "
                "devices in every forward",
                "plain BatchNorm where the per-device batch is large enough (drop "
                "`convert_sync_batchnorm`), or torch_npu's efficient SyncBatchNorm",
                cite(rules, "sync_batchnorm") or "sync_batchnorm.yaml"))
        elif kind == "env" and str(s.get("name")) in _ENV:
            bad, why, instead = _ENV[str(s["name"])]
            if bad(str(s.get("value", ""))):
                rule = cite(rules, str(s["name"]))
                out.append(_finding(f"{s['name']}={s.get('value')}", where, 1, 1, why,
                                    instead, rule or "environment_variable_info.yaml"))
    return out


def _bucket_rule(rules: Sequence[AdvisorRule]) -> tuple[AdvisorRule | None, float | None]:
    """The advice's bucket size for DDP (its row and value), if the catalog has it."""
    for r in rules:
        m = PARAM_API.match(r.api) if r.kind.startswith(TRANSPLANT_KIND) else None
        if m and m["api"] == DDP and m["name"] == "bucket_cap_mb" and m["op"] == "=":
            try:
                return r, float(m["value"])
            except ValueError:
                return None, None
    return None, None


def ddp_findings(ddp: Mapping[str, Any], settings: Sequence[Mapping[str, Any]],
                 rules: Sequence[AdvisorRule]) -> list[SpeedFinding]:
    """DistributedDataParallel's settings that cost time, at the line that made it: a bucket
    smaller than the migration tool's advice, gradients all-reduced on every micro-batch of
    an accumulation (a backward pass right after another with no optimizer step between, and no
``no_sync()``), and
    ``find_unused_parameters=True`` (torch's DDP docs: a traversal of the graph every
    iteration)."""
    where, out = str(ddp.get("where", "")), []
    built = "" if ddp.get("built") else " (recorded from its arguments: not made in the trace)"
    rule, advised = _bucket_rule(rules)
    cap = ddp.get("bucket_cap_mb")
    size = float(cap) if isinstance(cap, (int, float)) else float(DDP_BUCKET_MB)
    if rule is not None and advised is not None and size < advised:
        out.append(_finding(
            f"DistributedDataParallel(bucket_cap_mb={cap}){built}", where, 1, 1,
            f"gradients are all-reduced in {size:g} MB buckets: many small collectives "
            "between devices per step", f"`bucket_cap_mb={advised:g}` ({rule.pattern})", rule))
    steps = next((s for s in settings if s.get("kind") == "steps"), {})
    accumulated = int(steps.get("accumulated", 0))
    # a no_sync() block with no forward inside it changes nothing: DDP arms the all-reduce
    # in forward (torch's no_sync docs)
    idle = bool(ddp.get("no_sync")) and ddp.get("no_sync_forward") == 0
    if accumulated and (not ddp.get("no_sync") or idle):
        use = transplant(rules, f"{DDP}.no_sync()")
        what = ("no_sync() around the backward pass only" if idle else "without no_sync()")
        out.append(_finding(
            f"DistributedDataParallel {what} under gradient accumulation{built}",
            where, 1, 1,
            f"{accumulated} backward pass{'es' if accumulated > 1 else ''} right after another "
            "with no optimizer step between" + (": no forward ran inside no_sync(), and DDP "
                                                "decides to all-reduce in forward" if idle
                                                else "") +
            ": the gradients are all-reduced after every micro-batch, not once per step",
            "`with model.no_sync():` around the forward and backward passes before the last "
            "of each accumulation", use or "DDP no_sync"))
    if ddp.get("find_unused_parameters") is True:
        out.append(_finding(
            f"DistributedDataParallel(find_unused_parameters=True){built}", where, 1, 1,
            "the autograd graph is traversed from the outputs every iteration to find the "
            "parameters without gradients", "`find_unused_parameters=False` when every "
            "parameter gets a gradient (torch's DistributedDataParallel docs)",
            "DDP find_unused_parameters"))
    return out


def env_findings(environ: Mapping[str, str],
                 rules: Sequence[AdvisorRule] = ()) -> list[SpeedFinding]:
    """The findings of the environment variables the advisor checks, read from ``environ``
    (``opcheck env``: the shell's environment the training would start with)."""
    settings = [{"kind": "env", "where": "environment", "name": k, "value": v}
                for k, v in sorted(environ.items()) if k in _ENV]
    return setting_findings(settings, 1, rules)


def _anomaly_call(api: str) -> str:
    return f"{api}(True)" if api.endswith("set_detect_anomaly") else f"{api}()"


def sync_cause(settings: Sequence[Mapping[str, Any]]) -> str:
    """What made host syncs that have no user line, from what the run set (inferred)."""
    kinds = {s.get("kind"): s for s in settings}
    for kind, cause in (
            ("anomaly", "anomaly mode's NaN checks of every backward output"),
            ("grad_scaler", "GradScaler's inf/NaN check of the gradients (found_inf)"),
            ("sync_batchnorm", "SyncBatchNorm's cross-device statistics")):
        if kind in kinds:
            where = kinds[kind].get("where")
            return f"{cause} (set at {where})" if where else cause
    return ""


def name_sync_causes(findings: Sequence[SpeedFinding],
                     settings: Sequence[Mapping[str, Any]]) -> None:
    """Give host syncs without a user line the cause the settings name (inferred)."""
    cause = sync_cause(settings)
    if not cause:
        return
    for f in findings:
        if f.kind == "host_sync" and not f.locations:
            f.why = f"{f.why}; made inside torch by {cause}"
            f.inferred = True
            if "anomaly" in cause:
                f.instead = ("turn anomaly detection off outside debugging "
                             "(`torch.autograd.set_detect_anomaly(False)`)")
