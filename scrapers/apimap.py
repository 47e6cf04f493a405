"""Link documented Python APIs (``torch.nn.functional.max_pool3d``, ``Tensor.abs``) to ATen ops.

The API docs speak Python; traces and kernel registries speak ATen. The link is made by
rules over the op universe (the canonical names of native_functions.yaml, passed in: torch
is never imported) plus a human-edited overrides file, ``data/api_overrides.yaml``, for
what no rule can guess (``F.interpolate`` → ``upsample_*``). An override always wins; an
override with an empty list states "this API calls no ATen op" (Python-only helpers).

Rules, first hit wins:
1. namespaces with an ATen prefix: ``torch.special.X`` → ``special_X``, ``torch.linalg.X`` →
   ``linalg_X``, ``torch.fft.X`` → ``fft_X``, ``torch.nested.X`` → ``nested_X``;
2. the bare name (``torch.X``, ``torch.Tensor.X``, ``Tensor.X``, ``F.X``), then
   ``X_loss`` (``F.cross_entropy`` → ``cross_entropy_loss``);
3. Python dunders: an ATen dunder of the same name (``__and__``), else the operator
   (``__radd__`` → ``add``, ``__iadd__`` → ``add_``);
4. ``torch.nn.<Class>`` modules: the class name matched against op names with the
   underscores dropped (``LeakyReLU`` → ``leaky_relu``, ``MaxPool2d`` → ``max_pool2d``),
   then without a ``1d/2d/3d`` suffix (``BatchNorm2d`` → ``batch_norm``).
A name links to all its overloads except the ``out=`` variants, unless only those exist.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path

import yaml

from opcheck.core.errors import ScrapeError
from opcheck.core.opname import OpName

Overrides = Mapping[str, Sequence[str]]

_FUNC_LINE = re.compile(r"^- func:\s*([A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)?)\(", re.M)

_PREFIX_NS = (
    ("torch.special.", "special_"),
    ("torch.linalg.", "linalg_"),
    ("torch.fft.", "fft_"),
    ("torch.nested.", "nested_"),
)
_PLAIN_PREFIXES = (
    "torch.nn.functional.",
    "torch.Tensor.",
    "Tensor.",
    "F.",
    "torch.",
)
_NOT_OPS = (
    # Python-side machinery: no rule may guess an op for these (torch.cuda.synchronize
    # is no aten::synchronize); overrides can still link them.
    "torch.cuda.", "torch.npu.", "torch.distributed.", "torch.optim.", "torch.utils.",
    "torch.autograd.", "torch.backends.", "torch.jit.", "torch.fx.", "torch.onnx.",
    "torch.profiler.", "torch.package.", "torch.hub.", "torch.multiprocessing.",
    "torch.testing.", "torch.library.", "torch.export.", "torch.compiler.", "torch.monitor.",
    "torch.distributions.", "torch.ao.", "torch.quantization.", "torch.amp.", "torch.cpu.",
    "torch.accelerator.", "torch.func.", "torch.futures.", "torch.overrides.", "torch.random.",
    "torch.mps.", "torch.xpu.", "torch.mtia.", "torch.signal.", "torch.__config__.",
    "torch.storage.", "torch.Storage.", "torch.TypedStorage.", "torch.UntypedStorage.",
    "torch.nn.init.", "torch.nn.utils.", "torch.nn.parallel.", "torch.nn.parameter.",
    "torch.nn.attention.", "torch.nn.modules.", "torch.nn.Module.", "torch.sparse.",
    "torch.backends.", "torch.finfo", "torch.iinfo", "torch._logging.", "torch.Generator.",
)  # fmt: skip
_TORCH_OPS = re.compile(r"^torch\.ops\.([a-z_]+)\.([A-Za-z_][A-Za-z0-9_]*)(?:\.([A-Za-z0-9_]+))?$")
_DIM_SUFFIX = re.compile(r"(?:[123]d)$")
_DUNDER = re.compile(r"^__(i|r)?([a-z]+)__$")
_DUNDER_OPS = {
    "add": "add", "sub": "sub", "mul": "mul", "truediv": "div", "div": "div",
    "floordiv": "floor_divide", "mod": "remainder", "pow": "pow", "matmul": "matmul",
    "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "bitwise_left_shift",
    "rshift": "bitwise_right_shift", "neg": "neg", "abs": "abs", "invert": "bitwise_not",
    "eq": "eq", "ne": "ne", "lt": "lt", "le": "le", "gt": "gt", "ge": "ge",
    "getitem": "index", "setitem": "index_put_", "pos": "positive",
}  # fmt: skip


def universe_from_native_functions(text: str) -> set[str]:
    """Canonical op names of a native_functions.yaml text (a regex over ``- func:`` lines:
    the file is large and only the names are needed here)."""
    return {
        str(OpName.parse(m.group(1), default_namespace="aten")) for m in _FUNC_LINE.finditer(text)
    }


@dataclass(frozen=True)
class _Index:
    all_ops: frozenset[str]
    by_name: Mapping[str, tuple[str, ...]]
    squashed: Mapping[str, tuple[str, ...]]  # name without underscores → names


# One slot: callers link thousands of APIs against the same universe object in a row.
_INDEX_CACHE: list[tuple[object, int, _Index]] = []


def _index(universe: set[str] | frozenset[str]) -> _Index:
    if _INDEX_CACHE and _INDEX_CACHE[0][0] is universe and _INDEX_CACHE[0][1] == len(universe):
        return _INDEX_CACHE[0][2]
    by_name: dict[str, list[str]] = defaultdict(list)
    for op in universe:
        ns_name = op.split("::", 1)[-1]
        by_name[ns_name.split(".", 1)[0]].append(op)
    squashed: dict[str, list[str]] = defaultdict(list)
    for name in by_name:
        squashed[name.replace("_", "").lower()].append(name)
    idx = _Index(
        frozenset(universe),
        {k: tuple(sorted(v)) for k, v in by_name.items()},
        {k: tuple(sorted(v, key=lambda n: (n.startswith("_"), n))) for k, v in squashed.items()},
    )
    _INDEX_CACHE[:] = [(universe, len(universe), idx)]
    return idx


# Overload names PyTorch gives ``out=`` variants besides ``out``/``*_out`` (multi-output ops
# name them after their outputs). Taken from native_functions.yaml; "a" is left out because
# a functional overload shares it.
_OUT_OVERLOADS = frozenset(
    [
        "grad_input",
        "out_mode",
        "values",
        "OutTensor",
        "OutScalar_Self",
        "OutScalar_Other",
        "dim_max",
        "dim_values",
        "dim_min",
        "X",
        "U",
        "Q",
        "values_stable",
        "output",
        "L",
        "result",
        "sign",
        "eigenvalues",
        "eigvals",
        "inverse",
    ]
)
_OUT_PATTERN = re.compile(r"^(?:out|out_\w*|\w+_out)$")


def _is_out_overload(op: str) -> bool:
    overload = op.rpartition("::")[2].partition(".")[2]
    return bool(overload) and (overload in _OUT_OVERLOADS or bool(_OUT_PATTERN.match(overload)))


def _functional_overloads(ops: Sequence[str]) -> list[str]:
    """Drop ``out=`` variants unless nothing else exists."""
    keep = [op for op in ops if not _is_out_overload(op)]
    return keep or list(ops)


def normalize_api(api: str) -> str:
    """One spelling per API: ``Tensor.abs``/``torch.Tensor.abs`` → ``torch.Tensor.abs``,
    ``F.relu`` → ``torch.nn.functional.relu``; markdown escapes and call parens dropped."""
    s = api.strip().replace("\\_", "_").strip("`")
    s = re.sub(r"\(\)$", "", s)
    if s.startswith("Tensor."):
        s = "torch." + s
    elif s.startswith("F."):
        s = "torch.nn.functional." + s[2:]
    elif s.startswith("nn."):
        s = "torch." + s
    return s


def _expand(name: str, idx: _Index) -> list[str]:
    return _functional_overloads(idx.by_name.get(name, ()))


def _rule_link(api: str, idx: _Index) -> list[str]:
    for prefix, ns in _PREFIX_NS:
        if api.startswith(prefix):
            rest = api[len(prefix) :]
            return _expand(ns + rest, idx) or _expand(rest, idx)
    if api.startswith(_NOT_OPS):
        return []
    m_ops = _TORCH_OPS.match(api)
    if m_ops:
        op = f"{m_ops.group(1)}::{m_ops.group(2)}" + (
            f".{m_ops.group(3)}" if m_ops.group(3) and m_ops.group(3) != "default" else ""
        )
        return [op] if op in idx.all_ops else []
    if api.startswith("torch.nn.") and not api.startswith("torch.nn.functional."):
        cls = api[len("torch.nn.") :]
        if "." in cls or not cls[:1].isupper():
            return []  # a module's method (torch.nn.Conv2d.forward) or a submodule helper
        squashed = cls.lower().removeprefix("lazy")
        for key in (
            squashed,
            squashed.removesuffix("loss") + "loss",
            _DIM_SUFFIX.sub("", squashed),
        ):
            for name in idx.squashed.get(key, ()):
                ops = _expand(name, idx)
                if ops:
                    return ops
        return []
    name = api
    for prefix in _PLAIN_PREFIXES:
        if api.startswith(prefix):
            name = api[len(prefix) :]
            break
    if "." in name or not name:
        return []
    m = _DUNDER.match(name)
    if m:
        exact = _expand(name, idx)
        if exact:
            return exact
        inplace, base = m.group(1) == "i", _DUNDER_OPS.get(m.group(2))
        if base is None:
            return []
        if inplace and not base.endswith("_"):
            base += "_"
        return _expand(base, idx)
    found = _expand(name, idx) or _expand(name + "_loss", idx)
    if found or "_" in name:
        return found
    # "logsigmoid" → log_sigmoid: only for names written without underscores, where the
    # squashed lookup cannot hide an exact name.
    for cand in idx.squashed.get(name.lower(), ()):
        return _expand(cand, idx)
    return []


def _override_ops(values: Sequence[str], idx: _Index) -> list[str]:
    """Override values → canonical ops; names missing from ``universe`` (an older torch)
    are dropped, so one overrides file serves every torch version."""
    out: list[str] = []
    for v in values:
        if "::" in v or "." in v:
            op = v if "::" in v else f"aten::{v}"
            if op in idx.all_ops:
                out.append(op)
        else:
            out.extend(_expand(v, idx))
    return sorted(dict.fromkeys(out))


def link_api(api: str, universe: set[str], overrides: Overrides | None = None) -> list[str]:
    """Canonical ATen ops the Python API ``api`` calls (sorted); [] when none is known.

    ``overrides`` maps API names (any spelling ``normalize_api`` accepts) to op names:
    canonical (``aten::upsample_nearest2d.vec``, kept when in ``universe``) or bare
    (``upsample_nearest2d``: all its non-``out`` overloads). An empty list means "no op".
    """
    idx = _index(universe)
    norm = normalize_api(api)
    if overrides:
        table = _normalized_overrides(overrides)
        if norm in table:
            return _override_ops(table[norm], idx)
    return sorted(_rule_link(norm, idx))


_NORM_CACHE: list[tuple[Overrides, int, dict[str, tuple[str, ...]]]] = []


def _normalized_overrides(overrides: Overrides) -> dict[str, tuple[str, ...]]:
    if _NORM_CACHE and _NORM_CACHE[0][0] is overrides and _NORM_CACHE[0][1] == len(overrides):
        return _NORM_CACHE[0][2]
    table = {normalize_api(k): tuple(v) for k, v in overrides.items()}
    _NORM_CACHE[:] = [(overrides, len(overrides), table)]
    return table


def parse_overrides(text: str, *, source: str = "api_overrides.yaml") -> dict[str, tuple[str, ...]]:
    """The overrides YAML: ``api: [op, ...]`` (``[]`` = calls no ATen op)."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        raise ScrapeError(
            f"invalid YAML: {e}", source=source, line=mark.line + 1 if mark else None
        ) from e
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ScrapeError("expected a mapping api -> [ops]", source=source)
    out: dict[str, tuple[str, ...]] = {}
    for k, v in data.items():
        if v is None:
            v = []
        if isinstance(v, str):
            v = [v]
        if (
            not isinstance(k, str)
            or not isinstance(v, list)
            or not all(isinstance(x, str) for x in v)
        ):
            raise ScrapeError(f"entry {k!r}: expected a list of op names", source=source)
        out[k] = tuple(v)
    return out


def load_overrides(path: Path | None = None) -> dict[str, tuple[str, ...]]:
    """``data/api_overrides.yaml`` as packaged (or the file at ``path``)."""
    if path is not None:
        return parse_overrides(path.read_text(encoding="utf-8"), source=str(path))
    text = (
        resources.files("opcheck.data").joinpath("api_overrides.yaml").read_text(encoding="utf-8")
    )
    return parse_overrides(text)


@dataclass(frozen=True)
class Coverage:
    total: int
    linked: int
    no_op: int  # overrides that state "no ATen op"
    unlinked: tuple[str, ...] = field(default_factory=tuple)

    @property
    def fraction(self) -> float:
        return self.linked / self.total if self.total else 0.0

    def __str__(self) -> str:
        return f"{self.linked}/{self.total} APIs linked to ATen ({self.fraction:.1%}), {self.no_op} marked no-op"


def mapping_coverage(
    apis: Iterable[str], universe: set[str], overrides: Overrides | None = None
) -> Coverage:
    """How many distinct documented APIs link to at least one ATen op."""
    names = sorted({normalize_api(a) for a in apis})
    table = _normalized_overrides(overrides) if overrides else {}
    linked = no_op = 0
    unlinked: list[str] = []
    for api in names:
        if link_api(api, universe, overrides):
            linked += 1
        elif api in table and not table[api]:
            no_op += 1
        else:
            unlinked.append(api)
    return Coverage(len(names), linked, no_op, tuple(unlinked))


def is_op_api(api: str) -> bool:
    """APIs that can call ATen ops at all (tensor math, not Python machinery)."""
    norm = normalize_api(api)
    if not norm.startswith("torch.") or norm.startswith(_NOT_OPS):
        return False
    # methods of nn.Module classes and storage classes are Python-side
    return not re.match(r"^torch\.nn\.[A-Z]\w*\.|^torch\.\w*Storage\b", norm)
