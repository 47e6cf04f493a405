"""Generic repairs of the atlas trace (issue 36, session 10), each on a tiny synthetic case: a
fake-trace failure a real run repeats goes straight to a one-line failure (no real-data
rebuild), a top-k over shrunk experts is clamped under whatever name a config stores it, a
head built from the sub-config its class wants, real-data vocabularies cut to the special
tokens."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from opcheck.core.errors import TraceError
from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from opcheck.tracers import atlas_hf, atlas_hf_config, atlas_trace, runtime  # noqa: E402


class _Mismatch(torch.nn.Module):  # type: ignore[misc,name-defined]
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x: Any) -> Any:
        return self.proj(x)  # x has 5 features: wrong whatever the values


class _ReadsValues(torch.nn.Module):  # type: ignore[misc,name-defined]
    def forward(self, x: Any) -> Any:
        if x.sum() > 0:  # a branch on a value: the fake trace cannot take it
            return x * 2
        return x


def _fail(model: Any, x: Any) -> runtime.PartialTrace:
    with pytest.raises(runtime.PartialTrace) as info:
        runtime.trace_module(model, InputSpec(), example_args=(x,), label="m")
    return info.value


def test_a_shape_error_is_same_on_real_and_a_value_branch_is_not() -> None:
    with torch.device("meta"):
        mismatch, x5 = _Mismatch(), torch.randn(2, 5)
    shape = _fail(mismatch, x5)
    assert shape.same_on_real, str(shape)
    branch = _fail(_ReadsValues(), torch.randn(2, 5, device="meta"))
    assert not branch.same_on_real, str(branch)
    # a text naming the fake tensors is the fake trace's failure whatever else it says
    assert not runtime.same_on_real("RuntimeError: FakeTensor object has no attribute 'x'")
    assert runtime.same_on_real("ValueError: not enough values to unpack (expected 3, got 2)")
    assert runtime.same_on_real("ValueError: Audio must be mono, but got 16000")
    assert not runtime.same_on_real("AssertionError: Expected a real tensor, not a FakeTensor")


def test_a_failure_a_real_run_repeats_skips_the_real_data_rebuild(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    built: list[bool] = []

    def build(_library: str, _name: str, *, train: bool = False, real: bool = False,
              shrink: int | None = None) -> Any:
        built.append(real)
        with torch.device("meta"):
            return _Mismatch(), (torch.randn(2, 5),), {}

    monkeypatch.setattr(atlas_trace, "build", build)
    with pytest.raises(TraceError) as info:
        atlas_trace.trace_atlas("atlas:transformers/tiny", InputSpec())
    assert built == [False]  # the fake build only
    text = str(info.value)
    assert "cannot be multiplied" in text or "same reduction dim" in text
    assert "\n" not in text and "real-data recorder" not in text


def test_topk_is_clamped_to_the_shrunk_experts_under_an_aliased_name() -> None:
    class MoeConfig(transformers.PretrainedConfig):  # type: ignore[misc,name-defined]
        model_type = "tiny_moe"
        attribute_map: ClassVar[dict[str, str]] = {"num_experts": "moe_num_experts", "num_experts_per_tok": "moe_k"}

        def __init__(self, moe_num_experts: int = 64, moe_k: int | None = 6,
                     **kw: Any) -> None:
            self.moe_num_experts, self.moe_k = moe_num_experts, moe_k
            super().__init__(**kw)

    cfg = MoeConfig()
    atlas_hf._shrink_experts(cfg)
    atlas_hf_config.clamp_topk([cfg])
    assert cfg.moe_k is not None and 1 <= cfg.moe_k <= cfg.moe_num_experts <= 4
    untouched = MoeConfig(moe_num_experts=8, moe_k=3)
    atlas_hf_config.clamp_topk([untouched])
    assert untouched.moe_k == 3
    unset = MoeConfig(moe_num_experts=8, moe_k=None)  # left to the checkpoint by default
    atlas_hf_config.clamp_topk([unset])
    assert unset.moe_k == 2


def test_a_head_gets_the_sub_config_of_its_config_class() -> None:
    class Inner(transformers.PretrainedConfig):  # type: ignore[misc,name-defined]
        model_type = "tiny_inner"

    class Outer(transformers.PretrainedConfig):  # type: ignore[misc,name-defined]
        model_type = "tiny_outer"

    class Head:
        config_class = Inner

    outer = Outer()
    outer.text_config = Inner()
    assert atlas_hf_config.for_class(outer, Head) is outer.text_config
    assert atlas_hf_config.for_class(outer.text_config, Head) is outer.text_config
    assert atlas_hf_config.for_class(outer, object) is outer


def test_real_data_vocabularies_keep_the_special_token_ids() -> None:
    cfg = transformers.PretrainedConfig(vocab_size=50_000, image_token_id=30_000,
                                        eos_token_id=[2, 7])  # fmt: skip
    atlas_hf_config.shrink_vocab([cfg])
    assert cfg.vocab_size == 30_001
    small = transformers.PretrainedConfig(vocab_size=50_000, eos_token_id=[2, 7])
    atlas_hf_config.shrink_vocab([small])
    assert small.vocab_size == atlas_hf_config.SMALL_VOCAB


@pytest.mark.parametrize("text_path", ["skip", "fail"])
def test_a_model_whose_both_paths_need_a_processor_is_skipped_not_failed(
        monkeypatch: pytest.MonkeyPatch, text_path: str) -> None:
    from opcheck.tracers import atlas_inputs
    from opcheck.tracers.atlas_build import ModelSkip

    calls: list[bool] = []

    def both(*args: Any, **kwargs: Any) -> Any:
        calls.append(True)
        atlas_inputs.FED.add("pixel_values")  # the whole forward fed a tower
        if len(calls) == 1 or text_path == "skip":
            raise ModelSkip("X: needs inputs made by its processor (state), which a config "
                            "alone does not give")
        raise TraceError("tracing failed at m.py:3: ValueError: boom")

    monkeypatch.setattr(atlas_trace, "_trace_both", both)
    with pytest.raises(TraceError) as got:
        atlas_trace.trace_atlas("atlas:transformers/x", InputSpec())
    assert len(calls) == 2  # the text path was tried
    if text_path == "skip":
        assert type(got.value) is ModelSkip
        assert str(got.value).startswith("X: needs inputs made by its processor (state)")
    else:  # the text path failed for another reason: a failure, both reasons kept
        assert type(got.value) is TraceError
        assert "on the text path only: TraceError: tracing failed at m.py:3" in str(got.value)
