"""--fast: repeated blocks traced a few times, counts extrapolated, checked against full traces."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from opcheck.core.oplist import OpList
from opcheck.tracers.inputs import InputSpec

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from opcheck.tracers import repeat, runtime  # noqa: E402

SEQ = 8
Made = tuple[Any, tuple[Any, ...], dict[str, Any]]


def _ids() -> Any:
    return torch.zeros(1, SEQ, dtype=torch.long)


def llama() -> Made:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=4,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg), (_ids(),), {"use_cache": False}


def gpt2() -> Made:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=128, n_positions=64, n_embd=32, n_layer=5, n_head=4)
    cfg.use_cache = False
    return GPT2LMHeadModel(cfg), (_ids(),), {}


def bert() -> Made:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=4, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    return BertModel(cfg), (_ids(),), {"attention_mask": torch.ones(1, SEQ, dtype=torch.long)}


def vit() -> Made:
    from transformers import ViTConfig, ViTModel

    cfg = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=4,
                    num_attention_heads=4, intermediate_size=64)
    return ViTModel(cfg), (torch.zeros(1, 3, 32, 32),), {}


def bart() -> Made:
    from transformers import BartConfig, BartModel

    cfg = BartConfig(vocab_size=128, d_model=32, encoder_layers=4, decoder_layers=5,
                     encoder_attention_heads=4, decoder_attention_heads=4,
                     encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64)
    cfg.use_cache = False
    return BartModel(cfg), (_ids(),), {"decoder_input_ids": _ids(), "use_cache": False}


def _build(factory: Callable[[], Made]) -> Made:
    with torch.device("meta"):
        return factory()


def _trace(factory: Callable[[], Made], *, fast: bool, train: bool = False) -> OpList:
    model, args, kwargs = _build(factory)
    fn = repeat.trace_fast if fast else runtime.trace_module
    return fn(model, InputSpec(), example_args=args, example_kwargs=kwargs, train=train,
              label=factory.__name__)


def _counts(ol: OpList) -> dict[tuple[str, ...], int]:
    """Calls per op record and per call signature (its key: dtypes, dtype=, arguments)."""
    out: dict[tuple[str, ...], int] = {}
    for u in ol.ops:
        out[(u.op, *u.via)] = u.count
        for s in u.signatures:
            out[(u.op, *u.via, s.key)] = s.count
    return out


def _fast_notes(ol: OpList) -> list[str]:
    return [n for n in ol.notes if n.startswith("--fast")]


@pytest.mark.parametrize("train", [False, True], ids=["inference", "train"])
@pytest.mark.parametrize("factory", [llama, gpt2, bert, vit], ids=lambda f: f.__name__)
def test_fast_equals_the_full_trace(factory: Callable[[], Made], train: bool) -> None:
    full = _trace(factory, fast=False, train=train)
    fast = _trace(factory, fast=True, train=train)
    assert {u.key for u in fast.ops} == {u.key for u in full.ops}
    assert _counts(fast) == _counts(full)
    assert [u.op for u in fast.leaves()] == [u.op for u in full.leaves()]
    notes = _fast_notes(fast)
    assert len(notes) == 1 and "extrapolated" in notes[0], fast.notes
    # the training notes of the trace itself are kept
    assert [n for n in fast.notes if not n.startswith("--fast")] == full.notes


def test_module_paths_name_the_original_blocks_and_the_model_is_untouched() -> None:
    model, args, kwargs = _build(gpt2)
    ol = repeat.trace_fast(model, InputSpec(), example_args=args, example_kwargs=kwargs)
    mods = {m.split(".attn")[0] for u in ol.ops for m in u.modules if ".attn" in m}
    # blocks 0, 2 and 4 of 5 were traced, under their own names
    assert mods == {"transformer.h.0", "transformer.h.2", "transformer.h.4"}
    assert "transformer.h holds 5 identical GPT2Block blocks" in _fast_notes(ol)[0]
    assert len(model.transformer.h) == 5
    assert all(p.device.type == "meta" for p in model.parameters())


def test_two_lists_encoder_and_decoder() -> None:
    full = _trace(bart, fast=False, train=True)
    fast = _trace(bart, fast=True, train=True)
    assert _counts(fast) == _counts(full)
    notes = _fast_notes(fast)
    assert len(notes) == 2
    assert "encoder.layers holds 4" in notes[0] and "decoder.layers holds 5" in notes[1]


# ---------------------------------------------------------------- toy models: the fallbacks


class Block(torch.nn.Module):
    def __init__(self, i: int, wide: bool = False, sliding: bool = False) -> None:
        super().__init__()
        self.layer_idx = i  # a block's number: not a difference
        self.sliding = sliding
        self.lin = torch.nn.Linear(8, 8)
        self.act = torch.nn.GELU() if wide else torch.nn.ReLU()

    def forward(self, x: Any) -> Any:
        y = self.act(self.lin(x))
        return y.tanh() if self.sliding else y


class Stack(torch.nn.Module):
    def __init__(self, blocks: list[Block], by_index: int = 0, last_extra: bool = False) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(blocks)
        self.by_index = by_index
        self.last_extra = last_extra

    def forward(self, x: Any) -> Any:
        if self.by_index:  # indexes by the configured count: fewer blocks break it
            for i in range(self.by_index):
                x = self.layers[i](x)
            return x
        for block in self.layers:
            x = block(x)
            if self.last_extra and block.layer_idx == 5:  # a difference only a run shows
                x = x.sigmoid()
        return x


def _toy(model: Any, *, fast: bool) -> OpList:
    x = (torch.zeros(2, 8),)
    fn = repeat.trace_fast if fast else runtime.trace_module
    return fn(model, InputSpec(), example_args=x, train=True, label="toy")


def _same_as_full(make: Callable[[], Any]) -> OpList:
    with torch.device("meta"):
        fast = _toy(make(), fast=True)
        full = _toy(make(), fast=False)
    assert _counts(fast) == _counts(full)
    return fast


def test_blocks_that_differ_in_an_attribute_are_traced_in_full() -> None:
    fast = _same_as_full(lambda: Stack([Block(i, sliding=i % 2 == 1) for i in range(6)]))
    (note,) = _fast_notes(fast)
    assert "layers: block 1 differs from block 0 in attribute sliding (False vs True)" in note
    assert note.endswith("traced in full")


def test_blocks_that_differ_in_a_submodule_are_traced_in_full() -> None:
    fast = _same_as_full(lambda: Stack([Block(i, wide=i == 2) for i in range(6)]))
    (note,) = _fast_notes(fast)
    assert "block 2 differs from block 0 in submodule act (ReLU vs GELU)" in note


def test_a_run_of_identical_blocks_after_a_different_first_one() -> None:
    fast = _same_as_full(lambda: Stack([Block(i, wide=i == 0) for i in range(7)]))
    (note,) = _fast_notes(fast)
    assert note.startswith("--fast: layers holds 6 identical Block blocks (1 to 6 of 7")
    assert "blocks 1, 4 and 6 were traced" in note


def test_t5_first_block_differs_in_encoder_and_decoder() -> None:
    from transformers import T5Config, T5Model

    def t5() -> Made:
        cfg = T5Config(vocab_size=128, d_model=32, d_kv=8, d_ff=64, num_layers=5, num_heads=4)
        cfg.use_cache = False
        return T5Model(cfg), (_ids(),), {"decoder_input_ids": _ids(), "use_cache": False}

    fast = _trace(t5, fast=True)
    assert _counts(fast) == _counts(_trace(t5, fast=False))
    assert [n.split(";")[0] for n in _fast_notes(fast)] == [
        f"--fast: {part}.block holds 4 identical T5Block blocks (1 to 4 of 5" for part in
        ("encoder", "decoder")]


def test_a_block_that_differs_only_at_run_time_fails_the_count_check() -> None:
    fast = _same_as_full(lambda: Stack([Block(i) for i in range(6)], last_extra=True))
    (note,) = _fast_notes(fast)
    assert "op counts of blocks 3 and 5 differ" in note and "not interchangeable" in note
    assert "aten::sigmoid" in note


def test_a_forward_that_indexes_every_block_falls_back() -> None:
    fast = _same_as_full(lambda: Stack([Block(i) for i in range(6)], by_index=6))
    (note,) = _fast_notes(fast)
    assert "does not run with fewer blocks" in note and "IndexError" in note


def test_no_repeated_blocks() -> None:
    fast = _same_as_full(lambda: Stack([Block(i) for i in range(3)]))
    assert _fast_notes(fast) == ["--fast: no list of 4 or more identical blocks; traced in full"]


def test_fingerprint_ignores_the_block_number_only() -> None:
    with torch.device("meta"):
        a, b = Block(0), Block(7)
        c = Block(0)
        c.lin = torch.nn.Linear(8, 8, bias=False)
    assert repeat.fingerprint(a) == repeat.fingerprint(b)
    assert repeat.fingerprint(a) != repeat.fingerprint(c)


# ---------------------------------------------------------------- through the CLI and sandbox


def test_cli_trace_fast_in_the_sandbox(cli: Any, tmp_path: Path) -> None:
    src = tmp_path / "toymodel.py"
    src.write_text(
        "import torch\n"
        "class Block(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__()\n"
        "        self.lin = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        return self.lin(x).relu()\n"
        "def make():\n"
        "    m = torch.nn.Sequential(*[Block() for _ in range(5)])\n"
        "    return m, (torch.zeros(2, 8),)\n",
        encoding="utf-8",
    )
    out = tmp_path / "ops.json"
    r = cli("trace", "--model", f"{src}:make", "--fast", "--train", "-o", str(out), "--quiet")
    assert r.exit_code == 0, r.output
    doc = json.loads(out.read_text(encoding="utf-8"))
    assert any(n.startswith("--fast: the model holds 5 identical Block blocks") for n in
               doc["notes"]), doc["notes"]
    linear = {o["op"]: o["count"] for o in doc["ops"]}
    assert linear["aten::addmm"] == 5  # five blocks' forward, not three
    r = cli("trace", "--model", f"{src}:make", "--fast", "--static")
    assert r.exit_code == 2 and "--fast" in r.output
    # an op list is read as it is, saying so
    r = cli("trace", str(out), "--fast")
    assert r.exit_code == 0, r.output
    again = json.loads(r.output)
    assert again["notes"][-1] == "--fast applies to runtime traces: the op list was read as is"
    assert again["ops"] == doc["ops"]
