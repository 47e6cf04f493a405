"""Default configs that build but stop their trace (issue 36): a width that does not split
into its heads, a model naming several main inputs, and fields a default config leaves to the
checkpoint (a clamp bound, per-class lists) read where the trace stops. Real transformers
configs and models, made tiny."""

from __future__ import annotations

import traceback
from pathlib import Path
from typing import Any

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from opcheck.tracers import atlas_hf, atlas_hf_config, atlas_hf_unset  # noqa: E402


def test_heads_that_do_not_split_the_width_become_the_nearest_that_do() -> None:
    from transformers import SiglipVisionConfig, SiglipVisionModel

    cfg = SiglipVisionConfig(hidden_size=1152, num_attention_heads=14, num_hidden_layers=1,
                             intermediate_size=64)  # fmt: skip
    with pytest.raises(Exception) as info:
        SiglipVisionModel(cfg)
    exc = info.value
    # 12 and 16 are as near: more heads, the narrower head (a released 1152-wide tower's)
    assert "num_attention_heads = 16" in atlas_hf_config.repair([cfg], exc)
    with torch.device("meta"):
        SiglipVisionModel(cfg)
    other = ValueError("The hidden size (100) is not a multiple of the number of attention "
                       "heads (12)")  # fmt: skip
    bert = transformers.BertConfig(hidden_size=100, num_attention_heads=12)
    assert atlas_hf_config.repair([bert], other)
    assert bert.num_attention_heads == 5  # 7 off 12; 25 (13 off), the other 4-wide split


def _dbrx() -> Any:
    return transformers.DbrxConfig(
        d_model=32, n_heads=4, n_layers=1, max_seq_len=16, vocab_size=64,
        attn_config={"kv_n_heads": 2}, ffn_config={"ffn_hidden_size": 32, "moe_num_experts": 2,
                                                  "moe_top_k": 1},
    )  # fmt: skip


def _why(exc: BaseException) -> str:
    """The atlas's one line for a trace stopped in transformers' own code."""
    frame = [f for f in traceback.extract_tb(exc.__traceback__) if "/transformers/" in f.filename][-1]
    path = Path(frame.filename)
    rel = path.relative_to(Path(transformers.__file__).parent.parent)
    return f"tracing failed at {rel}:{frame.lineno}: {type(exc).__name__}: {exc}"


def test_a_clamp_bound_left_unset_is_set_and_the_model_runs(
        monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    monkeypatch.setattr(atlas_hf_unset, "SET_AFTER_TRACE", {})
    cfg = _dbrx()
    # the atlas's own construction: the fields a build names (rope_theta) repaired
    model = atlas_hf._construct(transformers.DbrxForCausalLM, cfg, real=True).eval()
    ids = torch.arange(6).unsqueeze(0)
    with pytest.raises(Exception) as info:
        model(input_ids=ids)
    exc = info.value
    why = _why(exc)
    assert atlas_hf_unset.remember([cfg, cfg.attn_config, cfg.ffn_config], why)
    assert not atlas_hf_unset.remember([cfg, cfg.attn_config], why)  # nothing new the 2nd time
    fresh = _dbrx()
    atlas_hf_unset.apply([fresh, fresh.attn_config, fresh.ffn_config])
    assert fresh.attn_config.clip_qkv == atlas_hf_unset.UNSET_FLOAT
    model = atlas_hf._construct(transformers.DbrxForCausalLM, fresh, real=True).eval()
    assert model(input_ids=ids).logits.shape == (1, 6, 64)
    # the atlas's build of the model type: its default config carries the field from then on
    monkeypatch.setattr(atlas_hf_unset, "SET_AFTER_TRACE", {})
    assert atlas_hf.make_config("dbrx", 2).attn_config.clip_qkv is None
    assert atlas_hf.repair_after("dbrx", why)
    assert atlas_hf.make_config("dbrx", 2).attn_config.clip_qkv == atlas_hf_unset.UNSET_FLOAT
    # a failure not about None names nothing, even on the same line
    assert atlas_hf_unset.unset_on_line([cfg.attn_config],
                                        why.split(": ")[0] + ": RuntimeError: shapes") == {}


def test_per_class_lists_get_one_entry_per_label() -> None:
    cfg = transformers.PPDocLayoutV2Config()
    labels = cfg.num_labels
    line = "x = torch.tensor(self.config.class_thresholds) + self.config.class_order"
    found: dict[str, Any] = {}
    for name in atlas_hf_unset._READ.findall(line):
        if name in vars(cfg) and vars(cfg)[name] is None:
            found[name] = atlas_hf_unset._unset_value(cfg, name)
    assert found == {"class_thresholds": [atlas_hf_unset.UNSET_SCORE] * labels,
                     "class_order": list(range(labels))}  # fmt: skip


def test_every_main_input_a_model_names_is_made() -> None:
    model, _args, kwargs = atlas_hf.build("transformers", "oneformer")
    task = model.config.task_seq_len
    assert set(kwargs) >= {"pixel_values", "task_inputs"}
    assert tuple(kwargs["task_inputs"].shape) == (1, task)  # its config's own sequence length
