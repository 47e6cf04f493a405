"""``opcheck zoo``: well-known architectures, one factory each, built without weights.

Every factory returns ``(model, example_args)`` or ``(model, example_args, example_kwargs)``
and is traced with ``--model <this file>:<factory>``, so it runs on the meta device inside the
sandboxed tracer. Sizes are tiny on purpose: the op list of a transformer does not depend on
its width or depth (every layer calls the same ops), only the call counts do, and tiny configs
keep a trace to a few seconds.

Architectures a well-known library ships are taken from it (transformers, imported lazily, from
configs: no weights, no download); the others are written here in plain PyTorch the way their
reference implementations are.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

Built = tuple[nn.Module, tuple[Any, ...], dict[str, Any]]

SEQ = 8
VOCAB = 128


def _ids(batch: int = 1, seq: int = SEQ) -> torch.Tensor:
    return torch.zeros(batch, seq, dtype=torch.long)


# ---------------------------------------------------------------- written in the project


class _Residual(nn.Module):
    def __init__(self, ch: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(ch)
        self.conv2 = nn.Conv2d(ch, ch, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(ch)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(x + self.bn2(self.conv2(y)))


class ConvClassifier(nn.Module):
    """ResNet-style: stem, max-pool, residual stages, global average pool, linear head."""

    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 16, 7, stride=2, padding=3, bias=False), nn.BatchNorm2d(16), nn.ReLU(),
            nn.MaxPool2d(3, stride=2, padding=1),
        )  # fmt: skip
        self.stage1 = _Residual(16)
        self.down = nn.Sequential(nn.Conv2d(16, 32, 1, stride=2, bias=False), nn.BatchNorm2d(32))
        self.stage2 = _Residual(32)
        self.fc = nn.Linear(32, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.stage2(self.down(self.stage1(self.stem(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


class LSTMClassifier(nn.Module):
    """Text classifier: embedding, two-layer bidirectional LSTM, last step to a linear head."""

    def __init__(self, classes: int = 4) -> None:
        super().__init__()
        self.emb = nn.Embedding(VOCAB, 16)
        self.lstm = nn.LSTM(16, 24, num_layers=2, batch_first=True, bidirectional=True)
        self.fc = nn.Linear(48, classes)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        out, _ = self.lstm(self.emb(ids))
        return self.fc(out[:, -1])


def _timestep_embedding(t: torch.Tensor, dim: int) -> torch.Tensor:
    half = dim // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, device=t.device) / half)
    args = t.float()[:, None] * freqs[None]
    return torch.cat([torch.cos(args), torch.sin(args)], dim=-1)


class _ResBlock(nn.Module):
    def __init__(self, cin: int, cout: int, tdim: int) -> None:
        super().__init__()
        self.norm1 = nn.GroupNorm(4, cin)
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1)
        self.temb = nn.Linear(tdim, cout)
        self.norm2 = nn.GroupNorm(4, cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.skip = nn.Conv2d(cin, cout, 1) if cin != cout else nn.Identity()

    def forward(self, x: torch.Tensor, temb: torch.Tensor) -> torch.Tensor:
        h = self.conv1(F.silu(self.norm1(x)))
        h = h + self.temb(F.silu(temb))[:, :, None, None]
        h = self.conv2(F.silu(self.norm2(h)))
        return self.skip(x) + h


class _AttnBlock(nn.Module):
    def __init__(self, ch: int, heads: int = 2) -> None:
        super().__init__()
        self.norm = nn.GroupNorm(4, ch)
        self.qkv = nn.Conv2d(ch, 3 * ch, 1)
        self.proj = nn.Conv2d(ch, ch, 1)
        self.heads = heads

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, c, h, w = x.shape
        q, k, v = self.qkv(self.norm(x)).reshape(b, 3, self.heads, c // self.heads, h * w).unbind(1)
        y = F.scaled_dot_product_attention(q.transpose(-1, -2), k.transpose(-1, -2),
                                           v.transpose(-1, -2))
        return x + self.proj(y.transpose(-1, -2).reshape(b, c, h, w))


class UNetBlock(nn.Module):
    """One level of a diffusion UNet (DDPM / Stable Diffusion layout): timestep embedding,
    GroupNorm+SiLU residual blocks, a strided-conv down step, spatial self-attention in the
    middle, nearest-neighbour up-sampling and the skip concatenation."""

    def __init__(self, ch: int = 16, tdim: int = 32) -> None:
        super().__init__()
        self.tdim = tdim
        self.time_mlp = nn.Sequential(nn.Linear(tdim, tdim), nn.SiLU(), nn.Linear(tdim, tdim))
        self.inp = nn.Conv2d(4, ch, 3, padding=1)
        self.down_block = _ResBlock(ch, ch, tdim)
        self.down = nn.Conv2d(ch, ch, 3, stride=2, padding=1)
        self.mid = _ResBlock(ch, 2 * ch, tdim)
        self.attn = _AttnBlock(2 * ch)
        self.up_block = _ResBlock(3 * ch, ch, tdim)
        self.out = nn.Sequential(nn.GroupNorm(4, ch), nn.SiLU(), nn.Conv2d(ch, 4, 3, padding=1))

    def forward(self, x: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        temb = self.time_mlp(_timestep_embedding(t, self.tdim))
        h0 = self.down_block(self.inp(x), temb)
        h = self.attn(self.mid(self.down(h0), temb))
        h = F.interpolate(h, scale_factor=2.0, mode="nearest")
        h = self.up_block(torch.cat([h, h0], dim=1), temb)
        return self.out(h)


def _conv_bn_silu(cin: int, cout: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=False),
                         nn.BatchNorm2d(cout), nn.SiLU())


class YOLODetector(nn.Module):
    """A YOLO-style single-scale detector with its post-processing in the model, as exported
    detectors ship it: grid/anchor box decoding, objectness × class scores, top-k candidates,
    pairwise IoU, then a vectorised ("fast") NMS and a score threshold.

    NMS is written with standard ops (no torchvision): the greedy loop of ``torchvision.ops.nms``
    depends on tensor values, while the matrix form keeps the same suppression rule for boxes
    that overlap a higher-scoring box, and traces without data-dependent control flow.
    """

    def __init__(self, classes: int = 3, anchors: int = 2, top_k: int = 32) -> None:
        super().__init__()
        self.classes, self.anchors, self.top_k = classes, anchors, top_k
        self.backbone = nn.Sequential(
            _conv_bn_silu(3, 8, 2), _conv_bn_silu(8, 16, 2), _conv_bn_silu(16, 32, 2),
        )  # fmt: skip
        self.head = nn.Conv2d(32, anchors * (5 + classes), 1)
        self.register_buffer("anchor_wh", torch.tensor([[10.0, 14.0], [23.0, 27.0]]))
        self.stride = 8.0
        self.score_threshold = 0.25
        self.iou_threshold = 0.45

    def forward(self, images: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        feat = self.head(self.backbone(images))
        b, _, h, w = feat.shape
        p = feat.view(b, self.anchors, 5 + self.classes, h, w).permute(0, 1, 3, 4, 2)
        gy, gx = torch.meshgrid(torch.arange(h, device=feat.device),
                                torch.arange(w, device=feat.device), indexing="ij")
        grid = torch.stack((gx, gy), -1).to(feat.dtype)[None, None]
        xy = (p[..., :2].sigmoid() + grid) * self.stride
        wh = p[..., 2:4].exp() * self.anchor_wh.view(1, self.anchors, 1, 1, 2)
        boxes = torch.cat((xy - wh / 2, xy + wh / 2), -1).reshape(b, -1, 4)
        cls_prob = p[..., 5:].sigmoid() * p[..., 4:5].sigmoid()
        scores, labels = cls_prob.reshape(b, -1, self.classes).max(-1)
        k = min(self.top_k, scores.shape[1])
        top, idx = scores.topk(k, dim=1)
        cand = boxes.gather(1, idx[..., None].expand(-1, -1, 4))
        cand_labels = labels.gather(1, idx)
        # class-aware NMS: shift each class's boxes apart so boxes of different classes
        # never overlap (the offset trick of batched_nms)
        shifted = cand + (cand_labels.to(cand.dtype) * 4096.0)[..., None]
        iou = _box_iou(shifted, shifted)
        # candidates are sorted by score: box j is suppressed by any higher-scoring box i < j
        iou = iou.triu(diagonal=1)
        keep = (iou.max(dim=1).values < self.iou_threshold) & (top > self.score_threshold)
        dets = torch.cat((cand, top[..., None], cand_labels[..., None].to(cand.dtype)), -1)
        dets = dets * keep[..., None]
        # per image, the kept detections: a data-dependent number of rows
        return dets, dets[0][keep[0]]


def _box_iou(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    area_a = (a[..., 2] - a[..., 0]).clamp(min=0) * (a[..., 3] - a[..., 1]).clamp(min=0)
    area_b = (b[..., 2] - b[..., 0]).clamp(min=0) * (b[..., 3] - b[..., 1]).clamp(min=0)
    lt = torch.maximum(a[..., :, None, :2], b[..., None, :, :2])
    rb = torch.minimum(a[..., :, None, 2:], b[..., None, :, 2:])
    inter = (rb - lt).clamp(min=0).prod(-1)
    return inter / (area_a[..., :, None] + area_b[..., None, :] - inter + 1e-7)


def conv_classifier() -> Built:
    return ConvClassifier(), (torch.randn(1, 3, 64, 64),), {}


def lstm() -> Built:
    return LSTMClassifier(), (_ids(2, 12),), {}


def unet_block() -> Built:
    return UNetBlock(), (torch.randn(1, 4, 16, 16), torch.tensor([10])), {}


def yolo() -> Built:
    return YOLODetector(), (torch.randn(1, 3, 64, 64),), {}


# ---------------------------------------------------------------- from transformers configs


def vit() -> Built:
    from transformers import ViTConfig, ViTForImageClassification

    cfg = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2,
                    num_attention_heads=4, intermediate_size=64, num_labels=10)
    cfg._attn_implementation = "sdpa"
    return ViTForImageClassification(cfg), (torch.randn(1, 3, 32, 32),), {}


def bert() -> Built:
    from transformers import BertConfig, BertModel

    cfg = BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    cfg._attn_implementation = "sdpa"
    mask = torch.ones(1, SEQ, dtype=torch.long)
    return BertModel(cfg), (_ids(),), {"attention_mask": mask}


def gpt2() -> Built:
    from transformers import GPT2Config, GPT2LMHeadModel

    cfg = GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=2, n_head=4)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    return GPT2LMHeadModel(cfg), (_ids(),), {"use_cache": False}


def llama() -> Built:
    from transformers import LlamaConfig, LlamaForCausalLM

    cfg = LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    return LlamaForCausalLM(cfg), (_ids(),), {"use_cache": False}


def whisper() -> Built:
    from transformers import WhisperConfig, WhisperForConditionalGeneration

    cfg = WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=32, encoder_layers=2,
                        decoder_layers=2, encoder_attention_heads=4, decoder_attention_heads=4,
                        encoder_ffn_dim=64, decoder_ffn_dim=64, max_source_positions=16,
                        max_target_positions=32, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                        decoder_start_token_id=1)
    cfg.use_cache = False
    cfg._attn_implementation = "sdpa"
    # the encoder's two convolutions halve the frames: 2 × max_source_positions mel frames
    features = torch.randn(1, cfg.num_mel_bins, 2 * cfg.max_source_positions)
    return (WhisperForConditionalGeneration(cfg), (features,),
            {"decoder_input_ids": _ids(1, 4), "use_cache": False})

