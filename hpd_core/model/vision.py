"""InternViT, pixel shuffle and the `mlp1` projector (docs/format.md §6).

Attribute names follow the checkpoint (`vision_model.encoder.layers.N.attn.qkv`, `mlp1.0`, ...).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hpd_core.config import HPDConfig, VisionConfig


class VisionEmbeddings(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        d = cfg.hidden_size
        self.patch_embedding = nn.Conv2d(3, d, kernel_size=cfg.patch_size, stride=cfg.patch_size)
        self.class_embedding = nn.Parameter(torch.zeros(1, 1, d))
        self.position_embedding = nn.Parameter(torch.zeros(1, cfg.grid ** 2 + 1, d))

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """[T, 3, S, S] -> [T, 1 + grid², D]: CLS first, then patches row-major."""
        patches = self.patch_embedding(pixels).flatten(2).transpose(1, 2)
        cls = self.class_embedding.expand(patches.shape[0], -1, -1)
        return torch.cat([cls, patches], dim=1) + self.position_embedding


class VisionAttention(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.heads = cfg.num_attention_heads
        self.qkv = nn.Linear(cfg.hidden_size, 3 * cfg.hidden_size, bias=cfg.qkv_bias)
        self.proj = nn.Linear(cfg.hidden_size, cfg.hidden_size)

    def forward(self, x):
        t, n, d = x.shape
        q, k, v = self.qkv(x).view(t, n, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        return self.proj(attention(q, k, v).transpose(1, 2).reshape(t, n, d))


QUERY_BLOCK, BLOCK_SCORES = 256, 1 << 20  # a step of `blockwise_attention`: its queries, and the scores
                                          # it holds at most (2 MiB in bf16: they stay in the CPU's cache)


def attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    """Non-causal attention, scale 1/sqrt(head_dim), over [..., n, head_dim]. In bf16 on the CPU,
    `blockwise_attention`: PyTorch's CPU flash kernel runs bf16 at the fp32 matmul rate there, and
    plain bf16 matmuls over blocks of queries take the ViT's attention in about half the time
    (bench/NOTES.md); elsewhere, and for training (its `out=` writes take no gradient), PyTorch's
    fused kernels."""
    if q.device.type == "cpu" and q.dtype == torch.bfloat16 and not q.requires_grad:
        return blockwise_attention(q, k, v)
    return F.scaled_dot_product_attention(q, k, v)


def blockwise_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, block: int = QUERY_BLOCK,
                        scores: int = BLOCK_SCORES) -> torch.Tensor:
    """softmax(q kᵀ / sqrt(head_dim)) v, a step over `block` queries of as many heads as keep
    `scores` scores (each query's row is whole)."""
    *lead, n, d = q.shape
    q, k, v = (q * d ** -0.5).flatten(0, -3), k.flatten(0, -3).transpose(1, 2), v.flatten(0, -3)
    out = torch.empty_like(q)
    step = max(1, scores // (block * k.shape[-1]))
    for first in range(0, q.shape[0], step):
        heads = slice(first, first + step)
        for start in range(0, n, block):
            rows = slice(start, start + block)
            torch.bmm(torch.softmax(torch.bmm(q[heads, rows], k[heads]), -1), v[heads], out=out[heads, rows])
    return out.view(*lead, n, d)


class VisionMLP(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.fc1 = nn.Linear(cfg.hidden_size, cfg.intermediate_size)
        self.fc2 = nn.Linear(cfg.intermediate_size, cfg.hidden_size)

    def forward(self, x):
        return self.fc2(F.gelu(self.fc1(x)))


class VisionLayer(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.norm1 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.attn = VisionAttention(cfg)
        self.ls1 = nn.Parameter(torch.ones(cfg.hidden_size))
        self.norm2 = nn.LayerNorm(cfg.hidden_size, eps=cfg.layer_norm_eps)
        self.mlp = VisionMLP(cfg)
        self.ls2 = nn.Parameter(torch.ones(cfg.hidden_size))

    def forward(self, h):
        h = h + self.ls1 * self.attn(self.norm1(h))
        return h + self.ls2 * self.mlp(self.norm2(h))


class VisionEncoder(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.layers = nn.ModuleList(VisionLayer(cfg) for _ in range(cfg.num_hidden_layers))

    def forward(self, h):
        for layer in self.layers:
            h = layer(h)
        return h


class InternViT(nn.Module):
    def __init__(self, cfg: VisionConfig):
        super().__init__()
        self.embeddings = VisionEmbeddings(cfg)
        self.encoder = VisionEncoder(cfg)

    def forward(self, pixels: torch.Tensor) -> torch.Tensor:
        """[T, 3, S, S] -> last hidden states [T, 1 + grid², D] (no final norm)."""
        return self.encoder(self.embeddings(pixels))


def pixel_shuffle(x: torch.Tensor, scale: int) -> torch.Tensor:
    """InternVL's v2 pixel shuffle: [T, g, g, C] -> [T, g/s, g/s, C·s²]."""
    t, w, h, c = x.shape
    x = x.reshape(t, w, h // scale, c * scale)
    x = x.permute(0, 2, 1, 3).contiguous().reshape(t, h // scale, w // scale, c * scale * scale)
    return x.permute(0, 2, 1, 3).contiguous()


def projector(cfg: HPDConfig) -> nn.Sequential:
    """`mlp1`: LayerNorm (eps 1e-5) -> Linear -> GELU -> Linear."""
    merged = cfg.vision_config.hidden_size * cfg.shuffle_scale ** 2
    hidden = cfg.llm_config.hidden_size
    return nn.Sequential(nn.LayerNorm(merged), nn.Linear(merged, hidden), nn.GELU(), nn.Linear(hidden, hidden))


def image_tokens(vit: InternViT, mlp1: nn.Sequential, pixels: torch.Tensor, scale: int) -> torch.Tensor:
    """Tiles [T, 3, S, S] -> LM rows [T · tokens_per_tile, H_llm], tiles in order."""
    h = vit(pixels)[:, 1:]  # drop CLS
    g = int(h.shape[1] ** 0.5)
    h = pixel_shuffle(h.reshape(h.shape[0], g, g, -1), scale)
    return mlp1(h.reshape(-1, h.shape[-1]))
