"""Inputs of transformers' models that follow no naming convention of the atlas, made from the
shape the forward's own docstring gives them (:func:`atlas_layouts.documented_input`), and
fitted to the forward: the documented width is the library's template text more often than
the width the model's first layer takes (``inputs_embeds`` documented ``hidden_size`` and
projected from twice a backbone's width; flattened patches documented ``hidden_size`` that
carry two position columns before the pixels). A forward on the meta device says the width it
wants (the same errors :mod:`atlas_audio` reads), and the input is resized once or twice.

Keyed by parameter names, docstrings, annotations and module attributes, never by model type.
torch is imported lazily.
"""

from __future__ import annotations

import inspect
import re
import typing
from typing import Any

from opcheck.tracers.atlas_layouts import documented_input, documented_shape

FIT_TRIES = 3  # forwards of the probe per model (each one on the meta device)
# "(8x766 and 768x512)": a linear got 766 features per row where its weight takes 768
_MATMUL = re.compile(r"mat1 and mat2 shapes cannot be multiplied \(\d+x(\d+) and (\d+)x\d+\)")
_REDUCTION = re.compile(r"reduction dim, but got \[\d+, (\d+)\] X \[(\d+), \d+\]")
# a forward refusing the inputs by their shape (not by a value: an index past a table is the
# random values')
SHAPE_ERROR = re.compile(r"shape|size|dimension|reduction dim|broadcast|multiplied|too many indices",
                         re.I)


def documented_siblings(forward: Any, params: Any, made: dict[str, Any]) -> list[str]:
    """The forward's parameters its docstring documents with a tensor shape and not as
    *optional* although the signature defaults them to None (a trajectory's ``actions``,
    ``returns_to_go`` and ``timesteps`` beside its ``states``): the forward uses them all."""
    out = []
    for name, p in params.items():
        # a mask the model makes itself where none is given (its docstring often forgets
        # *optional*): all ones is what it would make
        if name in made or name.endswith("mask") or p.default is not None or p.kind not in (p.POSITIONAL_OR_KEYWORD,
                                                                    p.KEYWORD_ONLY):
            continue
        found = documented_shape(forward, name)
        if found is not None and not found[2]:
            out.append(name)
    return out


def make_documented(forward: Any, missing: list[str], kwargs: dict[str, Any],
                    cfgs: list[Any], seq: int) -> list[str]:  # fmt: skip
    """The ``missing`` inputs the forward's docstring gives a tensor shape, made in ``kwargs``
    and taken off ``missing``; their names."""
    made = []
    for name in list(missing):
        value = documented_input(forward, name, cfgs, seq)
        if value is not None:
            kwargs[name] = value
            missing.remove(name)
            made.append(name)
    return made


def make_siblings(forward: Any, params: Any, kwargs: dict[str, Any], cfgs: list[Any],
                  seq: int) -> list[str]:  # fmt: skip
    """:func:`documented_siblings` made in ``kwargs``; their names."""
    names = []
    for name in documented_siblings(forward, params, kwargs):
        made = documented_input(forward, name, cfgs, seq)
        if made is not None:
            kwargs[name] = made
            names.append(name)
    return names


def kv_state_params(forward: Any) -> list[str]:
    """Parameters annotated ``dict[str, tuple[Tensor, Tensor]]``: key/value states per
    attention kind that a draft model reads from its target model (its own layers keep no
    key or value projection of their own)."""
    try:
        hints = typing.get_type_hints(forward)
    except Exception:  # an annotation naming a type its module imports lazily
        return []
    out = []
    for name, hint in hints.items():
        for arg in typing.get_args(hint) or (hint,):  # `X | None`
            if typing.get_origin(arg) is dict and _is_kv_pair(typing.get_args(arg)):
                out.append(name)
                break
    return out


def _is_kv_pair(args: tuple[Any, ...]) -> bool:
    import torch

    if len(args) != 2 or args[0] is not str or typing.get_origin(args[1]) is not tuple:
        return False
    return typing.get_args(args[1]) == (torch.Tensor, torch.Tensor)


def kv_states(model: Any, cfg: Any, seq: int) -> dict[str, tuple[Any, Any]] | None:
    """Key/value states per attention kind (the config's ``layer_types``), each ``(batch,
    key/value heads, seq, head width)`` as the attention modules of that kind read them (their
    ``layer_type``, ``head_dim`` and ``num_key_value_groups``). None when the model's
    attention modules do not say."""
    import torch

    from opcheck.tracers.atlas_hf_config import first_value

    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    kinds = getattr(text, "layer_types", None)
    heads = first_value([text], "num_attention_heads")
    if not isinstance(kinds, (list, tuple)) or not kinds or not isinstance(heads, int):
        return None
    out: dict[str, tuple[Any, Any]] = {}
    for mod in model.modules():
        kind, width = getattr(mod, "layer_type", None), getattr(mod, "head_dim", None)
        groups = getattr(mod, "num_key_value_groups", None)
        if isinstance(kind, str) and kind in kinds and kind not in out and isinstance(width, int) \
                and isinstance(groups, int) and groups > 0:
            shape = (1, max(heads // groups, 1), seq, width)
            out[kind] = (torch.randn(*shape), torch.randn(*shape))
    return out if set(out) == set(kinds) else None


def fit_widths(model: Any, params: Any, kwargs: dict[str, Any], documented: list[str],
               cfgs: list[Any], seq: int) -> str:  # fmt: skip
    """The float inputs made from the docstring (``documented``) resized in their last
    dimension until the model's first layer takes them: a forward names the width it wants
    (``mat1 and mat2 shapes cannot be multiplied (8x766 and 768x512)``), and the input grows by
    the difference (columns the model slices off first stay counted). A forward refusing to
    run without a parameter it names (``inputs_embeds and shared_kv_states cannot be None``,
    ``encoder_hidden_states must be given``) gets it, made from its docstring or, for
    key/value states, from the attention modules. Returns the last error of a shape kind or
    naming a parameter, "" when the forward ran or stopped for another reason (a value the
    meta device does not have: the fake trace may well pass it)."""
    import torch

    from opcheck.tracers.atlas_audio import _Runner

    for name, v in kwargs.items():  # the docstring's batch is one: a dummy's rows cut to it
        if name not in documented and isinstance(v, torch.Tensor) and v.dim() >= 2:
            kwargs[name] = v[:1]
    kv = kv_state_params(model.forward)
    runner = _Runner(model, params)  # a CPU copy where the meta device stops a try
    err = ""
    for _ in range(FIT_TRIES + 2):
        err = runner.run(kwargs) or ""
        named = [n for n in params if n not in kwargs and re.search(rf"\b{n}\b", err)]
        if named and _make_named(model, named, kv, kwargs, documented, cfgs, seq):
            continue
        if not err or not SHAPE_ERROR.search(err):
            return ""
        if not _refit(err, kwargs, documented):
            return err
    return err


def _make_named(model: Any, named: list[str], kv: list[str], kwargs: dict[str, Any],
                documented: list[str], cfgs: list[Any], seq: int) -> bool:  # fmt: skip
    """The parameters an error ``named`` made in ``kwargs`` (the documented ones noted in
    ``documented``); False when none could be."""
    made = False
    for name in named:
        value = kv_states(model, model.config, seq) if name in kv \
            else documented_input(model.forward, name, cfgs, seq)
        if value is not None:
            kwargs[name] = value
            documented += [] if name in kv else [name]
            made = True
    return made


def _refit(err: str, kwargs: dict[str, Any], documented: list[str]) -> bool:
    """The documented float input whose width a first layer refused, resized to the width it
    names (True), or False when the error names none."""
    import torch

    m = _MATMUL.search(err) or _REDUCTION.search(err)
    if m is None:
        return False
    floats = [n for n in documented if isinstance(kwargs.get(n), torch.Tensor)
              and kwargs[n].is_floating_point() and kwargs[n].dim() >= 2]  # fmt: skip
    got, want = int(m.group(1)), int(m.group(2))
    # the input whose width the layer got (the last made: the earlier ones passed their
    # first layers in the tries before), or the only one made where none matches
    name = next((n for n in reversed(floats) if kwargs[n].shape[-1] == got),
                floats[0] if len(floats) == 1 else None)  # fmt: skip
    if name is None:
        return False
    x = kwargs[name]
    width = x.shape[-1] + want - got
    if width <= 0 or width == x.shape[-1]:
        return False
    kwargs[name] = torch.rand(*x.shape[:-1], width)
    return True


def optional_main(forward: Any, main: str) -> bool:
    """The main input is optional in the signature (None by default): the forward takes
    another input in its place (Perceiver's ``inputs`` or ``input_ids``)."""
    p = inspect.signature(forward).parameters.get(main)
    return p is not None and p.default is None
