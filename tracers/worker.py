"""The sandboxed side of runtime tracing: ``python -m opcheck.tracers.worker REQUEST RESULT``.

Started by :mod:`opcheck.tracers.sandbox` with a memory limit and a timeout. Reads a JSON
request, loads/builds the model (the only place untrusted files may be unpickled, and only
when the request says ``trust``), traces it and writes a JSON result. Any failure becomes
``{"ok": false, "error": "..."}``, so the parent never has to parse a traceback.
"""

from __future__ import annotations

import faulthandler
import gc
import importlib
import json
import os
import select
import signal
import sys
import traceback
from contextlib import suppress
from pathlib import Path
from typing import Any, NoReturn

from opcheck.core.errors import OpcheckError
from opcheck.tracers.atlas_build import SPEC_PREFIX, ModelSkip
from opcheck.tracers.inputs import InputSpec
from opcheck.tracers.procs import become_subreaper, children, kill_descendants
from opcheck.tracers.sandbox import PRELOAD, READY_FD_ENV


def handle(request: dict[str, Any]) -> dict[str, Any]:
    if request.get("kind") == "script":  # `opcheck run SCRIPT`: see opcheck.tracers.script
        from opcheck.tracers import script

        return script.handle(request)
    from opcheck.tracers import runtime

    cwd = str(request.get("cwd") or "")
    if cwd:
        # `--model pkg.module:Class` resolves against the caller's directory, not the sandbox's
        sys.path.insert(0, cwd)
        os.environ["OPCHECK_TRACE_CWD"] = cwd
    label = str(request.get("label", ""))
    inputs = InputSpec.from_json(request.get("inputs") or {})
    train = bool(request.get("train", False))
    composites = [str(c) for c in request.get("composites") or []]
    stream = runtime.Stream(str(request["stream"])) if request.get("stream") else None
    try:
        spec = str(request.get("model_spec") or "")
        if spec.startswith(SPEC_PREFIX) and not request.get("fast"):
            # an atlas architecture: fake tensors, else the real-data recorder (atlas_trace)
            from opcheck.tracers.atlas_trace import trace_atlas

            ol = trace_atlas(spec, inputs, train=train, label=label, composites=composites,
                             stream=stream)  # fmt: skip
            return {"ok": True, "oplist": ol.to_json()}
        if request.get("model_spec"):
            model, ex_args, ex_kwargs = runtime.build_from_factory(str(request["model_spec"]))
        else:
            model, ex_args, ex_kwargs = runtime.load_model_file(
                str(request["target"]), str(request["kind"]), bool(request.get("trust", False))
            )
        # --fast: repeated blocks traced a few times, counts extrapolated (tracers.repeat)
        trace_fn = runtime.trace_module
        if request.get("fast"):
            from opcheck.tracers.repeat import trace_fast as trace_fn
        ol = trace_fn(
            model,
            inputs,
            example_args=ex_args,
            example_kwargs=ex_kwargs,
            train=train,
            label=label,
            method=str(request.get("method", "runtime")),
            composites=composites,
            stream=stream,
        )
        return {"ok": True, "oplist": ol.to_json()}
    except runtime.PartialTrace as exc:
        return {
            "ok": False,
            "error": str(exc),
            "data_dependent": str(exc).startswith("data-dependent"),
            "partial": exc.partial.to_json(),
        }
    except ModelSkip as exc:  # a reason about the model, not a tracer failure
        return {"ok": False, "error": str(exc), "skip": True}
    except OpcheckError as exc:
        return {"ok": False, "error": str(exc)}
    except MemoryError:
        return {"ok": False, "error": "out of memory", "oom": True}
    finally:
        if stream is not None:
            stream.close()


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: python -m opcheck.tracers.worker REQUEST.json RESULT.json", file=sys.stderr)
        return 2
    req_path, out_path = Path(argv[0]), Path(argv[1])
    # Whatever the traced code starts (workers, a daemon that leaves its session) is re-parented
    # here when orphaned, and killed before the result is written (tracers/procs.py).
    become_subreaper()
    # A fatal signal (an exception escaping on the autograd engine's device thread ends in
    # std::terminate) then leaves a Python traceback in the stderr tail the parent reports.
    faulthandler.enable()
    try:
        request = json.loads(req_path.read_text(encoding="utf-8"))
        result = handle(request)
    except MemoryError:
        result = {"ok": False, "error": "out of memory", "oom": True}
    except BaseException as exc:  # the parent gets one line, the traceback goes to stderr
        traceback.print_exc()
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        result = {"ok": False, "error": f"{type(exc).__name__}: {first}".rstrip(": ")}
    kill_descendants()
    tmp = out_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(result), encoding="utf-8")
    tmp.replace(out_path)
    return 0


def template(preload: list[str]) -> int:
    """``--template MODULE...``: import ``preload`` once, then fork one child per request line
    on stdin (JSON: id, request, result, stderr, cwd, memory_mb), answering ``{"id", "pid"}``
    when it starts and ``{"id", "exit"}`` (a return code, negative for a signal) when it ends.
    Each child leads its own session under its own limits (opcheck.tracers.sandbox)."""
    for name in preload:
        try:
            importlib.import_module(name)
        except Exception:  # a child that needs it fails with its own error
            traceback.print_exc()
    # Out of the collector's reach: a child's collections would otherwise touch (and so copy)
    # every page of the imported objects (~1/4 of a zoo model's trace time).
    gc.freeze()
    become_subreaper()  # a child's orphans come back here and are killed when it ends
    parent = os.getpid()
    children: dict[int, tuple[int, int]] = {}  # pidfd → (request id, pid)
    buf = b""

    def end() -> NoReturn:
        for _rid, pid in children.values():
            with suppress(OSError):
                os.killpg(pid, signal.SIGKILL)
            with suppress(OSError):
                os.waitpid(pid, 0)
        # no interpreter teardown of torch (~1 s the parent would wait for)
        os._exit(0)

    def reply(msg: dict[str, Any]) -> None:
        try:
            sys.stdout.write(json.dumps(msg) + "\n")
            sys.stdout.flush()
        except OSError:  # the parent is gone: so are its children
            end()

    while True:
        ready, _, _ = select.select([0, *children], [], [])
        for fd in ready:
            if fd != 0:
                rid, pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                _kill_strays({p for _r, p in children.values()})
                reply({"id": rid, "exit": os.waitstatus_to_exitcode(status)})
                continue
            data = os.read(0, 65536)
            if not data:  # the parent is done (or gone): no child outlives the template
                end()
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                job = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    for other in children:
                        os.close(other)
                    _child(job, parent)  # never returns
                children[os.pidfd_open(pid)] = (int(job["id"]), pid)
                reply({"id": job["id"], "pid": pid})


def _child(job: dict[str, Any], parent: int) -> None:
    code = 1
    try:
        os.setsid()  # the parent kills the whole session at the timeout
        _die_with_parent(parent)
        from opcheck.tracers.sandbox import set_limits

        set_limits(int(job["memory_mb"]))
        os.chdir(str(job["cwd"]))
        err = os.open(str(job["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        if "module" in job:  # `python -m MODULE ARGV` (sandbox.run_module)
            become_subreaper()
            code = _run_module(str(job["module"]), [str(a) for a in job["argv"]])
            kill_descendants()
        else:
            code = main([str(job["request"]), str(job["result"])])
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


def _kill_strays(running: set[int]) -> None:
    """Kill the template's children that are not running requests: orphans a crashed child
    left (re-parented here because the template is a subreaper)."""
    for pid in children(os.getpid()):
        if pid not in running:
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            with suppress(OSError):
                os.waitpid(pid, 0)


def _run_module(module: str, argv: list[str]) -> int:
    """What ``python -m module argv`` would exit with, run in this (forked) process."""
    import runpy

    sys.argv = [module, *argv]
    sys.path.insert(0, os.getcwd())  # as python -m puts the working directory first
    try:
        runpy.run_module(module, run_name="__main__", alter_sys=True)
    except SystemExit as exc:
        if exc.code is None or isinstance(exc.code, int):
            return exc.code or 0
        print(exc.code, file=sys.stderr)
        return 1
    return 0


def _die_with_parent(parent: int) -> None:
    """A child outlives a template killed outright (no EOF handling then): ask Linux to
    kill it with the template (PR_SET_PDEATHSIG); elsewhere the parent's timeout still does."""
    import ctypes

    with suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGKILL, 0, 0, 0)  # 1: PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the template died before the call
            os._exit(1)


def _imported() -> None:
    """Import what every trace needs, then tell the parent (sandbox.run_limited): its timeout
    counts from here, so a slow start on a loaded machine is not the model's time."""
    try:
        for name in PRELOAD:
            importlib.import_module(name)
    except Exception:  # main() imports again and reports why in its result
        pass
    fd = os.environ.pop(READY_FD_ENV, "")
    if fd:
        with suppress(OSError):
            os.write(int(fd), b"ready")
            os.close(int(fd))


if __name__ == "__main__":
    if sys.argv[1:2] == ["--template"]:
        sys.exit(template(sys.argv[2:]))
    ahead = sys.argv[1:2] == ["--ahead"]  # started early (sandbox.WorkerAhead)
    _imported()
    if sys.argv[1:2] == ["--module"] and len(sys.argv) > 2:  # sandbox.run_module, fresh
        code = _run_module(sys.argv[2], sys.argv[3:])
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    if ahead:
        if sys.stdin.readline().strip() != "go":
            os._exit(0)  # the caller never needed a trace
        sys.argv[1:] = sys.argv[2:]
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # The result is written: skip interpreter teardown, where the autograd engine's device
    # threads still alive after a backward can abort the process ("terminate called without
    # an active exception") and turn a finished trace into a crash.
    os._exit(code)
