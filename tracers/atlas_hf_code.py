"""What a built transformers model's own code reads off its config that the default config
does not hold, for the atlas: special token ids a module reads (``self.config.
vision_start_token_id``) on a config class that declares none (a thinker config split off
an omni model, its position code reading the start token the processor puts before the
image placeholders). Read from the source of the built modules' classes, never by model type:
next month's architectures split their configs the same way.

Imported lazily (inside the sandbox), as atlas_hf is.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Iterator
from typing import Any

# a special token id read on the module's config or one of its sub-configs
_READ_TOKEN = re.compile(r"self\.config\.(?:(\w+_config)\.)?(\w+_token_(?:id|index))\b")
# the text ids the atlas makes (atlas_hf_inputs.SEQ ids from 5): a made-up token keeps clear of them
_TEXT_IDS = range(0, 32)


def _sources(cls: type) -> Iterator[str]:
    """The source of ``cls`` and of its bases holding model code (a mixin holding the position
    code): transformers' models, a model class defined elsewhere; not torch's or transformers'
    shared machinery (generation reads token ids a forward never needs)."""
    for klass in cls.__mro__:
        home = klass.__module__
        if home.startswith(("torch", "builtins")) or (home.startswith("transformers.")
                                                      and not home.startswith("transformers.models.")):
            continue
        try:
            yield inspect.getsource(klass)
        except (OSError, TypeError):  # a class made at run time has no source
            continue


def _token_ids(cfg: Any) -> set[int]:
    """Every special token id named anywhere in the config tree."""
    from transformers import PretrainedConfig

    ids: set[int] = set()
    stack, seen = [cfg], set()
    while stack:
        c = stack.pop()
        if id(c) in seen:
            continue
        seen.add(id(c))
        for key, v in vars(c).items():
            if isinstance(v, PretrainedConfig):
                stack.append(v)
            elif key.endswith(("_token_id", "_token_index")):
                for i in v if isinstance(v, (list, tuple)) else [v]:
                    if isinstance(i, int) and not isinstance(i, bool):
                        ids.add(i)
    return ids


def _free_id(vocab: int, used: set[int]) -> int | None:
    """The highest id of the vocabulary no special token and no made text id uses: a token
    the built embedding already holds, distinct from every id the inputs carry."""
    return next((i for i in range(vocab - 1, -1, -1) if i not in used and i not in _TEXT_IDS),
                None)  # fmt: skip


def fill_read_token_ids(model: Any) -> list[str]:
    """Token ids the model's modules read off their config where the config has no such
    attribute at all (a config declaring it None is left to atlas_inputs.fit_placeholder_ids):
    each set to a free id of the vocabulary, so the inputs' placeholders get the bounds the
    position code searches for (atlas_inputs.BOUNDS reads the ids set here). What was set."""
    from transformers import PretrainedConfig

    root = getattr(model, "config", None)
    if not isinstance(root, PretrainedConfig):
        return []
    vocab = next((v for c in (root, getattr(root, "text_config", None)) if c is not None
                  for v in [getattr(c, "vocab_size", None)] if isinstance(v, int) and v > 0),
                 None)  # fmt: skip
    if vocab is None:
        return []
    used = _token_ids(root)
    done: list[str] = []
    seen_classes: set[type] = set()
    for mod in model.modules():
        cfg = getattr(mod, "config", None)
        if not isinstance(cfg, PretrainedConfig) or type(mod) in seen_classes:
            continue
        seen_classes.add(type(mod))
        for text in _sources(type(mod)):
            for sub, name in _READ_TOKEN.findall(text):
                owner = getattr(cfg, sub, None) if sub else cfg
                if not isinstance(owner, PretrainedConfig) or _has(owner, name):
                    continue
                token = _free_id(vocab, used)
                if token is None:
                    return done
                setattr(owner, name, token)
                used.add(token)
                done.append(f"{type(owner).__name__}.{name} = {token}")
    return done


def _has(cfg: Any, name: str) -> bool:
    """Whether the config answers ``name`` (its own field, an ``attribute_map`` alias or a
    property), whatever the value."""
    try:
        getattr(cfg, name)
    except AttributeError:
        return False
    return True
