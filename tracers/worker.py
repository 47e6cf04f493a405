"""The sandboxed side of runtime tracing: ``python -m opcheck.tracers.worker REQUEST RESULT``.

Started by :mod:`opcheck.tracers.sandbox` with a memory limit and a timeout. Reads a JSON
request, loads/builds the model (the only place untrusted files may be unpickled, and only
when the request says ``trust``), traces it and writes a JSON result. Any failure becomes
``{"ok": false, "error": "..."}``, so the parent never has to parse a traceback.
"""

from __future__ import annotations

import faulthandler
import importlib
import json
import os
import select
import signal
import sys
import traceback
from contextlib import suppress
from pathlib import Path
from typing import Any

from opcheck.core.errors import OpcheckError
from opcheck.tracers.inputs import InputSpec
from opcheck.tracers.sandbox import PRELOAD


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
        if request.get("model_spec"):
            model, ex_args, ex_kwargs = runtime.build_from_factory(str(request["model_spec"]))
        else:
            model, ex_args, ex_kwargs = runtime.load_model_file(
                str(request["target"]), str(request["kind"]), bool(request.get("trust", False))
            )
        ol = runtime.trace_module(
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
    children: dict[int, tuple[int, int]] = {}  # pidfd → (request id, pid)
    buf = b""

    def reply(msg: dict[str, Any]) -> None:
        sys.stdout.write(json.dumps(msg) + "\n")
        sys.stdout.flush()

    while True:
        ready, _, _ = select.select([0, *children], [], [])
        for fd in ready:
            if fd != 0:
                rid, pid = children.pop(fd)
                os.close(fd)
                _, status = os.waitpid(pid, 0)
                reply({"id": rid, "exit": os.waitstatus_to_exitcode(status)})
                continue
            data = os.read(0, 65536)
            if not data:  # the parent is done (or gone): no child outlives the template
                for _rid, pid in children.values():
                    with suppress(OSError):
                        os.killpg(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                return 0
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                job = json.loads(line)
                pid = os.fork()
                if pid == 0:
                    for other in children:
                        os.close(other)
                    _child(job)  # never returns
                children[os.pidfd_open(pid)] = (int(job["id"]), pid)
                reply({"id": job["id"], "pid": pid})


def _child(job: dict[str, Any]) -> None:
    code = 1
    try:
        os.setsid()  # the parent kills the whole session at the timeout
        from opcheck.tracers.sandbox import set_limits

        set_limits(int(job["memory_mb"]))
        os.chdir(str(job["cwd"]))
        err = os.open(str(job["stderr"]), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        null = os.open(os.devnull, os.O_RDWR)
        os.dup2(null, 0)
        os.dup2(null, 1)
        os.dup2(err, 2)
        code = main([str(job["request"]), str(job["result"])])
        sys.stderr.flush()
    except BaseException:
        traceback.print_exc()
    finally:
        os._exit(code)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--template"]:
        sys.exit(template(sys.argv[2:]))
    if sys.argv[1:2] == ["--ahead"]:  # started early (sandbox.WorkerAhead): import, then wait
        for name in PRELOAD:
            importlib.import_module(name)
        if sys.stdin.readline().strip() != "go":
            os._exit(0)  # the caller never needed a trace
        sys.argv[1:] = sys.argv[2:]
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # The result is written: skip interpreter teardown, where the autograd engine's device
    # threads still alive after a backward can abort the process ("terminate called without
    # an active exception") and turn a finished trace into a crash.
    os._exit(code)
