"""Inputs of no naming convention made from the shape the forward's docstring gives them
(tracers/atlas_documented.py, atlas_layouts.documented_input), fitted to the width the model's
first layer takes, on tiny configs built here (no network)."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest

from opcheck.tracers import atlas_documented, atlas_hf_inputs, atlas_layouts

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

def _inputs(model: Any) -> dict[str, Any]:
    return atlas_hf_inputs.make_inputs(model.eval(), model.config, real=True)[1]


def test_a_trajectory_model_gets_every_input_its_docstring_requires() -> None:
    # states is the main input; actions, returns_to_go and timesteps default to None but the
    # docstring does not mark them optional, and the forward uses them all
    cfg = transformers.DecisionTransformerConfig(state_dim=5, act_dim=3, hidden_size=32,
                                                 n_layer=1, n_head=2, max_ep_len=64)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.DecisionTransformerModel(cfg)
    made = _inputs(model)
    assert tuple(made["states"].shape) == (1, 8, 5)
    assert tuple(made["actions"].shape) == (1, 8, 3)
    assert tuple(made["returns_to_go"].shape) == (1, 8, 1)
    assert made["timesteps"].dtype == torch.long
    assert "attention_mask" not in made  # documented *optional*: the model makes it
    with torch.no_grad():
        out = model(**made)
    assert tuple(out.action_preds.shape) == (1, 8, 3)


def test_a_documented_width_is_fitted_to_what_the_first_layer_takes() -> None:
    # Pix2Struct documents flattened_patches as (batch, seq, hidden_size); its embedding slices
    # off two position columns first, so the input is two wider than the patch projection
    cfg = transformers.Pix2StructVisionConfig(hidden_size=32, patch_embed_hidden_size=12,
                                              d_ff=64, d_kv=8, num_hidden_layers=1,
                                              num_attention_heads=4)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Pix2StructVisionModel(cfg)
    made = _inputs(model)
    assert made["flattened_patches"].shape[-1] == 12 + 2
    with torch.no_grad():
        model(**made)


def test_a_parameter_the_forward_names_as_missing_is_made_from_its_docstring() -> None:
    # the Q-Former runs only with encoder_hidden_states (an optional parameter), of the
    # vision width, not the documented hidden_size
    cfg = transformers.Blip2QFormerConfig(hidden_size=32, num_hidden_layers=2,
                                          num_attention_heads=2, intermediate_size=64,
                                          encoder_hidden_size=48)  # fmt: skip
    torch.manual_seed(0)
    model = transformers.Blip2QFormerModel(cfg)
    made = _inputs(model)
    assert tuple(made["query_embeds"].shape) == (1, 8, 32)
    assert made["encoder_hidden_states"].shape[-1] == 48
    with torch.no_grad():
        model(**made)


def test_documented_shapes_read_brackets_config_names_and_len() -> None:
    def forward(noise: Any, context: Any, ids: Any = None, kv: Any = None) -> None:
        """Args:
        noise (`torch.Tensor` of shape `[batch_size, config.block_size, dim]`):
            noise.
        context (`torch.Tensor` of shape `[batch_size, n, dim * len(config.layer_ids)]`):
            context.
        ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`, *optional*):
            ids.
        kv (`dict[str, torch.Tensor` of shape `(batch_size, 1, q_len, kv_len)`, *optional*):
            not a tensor.
        """

    cfg = transformers.PretrainedConfig(block_size=4, hidden_size=16, layer_ids=[1, 5, 9])
    assert atlas_layouts.documented_shape(forward, "ids") == (
        "torch.LongTensor", ["batch_size", "sequence_length"], True)
    assert atlas_layouts.documented_shape(forward, "kv") is None
    noise = atlas_layouts.documented_input(forward, "noise", [cfg], 8)
    context = atlas_layouts.documented_input(forward, "context", [cfg], 8)
    assert tuple(noise.shape) == (1, 4, 16)  # `dim`: the config's hidden_size
    assert tuple(context.shape) == (1, 8, 48)
    assert atlas_layouts.documented_input(forward, "ids", [cfg], 8).dtype == torch.long


def test_kv_states_per_layer_type_from_the_attention_modules() -> None:
    module: Any = torch.nn.Module

    class Attention(module):  # type: ignore[misc]
        def __init__(self, kind: str, width: int) -> None:
            super().__init__()
            self.layer_type, self.head_dim, self.num_key_value_groups = kind, width, 2

    class Draft(module):  # type: ignore[misc]
        def __init__(self) -> None:
            super().__init__()
            self.layers = torch.nn.ModuleList([Attention("sliding_attention", 8),
                                               Attention("full_attention", 16)])  # fmt: skip

        def forward(self, x: Any = None,
                    shared: Any = None) -> Any:
            return x

    # transformers' annotation of a draft model's key/value states
    tensor: Any = torch.Tensor
    Draft.forward.__annotations__["shared"] = dict[str, tuple[tensor, tensor]] | None

    cfg = transformers.PretrainedConfig(num_attention_heads=4,
                                        layer_types=["sliding_attention", "full_attention"])
    assert atlas_documented.kv_state_params(Draft.forward) == ["shared"]
    states = atlas_documented.kv_states(Draft(), cfg, 8)
    assert states is not None
    assert tuple(states["sliding_attention"][0].shape) == (1, 2, 8, 8)
    assert tuple(states["full_attention"][1].shape) == (1, 2, 8, 16)
    # a layer type no attention module has: none made rather than a guess
    cfg.layer_types = ["sliding_attention", "chunked_attention"]
    assert atlas_documented.kv_states(Draft(), cfg, 8) is None


def test_several_main_inputs_are_all_made() -> None:
    # OneFormer names two main inputs (the image and its task's tokens), a list: each made,
    # the second from the shape its docstring gives
    base: Any = transformers.PreTrainedModel

    class TwoMains(base):  # type: ignore[misc]
        config_class = transformers.PretrainedConfig
        main_input_name: ClassVar[list[str]] = ["pixel_values", "task_inputs"]

        def __init__(self, config: Any) -> None:
            super().__init__(config)
            self.conv = torch.nn.Conv2d(3, 4, 1)
            self.task = torch.nn.Linear(8, 4)

        def forward(self, pixel_values: Any, task_inputs: Any) -> Any:
            """Args:
            task_inputs (`torch.Tensor` of shape `(batch_size, sequence_length)`):
                the task.
            """
            return self.conv(pixel_values).mean((2, 3)) + self.task(task_inputs)

    model = TwoMains(transformers.PretrainedConfig())
    made = _inputs(model)
    assert made["pixel_values"].dim() == 4
    assert tuple(made["task_inputs"].shape) == (1, 8)
    with torch.no_grad():
        assert tuple(model(**made).shape) == (1, 4)
