"""What a run's script set that costs time on an NPU (``OpList.settings``, recorded by
``opcheck.tracers.settings``), as speed findings at the script's lines, each with the rule it
follows: the vendor profiling advisor's (msprof-analyze, Ascend/mstt ``advisor/rules/``:
``dataloader.yaml``, ``sync_batchnorm.yaml``, ``environment_variable_info.yaml``, its
synchronize and anomaly checks) and torch_npu's.

Also the cause of host syncs no user line made (the sync ran inside torch: anomaly mode's NaN
checks, GradScaler's inf check, SyncBatchNorm's statistics), named from the settings the run
recorded, labelled inferred.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from opcheck.checker.speed import SpeedFinding

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
}


def _finding(what: str, where: str, count: int, steps: int, why: str, instead: str,
             rule: str, *, inferred: bool = False) -> SpeedFinding:
    per = round(count / steps, 2) if steps > 1 else float(count)
    return SpeedFinding(KIND, what, count, per, [where] if where else [], [], why=why,
                        instead=instead, source=f"profiling advisor rule {rule}",
                        link=RULES + rule if rule.endswith(".yaml") else "", inferred=inferred)


def setting_findings(settings: Sequence[Mapping[str, Any]], steps: int) -> list[SpeedFinding]:
    """One finding per setting that costs time (see the module doc)."""
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
                "then `x.to(device, non_blocking=True)`", "dataloader.yaml"))
        elif kind == "to":
            n = int(s.get("count", 1))
            out.append(_finding(
                "Tensor.to(device) without non_blocking", where, n, steps,
                "each host-to-device copy blocks the host until it is done",
                "`x.to(device, non_blocking=True)` with a pinned-memory DataLoader "
                "(`pin_memory=True`)", "synchronize (blocking copies)"))
        elif kind == "anomaly":
            out.append(_finding(
                _anomaly_call(str(s.get("api", "torch.autograd.set_detect_anomaly"))), where,
                1, 1,
                "anomaly mode checks every backward output for NaN on the host (a host sync "
                "per autograd function) and records a traceback per forward op",
                "turn it off outside debugging (`torch.autograd.set_detect_anomaly(False)`)",
                "synchronize (anomaly detection)"))
        elif kind == "sync_batchnorm":
            n = int(s.get("count", 1))
            out.append(_finding(
                f"nn.SyncBatchNorm ({n} layer{'s' if n > 1 else ''})", where, 1, 1,
                "SyncBatchNorm layers dispatch slowly from Python and communicate between "
                "devices in every forward",
                "plain BatchNorm where the per-device batch is large enough (drop "
                "`convert_sync_batchnorm`), or torch_npu's efficient SyncBatchNorm",
                "sync_batchnorm.yaml"))
        elif kind == "env" and str(s.get("name")) in _ENV:
            bad, why, instead = _ENV[str(s["name"])]
            if bad(str(s.get("value", ""))):
                out.append(_finding(f"{s['name']}={s.get('value')}", where, 1, 1, why,
                                    instead, "environment_variable_info.yaml"))
    return out


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
