"""The Qwen3 decoder (docs/format.md §6) over a block-paged, prefix-sharing KV cache.

Attribute names follow the checkpoint (`language_model.model.layers.N.self_attn.q_proj`, ...),
so `state_dict()` keys are the real tensor names.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from hpd_core.config import LLMConfig
from hpd_core.kv_cache import KVCache, Layout


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        # Normalise in at least fp32 (as transformers' Qwen3RMSNorm), fp64 stays fp64.
        wide = x.to(torch.promote_types(x.dtype, torch.float32))
        wide = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * wide.to(x.dtype)


def rotate_half(x: torch.Tensor) -> torch.Tensor:
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary:
    """Rotary embedding angles, computed per call (no buffers: models are built on the meta device)."""

    def __init__(self, head_dim: int, theta: float):
        self.head_dim, self.theta = head_dim, theta

    def __call__(self, positions: torch.Tensor, dtype: torch.dtype):
        """cos, sin: [B, 1, q, D] for positions [B, q] (angles in >= fp32, as transformers)."""
        wide = torch.promote_types(dtype, torch.float32)
        exponents = torch.arange(0, self.head_dim, 2, device=positions.device).float() / self.head_dim
        inv_freq = (1.0 / (self.theta ** exponents)).to(wide)
        freqs = positions[..., None].to(wide) * inv_freq
        emb = torch.cat((freqs, freqs), dim=-1)[:, None]
        return emb.cos().to(dtype), emb.sin().to(dtype)


class Attention(nn.Module):
    def __init__(self, cfg: LLMConfig):
        super().__init__()
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)

    def project(self, x, rope) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [B, heads, q, D], k and v [B, kv_heads, q, D] of inputs x [B, q, H], rotated."""
        b, q_len, _ = x.shape
        q = self.q_norm(self.q_proj(x).view(b, q_len, self.heads, self.head_dim)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, q_len, self.kv_heads, self.head_dim)).transpose(1, 2)
        v = self.v_proj(x).view(b, q_len, self.kv_heads, self.head_dim).transpose(1, 2)
        cos, sin = rope
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin, v

    def forward(self, x, rope, mask, kv: "CachedLayer | None") -> torch.Tensor:
        b, q_len, _ = x.shape
        q, k, v = self.project(x, rope)
        if kv is not None:
            return self.o_proj(kv.attend(q, k, v).transpose(1, 2).reshape(b, q_len, -1))
        return self.o_proj(masked_attention(q, k, v, mask).transpose(1, 2).reshape(b, q_len, -1))


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """SDPA of q [B, heads, n, D] over k, v [B, kv_heads, L, D]; mask broadcast to [B, 1, n, L]
    (True = may attend). On CUDA only the flash and math kernels take GQA, and flash takes no mask:
    with a mask (tree-masked training, a prefill) k/v expanded to every head let the
    memory-efficient kernel run instead of math, which materialises [B, heads, n, L]."""
    heads = q.shape[1]
    if mask is not None and q.is_cuda and k.shape[1] != heads:
        k, v = (t.repeat_interleave(heads // k.shape[1], dim=1) for t in (k, v))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=k.shape[1] != heads)


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor):
    """Softmax attention and its log-sum-exp: q [N, kv, n, D], k and v [N, kv, L, D], mask
    (True = may attend) broadcast to [N, kv, n, L] -> out [N, kv, n, D], lse [N, kv, n]."""
    scores = ((q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5).masked_fill(~mask, float("-inf"))
    lse = scores.logsumexp(-1, keepdim=True)
    return (scores - lse).exp() @ v, lse[..., 0]


def paged_attention(q: torch.Tensor, cache: KVCache, layer: int, layout: Layout) -> torch.Tensor:
    """Attention of q [B, heads, n, D] over each row's cached keys at positions <= its own.

    Two parts merged by log-sum-exp: each row's rest (its blocks after its shared prefix, gathered
    per row) and each group's shared prefix, gathered once and attended by the queries of all the
    group's rows together, so the prefix is read once per step however many rows hold it. Every
    prefix key precedes every query of its rows (`KVCache.layout` asserts it): no causal mask.
    A forward whose rows have no shared prefix (a page's prefill) is one fused SDPA instead: the
    dense softmax below materialises [B, kv, heads / kv * n, S] (3.5x slower for a 1,779-token
    prefill on the 2-core CPU)."""
    b, heads, n, d = q.shape
    kv = cache.k.shape[3]
    gn = heads // kv * n
    k, v = cache.gather(layer, layout.rest_blocks)
    mask = layout.rest_positions[:, None, :] <= layout.positions[:, :, None]      # [B, n, S]
    groups, members = layout.group_rows.shape
    if not groups:  # no shared prefix (e.g. a page's prefill): one fused attention, no merge
        return masked_attention(q, k, v, mask[:, None])
    q = q.reshape(b, kv, gn, d)  # query head h uses kv head h // (heads / kv)
    mask = mask[:, None, None].expand(-1, -1, heads // kv, -1, -1).reshape(b, 1, gn, -1)
    out, lse = attend(q, k, v, mask)
    k, v = cache.gather(layer, layout.prefix_blocks)                              # [G, kv, P, D]
    grouped = q[layout.group_rows].transpose(1, 2).reshape(groups, kv, members * gn, d)
    shared, shared_lse = attend(grouped, k, v, layout.prefix_valid[:, None, None, :])
    shared = shared.view(groups, kv, members, gn, d).transpose(1, 2)[layout.row_group.clamp(min=0), layout.row_slot]
    shared_lse = shared_lse.view(groups, kv, members, gn).transpose(1, 2)[layout.row_group.clamp(min=0),
                                                                          layout.row_slot]
    shared_lse = shared_lse.masked_fill((layout.row_group < 0)[:, None, None], float("-inf"))
    top = torch.maximum(lse, shared_lse)
    w_rest, w_shared = (lse - top).exp()[..., None], (shared_lse - top).exp()[..., None]
    out = (w_rest * out + w_shared * shared) / (w_rest + w_shared)
    return out.view(b, heads, n, d)


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LLMConfig):
        super().__init__()
        self.self_attn = Attention(cfg)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, h, rope, mask, kv):
        h = h + self.self_attn(self.input_layernorm(h), rope, mask, kv)
        return h + self.mlp(self.post_attention_layernorm(h))


# Not cuDNN's fused attention: it builds an execution plan for every new shape, and decoding
# meets a new key length every step (H200, bench/results/gpu-2026-11-29: the first pass over
# new lengths ran 5-10x slower than a repeat; an earlier prototype on the H200 saw 5x).
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


class CachedLayer:
    """What one layer's attention does with a cache: write this step's keys, attend over blocks."""

    def __init__(self, cache: KVCache, layer: int, layout: Layout):
        self.cache, self.layer, self.layout = cache, layer, layout

    def attend(self, q, k, v) -> torch.Tensor:
        self.cache.write(self.layer, self.layout, k, v)
        return paged_attention(q, self.cache, self.layer, self.layout)


class Decoder(nn.Module):
    """`language_model.model`: embeddings, layers, final norm. With `graphs` (graphs.py), decode
    forwards over a cache (q <= its `max_q`) run as captured CUDA graphs (or their padded
    eager twin on the CPU)."""

    def __init__(self, cfg: LLMConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg) for _ in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta)
        self.graphs = None

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None,
                rows: list[int] | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Post-norm hidden states [B, q, H] for input embeddings [B, q, H] at positions [B, q].

        With a cache, each row's keys/values are written at its positions and attention reads
        the row's positions [0, position] through its block table; without one, attention is
        causal by position within the input, or follows `mask` [B, 1, q, q] (True = may attend;
        training's tree mask).
        """
        if cache is not None and self.graphs is not None and positions.shape[1] <= self.graphs.max_q:
            return self.graphs.run(self, embeds, positions, cache, rows)
        layout = None if cache is None else cache.layout(rows, positions)  # once per forward, not per layer
        if cache is None and mask is None:
            mask = (positions[:, None, :] <= positions[:, :, None])[:, None]  # [B, 1, q, q]
        return self.run_layers(embeds, positions, mask, cache, layout)

    def run_layers(self, embeds, positions, mask, cache: KVCache | None, layout: Layout | None) -> torch.Tensor:
        """The layers and final norm over a planned forward (what a CUDA graph captures)."""
        rope = self.rotary(positions, embeds.dtype)
        h = embeds
        with sdpa_kernel(ATTENTION_BACKENDS):
            for i, layer in enumerate(self.layers):
                h = layer(h, rope, mask, None if cache is None else CachedLayer(cache, i, layout))
        return self.norm(h)


class LanguageModel(nn.Module):
    """`language_model`: the decoder, `lm_head` and (when loaded) the P-MTP head `mtp`."""

    def __init__(self, cfg: LLMConfig, mtp: nn.Module | None = None):
        super().__init__()
        self.config = cfg
        self.model = Decoder(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.mtp = mtp

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(ids)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)
