"""The sandboxed side of runtime tracing: ``python -m opcheck.tracers.worker REQUEST RESULT``.

Started by :mod:`opcheck.tracers.sandbox` with a memory limit and a timeout. Reads a JSON
request, loads/builds the model (the only place untrusted files may be unpickled, and only
when the request says ``trust``), traces it and writes a JSON result. Any failure becomes
``{"ok": false, "error": "..."}``, so the parent never has to parse a traceback.
"""

from __future__ import annotations

import faulthandler
import json
import os
import sys
import traceback
from pathlib import Path
from typing import Any

from opcheck.core.errors import OpcheckError
from opcheck.tracers.inputs import InputSpec


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


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stderr.flush()
    # The result is written: skip interpreter teardown, where the autograd engine's device
    # threads still alive after a backward can abort the process ("terminate called without
    # an active exception") and turn a finished trace into a crash.
    os._exit(code)
