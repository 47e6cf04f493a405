"""Generic repairs of a transformers default config made small for the atlas
(:mod:`opcheck.tracers.atlas_hf` shrinks it; these make the shrunk config consistent and fit the
class that builds it). By the config's own attributes only, never by a model's name: next
month's architectures break the same ways.

Imported lazily (inside the sandbox), as atlas_hf is.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Iterable
from pathlib import Path
from typing import Any

# a top-k over experts, under the names configs give it (or map to it with attribute_map)
TOPK_NAMES = ("num_experts_per_tok", "moe_topk", "moe_k", "top_k", "num_selected_experts",
              "experts_per_token", "router_top_k", "top_k_experts")  # fmt: skip
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


# --- unset fields: a default config leaves to the checkpoint what the model needs -----------

SHARED_EXPERT_NAMES = ("n_shared_experts", "num_shared_experts")
UNSET_VOCAB = 64  # a CTC or protein head's alphabet: tens of symbols
UNSET_STEPS = 8  # a forecast horizon (prediction_length) the default config leaves unset
FULL_ATTENTION = "full_attention"  # transformers' name of a plain attention layer kind
_NO_ATTR = re.compile(r"'(\w+)' object has no attribute '(\w+)'")
_NEEDED = re.compile(r"`(\w+)` config needs to be specified")
_MUST_TRUE = re.compile(r"`(\w+)=True`")
_MUST_BE = re.compile(r"(\w+) must be (-?\d+), got")
_CONFIG_ATTR = re.compile(r"config\.(\w+)(\[|\))")
# a width that does not split into its heads, as attention layers word it
_HEADS_SPLIT = re.compile(r"embed_dim`?: (\d+) and `?num_heads`?: (\d+)"
                          r"|hidden size \((\d+)\) is not a multiple of the number of attention "
                          r"heads \((\d+)\)")
_HEAD_NAMES = ("num_attention_heads", "num_heads", "n_head", "n_heads", "attention_heads")
_TIMM_NAME = re.compile(r"(\w+) is not set in the config\. Please set it to a timm model name")


def fill_unset(cfgs: list[Any]) -> None:
    """Fields a default config leaves None that the model's constructor needs, from the
    config's other fields: expert counts and widths beside a router, shared experts, a vocabulary
    (CTC and protein heads name none, nor their padding id)."""
    for c in cfgs:
        d = vars(c)
        if any(k in d for k in TOPK_NAMES):
            for key in EXPERT_NAMES:
                if key in d and d[key] is None:
                    setattr(c, key, 4)
            for key in SHARED_EXPERT_NAMES:
                if key in d and d[key] is None:
                    setattr(c, key, 1)
        if "moe_intermediate_size" in d and d["moe_intermediate_size"] is None \
                and _int(d, "intermediate_size"):
            c.moe_intermediate_size = d["intermediate_size"]
        if "vocab_size" in d and d["vocab_size"] is None:
            c.vocab_size = UNSET_VOCAB
            if d.get("pad_token_id", 0) is None:  # the checkpoint's vocabulary names it
                c.pad_token_id = 0


def fix_misspelled(cfgs: list[Any]) -> list[str]:
    """A default config's value passed under a misspelled name (a sub-config spec's
    ``archirecture`` beside the field ``architecture``) moved to the field it was meant for: an
    attribute no field of the class declares, one letter off a declared field of the same
    length whose value is still the class default and of the same type. What was moved."""
    import dataclasses

    done = []
    for c in cfgs:
        fields = getattr(type(c), "__dataclass_fields__", None) or {}
        d = vars(c)
        for key, value in list(d.items()):
            if key.startswith("_") or key in fields:
                continue
            for name, f in fields.items():
                default = f.default if f.default is not dataclasses.MISSING else None
                off = len(name) != len(key) or sum(map(str.__ne__, name, key)) != 1
                if off or d.get(name) != default or type(value) is not type(default):
                    continue
                setattr(c, name, value)
                done.append(f"{type(c).__name__}.{name} = {value!r} (given as {key})")
                break
    return done


def fit_neck_widths(cfgs: list[Any]) -> list[str]:
    """A config's ``hidden_size`` equal to its backbone's where both name one: the neck
    built from the outer config reads the backbone's output (ViTMatte's default pairs a
    384-wide decoder with a 768-wide ViTDet, the checkpoints pair equal widths). What was set."""
    done = []
    for c in cfgs:
        for key, sub in list(vars(c).items()):
            if not key.endswith("backbone_config") or not hasattr(sub, "to_dict"):
                continue
            mine, theirs = _int(vars(c), "hidden_size"), _int(vars(sub), "hidden_size")
            if mine is not None and theirs is not None and mine != theirs:
                c.hidden_size = theirs
                done.append(f"{type(c).__name__}.hidden_size = {theirs} (its {key}'s)")
    return done


def config_kwargs(exc: BaseException) -> dict[str, Any]:
    """Overrides for a default config its own validation refuses ("X must be 0, got 256")."""
    m = _MUST_BE.search(str(exc)) or _MUST_BE.search(str(exc.__cause__ or ""))
    return {m.group(1): int(m.group(2))} if m else {}


def repair(cfgs: list[Any], exc: BaseException) -> str:
    """Set the field a failed build names (its message or the failing line) from the
    config's other fields; what was set, or "" when the failure names nothing to set."""
    text = str(exc)
    for pattern, fix in ((_NO_ATTR, _missing_attr), (_NEEDED, _needed), (_MUST_TRUE, _must_true),
                         (_TIMM_NAME, _timm_name), (_HEADS_SPLIT, _split_heads)):
        m = pattern.search(text)
        if m:
            return fix(cfgs, m)
    if isinstance(exc, KeyError) and exc.args:
        return _rope_for_layer_kind(cfgs, str(exc.args[0]))
    if isinstance(exc, TypeError) and 'concatenate list (not "tuple")' in text:
        return _tuples_as_lists(cfgs)
    if isinstance(exc, TypeError) and "NoneType" in text:
        return _per_layer_list(cfgs, exc)
    return ""


def _tuples_as_lists(cfgs: list[Any]) -> str:
    """Tuples of a default config as lists, as a config read from JSON has them (a constructor
    concatenating a config's sizes to a list of its own)."""
    done = []
    for c in cfgs:
        for key, value in list(vars(c).items()):
            if isinstance(value, tuple) and not key.startswith("_"):
                setattr(c, key, list(value))
                done.append(key)
    return ", ".join(f"{k} as a list" for k in done)


def _missing_attr(cfgs: list[Any], m: re.Match[str]) -> str:
    owner, name = m.group(1), m.group(2)
    c = next((c for c in cfgs if type(c).__name__ == owner), None)
    if c is None:
        return ""
    value = _derive(c, name, cfgs)
    if value is None:
        return ""
    setattr(c, name, value)
    return f"{owner}.{name} = {value!r}"


def _derive(c: Any, name: str, cfgs: list[Any]) -> Any:
    """A value for ``name``, missing from config ``c``: the same field of another config of
    the model (the parent or a sibling tower), else by the field's naming convention."""
    for other in cfgs:
        v = vars(other).get(name)
        if other is not c and v is not None:
            return v
    d = vars(c)
    if name == "rope_theta":
        for other in [c, *cfgs]:
            rope = vars(other).get("rope_parameters")
            if isinstance(rope, dict) and isinstance(rope.get("rope_theta"), (int, float)):
                return rope["rope_theta"]
        return 10000.0
    if name == "num_key_value_heads":
        return _int(d, "num_attention_heads")
    if "dropout" in name or name.endswith("_prob"):
        return 0.0
    if name.endswith("intermediate_size"):
        return _int(d, "moe_intermediate_size") or _int(d, "intermediate_size")
    return None


def _needed(cfgs: list[Any], m: re.Match[str]) -> str:
    """A length the config asks for (``prediction_length``), and the lengths of the same
    config that default to it (``context_length``)."""
    name = m.group(1)
    for c in cfgs:
        d = vars(c)
        if name in d and d[name] is None:
            lengths = [k for k, v in d.items() if v is None and k.endswith("_length")]
            for key in dict.fromkeys([name, *lengths]):
                setattr(c, key, UNSET_STEPS)
            return f"{name} = {UNSET_STEPS}"
    return ""


def _split_heads(cfgs: list[Any], m: re.Match[str]) -> str:
    """A default config whose attention width does not divide into its head count (a tower's
    defaults copied from two checkpoints): the head count nearest it that divides the width,
    heads at least 4 wide (rotary pairs), more heads on a tie (the narrower head)."""
    width, heads = (int(g) for g in m.groups() if g is not None)
    for c in cfgs:
        d = vars(c)
        if width not in (_int(d, k) for k in ("hidden_size", "embed_dim", "d_model", "dim")):
            continue
        for key in _HEAD_NAMES:
            if _int(d, _real_name(c, key)) != heads:
                continue
            fits = [h for h in range(1, width + 1) if width % h == 0 and (width // h) % 4 == 0]
            if not fits:
                return ""
            best = min(fits, key=lambda h: (abs(h - heads), -h))
            setattr(c, _real_name(c, key), best)
            return f"{type(c).__name__}.{key} = {best} (was {heads}, {width} wide)"
    return ""


def _must_true(cfgs: list[Any], m: re.Match[str]) -> str:
    name = m.group(1)
    for c in cfgs:
        if vars(c).get(name) is False:
            setattr(c, name, True)
            return f"{name} = True"
    return ""


def _timm_name(cfgs: list[Any], m: re.Match[str]) -> str:
    """A timm model name a default config leaves unset (a timm backbone's ``backbone``): the
    architecture transformers' own timm wrapper defaults to."""
    import dataclasses

    from transformers import TimmWrapperConfig

    field = getattr(TimmWrapperConfig, "__dataclass_fields__", {}).get("architecture")
    name = field.default if field is not None else dataclasses.MISSING
    for c in cfgs:
        if isinstance(name, str) and m.group(1) in vars(c) and vars(c)[m.group(1)] is None:
            setattr(c, m.group(1), name)
            return f"{m.group(1)} = {name!r}"
    return ""


def _rope_for_layer_kind(cfgs: list[Any], kind: str) -> str:
    """Rope parameters keyed by layer kind, lacking a kind the layers use: the config's own
    (flat) rope settings for it."""
    for c in cfgs:
        d = vars(c)
        rope = d.get("rope_parameters")
        if isinstance(rope, dict) and kind in (d.get("layer_types") or []) and kind not in rope:
            flat = {k: v for k, v in rope.items() if not isinstance(v, dict)}
            theta = flat.get("rope_theta", d.get("rope_theta") or 10000.0)
            rope[kind] = {**flat, "rope_type": flat.get("rope_type", "default"),
                          "rope_theta": theta}  # fmt: skip
            return f"rope_parameters[{kind!r}]"
    return ""


def _per_layer_list(cfgs: list[Any], exc: BaseException) -> str:
    """A per-layer list left None, indexed on the failing line (``config.mlp_layer_types[i]
    == "sparse"``): one entry per layer, the kind the line tests for; ``layer_types``
    alternates it with full attention, so a hybrid keeps both kinds of layer."""
    tb = traceback.extract_tb(exc.__traceback__)
    line = tb[-1].line if tb else ""
    kinds = re.findall(r"""["'](\w+)["']""", line or "")
    for name, _ in _CONFIG_ATTR.findall(line or ""):
        for c in cfgs:
            d = vars(c)
            n = next((d[k] for k in ("num_hidden_layers", "num_layers") if _int(d, k)), None)
            if name not in d or d[name] is not None or not n or not kinds:
                continue
            other = FULL_ATTENTION if name == "layer_types" else kinds[0]
            setattr(c, name, [kinds[0] if i % 2 == 0 else other for i in range(n)])
            return f"{name} = {getattr(c, name)!r}"
    return ""


# --- multimodal rotary sections ---------------------------------------------------------------

_SECTION_DEFAULT = re.compile(r"""\.get\(\s*["']mrope_section["']\s*,\s*(\[[\d,\s]+\])""")
# sections read with no fallback (``.get("mrope_section")``, ``["mrope_section"]``)
_SECTION_BARE = re.compile(r"""(\.get\(\s*["']mrope_section["']\s*\)|\[\s*["']mrope_section["']\s*\])""")
# the multimodal convention's axes (temporal, height, width), equal shares of the rotary half
EVEN_SECTIONS = [1, 1, 1]


def code_sections(cls: Any) -> list[int] | None:
    """The rotary sections the model's code falls back to when the config names none
    (``config.rope_parameters.get("mrope_section", [8, 12, 12])``), read from its module or
    the modules its classes come from (a model reusing another's text decoder); equal shares
    of the three axes where the code reads sections with no fallback at all (a rotary embedding
    taking ``len(None)`` of a default config's missing sections)."""
    import sys

    home = sys.modules.get(getattr(cls, "__module__", ""))
    if home is None:
        return None
    names = [home.__name__, *(v.__module__ for v in vars(home).values() if isinstance(v, type))]
    bare = False
    for name in dict.fromkeys(names):
        path = getattr(sys.modules.get(name), "__file__", None)
        if not path or not name.startswith("transformers.models."):
            continue
        try:
            text = Path(path).read_text()
        except OSError:
            continue
        m = _SECTION_DEFAULT.search(text)
        if m:
            return [int(x) for x in m.group(1).strip("[]").split(",") if x.strip()]
        bare = bare or _SECTION_BARE.search(text) is not None
    return list(EVEN_SECTIONS) if bare else None


def _model_class(c: Any) -> Any:
    """The base model class of config ``c``'s model type (None when none is registered)."""
    import transformers
    from transformers.models.auto import modeling_auto

    name = modeling_auto.MODEL_MAPPING_NAMES.get(getattr(c, "model_type", ""), "")
    try:
        return getattr(transformers, name) if isinstance(name, str) and name else None
    except Exception:  # a dummy class of a missing package raises on access
        return None


def rotary_half(d: dict[str, Any], rope: dict[str, Any]) -> int | None:
    """Half the rotary width of a head: the sections' sum (the head width, or hidden size over
    heads, times the partial rotary factor)."""
    head = _int(d, "head_dim")
    heads, hidden = _int(d, "num_attention_heads"), _int(d, "hidden_size")
    if head is None and heads and hidden:
        head = hidden // heads
    if not head:
        return None
    factor = rope.get("partial_rotary_factor") or d.get("partial_rotary_factor") or 1.0
    return (int(head * float(factor)) + 1) // 2  # arange(0, dim, 2): an odd width rounds up


def fit_rope_sections(cfgs: list[Any], cls: Any) -> None:
    """Multimodal RoPE sections (temporal, height, width) summing to half the rotary width of
    a head, in their proportions: the config's own, or the code's fallback written into a text
    config that names none (a default config whose head width or rotary factor differs from
    the checkpoint the fallback was written for, or a head narrowed by the atlas)."""
    default = code_sections(cls)
    for c in cfgs:
        d = vars(c)
        rope = d.get("rope_parameters") or d.get("rope_scaling")
        if not isinstance(rope, dict) or any(isinstance(v, dict) for v in rope.values()):
            continue  # rope settings per layer kind: no shared sections
        sections = rope.get("mrope_section")
        if sections is None and "vocab_size" in d:
            sections = default or code_sections(_model_class(c))
        half = rotary_half(d, rope)
        if not isinstance(sections, list) or not sections or not half:
            continue
        total = sum(sections)
        if total != half:
            scaled = [max(s * half // total, 1) for s in sections]
            scaled[0] += half - sum(scaled)
            sections = scaled
        rope["mrope_section"] = list(sections)


# --- MLP widths a grouped matmul accepts ------------------------------------------------------

MLP_WIDTHS = ("intermediate_size", "ffn_dim", "encoder_ffn_dim", "decoder_ffn_dim", "d_ff",
              "moe_intermediate_size", "shared_expert_intermediate_size", "n_inner")  # fmt: skip
ALIGN = 8  # elements: bf16 grouped_mm wants 16-byte strides (DeepSeek-V2's 1407 is refused)


def align_mlp_widths(cfgs: list[Any], align: int = ALIGN) -> None:
    """MLP widths (never an attention width: heads split it) rounded down to a multiple of
    ``align``, so the narrowed expert weights keep strides grouped matmuls accept."""
    for c in cfgs:
        d = vars(c)
        for key in MLP_WIDTHS:
            w = _int(d, key)
            if w is not None and w > align and w % align:
                setattr(c, key, w - w % align)


# --- other tables and expert pools a shrunk config still keeps at full size -------------------

_EXPERT_COUNT = re.compile(r"^(num_|n_)?\w*experts?(_num)?$")


def shrink_expert_pools(cfgs: list[Any], keep: int = 4) -> None:
    """Expert counts under names the shrinking does not list (``zero_expert_num``, ...): a
    count of experts (``num_``/``n_`` prefix or ``_num`` suffix) above ``keep`` cut to it."""
    for c in cfgs:
        d = vars(c)
        for key, v in list(d.items()):
            counts = key.startswith(("num_", "n_")) or key.endswith("_num")
            if counts and _EXPERT_COUNT.match(key) and "per_tok" not in key \
                    and isinstance(v, int) and not isinstance(v, bool) and v > keep:
                setattr(c, key, keep)


def shrink_other_vocabs(cfgs: list[Any], keep: int = SMALL_VOCAB) -> None:
    """Real-data builds: embedding tables sized by other vocabulary fields (``*_vocab``: BLT's
    500,002-row hash embeddings, 384 M parameters narrowed) cut to ``keep`` rows."""
    for c in cfgs:
        for key, v in list(vars(c).items()):
            if key.endswith("_vocab") and isinstance(v, int) and not isinstance(v, bool) \
                    and v > keep:
                setattr(c, key, keep)


def default_config(model_type: str, tries: int = 8) -> Any:
    """``AutoConfig.for_model(model_type)``, with the values its own validation asks for
    ("X must be 0, got 256") where the default refuses itself: passed at the top, then to its
    sub-configs when the top does not reach the field (a nested text config's)."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    subs = list(getattr(CONFIG_MAPPING[model_type], "sub_configs", None) or {})
    top: dict[str, Any] = {}
    nested: dict[str, dict[str, Any]] = {}
    for _ in range(tries):
        try:
            cfg = AutoConfig.for_model(model_type, **top, **{k: dict(v) for k, v in
                                                             nested.items()})  # fmt: skip
            levels = one_feature_level(cfg)
            if not levels:
                return cfg
            top.update(levels)  # built again: the config derives its per-level fields from it
            return AutoConfig.for_model(model_type, **top, **{k: dict(v) for k, v in
                                                              nested.items()})  # fmt: skip
        except Exception as exc:
            fix = config_kwargs(exc)
            if not fix:
                raise
            [(key, value)] = fix.items()
            if any(n.get(key) == value for n in nested.values()):
                raise
            if top.get(key) != value:
                top[key] = value
                continue
            if not subs:
                raise
            del top[key]  # the top config does not hold it: its sub-configs do
            for sub in subs:
                nested.setdefault(sub, {})[key] = value
    return AutoConfig.for_model(model_type, **top, **nested)


# --- the layer outputs a neck reads, kept by a shrunk layer stack -----------------------------

# lists naming the layers whose outputs a neck, a decoder or a merge reads: a backbone's
# out_indices (stored as _out_indices by transformers' backbone configs), backbone_out_indices,
# intermediate_hook_ids, intermediate_hidden_state_indices, intermediate_layers_indices
_OUTPUT_LAYERS = re.compile(r"^_?(\w+_)?(out_indices|hook_ids|hidden_state_indices|layers_indices)$")


def _output_lists(c: Any, n: int, holders: Iterable[Any] = ()) -> list[tuple[Any, str, list[int], int]]:
    """(config, field, indices made positive, offset) of each list naming outputs of the ``n``
    layers of config ``c``: its own, and those of ``holders`` (a config holding ``c`` with no
    layers of its own: Depth Pro's hook ids count its patch encoder's layers); offset 1 where
    index 0 is the stem (a backbone's ``stage_names``: the embeddings, then one stage per
    layer), else 0."""
    out = []
    for owner in [c, *holders]:
        d = vars(owner)
        stages = d.get("stage_names") if owner is c else None
        for key, v in d.items():
            if not _OUTPUT_LAYERS.match(key) or not isinstance(v, (list, tuple)) or not v \
                    or not all(isinstance(i, int) and not isinstance(i, bool) for i in v):
                continue
            # a backbone's indices count stages, the stem first; the others count layers
            offset = 1 if isinstance(stages, (list, tuple)) and len(stages) == n + 1 else 0
            if offset == 0 and key.lstrip("_") == "out_indices" \
                    and isinstance(d.get("stage_names"), (list, tuple)):
                continue  # stages that are not one per layer (a hierarchical backbone's)
            if any(not -(n + offset) <= i < n + offset for i in v):
                continue  # indices into something else than these layers
            out.append((owner, key, [i % (n + offset) for i in v], offset))
    return out


def layers_kept(c: Any, n: int, keep: int, holders: Iterable[Any] = ()) -> int:
    """How many of the ``n`` layers of config ``c`` a shrink keeps: ``keep``, or one per
    output a neck reads (a depth neck of four reassemble stages wants four hidden states)."""
    most = keep
    for _owner, _key, indices, offset in _output_lists(c, n, holders):
        most = max(most, len({i for i in indices if i >= offset}))
    return min(most, n)


def remap_layer_outputs(c: Any, n: int, kept: int, holders: Iterable[Any] = ()) -> None:
    """The output lists of config ``c`` (``n`` layers cut to ``kept``) and of its ``holders``
    remapped in order onto the last layers kept, the stem staying the stem, and its
    ``stage_names`` cut to the stem and one stage per kept layer: a neck still gets as many
    hidden states as it has stages."""
    lists = _output_lists(c, n, holders)
    stages = vars(c).get("stage_names")
    if isinstance(stages, (list, tuple)) and len(stages) == n + 1:
        c.stage_names = list(stages[: kept + 1])
    for owner, key, indices, offset in lists:
        layers = sorted({i for i in indices if i >= offset})
        first = kept + offset - len(layers)
        where = {i: first + rank for rank, i in enumerate(layers)}
        new = [where.get(i, i) for i in indices]
        if key == "_out_indices" and hasattr(owner, "set_output_features_output_indices"):
            # a backbone config keeps out_features and out_indices naming the same stages
            owner.set_output_features_output_indices(out_features=None, out_indices=new)
        else:
            setattr(owner, key, type(vars(owner)[key])(new))


def one_feature_level(cfg: Any) -> dict[str, Any]:
    """The field to pass for a detector whose default config has no feature level at all
    (``num_feature_levels`` 0, derived from an empty ``*scale_factors`` list: LW-DETR's
    projector, which the checkpoints give one or more scales): one level at scale 1."""
    d = vars(cfg)
    if d.get("num_feature_levels") != 0:
        return {}
    return {key: [1.0] for key, v in d.items()
            if key.endswith("scale_factors") and isinstance(v, (list, tuple)) and not v}


def fit_stage_width(c: Any, n: int, kept: int) -> None:
    """A hierarchical encoder's ``hidden_size`` after its stages were cut from ``n`` to
    ``kept``: Swin-like stages double the width, the config holding the last one's, an
    ``embed``-named width times ``2 ** (stages - 1)``; the model's output narrows with the
    stages cut, and a head sized by ``hidden_size`` (CLAP's audio projection) would refuse it.
    Called only where a per-stage list of layer counts (``depths``) was cut with them."""
    d = vars(c)
    h = d.get("hidden_size")
    if not isinstance(h, int) or isinstance(h, bool) or kept >= n:
        return
    for key, w in d.items():
        if key != "hidden_size" and "embed" in key and isinstance(w, int) \
                and not isinstance(w, bool) and w > 0 and w * 2 ** (n - 1) == h:
            c.hidden_size = w * 2 ** (kept - 1)
            return
