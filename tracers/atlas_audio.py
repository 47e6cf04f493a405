"""Audio, speech and codec inputs for the atlas's transformers models: waveforms, spectrogram
features, codec latents, codebook ids and the masks a feature extractor makes, sized from the
config by the library's naming conventions.

A config says the sizes (``num_mel_bins``, ``audio_channels``, the product of the codec's
``downsampling_ratios`` ...) but not always the layout: a mono waveform is ``(B, T)`` for one
encoder and ``(B, 1, T)`` for the next, log-mel features ``(B, mel, T)`` or ``(B, T, mel)``.
Where the config cannot decide, a short ladder of layouts is tried in order on the meta device
(no arithmetic: each try costs only the forward's Python), and the first the model's forward
accepts is kept; a try failing for a reason that is not about shapes (a value the meta device
does not have) stops the ladder there, as the fake trace may well pass it. The layout used is
stated in the row's notes (:func:`notes`).

Keyed by forward parameter names, config attributes and error kinds, never by model type: the
next release's speech models reuse the same conventions. torch is imported lazily.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

SECONDS = 16000  # waveform samples before rounding to the codec's hop
FRAMES = 200  # feature frames when the config names no source length
MAX_FRAMES = 3000  # Whisper-style encoders: two frames per source position, at most 30 s
MAX_TRIES = 16  # probes per model (each one forward on the meta device)
WAVE_NAMES = ("input_values", "audio_values", "waveform", "input_audio")
FEATURE_NAMES = ("input_features", "audio_features", "audio_mel", "spectrogram")
LATENT_NAMES = ("latents", "hidden_states", "audio_latents")
ID_NAMES = ("input_ids", "decoder_input_ids")
# masks a feature extractor returns with the features (1 = a frame holding audio)
FRAME_MASKS = ("input_features_mask", "feature_attention_mask")
# the same, True where the frame is padding
PAD_MASKS = ("audio_mel_mask",)
# feature size per frame, in order of preference
FEATURE_KEYS = ("input_feat_per_channel", "num_mel_bins", "feature_size", "n_mels",
                "input_feat_size", "feature_projection_input_dim", "model_in_channels")  # fmt: skip
AUDIO_TOKEN_KEYS = ("audio_token_id", "audio_token_index")
CHANNEL_KEYS = ("audio_channels", "channels")
# feature frames per text token of a streaming speech model (one audio embedding per token)
FRAMES_PER_TOKEN_KEYS = ("audio_length_per_tok", "audio_length_per_token", "frames_per_token")
HOP_KEYS = ("hop_length", "hop_size")
RATIO_KEYS = ("downsampling_ratios", "upsampling_ratios", "conv_stride", "strides",
              "encoder_rates", "patch_sizes")  # fmt: skip
LATENT_KEYS = ("latent_dim", "hidden_size", "codebook_dim")
# the codebooks a token position holds (one id per codebook) in audio-token decoders
CODEBOOK_KEYS = ("num_codebooks", "num_channels")
IMAGE_KEYS = ("image_size", "patch_size", "num_frames", "img_size")
SHAPE_ERROR = re.compile(
    r"size|shape|dimension|dim\b|channels|unpack|broadcast|mono|multiple of|out of range"
    r"|normalized_shape|expected .*input|should contain \d+ elements",
    re.I,
)
MULTIPLE = re.compile(r"multiple of (\d+)")
# the size a first layer wants, as its shape error names it
WANTED_SIZE = (
    re.compile(r"reduction dim, but got \[\d+, \d+\] X \[(\d+), \d+\]"),
    re.compile(r"mat1 and mat2 shapes cannot be multiplied \(\d+x\d+ and (\d+)x\d+\)"),
    re.compile(r"normalized_shape=\[(\d+)\]"),
    re.compile(r"groups=1, weight of size \[\d+, (\d+), \d+\]"),
    re.compile(r"size of tensor a \(\d+\) must match the size of tensor b \((\d+)\)"),
)
META_LIMIT = re.compile(r"meta", re.I)  # what the meta device cannot do (values, kernels)
MAX_CPU_PARAMS = 300_000_000  # a CPU copy for the probe up to ~1.2 GB
LAYOUT_ATTR = "_opcheck_audio_layout"
# the layout the fake build chose, per model class: the real-data rebuild of the same model
# in the same process reuses it instead of probing again with real arithmetic
_CHOSEN: dict[str, tuple[Hints, int]] = {}



@dataclass(frozen=True)
class Hints:
    """What earlier tries said the model wants: a waveform length multiple, feature sizes."""

    multiple: int = 1
    sizes: tuple[int, ...] = ()


Candidate = tuple[str, dict[str, Any]]  # (what the row says, the inputs of this layout)


def _vals(cfgs: Iterable[Any], keys: Iterable[str]) -> list[Any]:
    """Every value the configs give for ``keys`` (sub-configs in order), None and bools left
    out."""
    out = []
    for c in cfgs:
        d = vars(c)
        for k in keys:
            v = d.get(k)
            if v is not None and not isinstance(v, bool):
                out.append(v)
    return out


def _ints(cfgs: Iterable[Any], keys: Iterable[str]) -> list[int]:
    out: list[int] = []
    for v in _vals(cfgs, keys):
        if isinstance(v, int) and v > 0 and v not in out:
            out.append(v)
    return out


def feature_sizes(cfgs: list[Any], named: Iterable[int] = ()) -> list[int]:
    """Feature sizes per frame: those a failed try ``named`` (frames stacked by the feature
    extractor, a size no config attribute holds), the configs' own, then the common log-mel
    sizes. ``input_feat_per_channel`` counts one of ``input_channels`` stacked channels."""
    sizes: list[int] = list(named)
    for c in cfgs:
        d = vars(c)
        per, chans = d.get("input_feat_per_channel"), d.get("input_channels")
        if isinstance(per, int) and isinstance(chans, int) and chans > 0:
            sizes.append(per * chans)
    for n in [*_ints(cfgs, FEATURE_KEYS), 80, 128]:
        if n not in sizes:
            sizes.append(n)
    return sizes


def hop(cfgs: list[Any]) -> int:
    """The samples one codec frame covers: the product of its stride ratios or its
    ``hop_length`` (the least common multiple where the sub-configs name several)."""
    hops = _ints(cfgs, HOP_KEYS)
    for v in _vals(cfgs, RATIO_KEYS):
        if isinstance(v, (list, tuple)) and v and all(isinstance(r, int) and r > 0 for r in v):
            hops.append(math.prod(v))
    return math.lcm(*hops) if hops else 1


def wave_length(cfgs: list[Any], multiple: int = 1) -> int:
    step = math.lcm(hop(cfgs), multiple)
    return -(-SECONDS // step) * step


def frames(cfgs: list[Any], *, positions: bool = True, text: int | None = None) -> int:
    """Feature frames: two per source position where ``positions`` (Whisper-style encoders
    check it; their features come before the frames), else a short clip (an encoder taking
    frames first checks no length, and a long one only costs memory in the probe), rounded
    up to the subsampling factor. A streaming model naming its frames per text token (its
    audio embeddings are added to the ``text`` tokens' one by one) gets as many per token."""
    per_token = _ints(cfgs, FRAMES_PER_TOKEN_KEYS)
    if per_token and text:
        return per_token[0] * text
    pos = _ints(cfgs, ("max_source_positions",)) if positions else []
    n = min(pos[0] * 2, MAX_FRAMES) if pos else FRAMES
    sub = _ints(cfgs, ("subsampling_factor",))
    step = sub[0] if sub else 1
    return -(-n // step) * step


def _codebooks(cfgs: list[Any]) -> list[int]:
    """Codebook counts of audio-token decoders (``num_channels`` only in a config with no
    image sizes: a vision config's ``num_channels`` is its colour channels)."""
    out: list[int] = []
    for c in cfgs:
        d = vars(c)
        for k in CODEBOOK_KEYS:
            v = d.get(k)
            if k == "num_channels" and any(i in d for i in IMAGE_KEYS):
                continue
            if isinstance(v, int) and not isinstance(v, bool) and v > 1 and v not in out:
                out.append(v)
    return out


def wave_candidates(cfgs: list[Any], multiple: int = 1) -> list[Candidate]:
    """Waveforms: the config's channels first (``(B, C, T)`` when it names them), then mono
    ``(B, T)`` and ``(B, 1, T)``; last a spectrogram ``(B, frames, mel)`` (encoders whose
    ``input_values`` are features, as the Audio Spectrogram Transformer's)."""
    import torch

    n = wave_length(cfgs, multiple)
    chans = _ints(cfgs, CHANNEL_KEYS)
    shapes: list[tuple[int, ...]] = [(1, chans[0], n)] if chans else []
    for s in ((1, n), (1, 1, n)):
        if s not in shapes:
            shapes.append(s)
    out: list[Candidate] = [(f"waveform {_dims(s)}", {"x": torch.randn(*s)}) for s in shapes]
    mel = feature_sizes(cfgs)[0]
    spec = _ints(cfgs, ("max_length",))
    t = min(spec[0], 1024) if spec else FRAMES
    out.append((f"spectrogram (1, {t} frames, {mel} features)", {"x": torch.randn(1, t, mel)}))
    return out


def feature_candidates(
    cfgs: list[Any], named: Iterable[int] = (), clip: int | None = None, text: int | None = None
) -> list[Candidate]:
    """Spectrogram features: each feature size the config names, features before frames
    (Whisper's ``(B, mel, T)``) and after (``(B, T, mel)``, conformer encoders). ``clip``:
    the frames-first length, when the features go with a waveform (one per codec frame);
    ``text``: the length of the ids made beside them."""
    import torch

    t, short = frames(cfgs, text=text), clip or frames(cfgs, positions=False, text=text)
    out: list[Candidate] = []
    for mel in feature_sizes(cfgs, named):
        out.append((f"features (1, {mel} features, {t} frames)", {"x": torch.randn(1, mel, t),
                                                                   "frames": t}))  # fmt: skip
        out.append((f"features (1, {short} frames, {mel} features)",
                    {"x": torch.randn(1, short, mel), "frames": short}))  # fmt: skip
    mel = feature_sizes(cfgs, named)[0]  # a channel axis first (CLAP's fused mel views)
    out.append((f"features (1, 1, {t} frames, {mel} features)",
                {"x": torch.randn(1, 1, t, mel), "frames": t}))  # fmt: skip
    return out


def latent_candidates(cfgs: list[Any], multiple: int = 1) -> list[Candidate]:
    """A codec decoder's latents: one vector per codec frame, channels before frames then
    after, for each width the config names; a waveform first (the same parameter name takes
    the audio in the codec's encoder)."""
    import torch

    t = max(wave_length(cfgs, multiple) // max(hop(cfgs), 1), 4)
    out = wave_candidates(cfgs, multiple)[:2]
    for d in _ints(cfgs, LATENT_KEYS):
        out.append((f"latents (1, {d} channels, {t} frames)", {"x": torch.randn(1, d, t)}))
        out.append((f"latents (1, {t} frames, {d} channels)", {"x": torch.randn(1, t, d)}))
    return out


def id_candidates(ids: Any, cfgs: list[Any]) -> list[Candidate]:
    """Token ids of audio-token decoders: as made ``(B, T)``, then one row per codebook
    ``(B*K, T)``, one id per codebook per position ``(B, T, K)`` and ``(B, T, K+1)`` (a text
    token beside the audio codebooks)."""
    out: list[Candidate] = [(f"ids {_dims(tuple(ids.shape))}", {"x": ids})]
    for k in _codebooks(cfgs):
        t = ids.shape[-1]
        out.append((f"ids (1*{k} codebooks, {t})", {"x": ids.repeat(k, 1)}))
        for kk in (k, k + 1):
            out.append((f"ids (1, {t}, {kk} codebooks)",
                        {"x": ids.unsqueeze(-1).repeat(1, 1, kk)}))  # fmt: skip
    return out


def _dims(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(str(s) for s in shape) + ")"


def _slots(
    model: Any, cfgs: list[Any], params: Any, kwargs: dict[str, Any], missing: list[str],
    hints: Hints,
) -> dict[str, list[Candidate]]:  # fmt: skip
    """The audio inputs this forward takes and the layouts to try for each: those made or
    missing, the main input (a wrapper's generic ``inputs`` taking its encoder's kind), and
    where none of these is audio an optional one, in a model with an audio tower and no audio
    placeholder token (a contrastive text-audio model; a speech LM's towers are fed by
    :mod:`atlas_inputs`)."""
    main = getattr(model, "main_input_name", "")
    wanted = [n for n in params if n in kwargs or n in missing or n == main]
    if not any(_kind(model, n) for n in wanted) and not _vals(cfgs, AUDIO_TOKEN_KEYS) \
            and _audio_tower(cfgs):
        wanted += [n for n in params if n in WAVE_NAMES + FEATURE_NAMES][:1]
    slots: dict[str, list[Candidate]] = {}
    for name in wanted:
        kind = _kind(model, name)
        if kind == "wave":
            slots[name] = wave_candidates(cfgs, hints.multiple)
        elif kind == "features":
            # beside a codec's waveform: one feature frame per codec frame, as both paths meet
            with_wave = any(_kind(model, n) == "wave" for n in wanted)
            clip = wave_length(cfgs, hints.multiple) // hop(cfgs) if with_wave else None
            ids = kwargs.get("input_ids")
            slots[name] = feature_candidates(cfgs, hints.sizes, clip if clip and clip > 1 else None,
                                             ids.shape[-1] if ids is not None else None)
        elif kind == "latents" and name not in kwargs:
            # ``hidden_states`` made by another convention (a vision tower's flattened
            # patches) is that convention's; only a latent input nothing else made is a codec's
            slots[name] = latent_candidates(cfgs, hints.multiple)
    for name in ID_NAMES:
        if name in kwargs and _codebooks(cfgs):
            slots[name] = id_candidates(kwargs[name], cfgs)
    return slots


def _audio_tower(cfgs: list[Any]) -> bool:
    """The model has an audio or speech tower of its own (an ``audio_config``, a
    ``speech_config``): its optional audio input is that tower's, not an embedding's."""
    return any(k.endswith("config") and ("audio" in k or "speech" in k)
               for c in cfgs for k in vars(c))  # fmt: skip


def _kind(model: Any, name: str) -> str:
    """What the input called ``name`` holds: a waveform, features, latents or "" (no audio).
    A wrapper's main input named ``inputs`` is its encoder's main input."""
    if name == "inputs" and name == getattr(model, "main_input_name", ""):
        name = getattr(getattr(model, "encoder", None), "main_input_name", name)
    if name in WAVE_NAMES:
        return "wave"
    if name in FEATURE_NAMES:
        return "features"
    return "latents" if name in LATENT_NAMES else ""


def _side_inputs(params: Any, made: dict[str, Any]) -> dict[str, Any]:
    """The masks a feature extractor returns beside the features, one per frame."""
    import torch

    t = next((v["frames"] for v in made.values() if "frames" in v), None)
    out: dict[str, Any] = {}
    if t is None:
        return out
    for name in FRAME_MASKS:
        if name in params:
            out[name] = torch.ones(1, t, dtype=torch.long)
    for name in PAD_MASKS:
        if name in params:
            out[name] = torch.zeros(1, t, dtype=torch.bool)
    return out


def fit_inputs(
    model: Any,
    cfgs: list[Any],
    params: Any,
    kwargs: dict[str, Any],
    missing: list[str],
    *,
    real: bool,
) -> list[str]:
    """Audio inputs in ``kwargs`` made or replaced in the layout the model's forward accepts
    (the first of each ladder, or the first a probe forward takes); returns the names still
    missing. Models with no audio input are left as they are, without a probe."""
    hints = Hints()
    slots = _slots(model, cfgs, params, kwargs, missing, hints)
    if not slots or (set(slots) <= set(ID_NAMES) and _fed_towers(kwargs)):
        return missing
    key = type(model).__name__
    combos = _combos(slots)
    if real and key in _CHOSEN:
        hints, pick = _CHOSEN[key]
        slots = _slots(model, cfgs, params, kwargs, missing, hints)
        combos = _combos(slots)
    elif len(combos) > 1:
        runner = _Runner(model, params)
        pick, hint = _probe(runner, kwargs, slots, combos, hints)
        for _ in range(3):  # a try named the length or size it wants: the ladder again
            if hint is None:
                break
            hints = hint
            slots = _slots(model, cfgs, params, kwargs, missing, hints)
            combos = _combos(slots)
            pick, hint = _probe(runner, kwargs, slots, combos, hints)
        _CHOSEN[key] = (hints, pick)
    else:
        pick = 0
    chosen = dict(zip(slots, combos[min(pick, len(combos) - 1)], strict=True))
    kwargs.update(_inputs(params, chosen))
    setattr(model, LAYOUT_ATTR, "; ".join(f"{n}: {desc}" for n, (desc, _) in chosen.items()))
    return [n for n in missing if n not in kwargs]


def _combos(slots: dict[str, list[Candidate]]) -> list[tuple[Candidate, ...]]:
    return list(itertools.islice(itertools.product(*slots.values()), MAX_TRIES))


def _fed_towers(kwargs: dict[str, Any]) -> bool:
    """A multimodal model's towers are fed (pixels, features): its ids are the placeholder
    layout :mod:`atlas_inputs` made, not codebooks."""
    return any(n in kwargs for n in ("pixel_values", "input_features", "pixel_values_videos"))


def _inputs(params: Any, chosen: dict[str, Candidate]) -> dict[str, Any]:
    made = {name: v for name, (_, v) in chosen.items()}
    out = {name: v["x"] for name, v in made.items()}
    out.update(_side_inputs(params, made))
    return out


def _probe(
    runner: _Runner,
    kwargs: dict[str, Any],
    slots: dict[str, list[Candidate]],
    combos: list[tuple[Candidate, ...]],
    hints: Hints,
) -> tuple[int, Hints | None]:
    """The first layout the forward runs with (index into ``combos``), or the first failing
    for a reason not about shapes; 0 when every one fails on shapes. Second: new hints when
    a failure named a length multiple or a feature size not tried yet (None otherwise)."""
    for i, combo in enumerate(combos):
        trial = dict(kwargs)
        trial.update(_inputs(runner.params, dict(zip(slots, combo, strict=True))))
        err = runner.run(trial)
        if err is None:
            return i, None
        if not SHAPE_ERROR.search(err) and not err.startswith("MemoryError"):
            return i, None
        hint = _hint(err, hints)
        if hint is not None:
            return i, hint
    return 0, None


def _hint(err: str, hints: Hints) -> Hints | None:
    """What a shape error says the model wants: a length multiple (a codec's own check) or
    the feature size its first layer takes (a linear, a norm, a convolution's channels)."""
    m = MULTIPLE.search(err)
    if m and int(m.group(1)) > 1 and hints.multiple % int(m.group(1)):
        return Hints(math.lcm(hints.multiple, int(m.group(1))), hints.sizes)
    for pattern in WANTED_SIZE:
        m = pattern.search(err)
        if m and int(m.group(1)) > 1 and int(m.group(1)) not in hints.sizes:
            return Hints(hints.multiple, (int(m.group(1)), *hints.sizes))
    return None


class _Runner:
    """Forwards of the probe: on the meta device, and where the meta device stops a try
    (``.item()``, a kernel with no meta form) on a copy of the model built on the CPU, once,
    when it is small enough to build."""

    def __init__(self, model: Any, params: Any) -> None:
        self.model, self.params = model, params
        self.cpu: Any = None

    def run(self, kwargs: dict[str, Any]) -> str | None:
        err = _run(self.model, self.params, kwargs)
        if err is None or SHAPE_ERROR.search(err) or not META_LIMIT.search(err):
            return err
        if self.cpu is None:
            self.cpu = _cpu_copy(self.model) or False
        return _run(self.cpu, self.params, kwargs) if self.cpu is not False else err


def _cpu_copy(model: Any) -> Any:
    """The model built again from its config on the CPU (random weights), or None when it
    is too large or does not build there."""
    import torch

    if sum(p.numel() for p in model.parameters()) > MAX_CPU_PARAMS or not hasattr(model,
                                                                                "config"):
        return None
    try:
        with torch.device("cpu"):
            torch.manual_seed(0)
            return type(model)(model.config).eval()
    except Exception:  # a model the meta device builds and the CPU does not: no second probe
        return None


def _run(model: Any, params: Any, kwargs: dict[str, Any]) -> str | None:
    """One forward on the model's device; the error's text, or None when it ran."""
    import torch

    device = next((p.device for p in model.parameters()), torch.device("cpu"))
    kw = {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in kwargs.items()}
    if "use_cache" in params:
        kw["use_cache"] = False
    try:
        with torch.no_grad():
            model(**kw)
    except Exception as exc:  # the model's own check on the layout, or a meta-device limit
        return f"{type(exc).__name__}: {exc}"
    return None


def notes(model: Any) -> list[str]:
    """The row's note on the audio layout used, if the conventions chose one."""
    layout = getattr(model, LAYOUT_ATTR, "")
    return [f"audio inputs: {layout}"] if layout else []
