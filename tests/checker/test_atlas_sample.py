"""The atlas on a sample of real architectures, traced for real: at least 50 of them across
the four libraries (transformers' well-known and recent model types of every kind, torchvision's
and timm's families, diffusers' UNet, DiT and VAE classes) and the zoo, each a row with a
verdict per release or a one-line reason. The whole library is a separate run, out of CI
(``OPCHECK_ATLAS_WHOLE=1``; benchmarks/bench_atlas.py times it)."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from opcheck.checker import atlas
from opcheck.db.atlas import AtlasStore
from opcheck.db.catalog import Catalog
from opcheck.db.engine import make_engine

pytestmark = [pytest.mark.slow, pytest.mark.torch]

# well-known ones, and recent ones of every kind (causal LM, MoE, seq2seq, vision, audio,
# multimodal, masked LM)
TRANSFORMERS = ["bert", "gpt2", "llama", "vit", "whisper", "bart", "clip", "resnet", "mistral", "qwen2", "gemma2", "phi3", "roberta", "distilbert", "deit", "convnext", "swin", "wav2vec2", "mbart", "mt5", "falcon", "opt", "bloom", "gpt_neox", "electra", "mixtral", "detr", "segformer", "blip", "granitemoeshared", "bitnet", "gpt_neo", "afmoe", "olmo2", "smollm3", "glm4_moe_lite", "llava_next_video", "kimi_k25", "mobilenet_v1", "t5", "albert"]

# one of each kind the other libraries ship, quick ones (fake tensors, a few seconds): a
# segmentation head and a CNN and a transformer classifier; UNet, DiT and VAE
OTHERS = {
    "torchvision": ["resnet18", "deeplabv3_mobilenet_v3_large", "convnext_tiny", "vit_b_16"],
    "timm": ["resnet10t", "vit_tiny_patch16_224", "convnext_atto", "efficientnet_b0"],
    "diffusers": ["UNet2DModel", "AutoencoderKL", "DiTTransformer2DModel", "UNet2DConditionModel"],
}


def sample() -> list[atlas.Architecture]:
    """transformers' sample, the other libraries' where installed, and the zoo."""
    archs = [atlas.Architecture("transformers", n, f"atlas:transformers/{n}")
             for n in TRANSFORMERS]
    here = atlas.installed()
    for lib, names in OTHERS.items():
        if lib in here:
            archs += [atlas.Architecture(lib, n, f"atlas:{lib}/{n}") for n in names]
    return archs + atlas.architectures("zoo")


def test_a_sample_of_50_architectures(bundled_catalog: Path, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    archs = sample()
    assert len(archs) >= 50
    cat = Catalog.load(make_engine(bundled_catalog))
    store = AtlasStore(tmp_path / "atlas.sqlite")
    start = time.monotonic()
    result = atlas.run_atlas(cat, store, archs, atlas.Settings(jobs=2, timeout=120))
    took = time.monotonic() - start
    print(f"\natlas sample: {len(archs)} architectures in {took:.0f} s: {result.traced} traced, "
          f"{len(result.skipped)} skipped, {len(result.failed)} failed")
    for line in result.failed + result.skipped:
        print("  " + line)
    done = {(r.library, r.architecture) for r in store.rows()}
    assert done == {(a.library, a.name) for a in archs}  # every one is a row
    for r in store.rows():
        assert "Traceback" not in r.error and "\n" not in r.error
        if r.verdict in (atlas.ERROR, atlas.SKIPPED):
            assert r.error and not r.first_release
        else:
            assert r.first_release and r.recorder in ("fake-tensors", "real-data")
    for r in store.rows():  # each row says what ran
        assert r.traced.startswith("forward only"), r
    assert {r.library for r in store.rows() if r.verdict not in (atlas.ERROR, atlas.SKIPPED)} \
        == {a.library for a in archs}  # each library of the sample traced something
    with_verdict = {(r.library, r.architecture) for r in store.rows()
                    if r.verdict not in (atlas.ERROR, atlas.SKIPPED)}
    assert len(with_verdict) >= 0.9 * len(archs)


@pytest.mark.skipif(not os.environ.get("OPCHECK_ATLAS_WHOLE"),
                    reason="a whole library takes tens of minutes: OPCHECK_ATLAS_WHOLE=1")
def test_the_whole_transformers_atlas(bundled_catalog: Path, tmp_path: Path) -> None:
    cat = Catalog.load(make_engine(bundled_catalog))
    store = AtlasStore(tmp_path / "atlas.sqlite")
    archs = atlas.architectures("transformers", store=store)
    result = atlas.run_atlas(cat, store, archs, atlas.Settings(jobs=2))
    traced = len({r.architecture for r in result.rows if r.first_release})
    assert traced >= 0.95 * (len(archs) - len(result.skipped))
