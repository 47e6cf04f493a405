"""How torch_npu picks the kernel path of a call: the rules in its own and op-plugin's sources.

For an op with both an ``op_api`` (aclnn) and an ``acl_op`` kernel, op-plugin's generated
wrapper (``codegen/gen.py``, later ``torchnpugen/gen.py``) calls op_api only under a condition
(:func:`parse_codegen`: jit compile disabled, inputs in base format; aclnn-only devices raise
instead of taking acl_op). Whether jit compile is disabled by default is torch_npu's
(:func:`parse_jit_rule` over ``EnvVariables.cpp``, :func:`parse_acl_default` over
``LazyInitAclops.cpp``), and so is the precision mode the acl_op path compiles with
(:func:`parse_precision`). The SoC those rules compare is an enum (:func:`parse_soc_enum`,
``NpuVariables.h``); aclnn-only devices are named in ``NpuVariables.cpp``
(:func:`parse_aclnn_only`). op-plugin's op_api kernels also check the SoC themselves and hand
the call elsewhere (:func:`parse_soc_checks`: the ``_foreach_*`` kernels' per-tensor slow path,
an acl_op kernel on older SoCs).

Conditions are kept as normalized text over SoC comparisons (``soc>=Ascend910B1&&soc<Ascend310B1
||soc>Ascend310B4``) that :func:`soc_holds` decides for one SoC with the release's enum.

Pure: text in, facts out; an unrecognised form of a rule this module reads fails with the file
and line.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from opcheck.core.errors import ScrapeError
from opcheck.scrapers.opapi_sources import CppFunction, parse_kernel_source
from opcheck.scrapers.rows import Origin

__all__ = [
    "CALL_PREFIX",
    "CodegenRule",
    "JitRule",
    "PrecisionRule",
    "SocCheck",
    "SocRule",
    "parse_acl_default",
    "parse_aclnn_only",
    "parse_call_checks",
    "parse_codegen",
    "parse_jit_rule",
    "parse_precision",
    "parse_soc_checks",
    "parse_soc_enum",
    "soc_holds",
]

_COMMENT = re.compile(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\\n])*"', re.S)
_SOC_CMP = re.compile(
    r"(?:c10_npu::)?GetSocVersion\(\)\s*(>=|<=|==|!=|<|>)\s*(?:c10_npu::)?SocVersion::(\w+)")


def _blank_comments(text: str) -> str:
    """Comments and string literals blanked, line numbers kept (strings matter nowhere here)."""
    return _COMMENT.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


# --------------------------------------------------------------------------- SoC conditions


def _soc_expr(text: str) -> str | None:
    """A C++ boolean expression over SoC comparisons only, normalized; None when it reads
    anything else (a variable, a call other than GetSocVersion)."""
    rest = _SOC_CMP.sub(lambda m: f" soc{m.group(1)}{m.group(2)} ", text)
    tokens = re.findall(r"soc(?:>=|<=|==|!=|<|>)\w+|&&|\|\||[()!]|\S+", rest)
    if not tokens or any(not (t.startswith("soc") or t in ("&&", "||", "(", ")", "!"))
                         for t in tokens):
        return None
    if not any(t.startswith("soc") for t in tokens):
        return None
    expr = "".join(tokens)
    try:
        _Eval(expr, {}, "").parse()  # syntax only
    except (KeyError, ValueError):
        return None
    return expr


class _Eval:
    """Recursive descent over ``||``, ``&&``, ``!``, parentheses and ``soc<op>Name`` atoms."""

    def __init__(self, expr: str, enum: dict[str, int], soc: str) -> None:
        self.tokens = re.findall(r"soc(?:>=|<=|==|!=|<|>)\w+|&&|\|\||[()!]", expr)
        if "".join(self.tokens) != expr:
            raise ValueError(f"not a SoC condition: {expr!r}")
        self.i = 0
        self.enum = enum
        self.soc = soc

    def parse(self) -> bool:
        v = self._or()
        if self.i != len(self.tokens):
            raise ValueError("trailing tokens")
        return v

    def _peek(self) -> str:
        return self.tokens[self.i] if self.i < len(self.tokens) else ""

    def _or(self) -> bool:
        v = self._and()
        while self._peek() == "||":
            self.i += 1
            v = self._and() or v
        return v

    def _and(self) -> bool:
        v = self._not()
        while self._peek() == "&&":
            self.i += 1
            v = self._not() and v
        return v

    def _not(self) -> bool:
        if self._peek() == "!":
            self.i += 1
            return not self._not()
        if self._peek() == "(":
            self.i += 1
            v = self._or()
            if self._peek() != ")":
                raise ValueError("unbalanced parentheses")
            self.i += 1
            return v
        tok = self._peek()
        m = re.fullmatch(r"soc(>=|<=|==|!=|<|>)(\w+)", tok)
        if not m:
            raise ValueError(f"unexpected {tok!r}")
        self.i += 1
        if not self.enum:  # syntax check only
            return True
        left, right = self.enum[self.soc], self.enum[m.group(2)]
        op = m.group(1)
        return {">=": left >= right, "<=": left <= right, "==": left == right,
                "!=": left != right, "<": left < right, ">": left > right}[op]


def soc_holds(expr: str, enum: dict[str, int], soc: str) -> bool:
    """Whether condition ``expr`` holds on ``soc`` with the release's SoC enum ("": on every
    SoC). KeyError when the enum lacks a name the condition or the question uses."""
    if not expr:
        return True
    if not enum:
        raise KeyError("empty SoC enum")
    return _Eval(expr, enum, soc).parse()


# --------------------------------------------------------------------------- torch_npu files


def parse_soc_enum(text: str, *, origin: Origin) -> dict[str, int]:
    """``enum class SocVersion { … }`` of ``NpuVariables.h``: name → value (C++ numbering:
    an explicit ``= N`` restarts the count)."""
    code = _blank_comments(text)
    m = re.search(r"enum\s+class\s+SocVersion\s*\{(.*?)\}", code, re.S)
    if not m:
        raise ScrapeError("no enum class SocVersion", source=origin.path)
    out: dict[str, int] = {}
    nxt = 0
    base = _line(code, m.start(1))
    for im in re.finditer(r"[^,]+", m.group(1)):
        item = im.group(0).strip()
        if not item:
            continue
        em = re.fullmatch(r"(\w+)\s*(?:=\s*(-?\d+))?", item)
        if not em:
            raise ScrapeError(f"unrecognised SocVersion entry {item!r}", source=origin.path,
                              line=_line(code, m.start(1) + im.start() + len(im.group(0))
                                         - len(im.group(0).lstrip())))
        if em.group(2) is not None:
            nxt = int(em.group(2))
        out[em.group(1)] = nxt
        nxt += 1
    if not out:
        raise ScrapeError("empty enum class SocVersion", source=origin.path, line=base)
    return out


@dataclass(frozen=True)
class JitRule:
    """When jit compile is disabled (op_api taken) if the user sets nothing.

    ``soc``: ``CheckJitDisableInner`` returns true for SoCs where ``condition`` holds
    (2.6-era sources: ``soc>=Ascend910B1``). ``option``: ``REGISTER_OPTION_BOOL_FUNCTION``
    with the default option value ``default`` ("enable": jit compile on everywhere unless the
    CANN default read at init says otherwise, see :func:`parse_acl_default`)."""

    kind: str  # soc | option
    condition: str = ""  # soc: where jit compile is disabled by default
    default: str = ""  # option: the option's default value (enable | disable)
    line: int = 0


def parse_jit_rule(text: str, *, origin: Origin) -> JitRule | None:
    """The jit-compile default of ``EnvVariables.cpp``; None when the release has no
    ``CheckJitDisable`` function at all (before op-plugin split op_api from acl_op)."""
    code = _blank_comments(text)
    m = re.search(r"REGISTER_OPTION_BOOL_FUNCTION\s*\(\s*(CheckJitDisable(?:Inner)?)\s*,\s*"
                  r"jitCompile\s*,\s*(\"?\w+\"?)\s*,\s*(\"?\w+\"?)\s*\)", text)
    if m:
        default, true_val = m.group(2).strip('"'), m.group(3).strip('"')
        if true_val != "disable" or default not in ("enable", "disable"):
            raise ScrapeError(f"unrecognised jitCompile option function {m.group(0)!r}",
                              source=origin.path, line=_line(text, m.start()))
        return JitRule("option", default=default, line=_line(text, m.start()))
    f = re.search(r"\bbool\s+CheckJitDisableInner\s*\(\s*\)\s*\{", code)
    if f is None:
        other = re.search(r"\bCheckJitDisable", code)
        if other is not None:
            raise ScrapeError("CheckJitDisable defined in an unrecognised form",
                              source=origin.path, line=_line(code, other.start()))
        return None
    body_start = f.end()
    depth, i = 1, body_start
    while depth and i < len(code):
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        i += 1
    body = code[body_start:i - 1]
    # the user's setting first, then: `if (<soc condition>) { return true; } return false;`
    sm = re.search(r"if\s*\(((?:[^{}])*?GetSocVersion(?:[^{}])*?)\)\s*\{\s*return\s+(true|false)"
                   r"\s*;\s*\}\s*return\s+(true|false)\s*;", body, re.S)
    if not sm or sm.group(2) == sm.group(3):
        raise ScrapeError("CheckJitDisableInner: no SoC default found",
                          source=origin.path, line=_line(code, f.start()))
    expr = _soc_expr(sm.group(1))
    if expr is None:
        raise ScrapeError(f"CheckJitDisableInner: unrecognised condition {sm.group(1).strip()!r}",
                          source=origin.path, line=_line(code, body_start + sm.start()))
    if sm.group(2) == "false":
        expr = f"!({expr})"
    return JitRule("soc", condition=expr, line=_line(code, body_start + sm.start()))


def parse_acl_default(text: str, *, origin: Origin) -> int:
    """The line where torch_npu sets the jitCompile option from CANN's own
    ``ACL_OP_JIT_COMPILE`` default at init, when the user set none (``LazyInitAclops.cpp``:
    ``GetAndSetDefaultJitCompileByAcl``; earlier ``npu_sys_ctrl.cpp``); 0 when the file does
    not."""
    code = _blank_comments(text)
    m = re.search(r"void\s+GetAndSetDefaultJitCompileByAcl\s*\(\s*\)\s*\{", code)
    if m is None:
        m = re.search(r"AclGetCompileopt\s*\(\s*ACL_OP_JIT_COMPILE", code)
        if m is None:
            return 0
    depth, i = 1, m.end()
    while depth and i < len(code):  # to the end of the function (or of the one read in)
        depth += {"{": 1, "}": -1}.get(code[i], 0)
        i += 1
    put = re.search(r"SetOption\s*\(\s*\"jitCompile\"", text[m.end():i])
    if put is None:
        raise ScrapeError("CANN's ACL_OP_JIT_COMPILE default is read but not set as jitCompile",
                          source=origin.path, line=_line(code, m.start()))
    return _line(text, m.end() + put.start())


@dataclass(frozen=True)
class PrecisionRule:
    """``SetPrecisionMode``: ``when_true`` where ``condition`` holds, else ``when_false``
    (acl_op kernels are compiled with it)."""

    condition: str
    when_true: str
    when_false: str
    line: int


def parse_precision(text: str, *, origin: Origin) -> PrecisionRule | None:
    """``SetPrecisionMode`` of ``LazyInitAclops.cpp``; None when the file has none."""
    code = _blank_comments(text)
    m = re.search(r"void\s+SetPrecisionMode\s*\(\s*\)\s*\{", code)
    if m is None:
        return None
    window = text[m.end():m.end() + 1200]
    tm = re.search(r"=\s*([^;?]*GetSocVersion[^;?]*)\?\s*\"(\w+)\"\s*:\s*\"(\w+)\"", window, re.S)
    if tm is None:
        raise ScrapeError("SetPrecisionMode: no SoC choice found", source=origin.path,
                          line=_line(code, m.start()))
    expr = _soc_expr(tm.group(1))
    if expr is None:
        raise ScrapeError(f"SetPrecisionMode: unrecognised condition {tm.group(1).strip()!r}",
                          source=origin.path, line=_line(text, m.end() + tm.start()))
    return PrecisionRule(expr, tm.group(2), tm.group(3), _line(text, m.end() + tm.start()))


@dataclass(frozen=True)
class SocRule:
    condition: str  # "" when it holds on no SoC
    line: int


def parse_aclnn_only(text: str, *, origin: Origin) -> SocRule | None:
    """``IsAclnnOnly()`` of ``NpuVariables.cpp``: the SoCs that run aclnn operators only;
    None when the release has no such function."""
    code = _blank_comments(text)
    m = re.search(r"bool\s+IsAclnnOnly\s*\(\s*\)\s*\{\s*return\s+([^;]*);\s*\}", code)
    if m is None:
        if "IsAclnnOnly" in code:
            raise ScrapeError("IsAclnnOnly defined in an unrecognised form", source=origin.path,
                              line=_line(code, code.index("IsAclnnOnly")))
        return None
    if m.group(1).strip() == "false":  # declared, no SoC is aclnn-only yet
        return SocRule("", _line(code, m.start(1)))
    expr = _soc_expr(m.group(1))
    if expr is None:
        raise ScrapeError(f"IsAclnnOnly: unrecognised condition {m.group(1).strip()!r}",
                          source=origin.path, line=_line(code, m.start(1)))
    return SocRule(expr, _line(code, m.start(1)))


# --------------------------------------------------------------------------- op-plugin codegen


@dataclass(frozen=True)
class CodegenRule:
    """The condition of the wrapper generated for an op with both kernels: op_api when
    ``jit_disabled`` (jit compile off) and, if ``base_format``, every tensor input in base
    (ND) format; else acl_op, or an error on aclnn-only devices (``aclnn_only_raises``).
    ``force_aclnn``: the FORCE_ACLNN_OP_LIST option forces op_api;
    ``internal_format_opapi``: entries flagged so in the YAML skip the format test."""

    jit_disabled: bool
    base_format: bool
    force_aclnn: bool
    aclnn_only_raises: bool
    internal_format_opapi: bool
    line: int  # the generated `if (…)` that chooses op_api


def parse_codegen(text: str, *, origin: Origin) -> CodegenRule:
    """The op_api/acl_op choice of op-plugin's ``gen.py`` at one pin."""
    m = re.search(r"if\s+\"op_api\"\s+in\s+f\.impl_ns\s+and\s+\"acl_op\"\s+in\s+f\.impl_ns\s*:",
                  text)
    if m is None:
        raise ScrapeError("no branch for ops with both op_api and acl_op kernels",
                          source=origin.path)
    rest = text[m.end():]
    end = re.search(r"\n\s{0,8}elif\s+\"op_api\"\s+in\s+f\.impl_ns|\n\s{0,8}elif\s+\"op_api\"\s+in"
                    r"\s+f\.impl_ns\s+or", rest)
    block = rest[: end.start()] if end else rest[:4000]
    cond = None
    for cm in re.finditer(r"^\s*if\s*\((.*)\)\s*\{\{\s*$", block, re.M):
        nxt = block[cm.end():cm.end() + 400]
        if re.search(r"return\s+op_api::", nxt.split("}}", 1)[0]):
            cond = cm
            break
    if cond is None:
        raise ScrapeError("the generated wrapper's op_api condition was not found",
                          source=origin.path, line=_line(text, m.start()))
    c = cond.group(1)
    jit = "CheckJitDisable" in c or "is_jit_disable" in c
    fmt = "format_check" in c
    if not jit:
        raise ScrapeError(f"unrecognised op_api condition {c!r}", source=origin.path,
                          line=_line(text, m.end() + cond.start()))
    if fmt and "IsOpInputBaseFormat" not in text[max(0, m.start() - 6000):m.start()] + block:
        raise ScrapeError("a format check without IsOpInputBaseFormat", source=origin.path,
                          line=_line(text, m.end() + cond.start()))
    return CodegenRule(
        jit_disabled=jit, base_format=fmt, force_aclnn="force_aclnn" in c,
        aclnn_only_raises="is_aclnn_only" in block and "do not support internal format" in block,
        internal_format_opapi="internal_format_opapi" in block,
        line=_line(text, m.end() + cond.start()),
    )


# --------------------------------------------------------------------------- op_api kernels


@dataclass(frozen=True)
class SocCheck:
    """An op_api kernel that hands the call elsewhere on some SoCs: ``fallback`` (a PyTorch
    generic function such as ``at::native::foreach_tensor_add_scalar_kernel_slow_``, or an
    ``acl_op::`` kernel) when ``when`` holds."""

    function: str  # the C++ kernel
    line: int  # the `if` that falls back
    start: int  # the kernel's first and last line
    end: int
    when: str  # SoC condition under which it falls back ("" on every SoC)
    fallback: str
    params: tuple[str, ...] = ()  # the kernel's parameter type classes (to find its overload)


_STATIC_BOOL = re.compile(r"static\s+(?:const\s+)?bool\s+(\w+)\s*=\s*([^;]*);", re.S)
_TOP_RETURN = re.compile(r"\breturn\s+(at::native::foreach_tensor_\w+)\s*\(")
_IF_RETURN = re.compile(r"\bif\s*\(((?:[^(){};]|\((?:[^(){};]|\([^(){};]*\))*\))*)\)\s*\{\s*"
                        r"return\s+((?:at::native|acl_op)::\w+)\s*\(", re.S)


def _function_bodies(text: str, code: str,
                     origin: Origin) -> Iterator[tuple[CppFunction, int, str]]:
    """Each kernel function of a source file, its body's offset in ``code`` (the text with
    comments blanked) and the body."""
    lines = code.splitlines(keepends=True)
    offsets = [0]
    for ln in lines:
        offsets.append(offsets[-1] + len(ln))
    for fn in parse_kernel_source(text, origin=origin):
        if fn.line - 1 < len(offsets):
            lo = offsets[fn.line - 1]
            yield fn, lo, code[lo:offsets[min(fn.end_line, len(lines))]]


def parse_soc_checks(text: str, *, origin: Origin) -> tuple[SocCheck, ...]:
    """The SoC fallbacks of one ``op_plugin/ops/opapi/*.cpp`` file, per kernel function."""
    code = _blank_comments(text)
    out: list[SocCheck] = []
    for fn, lo, body in _function_bodies(text, code, origin):
        for tm in _TOP_RETURN.finditer(body):
            # at the function body's own level: every call takes PyTorch's per-tensor path
            if body.count("{", 0, tm.start()) - body.count("}", 0, tm.start()) == 1:
                out.append(SocCheck(fn.name, _line(code, lo + tm.start()), fn.line,
                                    fn.end_line, "", tm.group(1), fn.param_classes()))
                break
        if "GetSocVersion" not in body:
            continue
        flags: dict[str, str] = {}
        for sm in _STATIC_BOOL.finditer(body):
            expr = _soc_expr(sm.group(2))
            if expr is not None:
                flags[sm.group(1)] = expr
        for im in _IF_RETURN.finditer(body):
            cond = " ".join(im.group(1).split())
            neg = re.fullmatch(r"!\s*(\w+)", cond)
            if neg and neg.group(1) in flags:
                when = f"!({flags[neg.group(1)]})"
            elif cond in flags:
                when = flags[cond]
            else:
                expr = _soc_expr(cond)
                if expr is None:
                    continue  # not about the SoC alone (dtype, a CANN probe...)
                when = expr
            out.append(SocCheck(fn.name, _line(code, lo + im.start()), fn.line, fn.end_line,
                                when, im.group(2), fn.param_classes()))
    return tuple(out)


def parse_call_checks(text: str, *, origin: Origin) -> tuple[SocCheck, ...]:
    """The per-call fallbacks of one ``op_plugin/ops/opapi/*.cpp`` file, per kernel function:
    ``when`` is a ``call:`` condition over the call's tensor lists (below)."""
    code = _blank_comments(text)
    out: list[SocCheck] = []
    for fn, lo, body in _function_bodies(text, code, origin):
        names = [n for _, n in fn.params]
        for pos, cond, fallback in _if_returns(body):
            when = _call_expr(cond, names)
            if when is not None:
                out.append(SocCheck(fn.name, _line(code, lo + pos), fn.line, fn.end_line,
                                    when, fallback, fn.param_classes()))
    return tuple(out)


# Per-call fallbacks: the kernel hands a call to PyTorch's per-tensor path when its tensor
# lists may not take the fused route (PyTorch's ``can_use_fast_route``: lists sharing one
# dtype and device, dense, no integer promotion by a scalar) or hold integer tensors
# (``has_integral_tensor(list, include_bool)``). Kept as ``call:`` conditions over the call's
# dtypes: ``call:!fast_route`` and ``call:integral@N`` / ``call:integral_or_bool@N`` (N: the
# kernel parameter holding the list), joined by ``||``.
CALL_PREFIX = "call:"
_FAST_ROUTE = re.compile(r"!\s*(?:at::native::)?can_use_fast_route\s*\(.*\)", re.S)
_INTEGRAL = re.compile(r"(?:at::native::)?has_integral_tensor\s*\(\s*(\w+)\s*,\s*(true|false)\s*\)")


def _if_returns(body: str) -> list[tuple[int, str, str]]:
    """``if (cond) { return at::native::f(`` in a function body: (offset, cond, f)."""
    out: list[tuple[int, str, str]] = []
    for m in re.finditer(r"\bif\s*\(", body):
        depth, j = 0, m.end() - 1
        for j in range(m.end() - 1, len(body)):
            if body[j] == "(":
                depth += 1
            elif body[j] == ")":
                depth -= 1
                if depth == 0:
                    break
        rm = re.match(r"\s*\{\s*return\s+(at::native::\w+)\s*\(", body[j + 1:])
        if depth == 0 and rm:
            out.append((m.start(), body[m.end():j], rm.group(1)))
    return out


def _top_split(text: str, sep: str) -> list[str]:
    parts, depth, cur = [], 0, 0
    for k, ch in enumerate(text):
        if ch in "({[":
            depth += 1
        elif ch in ")}]":
            depth -= 1
        elif depth == 0 and text.startswith(sep, k):
            parts.append(text[cur:k])
            cur = k + len(sep)
    parts.append(text[cur:])
    return [p.strip() for p in parts if p.strip() != ""]


def _call_expr(cond: str, params: list[str]) -> str | None:
    """A fallback condition over the call's tensor lists, normalized; None when any term
    reads something else (a SoC, a jit setting, a CANN probe...)."""
    terms: list[str] = []
    for term in _top_split(" ".join(cond.split()), "||"):
        im = _INTEGRAL.fullmatch(term)
        if _FAST_ROUTE.fullmatch(term):
            terms.append("!fast_route")
        elif im and im.group(1) in params:
            kind = "integral_or_bool" if im.group(2) == "true" else "integral"
            terms.append(f"{kind}@{params.index(im.group(1))}")
        else:
            return None
    return CALL_PREFIX + "||".join(terms) if terms else None
