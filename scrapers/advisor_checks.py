"""The profiling advisor's check rules (msprof-analyze ``advisor``, Ascend/mstt
``profiler/msprof_analyze/advisor/rules/en/``) besides the fusion patterns
(:mod:`opcheck.scrapers.advisor`), as rows with their line:

- ``aicpu_rules.yaml``: under ``CommonChecker``, per CANN version, the dtypes each operator type
  (``__ALL__``: every type but the ``ignore_type`` ones) runs on the AI Core with; any other dtype
  runs on the AI CPU. One ``aicpu_dtype`` row per checker: ``api`` the op type, ``pattern``
  ``in=…;out=…;ignore=…`` (comma lists), ``cann`` its versions. ``ExampleGuideChecker``: one
  ``aicpu_guide`` row per op type with the advisor's advice. The top-level texts are the
  findings' wording, checked for their keys only.
- ``environment_variable_info.yaml``: one ``env`` row per variable, ``pattern`` its suggestion.
- ``dataloader.yaml``, ``sync_batchnorm.yaml``, ``synchronize.yaml``: one ``advice`` row per
  problem, threshold and solution, ``api`` ``<file stem>.<key>`` (``dataloader.solution``).

Unknown keys, and values of the wrong shape, fail with file and line.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass

from opcheck.scrapers import yamlines as yl
from opcheck.scrapers.rows import Origin

DIR = "profiler/msprof_analyze/advisor/rules/en/"
AICPU, ENV = DIR + "aicpu_rules.yaml", DIR + "environment_variable_info.yaml"
DATALOADER, SYNC_BN, SYNCHRONIZE = (DIR + "dataloader.yaml", DIR + "sync_batchnorm.yaml",
                                    DIR + "synchronize.yaml")
# each advice file's keys besides ``problem`` and ``solutions``: its threshold
_THRESHOLDS = {DATALOADER: "dataloader_duration_threshold", SYNC_BN: "max_syncbn_num",
               SYNCHRONIZE: "min_co_occurrence_ratio"}
PATHS = (AICPU, ENV, DATALOADER, SYNC_BN, SYNCHRONIZE)
_AICPU_TOP = frozenset({"problem", "description", "suggestion", "double_suggestion",
                        "DataTypeSuggeation", "AICPU_DOC_URL", "CommonChecker",
                        "ExampleGuideChecker"})
_DTYPE_KEYS = frozenset({"cann_version", "op_type", "ignore_type", "input", "output",
                         "suggestion"})
_GUIDE_KEYS = frozenset({"op_type", "url", "suggestion"})
_ENV_KEYS = frozenset({"desc", "suggest", "suggest_html"})
_SOLUTION_KEYS = frozenset({"desc", "efficient_code"})
_NAME = re.compile(r"^[A-Za-z_]\w*$")


@dataclass(frozen=True)
class CheckRow:
    kind: str  # aicpu_dtype | aicpu_guide | env | advice
    api: str  # the op type, the variable, or "<file stem>.<key>"
    pattern: str
    cann: str
    line: int


def _text(value: object) -> str:
    return " ".join(str(value).replace("\\n", " ").split())


def _names(ctx: yl.YamlCtx, entry: yl.LineDict, key: str, line: int) -> str:
    value = entry.get(key, [])
    yl.expect_list(ctx, value, yl.line_of(entry, key, line), key)
    if not all(isinstance(v, (str, int, float)) and not isinstance(v, bool) for v in value):
        raise ctx.error(f"{key}: expected a list of names", yl.line_of(entry, key, line))
    return ",".join(str(v).strip() for v in value)


def _checkers(ctx: yl.YamlCtx, data: yl.LineDict, section: str, keys: frozenset[str]
              ) -> list[tuple[int, str, yl.LineDict]]:
    """(line, checker name, body) of each ``- Name: {…}`` item of a checker list."""
    items = data.get(section, [])
    yl.expect_list(ctx, items, yl.line_of(data, section), section)
    out = []
    for line, item in yl.items(items):
        if not isinstance(item, yl.LineDict) or len(item) != 1:
            raise ctx.error(f"{section}: expected one `Name: {{...}}` per item", line)
        [(name, body)] = item.items()
        body_line = yl.line_of(item, name, line)
        if not isinstance(body, yl.LineDict):
            raise ctx.error(f"{section}.{name}: expected a mapping", body_line)
        yl.check_keys(ctx, body, keys, f"{section}.{name}")
        out.append((body_line, str(name), body))
    return out


def parse_aicpu(text: str, origin: Origin) -> list[CheckRow]:
    """The rows of ``aicpu_rules.yaml`` (see the module doc)."""
    ctx = yl.YamlCtx(origin)
    data = yl.expect_mapping(ctx, yl.load(text, origin), "aicpu rules")
    yl.check_keys(ctx, data, _AICPU_TOP, "aicpu rules")
    rows: list[CheckRow] = []
    for line, name, body in _checkers(ctx, data, "CommonChecker", _DTYPE_KEYS):
        if name != "DataTypeChecker":
            raise ctx.error(f"CommonChecker: unknown checker {name}", line)
        cann, ops = _names(ctx, body, "cann_version", line), _names(ctx, body, "op_type", line)
        dtypes = (f"in={_names(ctx, body, 'input', line)};out={_names(ctx, body, 'output', line)}"
                  f";ignore={_names(ctx, body, 'ignore_type', line)}")
        if not cann or not ops:
            raise ctx.error("DataTypeChecker without cann_version or op_type", line)
        rows += [CheckRow("aicpu_dtype", op.lower(), dtypes, cann, line) for op in ops.split(",")]
    for line, _name, body in _checkers(ctx, data, "ExampleGuideChecker", _GUIDE_KEYS):
        advice = _text(body.get("suggestion", "")).replace("{}", _text(body.get("url", "")))
        advice = re.sub(r"<a href=\"?([^\" >]+)\"?[^>]*>LINK</a>", r"\1", advice)
        rows += [CheckRow("aicpu_guide", op.lower(), advice, "", line)
                 for op in _names(ctx, body, "op_type", line).split(",")]
    if not rows:
        raise ctx.error("no rules", 1)
    return rows


def parse_env(text: str, origin: Origin) -> list[CheckRow]:
    """The rows of ``environment_variable_info.yaml``: one per variable."""
    ctx = yl.YamlCtx(origin)
    data = yl.expect_mapping(ctx, yl.load(text, origin), "environment variables")
    rows = []
    for name, body in data.items():
        line = yl.line_of(data, name)
        if not _NAME.match(str(name)) or not isinstance(body, yl.LineDict):
            raise ctx.error(f"{name}: expected a variable name with desc and suggest", line)
        yl.check_keys(ctx, body, _ENV_KEYS, str(name))
        if "suggest" not in body:
            raise ctx.error(f"{name}: no suggest", line)
        rows.append(CheckRow("env", str(name), _text(body["suggest"]), "", line))
    if not rows:
        raise ctx.error("no variables", 1)
    return rows


def parse_advice(text: str, origin: Origin) -> list[CheckRow]:
    """The rows of one of ``dataloader.yaml``, ``sync_batchnorm.yaml``, ``synchronize.yaml``."""
    ctx = yl.YamlCtx(origin)
    data = yl.expect_mapping(ctx, yl.load(text, origin), "advice")
    stem = origin.path.rsplit("/", 1)[-1].removesuffix(".yaml")
    threshold = next((v for k, v in _THRESHOLDS.items() if origin.path.endswith(k)), None)
    if threshold is None:
        raise ctx.error("not an advice file this parser knows", 1)
    yl.check_keys(ctx, data, frozenset({"problem", "solutions", threshold}), stem)
    if "problem" not in data or "solutions" not in data:
        raise ctx.error("no problem or solutions", 1)
    rows = [CheckRow("advice", f"{stem}.problem", _text(data["problem"]), "",
                     yl.line_of(data, "problem"))]
    if threshold in data:
        rows.append(CheckRow("advice", f"{stem}.{threshold}", str(data[threshold]), "",
                             yl.line_of(data, threshold)))
    yl.expect_list(ctx, data["solutions"], yl.line_of(data, "solutions"), "solutions")
    for line, item in yl.items(data["solutions"]):
        if isinstance(item, str):
            rows.append(CheckRow("advice", f"{stem}.solution", _text(item), "", line))
            continue
        if not isinstance(item, yl.LineDict) or len(item) != 1:
            raise ctx.error("a solution is neither a text nor `name: {desc: ...}`", line)
        [(name, body)] = item.items()
        if not isinstance(body, yl.LineDict) or "desc" not in body:
            raise ctx.error(f"solution {name}: expected a mapping with desc", line)
        yl.check_keys(ctx, body, _SOLUTION_KEYS, f"solution {name}")
        rows.append(CheckRow("advice", f"{stem}.solution", f"{name}: {_text(body['desc'])}",
                             "", yl.line_of(body, "desc", line)))
    return rows


Parser = Callable[[str, Origin], list[CheckRow]]
PARSERS: dict[str, Parser] = {AICPU: parse_aicpu, ENV: parse_env, DATALOADER: parse_advice,
           SYNC_BN: parse_advice, SYNCHRONIZE: parse_advice}
