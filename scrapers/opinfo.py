"""op-plugin's OpInfo failure lists: ``test/**/unsupported_ops_info*.yaml``.

Each file maps an OpInfo name (``nn.functional.conv2d``, ``__rmul__``, ``_refs.div``) to
the OpInfo tests that fail on NPU and the dtypes they fail with::

    nn.functional.conv2d:
      test_compare_cpu:
      - float32

``unsupported_ops_info_base.yaml`` holds the list for every torch version; the per-version
``test_v2rN_ops/unsupported_ops_info.yaml`` add to it for torch 2.N. The files are read line
by line rather than with a YAML loader: a loader turns the upstream key ``null:`` and the
item ``- null`` into None and loses line numbers.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.apidocs import norm_dtype
from opcheck.scrapers.rows import Origin

_OP_KEY = re.compile(r"^(?P<key>[^\s#-][^:#]*?|'[^']*'|\"[^\"]*\"):\s*(?:#.*)?$")
_TEST_KEY = re.compile(r"^(?P<indent>\s+)(?P<key>[A-Za-z_][A-Za-z0-9_]*):\s*(?:#.*)?$")
_ITEM = re.compile(r"^\s*-\s*(?P<val>.*?)\s*(?:#.*)?$")
_VERSION_DIR = re.compile(r"(?:^|/)test_v(\d+)r(\d+)_ops/")
_NO_DTYPE = {"", "''", '""', "null", "~"}


@dataclass(frozen=True)
class OpInfoFailureRow:
    """One failing (OpInfo, test, dtype) triple.

    ``dtype`` as upstream writes it (``float32``; "" when the test fails regardless of
    dtype), ``dtype_short`` in the API-docs vocabulary (``fp32``) for joining with them.
    ``torch`` is ``"2.12"`` for a per-version file, None for the base list.
    """

    opinfo: str
    test: str
    dtype: str
    dtype_short: str
    api: str  # the Python API the OpInfo exercises, "" for reference impls (_refs.*)
    torch: str | None
    line: int


def torch_from_path(path: str) -> str | None:
    m = _VERSION_DIR.search(path)
    return f"{m.group(1)}.{m.group(2)}" if m else None


def api_from_opinfo(name: str) -> str:
    """``nn.functional.conv2d`` → ``torch.nn.functional.conv2d``; ``__rmul__`` →
    ``torch.Tensor.__rmul__``; ``_refs.*`` (Python reference implementations) → ""."""
    if name.startswith("_refs.") or name in ("", "null"):
        return ""
    if name.startswith("__"):
        return f"torch.Tensor.{name}"
    return f"torch.{name}"


def _unquote(s: str) -> str:
    if len(s) >= 2 and s[0] == s[-1] and s[0] in "'\"":
        return s[1:-1]
    return s


def parse_unsupported_ops_info(text: str, *, origin: Origin) -> list[OpInfoFailureRow]:
    """Rows of one ``unsupported_ops_info*.yaml``; layout changes raise ScrapeError."""
    torch = torch_from_path(origin.path)
    rows: list[OpInfoFailureRow] = []
    op: str | None = None
    test: str | None = None
    test_indent: str | None = None
    for lineno, raw in enumerate(text.split("\n"), start=1):
        line = raw.rstrip()
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        m = _OP_KEY.match(line)
        if m:
            op, test, test_indent = _unquote(m.group("key").strip()), None, None
            continue
        m = _TEST_KEY.match(line)
        if m:
            if op is None:
                raise ScrapeError(
                    f"test {m.group('key')!r} before any op", source=origin.path, line=lineno
                )
            if test_indent is not None and m.group("indent") != test_indent:
                raise ScrapeError(
                    "inconsistent indentation of test names", source=origin.path, line=lineno
                )
            test, test_indent = m.group("key"), m.group("indent")
            continue
        m = _ITEM.match(line)
        if m:
            if op is None or test is None:
                raise ScrapeError("dtype item outside an op/test", source=origin.path, line=lineno)
            val = _unquote(m.group("val")) if m.group("val") not in _NO_DTYPE else ""
            if val and not re.fullmatch(r"[A-Za-z0-9_]+", val):
                raise ScrapeError(f"not a dtype: {val!r}", source=origin.path, line=lineno)
            rows.append(
                OpInfoFailureRow(
                    opinfo=op,
                    test=test,
                    dtype=val,
                    dtype_short=norm_dtype(val) or val,
                    api=api_from_opinfo(op),
                    torch=torch,
                    line=lineno,
                )
            )
            continue
        raise ScrapeError(
            f"unexpected line {line.strip()!r} (expected op:, test: or - dtype)",
            source=origin.path,
            line=lineno,
        )
    return rows


def opinfo_paths(all_paths: Iterable[str]) -> list[str]:
    return sorted(
        p
        for p in all_paths
        if re.search(r"(?:^|/)test/(?:.*/)?unsupported_ops_info[^/]*\.ya?ml$", p)
    )
