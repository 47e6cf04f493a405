"""The migration tool's advice (msTransplant ``precision_performance_advice.json`` of
Ascend/mstt): the real file at its pin in the mirror under tests/fixtures, and hand-written
broken ones."""

from __future__ import annotations

import json

import pytest
from testpaths import FIXTURES

from opcheck.core.errors import ScrapeError
from opcheck.scrapers import transplant_advice as ta
from opcheck.scrapers.rows import Origin
from opcheck.sync.advisor import MSTT, TRANSPLANT_PIN


def _real() -> str:
    return (FIXTURES / "mirror" / MSTT / TRANSPLANT_PIN / ta.PATH).read_text(encoding="utf-8")


def test_every_entry_of_the_real_file_is_a_row_at_its_line() -> None:
    text = _real()
    rows = ta.parse(text, Origin(ta.PATH))
    lines = text.splitlines()
    data = json.loads(text)
    plain = sum(len(data[k]) for k in ("api_precision_dict", "api_performance_dict",
                                       "performance_configuration_dict"))
    params = sum(len(v["parameter"]) for v in data["api_parameters_performance_dict"].values())
    uses = sum(len(v["dependency"]) for v in data["performance_api_suggest_use"].values())
    assert len(rows) == plain + params + uses
    for r in rows:
        # the row's line holds its key: the API, the parameter or the suggested call
        key = r.api.split("(")[1].split("=")[0].rstrip("!") if r.kind == "parameter" else (
            r.api.rsplit(".", 1)[-1].removesuffix("()") if r.kind == "use" else r.api)
        assert f'"{key}"' in lines[r.line - 1], (r, lines[r.line - 1])
    by = {(r.kind, r.api): r for r in rows}
    bucket = by["parameter", "torch.nn.parallel.DistributedDataParallel(bucket_cap_mb=500)"]
    assert bucket.default == "25" and "bucket_cap_mb" in bucket.pattern
    assert ("parameter", "torch.utils.data.DataLoader(num_workers!=0)") in by
    assert ("use", "torch.nn.parallel.DistributedDataParallel.no_sync()") in by
    assert "NpuFusedAdamW" in by["api", "torch.optim.AdamW"].pattern
    assert ("precision", "torch.baddbmm") in by and ("configuration", "TASK_QUEUE_ENABLE") in by
    assert all("\n" not in r.pattern for r in rows)  # one line each (multi-line code joined)
    # every parameter row reads back through the shape the checker matches
    for r in rows:
        if r.kind == "parameter":
            assert ta.PARAM_API.match(r.api), r.api


@pytest.mark.parametrize(("text", "error", "line"), [
    ('{\n  "api_precision_dict": {},\n  "api_new_dict": {}\n}', "unknown key 'api_new_dict'", 3),
    ('{\n  "api_performance_dict": {\n    "torch.optim.SGD": 3\n  }\n}', "torch.optim.SGD", 3),
    ('{\n  "api_parameters_performance_dict": {\n    "torch.x.Y": {\n      "parameter": {\n'
     '        "p": {"expected_value": "1", "unexpected_value": "2", "msg": "m"}\n      }\n'
     '    }\n  }\n}', "one of expected_value or unexpected_value", 5),
    ('{\n  "api_parameters_performance_dict": {\n    "torch.x.Y": {\n      "parameter": {\n'
     '        "p": {"expected_value": "1", "msg": "m", "since": "8.0"}\n      }\n'
     '    }\n  }\n}', "unknown key 'since'", 5),
    ('{\n  "performance_api_suggest_use": {\n    "no_sync": {\n      "msg": "m"\n    }\n'
     '  }\n}', "no dependency", 3),
    ('{\n  "api_performance_dict": {\n    "not an api()": "m"\n  }\n}', "not an API name", 3),
    ('{\n  "api_performance_dict": {}\n}', "no advice", 1),
])
def test_unknown_keys_and_wrong_shapes_fail_with_file_and_line(text: str, error: str,
                                                               line: int) -> None:
    with pytest.raises(ScrapeError, match=error) as exc:
        ta.parse(text, Origin("advice.json"))
    assert exc.value.source == "advice.json" and exc.value.line == line
