"""The vendor migration tool's advice (msTransplant, Ascend/mstt
``msfmktransplt/src/ms_fmk_transplt/resource/precision_performance_advice.json``): the APIs its
scan of a training script flags for precision or speed on an NPU, as rows with their line.

The file is one JSON object of five sections, each a kind of row (``api`` what the advice is
keyed by, ``pattern`` the advice's text):

- ``api_precision_dict`` (``precision``) and ``api_performance_dict`` (``api``): an API
  (``torch.optim.AdamW``) and its advice;
- ``api_parameters_performance_dict`` (``parameter``): per API, per parameter, the value to set
  (``expected_value``) or to avoid (``unexpected_value``), with torch's default and the position
  of the argument: ``api`` ``torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=500)``
  (``!=`` for a value to avoid);
- ``performance_api_suggest_use`` (``use``): an API to call when another is used: ``api``
  ``torch.nn.parallel.DistributedDataParallel.no_sync()``;
- ``performance_configuration_dict`` (``configuration``): a call or environment variable to
  set.

Unknown keys, and values of the wrong shape, fail with file and line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from opcheck.scrapers import yamlines as yl
from opcheck.scrapers.rows import Origin

# an advice row's kind in the catalog (advisor_rule): its section's kind, prefixed
KIND_PREFIX = "transplant_"
PATH = "msfmktransplt/src/ms_fmk_transplt/resource/precision_performance_advice.json"
_PLAIN = {"api_precision_dict": "precision", "api_performance_dict": "api",
          "performance_configuration_dict": "configuration"}
_PARAMS, _USE = "api_parameters_performance_dict", "performance_api_suggest_use"
_TOP = frozenset({*_PLAIN, _PARAMS, _USE})
_PARAM_KEYS = frozenset({"parameter_idx", "expected_value", "unexpected_value", "default_value",
                         "msg"})
_USE_KEYS = frozenset({"dependency", "msg"})
_API = re.compile(r"^[A-Za-z_][\w.]*$")
# the advice's parameter row: API(name=value) or API(name!=value)
PARAM_API = re.compile(r"^(?P<api>[\w.]+)\((?P<name>\w+)(?P<op>!?=)(?P<value>[^)]*)\)$")


@dataclass(frozen=True)
class TransplantRow:
    kind: str  # precision | api | parameter | use | configuration
    api: str
    pattern: str  # the advice's text (one line)
    default: str  # a parameter's default ("" for the other kinds)
    line: int


def _text(value: object) -> str:
    return " ".join(str(value).split())


def _api(ctx: yl.YamlCtx, name: object, line: int) -> str:
    if not isinstance(name, str) or not _API.match(name):
        raise ctx.error(f"not an API name: {name!r}", line)
    return name


def _mapping(ctx: yl.YamlCtx, value: object, line: int, what: str) -> yl.LineDict:
    if not isinstance(value, yl.LineDict):
        raise ctx.error(f"{what}: expected a mapping, got {type(value).__name__}", line)
    return value


def _msg(ctx: yl.YamlCtx, value: object, line: int, what: str) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ctx.error(f"{what}: expected the advice's text, got {value!r}", line)
    return _text(value)


def _parameters(ctx: yl.YamlCtx, section: yl.LineDict) -> list[TransplantRow]:
    out = []
    for api, body in section.items():
        line = yl.line_of(section, api)
        _api(ctx, api, line)
        body = _mapping(ctx, body, line, str(api))
        yl.check_keys(ctx, body, frozenset({"parameter"}), str(api))
        params = _mapping(ctx, body.get("parameter"), yl.line_of(body, "parameter", line),
                          f"{api}.parameter")
        for name, p in params.items():
            p_line = yl.line_of(params, name, line)
            p = _mapping(ctx, p, p_line, f"{api}.{name}")
            yl.check_keys(ctx, p, _PARAM_KEYS, f"{api}.{name}")
            if ("expected_value" in p) == ("unexpected_value" in p):
                raise ctx.error(f"{api}.{name}: expected one of expected_value or "
                                "unexpected_value", p_line)
            yl.expect_list(ctx, p.get("parameter_idx", []), yl.line_of(p, "parameter_idx",
                                                                       p_line), "parameter_idx")
            op, value = (("=", p["expected_value"]) if "expected_value" in p
                         else ("!=", p["unexpected_value"]))
            out.append(TransplantRow("parameter", f"{api}({_api(ctx, name, p_line)}{op}"
                                     f"{_text(value)})",
                                     _msg(ctx, p.get("msg"), p_line, f"{api}.{name}"),
                                     _text(p.get("default_value", "")), p_line))
    return out


def _uses(ctx: yl.YamlCtx, section: yl.LineDict) -> list[TransplantRow]:
    out = []
    for name, body in section.items():
        line = yl.line_of(section, name)
        body = _mapping(ctx, body, line, str(name))
        yl.check_keys(ctx, body, _USE_KEYS, str(name))
        deps = body.get("dependency", [])
        yl.expect_list(ctx, deps, yl.line_of(body, "dependency", line), "dependency")
        if not deps:
            raise ctx.error(f"{name}: no dependency", line)
        msg = _msg(ctx, body.get("msg"), line, str(name))
        out += [TransplantRow("use", f"{_api(ctx, d, line)}.{_api(ctx, name, line)}()", msg,
                              "", line) for d in deps]
    return out


def parse(text: str, origin: Origin) -> list[TransplantRow]:
    """The rows of one ``precision_performance_advice.json`` (see the module doc)."""
    ctx = yl.YamlCtx(origin)
    data = yl.expect_mapping(ctx, yl.load(text, origin), "top level")
    yl.check_keys(ctx, data, _TOP, "top level")
    rows: list[TransplantRow] = []
    for section, body in data.items():
        body = _mapping(ctx, body, yl.line_of(data, section), str(section))
        if section == _PARAMS:
            rows += _parameters(ctx, body)
        elif section == _USE:
            rows += _uses(ctx, body)
        else:
            for api, msg in body.items():
                line = yl.line_of(body, api)
                rows.append(TransplantRow(_PLAIN[str(section)], _api(ctx, api, line),
                                          _msg(ctx, msg, line, str(api)), "", line))
    if not rows:
        raise ctx.error("no advice", 1)
    return rows
