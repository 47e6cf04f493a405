"""Check that a workaround's executable rewrite is right and really avoids the problem.

(a) ``check_equivalence``: original (or the entry's ``reference``) and ``replacement`` agree on
    every generated input, on the CPU, within the entry's tolerance.
(b) ``check_npu_ops``: every op the replacement dispatches has status ``npu`` on each release
    the entry applies to. The op tracer and the per-release status are injected, so the CLI can
    plug in the fake-NPU tracer and the catalog resolver; ``default_trace_ops`` records ops on
    CPU tensors, which is enough for tests and for rewrites built from plain tensor ops.

Besides the entry's own cases, (a) runs edge cases derived from each of them
(:func:`edge_cases`: large magnitudes, all negative, inf/-inf/nan, empty, non-contiguous): a
rewrite that is only right on ``randn`` inputs fails. A derived case the original itself
refuses (raises on) is skipped, not counted against the rewrite.

Entry code is contributed code: ``opcheck workaround verify`` runs it with
:func:`verify_isolated`, in a child process (``python -m opcheck.contrib.verify``) with a
timeout and an address-space limit, so an infinite loop in ``inputs()`` or a replacement that
allocates without bound fails that entry instead of hanging CI. Verifying several entries, the
children are forked from one process that imported torch once (``sandbox.shared_imports``),
each still under its own limits. The child runs (a) and traces
the replacement's ops; the parent asks the catalog (b).

torch is imported inside functions only: importing this module must stay cheap.
"""

from __future__ import annotations

import importlib
import json
import signal
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Sequence
from contextlib import nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from opcheck.contrib.verify_edges import Case, edge_cases
from opcheck.contrib.workarounds import Rewrite, Workaround
from opcheck.core.errors import CatalogError
from opcheck.core.opname import canonical
from opcheck.tracers import sandbox
from opcheck.tracers.sandbox import MIN_MEMORY_MB, looks_oom

TraceOps = Callable[[Callable[..., Any], Sequence[tuple[tuple[Any, ...], dict[str, Any]]]], set[str]]
OpStatus = Callable[[str, str], str]

# Ops every rewrite may use without a kernel check: they only make or reshape tensor metadata.
_ALWAYS_OK = frozenset({"aten::detach", "aten::alias", "aten::lift_fresh"})


@dataclass
class RewriteCode:
    replacement: Callable[..., Any]
    inputs: Callable[[], Iterable[Any]]
    original: Callable[..., Any]


@dataclass
class VerifyResult:
    entry: str
    cases: int = 0
    ops: set[str] = field(default_factory=set)
    problems: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    seconds: float = 0.0
    edge_cases: int = 0  # derived cases run (those the original accepts)

    @property
    def ok(self) -> bool:
        return not self.problems


def _resolve(dotted: str) -> Callable[..., Any]:
    parts = dotted.split(".")
    for i in range(len(parts), 0, -1):
        try:
            obj: Any = importlib.import_module(".".join(parts[:i]))
        except ImportError:
            continue
        for attr in parts[i:]:
            obj = getattr(obj, attr)
        if not callable(obj):
            raise CatalogError(f"{dotted} is not callable")
        return obj  # type: ignore[no-any-return]
    raise ImportError(dotted)


def load_rewrite(rewrite: Rewrite, entry_id: str = "") -> RewriteCode:
    """Execute the entry's code (trusted: it is reviewed repository data) and pick its functions."""
    ns: dict[str, Any] = {"__name__": f"opcheck_rewrite_{entry_id.replace('-', '_')}"}
    try:
        exec(compile(rewrite.code, f"<workaround {entry_id}>", "exec"), ns)
    except Exception as e:
        raise CatalogError(f"{entry_id}: rewrite code fails to load: {type(e).__name__}: {e}") from None
    if "reference" in ns:
        original = ns["reference"]
    else:
        try:
            original = _resolve(rewrite.api)
        except (ImportError, AttributeError):
            raise CatalogError(
                f"{entry_id}: cannot import {rewrite.api}; define reference() in the code"
            ) from None
    return RewriteCode(ns["replacement"], ns["inputs"], original)


def _cases(code: RewriteCode, entry_id: str) -> list[tuple[tuple[Any, ...], dict[str, Any]]]:
    import torch

    torch.manual_seed(0)
    out = []
    try:
        cases = list(code.inputs())
    except Exception as e:
        raise CatalogError(f"{entry_id}: inputs() raises {type(e).__name__}: {e}") from None
    for case in cases:
        if not (isinstance(case, tuple) and len(case) == 2 and isinstance(case[1], dict)):
            raise CatalogError(f"{entry_id}: inputs() must yield (args, kwargs) pairs")
        out.append((tuple(case[0]), dict(case[1])))
    if not out:
        raise CatalogError(f"{entry_id}: inputs() yields no cases")
    return out


def _clone(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.clone()
    if isinstance(value, (list, tuple)):
        return type(value)(_clone(v) for v in value)
    if isinstance(value, dict):
        return {k: _clone(v) for k, v in value.items()}
    return value


def _compare(expected: Any, actual: Any, rw: Rewrite, where: str) -> str | None:
    import torch

    if isinstance(expected, torch.Tensor) or isinstance(actual, torch.Tensor):
        if not (isinstance(expected, torch.Tensor) and isinstance(actual, torch.Tensor)):
            return f"{where}: expected {type(expected).__name__}, got {type(actual).__name__}"
        if expected.shape != actual.shape:
            return f"{where}: shape {tuple(actual.shape)} != {tuple(expected.shape)}"
        if rw.check_dtype and expected.dtype != actual.dtype:
            return f"{where}: dtype {actual.dtype} != {expected.dtype}"
        if expected.is_complex() or actual.is_complex():
            expected, actual = torch.view_as_real(expected.to(torch.complex128)), torch.view_as_real(
                actual.to(torch.complex128)
            )
        if not (expected.is_floating_point() or actual.is_floating_point()):
            if not torch.equal(expected.to(torch.int64), actual.to(torch.int64)):
                return f"{where}: values differ"
            return None
        e, a = expected.double(), actual.double()
        if not torch.allclose(a, e, rtol=rw.rtol, atol=rw.atol, equal_nan=True):
            diff = (a - e).abs().nan_to_num(0.0).max().item()
            return f"{where}: values differ (max abs diff {diff:.3g}, rtol={rw.rtol}, atol={rw.atol})"
        return None
    if isinstance(expected, (list, tuple)):
        if not isinstance(actual, (list, tuple)) or len(actual) != len(expected):
            return f"{where}: expected a sequence of {len(expected)}"
        for i, (x, y) in enumerate(zip(expected, actual, strict=True)):
            msg = _compare(x, y, rw, f"{where}[{i}]")
            if msg:
                return msg
        return None
    if isinstance(expected, float) and isinstance(actual, (int, float)):
        ok = abs(expected - actual) <= rw.atol + rw.rtol * abs(expected)
        return None if ok else f"{where}: {actual} != {expected}"
    return None if expected == actual else f"{where}: {actual!r} != {expected!r}"


def _run_case(code: RewriteCode, rw: Rewrite, label: str, case: Case, *,
              derived: bool) -> tuple[bool, str | None]:
    """(ran, problem): ``ran`` is False when a derived case is one the original refuses."""
    args, kwargs = case
    try:
        expected = code.original(*_clone(args), **_clone(kwargs))
    except Exception as e:
        if derived:
            return False, None
        return True, f"{label}: original raises {type(e).__name__}: {e}"
    try:
        actual = code.replacement(*_clone(args), **_clone(kwargs))
    except Exception as e:
        return True, f"{label}: replacement raises {type(e).__name__}: {e}"
    try:
        return True, _compare(expected, actual, rw, label)
    except Exception as e:  # outputs torch cannot compare (odd types, devices)
        return True, f"{label}: outputs cannot be compared: {type(e).__name__}: {e}"


def _equivalence(entry: Workaround, code: RewriteCode) -> tuple[int, int, list[str]]:
    """(cases, derived cases run, problems)."""
    assert entry.rewrite is not None
    cases = _cases(code, entry.id)
    problems: list[str] = []
    for i, case in enumerate(cases):
        _ran, msg = _run_case(code, entry.rewrite, f"case {i}", case, derived=False)
        if msg:
            problems.append(msg)
    ran = 0
    for label, case in edge_cases(cases, entry.rewrite.edge_cases):
        did, msg = _run_case(code, entry.rewrite, label, case, derived=True)
        ran += did
        if msg:
            problems.append(msg)
    return len(cases), ran, problems


def check_equivalence(entry: Workaround, code: RewriteCode | None = None) -> tuple[int, list[str]]:
    """(number of cases, problems): original vs replacement on every generated input and on
    the edge cases derived from them."""
    if entry.rewrite is None:
        return 0, []
    code = code or load_rewrite(entry.rewrite, entry.id)
    n, _edge, problems = _equivalence(entry, code)
    return n, problems


def default_trace_ops(fn: Callable[..., Any], inputs: Sequence[tuple[tuple[Any, ...], dict[str, Any]]]) -> set[str]:
    """Canonical names of the ops ``fn`` dispatches on CPU tensors, over all input cases.

    Cases hold CPU tensors; a fake-NPU tracer plugged in instead must move them to its device
    (the replacements create their temporaries on ``x.device``, so they follow).
    """
    from torch.utils._python_dispatch import TorchDispatchMode

    seen: set[str] = set()

    class _Record(TorchDispatchMode):  # type: ignore[no-untyped-call]
        def __torch_dispatch__(self, func: Any, types: Any, args: Any = (), kwargs: Any = None) -> Any:
            seen.add(canonical(func.name()))
            return func(*args, **(kwargs or {}))

    for args, kwargs in inputs:
        a, k = _clone(args), _clone(kwargs)
        with _Record():  # type: ignore[no-untyped-call]
            fn(*a, **k)
    return seen


def fake_npu_trace_ops(
    fn: Callable[..., Any], inputs: Sequence[tuple[tuple[Any, ...], dict[str, Any]]]
) -> set[str]:
    """The ops ``fn`` sends to the (fake) NPU backend, over all input cases.

    Uses the runtime tracer's fake PrivateUse1 device, so device-specific decompositions are
    the NPU's. Where the fake trace cannot follow the code (data-dependent control flow, a
    temporary created on the host), the ops recorded up to that point are kept and the case is
    also recorded on the CPU: a superset errs on the side of flagging an op.
    """
    import torch

    from opcheck.core.errors import OpcheckError
    from opcheck.tracers import runtime
    from opcheck.tracers.inputs import InputSpec

    class _Call(torch.nn.Module):
        def forward(self, *args: Any, **kwargs: Any) -> Any:
            return fn(*args, **kwargs)

    seen: set[str] = set()
    for args, kwargs in inputs:
        a, k = _clone(args), _clone(kwargs)
        try:
            oplist = runtime.trace_module(_Call(), InputSpec(), example_args=a, example_kwargs=k,
                                          label="replacement")
            seen |= {u.op for u in oplist.ops}
            continue
        except runtime.PartialTrace as partial:
            seen |= {u.op for u in partial.partial.ops}
        except (OpcheckError, RuntimeError):
            pass
        seen |= default_trace_ops(fn, [(args, kwargs)])
    return seen


def npu_op_problems(
    entry: Workaround,
    ops: set[str],
    *,
    op_status: OpStatus,
    releases: Iterable[str],
    ok_statuses: frozenset[str] = frozenset({"npu"}),
) -> list[str]:
    """Each op the replacement uses must have an ``ok_statuses`` status on each release the
    entry applies to."""
    problems: list[str] = []
    applicable = [r for r in releases if entry.applies(r)]
    for op in sorted(ops - _ALWAYS_OK):
        bad = [(r, s) for r in applicable if (s := op_status(op, r)) not in ok_statuses]
        if bad:
            shown = ", ".join(f"{r}: {s}" for r, s in bad[:3]) + (" …" if len(bad) > 3 else "")
            problems.append(f"replacement uses {op}, not on the NPU ({shown})")
    return problems


def check_npu_ops(
    entry: Workaround,
    *,
    op_status: OpStatus,
    releases: Iterable[str],
    trace_ops: TraceOps = default_trace_ops,
    code: RewriteCode | None = None,
    ok_statuses: frozenset[str] = frozenset({"npu"}),
) -> tuple[set[str], list[str]]:
    """(ops the replacement uses, problems): each op must be ``npu`` on each applicable release."""
    if entry.rewrite is None:
        return set(), []
    code = code or load_rewrite(entry.rewrite, entry.id)
    ops = trace_ops(code.replacement, _cases(code, entry.id))
    return ops, npu_op_problems(entry, ops, op_status=op_status, releases=releases,
                                ok_statuses=ok_statuses)


def verify(
    entry: Workaround,
    *,
    op_status: OpStatus | None = None,
    releases: Iterable[str] = (),
    trace_ops: TraceOps = default_trace_ops,
    ok_statuses: frozenset[str] = frozenset({"npu"}),
) -> VerifyResult:
    """Both checks for one entry, in this process; (b) is skipped when no ``op_status`` is
    given. For contributed code use :func:`verify_isolated`."""
    start = time.perf_counter()
    result = VerifyResult(entry.id)
    if entry.rewrite is None:
        result.skipped.append("no rewrite code")
        return result
    try:
        code = load_rewrite(entry.rewrite, entry.id)
        result.cases, result.edge_cases, result.problems = _equivalence(entry, code)
        if op_status is None:
            result.skipped.append("npu op check: no op status source")
        else:
            result.ops, more = check_npu_ops(
                entry, op_status=op_status, releases=list(releases), trace_ops=trace_ops,
                code=code, ok_statuses=ok_statuses,
            )
            result.problems += more
    except CatalogError as e:
        result.problems.append(str(e))
    result.seconds = time.perf_counter() - start
    return result


def verify_all(
    entries: Iterable[Workaround],
    *,
    op_status: OpStatus | None = None,
    releases: Iterable[str] = (),
    trace_ops: TraceOps = default_trace_ops,
    ok_statuses: frozenset[str] = frozenset({"npu"}),
) -> list[VerifyResult]:
    rels = list(releases)
    return [verify(e, op_status=op_status, releases=rels, trace_ops=trace_ops,
                   ok_statuses=ok_statuses) for e in entries]


# ---------------------------------------------------------------------------- isolation

DEFAULT_TIMEOUT = 120.0
DEFAULT_MEMORY_MB = 4096


def _child_failure(code: int | None, tail: str, memory_mb: int) -> str:
    if looks_oom(code, tail):
        return f"ran out of memory (limit {memory_mb} MB; raise --memory-mb)"
    if code is not None and code < 0:
        return f"the entry's process died ({signal.Signals(-code).name})"
    lines = [ln.strip() for ln in tail.splitlines() if ln.strip()]
    return f"the entry's process exited with code {code}" + (f": {lines[-1][:300]}" if lines else "")


def verify_isolated(
    entry: Workaround,
    *,
    op_status: OpStatus | None = None,
    releases: Iterable[str] = (),
    fake_npu: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
    ok_statuses: frozenset[str] = frozenset({"npu"}),
) -> VerifyResult:
    """:func:`verify` with the entry's code run in a child process (timeout, memory limit, its
    own session so a timeout kills everything it started); the catalog check stays here.
    ``fake_npu`` traces the replacement with the fake NPU device (:func:`fake_npu_trace_ops`)
    instead of on the CPU."""
    from opcheck.core.errors import UsageError

    if memory_mb < MIN_MEMORY_MB:
        raise UsageError(f"memory limit {memory_mb} MB is too low to start torch "
                         f"(minimum {MIN_MEMORY_MB} MB)")
    start = time.perf_counter()
    result = VerifyResult(entry.id)
    if entry.rewrite is None:
        result.skipped.append("no rewrite code")
        return result
    with tempfile.TemporaryDirectory(prefix="opcheck-verify-") as tmp:
        req, out = Path(tmp) / "request.json", Path(tmp) / "result.json"
        req.write_text(json.dumps({"entry": entry.model_dump(mode="json"),
                                   "fake_npu": fake_npu}), encoding="utf-8")
        child = sandbox.run_module("opcheck.contrib.verify", [str(req), str(out)], cwd=tmp,
                                   timeout=timeout, memory_mb=memory_mb)
        if child.returncode is None:
            result.problems.append(
                f"{entry.id}: timed out after {timeout:g} s (a loop in inputs() or "
                "replacement() that does not end?)" if child.started else
                f"{entry.id}: its process did not finish importing torch within "
                f"{sandbox.STARTUP_LIMIT:g} s (is the machine overloaded?)")
            result.seconds = time.perf_counter() - start
            return result
        tail = child.stderr[-4000:]
        try:
            doc = json.loads(out.read_text(encoding="utf-8"))
        except (OSError, json.JSONDecodeError):
            doc = None
    if not isinstance(doc, dict):
        result.problems.append(f"{entry.id}: {_child_failure(child.returncode, tail, memory_mb)}")
    elif doc.get("oom"):
        result.problems.append(f"{entry.id}: ran out of memory (limit {memory_mb} MB; "
                               "raise --memory-mb)")
    else:
        result.cases = int(doc["cases"])
        result.edge_cases = int(doc["edge_cases"])
        result.problems = [str(p) for p in doc["problems"]]
        result.ops = {str(o) for o in doc["ops"]}
        if doc.get("traced"):
            if op_status is None:
                result.skipped.append("npu op check: no op status source")
            else:
                result.problems += npu_op_problems(entry, result.ops, op_status=op_status,
                                                   releases=releases, ok_statuses=ok_statuses)
    result.seconds = time.perf_counter() - start
    return result


def verify_all_isolated(
    entries: Iterable[Workaround],
    *,
    op_status: OpStatus | None = None,
    releases: Iterable[str] = (),
    fake_npu: bool = False,
    timeout: float = DEFAULT_TIMEOUT,
    memory_mb: int = DEFAULT_MEMORY_MB,
    ok_statuses: frozenset[str] = frozenset({"npu"}),
) -> list[VerifyResult]:
    rels = list(releases)
    todo = list(entries)
    shared = (sum(1 for e in todo if e.rewrite is not None) > 1 and not sandbox.sharing()
              and memory_mb >= MIN_MEMORY_MB)
    # Several entries: each still runs in its own limited child, forked from one process that
    # imported torch once (~1-2 s per entry saved)
    with sandbox.shared_imports(sandbox.PRELOAD) if shared else nullcontext():
        return [verify_isolated(e, op_status=op_status, releases=rels, fake_npu=fake_npu,
                                timeout=timeout, memory_mb=memory_mb, ok_statuses=ok_statuses)
                for e in todo]


def _child(request: Path, out: Path) -> int:
    """The child of :func:`verify_isolated`: (a) and the replacement's ops, as JSON. What the
    entry's code starts and leaves behind is killed before the answer is written."""
    from opcheck.tracers.procs import become_subreaper, kill_descendants

    become_subreaper()
    try:
        return _check_entry(request, out)
    finally:
        kill_descendants()


def _check_entry(request: Path, out: Path) -> int:
    doc = json.loads(request.read_text(encoding="utf-8"))
    entry = Workaround.model_validate(doc["entry"])
    assert entry.rewrite is not None
    res: dict[str, Any] = {"cases": 0, "edge_cases": 0, "problems": [], "ops": [],
                           "traced": False}
    try:
        code = load_rewrite(entry.rewrite, entry.id)
        res["cases"], res["edge_cases"], res["problems"] = _equivalence(entry, code)
        trace = fake_npu_trace_ops if doc.get("fake_npu") else default_trace_ops
        try:
            res["ops"] = sorted(trace(code.replacement, _cases(code, entry.id)))
            res["traced"] = True
        except Exception as e:  # a replacement that raises is already a problem of (a)
            if not res["problems"]:
                res["problems"].append(f"tracing the replacement fails: {type(e).__name__}: {e}")
    except CatalogError as e:
        res["problems"].append(str(e))
    except MemoryError:
        res = {"oom": True}
    out.write_text(json.dumps(res), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(_child(Path(sys.argv[1]), Path(sys.argv[2])))
