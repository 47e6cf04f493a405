"""A restriction text of torch_npu's API docs read into the dtypes it names (only / not, per
subject) and the argument limits it states. A step of :mod:`opcheck.scrapers.apidocs`; pure."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache


@dataclass(frozen=True)
class DtypeClause:
    """One dtype statement of a restriction text.

    ``kind``: ``only`` (仅支持 / 支持 / Only support: the list is exhaustive), ``not``
    (不支持), ``extra`` (额外支持: added on the named products). ``hardware`` empty = all
    products; ``condition`` non-empty = only under that condition (``属性mode为constant时``),
    so it is kept but not used by ``DtypeRestriction.only``/``unsupported``.
    """

    kind: str
    dtypes: tuple[str, ...]
    args: tuple[str, ...] = ()
    hardware: tuple[str, ...] = ()
    condition: str = ""
    text: str = ""


@dataclass(frozen=True)
class DtypeRestriction:
    clauses: tuple[DtypeClause, ...] = ()

    def _applies(self, c: DtypeClause, hardware: str) -> bool:
        return not c.condition and (not c.hardware or hardware in c.hardware)

    def only(self, hardware: str = "") -> frozenset[str] | None:
        """The exhaustive dtype set on ``hardware`` ("" = no product named), or None.

        Product-specific lists win over general ones (the docs give a general list and then
        "Atlas 训练系列产品：仅支持…" for the odd product out); 额外支持 adds to either.
        """
        scoped = [
            c
            for c in self.clauses
            if c.kind == "only" and c.hardware and self._applies(c, hardware)
        ]
        general = [
            c for c in self.clauses if c.kind == "only" and not c.hardware and not c.condition
        ]
        chosen = scoped or general
        if not chosen:
            return None
        out: set[str] = set()
        for c in chosen:
            out.update(c.dtypes)
        for c in self.clauses:
            if c.kind == "extra" and self._applies(c, hardware):
                out.update(c.dtypes)
        return frozenset(out)

    def allowed(self, hardware: str = "") -> frozenset[str] | None:
        """``only`` minus what is explicitly not supported on ``hardware``."""
        only = self.only(hardware)
        return None if only is None else only - self.unsupported(hardware)

    def unsupported(self, hardware: str = "") -> frozenset[str]:
        out: set[str] = set()
        for c in self.clauses:
            if c.kind == "not" and self._applies(c, hardware):
                out.update(c.dtypes)
        return frozenset(out)


@dataclass(frozen=True)
class ArgLimit:
    """An argument restriction that parsed cleanly ("dilation仅支持设置为1").

    ``kind``: ``only`` (the argument only accepts ``values``), ``not`` (rejects ``values``),
    ``unsupported_param`` (the parameter itself is not supported).
    """

    arg: str
    kind: str
    values: tuple[str, ...] = ()
    text: str = ""


# --------------------------------------------------------------------------- dtypes

_DTYPE_ALIASES: dict[str, str] = {
    "bf16": "bf16", "bfloat16": "bf16",
    "fp16": "fp16", "float16": "fp16", "half": "fp16",
    "fp32": "fp32", "float32": "fp32", "float": "fp32",
    "fp64": "fp64", "float64": "fp64", "double": "fp64",
    "uint8": "uint8", "uint16": "uint16", "uint32": "uint32", "uint64": "uint64",
    "int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "long": "int64",
    "bool": "bool",
    "complex32": "complex32", "chalf": "complex32",
    "complex64": "complex64", "cfloat": "complex64",
    "complex128": "complex128", "cdouble": "complex128",
    "float8_e4m3fn": "float8_e4m3fn", "float8_e5m2": "float8_e5m2",
}  # fmt: skip


def norm_dtype(name: str) -> str | None:
    """``torch.float`` / ``float32`` / ``fp32`` → ``fp32``; None for non-dtypes."""
    key = name.strip().lower()
    key = key.removeprefix("torch.")
    return _DTYPE_ALIASES.get(key)


_TOK = (
    "(?:torch\\.)?(?:"
    + "|".join(sorted(map(re.escape, _DTYPE_ALIASES), key=len, reverse=True))
    + ")(?![A-Za-z0-9_])"
)
_DTYPE_LIST = re.compile(
    rf"\s*(?:输出)?\s*(?P<list>{_TOK}(?:\s*(?:，|,|、|和|及|与|/|\bor\b|\band\b)\s*{_TOK})*)",
    re.I,
)
_VERB = re.compile(
    r"仅支持|额外支持|暂不支持|不支持|支持|[Oo]nly supports?|[Dd]on[`'’]?t support|[Dd]o not support|[Nn]ot support(?:ed)?|[Ss]upports?"
)
_HW = re.compile(r"Atlas [^：:，,、/。；;\n]*?(?:系列产品|产品|系列)|Ascend \d+[A-Za-z]*")
_SEGMENT_SPLIT = re.compile(r"[\n。；;]")


def _verb_kind(verb: str) -> str:
    v = verb.lower()
    if "不" in v or "n't" in v or "not" in v or "don" in v:
        return "not"
    if "额外" in v:
        return "extra"
    return "only"


def _subject(prefix: str) -> tuple[tuple[str, ...], tuple[str, ...], str]:
    """(args, hardware, condition) from the text before a verb."""
    hardware = tuple(dict.fromkeys(h.strip() for h in _HW.findall(prefix)))
    parts = [p.strip() for p in re.split(r"[，,：:]", prefix.strip().lstrip("-* ").strip())]
    parts = [p for p in parts if p]
    cond_parts: list[str] = []
    args: tuple[str, ...] = ()
    for idx, part in enumerate(parts):
        rest = _HW.sub("", part)
        rest = re.sub(r"^针对|[、/\s]|和", "", rest)
        if not rest:
            continue  # a product-only part: scope, not condition
        if idx == len(parts) - 1:
            ticked = re.findall(r"`([^`]+)`", part)
            bare = re.sub(r"`[^`]+`|[、/\s]|和|的|参数|输入", "", _HW.sub("", part))
            if ticked and not bare:
                args = tuple(ticked)
                continue
            if not ticked and re.fullmatch(r"[A-Za-z_]\w*", bare):
                args = (bare,)
                continue
        cond_parts.append(part)
    return args, hardware, "，".join(cond_parts)


@lru_cache(maxsize=16384)
def parse_dtypes(restriction_text: str) -> DtypeRestriction:
    """Dtype statements of a 限制与说明 / Limitations text.

    Plain 支持 lists (pipe-table generation) count as exhaustive: the next generation
    rewrote the same lists as 仅支持. A verb only counts when dtypes follow it directly, so
    "int64类型不支持三个tensor同时广播" (a dtype before the verb) yields nothing.
    """
    clauses: list[DtypeClause] = []
    for segment in _SEGMENT_SPLIT.split(restriction_text):
        pos = 0
        for vm in _VERB.finditer(segment):
            if vm.start() < pos:
                continue
            lm = _DTYPE_LIST.match(segment, vm.end())
            if not lm:
                continue
            toks = re.findall(_TOK, lm.group("list"), re.I)
            dtypes = tuple(dict.fromkeys(d for t in toks if (d := norm_dtype(t))))
            args, hardware, condition = _subject(segment[pos : vm.start()])
            if segment[vm.end() : lm.start("list")].strip() == "输出":
                args = ("output",)
            clauses.append(
                DtypeClause(
                    kind=_verb_kind(vm.group(0)),
                    dtypes=dtypes,
                    args=args,
                    hardware=hardware,
                    condition=condition,
                    text=segment[pos : lm.end()].strip(" ，,-"),
                )
            )
            pos = lm.end()
    return DtypeRestriction(tuple(clauses))


_ID = r"(?<![A-Za-z0-9_])`?(?P<arg>[A-Za-z_][A-Za-z0-9_]*)`?"
_VAL = r"`?(?:\([0-9,\s]*\)|[A-Za-z0-9_.+\-]+)`?"
# A value must end at punctuation or the text end: "仅支持2维及以上的输入" is no arg limit.
_VAL_END = r"(?=$|[\s，,。；;)）]|或|和|、)"
_ARG_ONLY = re.compile(
    _ID + r"\s*(?:参数)?(?:的值)?(?:目前)?(?:在NPU上)?仅支持(?:设置为|设为|为)?\s*"
    rf"(?P<vals>{_VAL}{_VAL_END}(?:\s*(?:或|和|、)\s*{_VAL}{_VAL_END})*)"
)
_ARG_NOT_VALUE = re.compile(
    r"(?:不支持|[Dd]on[`'’]?t support)\s*" + _ID + r"\s*=\s*`?(?P<val>[A-Za-z0-9_.]+)"
)
_ARG_NOT_PARAM = re.compile(r"(?:不支持|[Dd]on[`'’]?t support)\s*" + _ID + r"\s*(?:参数|parameter)")


@lru_cache(maxsize=16384)
def parse_arg_limits(restriction_text: str) -> tuple[ArgLimit, ...]:
    out: list[ArgLimit] = []
    for segment in _SEGMENT_SPLIT.split(restriction_text):
        for m in _ARG_ONLY.finditer(segment):
            vals = tuple(
                v.strip().strip("`") for v in re.split(r"\s*(?:或|和|、)\s*", m.group("vals"))
            )
            if any(norm_dtype(v) for v in vals):
                continue  # a dtype list, handled by parse_dtypes
            out.append(ArgLimit(m.group("arg"), "only", vals, m.group(0)))
        for m in _ARG_NOT_VALUE.finditer(segment):
            out.append(ArgLimit(m.group("arg"), "not", (m.group("val"),), m.group(0)))
        for m in _ARG_NOT_PARAM.finditer(segment):
            out.append(ArgLimit(m.group("arg"), "unsupported_param", (), m.group(0)))
    return tuple(out)
