"""Generic repairs of a transformers default config made small for the atlas
(:mod:`opcheck.tracers.atlas_hf` shrinks it; these make the shrunk config consistent and fit the
class that builds it). By the config's own attributes only, never by a model's name: next
month's architectures break the same ways.

Imported lazily (inside the sandbox), as atlas_hf is.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

# a top-k over experts, under the names configs give it (or map to it with attribute_map)
TOPK_NAMES = ("num_experts_per_tok", "moe_topk", "moe_k", "top_k", "num_selected_experts",
              "experts_per_token", "router_top_k")  # fmt: skip
EXPERT_NAMES = ("num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts")
# real-data builds: an embedding table of a full vocabulary is most of a small model's memory
# and time (DeepSeek-V2's 102,400 rows took 2.9 GB at the narrowed width)
SMALL_VOCAB = 1024


def _real_name(c: Any, name: str) -> str:
    """The attribute a config stores ``name`` under (its ``attribute_map`` aliases)."""
    return str(getattr(type(c), "attribute_map", {}).get(name, name))


def _int(d: dict[str, Any], key: str) -> int | None:
    v = d.get(key)
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def first_value(cfgs: Iterable[Any], *keys: str, default: Any = None) -> Any:
    """The first value among ``keys`` set on the configs, in order (a tower's own config
    first): not None, not a bool (a flag is no size)."""
    for c in cfgs:
        d = vars(c)
        for k in keys:
            v = d.get(k)
            if v is not None and not isinstance(v, bool):
                return v
    return default


def clamp_topk(cfgs: list[Any]) -> None:
    """A top-k no larger than the (shrunk) expert count, whatever name the config stores either
    under: a top-6 router over 4 experts stops the trace at topk. A top-k the default config
    leaves unset (None) beside a set expert count gets 2: the router calls topk(k=None)."""
    for c in cfgs:
        d = vars(c)
        experts = [n for n in (_int(d, _real_name(c, k)) for k in EXPERT_NAMES) if n]
        if not experts:
            continue
        most = min(experts)
        for key in {_real_name(c, k) for k in TOPK_NAMES}:
            k = _int(d, key)
            if (k is not None and k > most) or (key in d and d[key] is None):
                setattr(c, key, min(2, most))


def for_class(cfg: Any, cls: Any) -> Any:
    """The config ``cls`` is built from: ``cfg`` itself, or the sub-config of the class's
    ``config_class`` where a composite model type's default config wraps it (a text-only head
    registered under a vision-language model type)."""
    want = getattr(cls, "config_class", None)
    if not isinstance(want, type) or isinstance(cfg, want):
        return cfg
    for value in vars(cfg).values():
        if isinstance(value, want):
            return value
    return cfg


def shrink_vocab(cfgs: list[Any], keep: int = SMALL_VOCAB) -> None:
    """Vocabularies cut to ``keep`` rows, never below a special token id the config names (the
    model looks them up in the same table), wherever in the config tree it is named: a
    multimodal model's placeholder ids (``image_token_id``) live on the outer config."""
    ids = [i for c in cfgs for k, v in vars(c).items() if k.endswith(("_token_id", "_token_index"))
           for i in (v if isinstance(v, (list, tuple)) else [v])
           if isinstance(i, int) and not isinstance(i, bool)]  # fmt: skip
    for c in cfgs:
        vocab = _int(vars(c), "vocab_size")
        if vocab is not None and vocab > keep:
            c.vocab_size = max([keep, *(i + 1 for i in ids)])
