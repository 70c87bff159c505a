"""The Qwen3 decoder (docs/format.md §6) over a block-paged, prefix-sharing KV cache.

Attribute names follow the checkpoint (`language_model.model.layers.N.self_attn.q_proj`, ...),
so `state_dict()` keys are the real tensor names.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

from hpd_core.config import LLMConfig
from hpd_core.kv_cache import KVCache, Layout
from hpd_core.model.kernels import EAGER, Kernels, additive_bias, reads_in_place


class RMSNorm(nn.Module):
    def __init__(self, size: int, eps: float):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(size))
        self.eps = eps

    def forward(self, x: torch.Tensor, kernels: Kernels = EAGER) -> torch.Tensor:
        return kernels.norm(x, self.weight, self.eps)


class Rotary:
    """Rotary embedding angles, computed per call (no buffers: models are built on the meta device)."""

    def __init__(self, head_dim: int, theta: float):
        self.head_dim, self.theta = head_dim, theta

    def __call__(self, positions: torch.Tensor, dtype: torch.dtype):
        """cos, sin: [B, q, 1, D] for positions [B, q] (angles in >= fp32, as transformers), sin
        with its first half negated: the sign of rotate_half (`kernels.norm_rotate`)."""
        wide = torch.promote_types(dtype, torch.float32)
        exponents = torch.arange(0, self.head_dim, 2, device=positions.device).float() / self.head_dim
        inv_freq = (1.0 / (self.theta ** exponents)).to(wide)
        freqs = (positions[..., None].to(wide) * inv_freq)[:, :, None]
        cos, sin = freqs.cos(), freqs.sin()
        return torch.cat((cos, cos), -1).to(dtype), torch.cat((-sin, sin), -1).to(dtype)


def fuse_linears(*linears: nn.Linear) -> torch.Tensor:
    """The weights of bias-free linears as one [sum of outputs, inputs] tensor, for one matmul where
    there were several; each linear's weight becomes a view of it (no second copy; the checkpoint's
    names stay). Inference only: the views no longer train."""
    with torch.no_grad():
        joint = torch.cat([linear.weight for linear in linears])
    start = 0
    for linear in linears:
        rows = linear.weight.shape[0]
        linear.weight = nn.Parameter(joint[start:start + rows], requires_grad=False)
        start += rows
    return joint


class Attention(nn.Module):
    def __init__(self, cfg: LLMConfig, index: int):
        super().__init__()
        self.index = index  # the layer's place in the KV cache
        self.heads, self.kv_heads, self.head_dim = cfg.num_attention_heads, cfg.num_key_value_heads, cfg.head_dim
        self.q_proj = nn.Linear(cfg.hidden_size, self.heads * self.head_dim, bias=False)
        self.k_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.v_proj = nn.Linear(cfg.hidden_size, self.kv_heads * self.head_dim, bias=False)
        self.o_proj = nn.Linear(self.heads * self.head_dim, cfg.hidden_size, bias=False)
        self.q_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.k_norm = RMSNorm(self.head_dim, cfg.rms_norm_eps)
        self.register_buffer("qkv", None, persistent=False)  # q, k, v weights as one (`fuse`)

    def fuse(self) -> None:
        self.qkv = fuse_linears(self.q_proj, self.k_proj, self.v_proj)

    def project(self, x, rope, kernels: Kernels = EAGER) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """q [B, heads, q, D], k and v [B, kv_heads, q, D] of inputs x [B, q, H], normed and rotated."""
        b, q_len, _ = x.shape
        if self.qkv is None:
            q, k, v = self.q_proj(x), self.k_proj(x), self.v_proj(x)
        else:
            q, k, v = F.linear(x, self.qkv).split([self.heads * self.head_dim] + 2 * [self.kv_heads * self.head_dim], -1)
        q = q.view(b, q_len, self.heads, self.head_dim)
        k = k.view(b, q_len, self.kv_heads, self.head_dim)
        q = kernels.norm_rotate(q, self.q_norm.weight, self.q_norm.eps, *rope)
        k = kernels.norm_rotate(k, self.k_norm.weight, self.k_norm.eps, *rope)
        v = v.view(b, q_len, self.kv_heads, self.head_dim)
        return q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2)

    def forward(self, x, rope, mask, paged: PagedForward | None, kernels: Kernels) -> torch.Tensor:
        b, q_len, _ = x.shape
        q, k, v = self.project(x, rope, kernels)
        out = masked_attention(q, k, v, mask) if paged is None else paged.attend(self.index, q, k, v, kernels)
        return self.o_proj(out.transpose(1, 2).reshape(b, q_len, -1))


def masked_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
    """SDPA of q [B, heads, n, D] over k, v [B, kv_heads, L, D]; mask broadcast to [B, 1, n, L]
    (True = may attend); None: causal, query i over keys 0..i. On CUDA only the flash and math
    kernels take GQA, and flash takes no mask and no float32: otherwise (tree-masked training, a
    prefill at a later position, float32) k/v expanded to every head let the memory-efficient
    kernel run instead of math, which materialises [B, heads, n, L]."""
    heads = q.shape[1]
    flash = mask is None and q.dtype in (torch.float16, torch.bfloat16)
    if q.is_cuda and k.shape[1] != heads and not flash:
        k, v = (t.repeat_interleave(heads // k.shape[1], dim=1) for t in (k, v))
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=mask is None,
                                          enable_gqa=k.shape[1] != heads)


def paged_attention(q: torch.Tensor, paged: PagedForward, layer: int, kernels: Kernels) -> torch.Tensor:
    """Attention of q [B, heads, n, D] over each row's cached keys at positions <= its own.

    Two parts merged by log-sum-exp: each row's rest (its blocks after its shared prefix) and each
    group's shared prefix, attended by the queries of all the group's rows together, so the prefix
    is read once per step however many rows hold it. Every prefix key precedes every query of its
    rows (`KVCache.layout` asserts it): no causal mask. A forward whose rows have no shared prefix
    (a page's prefill) is one fused SDPA instead, unless its few queries read the blocks in place:
    the dense softmax below materialises [B, kv, heads / kv * n, S] (3.5x slower for a 1,779-token
    prefill on the 2-core CPU)."""
    b, heads, n, d = q.shape
    cache, layout = paged.cache, paged.layout
    kv = cache.k.shape[3]
    groups, members = layout.group_rows.shape
    # query head h uses kv head h // (heads / kv) (a copy: made only where it is read)
    rows_q = q.reshape(b, kv, heads // kv * n, d) if groups or kernels.paged is not None else None
    rest_in_place = rows_q is not None and in_place(kernels, rows_q, layout.rest_blocks, cache)
    if not groups and not rest_in_place:  # a prefill
        k, v = cache.gather(layer, layout.rest_blocks)
        if layout.causal:  # rows written from position 0: causal over their first n keys (2x faster)
            return masked_attention(q, k[:, :, :n], v[:, :, :n], None)
        return masked_attention(q, k, v, paged.rest_mask)
    out, lse = read(rows_q, layout.rest_blocks, paged.rest_limit, paged.rest_mask, paged, layer, kernels,
                    rest_in_place)
    if not groups:
        return out.view(b, heads, n, d)
    grouped = rows_q[layout.group_rows].transpose(1, 2).reshape(groups, kv, members * rows_q.shape[2], d)
    shared, shared_lse = read(grouped, layout.prefix_blocks, paged.prefix_limit, paged.prefix_mask, paged, layer,
                              kernels, in_place(kernels, grouped, layout.prefix_blocks, cache))
    out = kernels.merge(out, lse, shared, shared_lse, paged.group, layout.row_slot, paged.alone)
    return out.view(b, heads, n, d)


def in_place(kernels: Kernels, q: torch.Tensor, blocks: torch.Tensor, cache: KVCache) -> bool:
    """Whether q [N, kv, n, D] reads its rows' blocks [N, b] in place (`kernels.reads_in_place`)."""
    return kernels.paged is not None and reads_in_place(q, blocks.shape[1] * cache.block_size)


def read(q: torch.Tensor, blocks: torch.Tensor, limit: torch.Tensor, bias: torch.Tensor, paged: PagedForward,
         layer: int, kernels: Kernels, paged_read: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Attention and log-sum-exp of q [N, kv, M, D] over the blocks [N, b] of its rows, query m of
    row i over the row's first limit[i, m] keys (the same mask as the additive `bias`): the blocks
    read in place by `kernels.paged` where `paged_read` (`in_place`), else gathered (the reference)."""
    cache = paged.cache
    if paged_read:
        return kernels.paged(q, cache.k[layer], cache.v[layer], blocks, limit)
    k, v = cache.gather(layer, blocks)
    return kernels.attend(q, k, v, bias)


class MLP(nn.Module):
    def __init__(self, hidden: int, intermediate: int):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)
        self.register_buffer("gate_up", None, persistent=False)  # gate and up weights as one (`fuse`)

    def fuse(self) -> None:
        self.gate_up = fuse_linears(self.gate_proj, self.up_proj)

    def forward(self, x, kernels: Kernels = EAGER):
        gate, up = ((self.gate_proj(x), self.up_proj(x)) if self.gate_up is None
                    else F.linear(x, self.gate_up).chunk(2, -1))
        return self.down_proj(kernels.silu_mul(gate, up))


class DecoderLayer(nn.Module):
    def __init__(self, cfg: LLMConfig, index: int):
        super().__init__()
        self.self_attn = Attention(cfg, index)
        self.mlp = MLP(cfg.hidden_size, cfg.intermediate_size)
        self.input_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.post_attention_layernorm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)

    def forward(self, h, delta, rope, mask, paged: PagedForward | None, kernels: Kernels):
        """The residual stream h and the previous layer's output `delta`, not yet added (None before
        the first layer) -> (the stream, this layer's output): each residual add runs in the norm
        after it (`kernels.add_norm`), the same sums as h + attention, then h + MLP."""
        first, second = self.input_layernorm, self.post_attention_layernorm
        h, x = (h, first(h, kernels)) if delta is None else kernels.add_norm(h, delta, first.weight, first.eps)
        h, x = kernels.add_norm(h, self.self_attn(x, rope, mask, paged, kernels), second.weight, second.eps)
        return h, self.mlp(x, kernels)


# Not cuDNN's fused attention: it builds an execution plan for every new shape, and decoding
# meets a new key length every step (H200, bench/results/gpu-2026-11-29: the first pass over
# new lengths ran 5-10x slower than a repeat; an earlier prototype on the H200 saw 5x).
ATTENTION_BACKENDS = [SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH]


@dataclass(frozen=True)
class PagedForward:
    """What each layer's attention does with a cache in one forward: write this step's keys,
    attend over blocks. The masks and indices that every layer reads are derived from the layout
    once per forward (inside a captured graph: from its static layout)."""
    cache: KVCache
    layout: Layout
    rest_mask: torch.Tensor    # [B, 1, heads / kv * n, S] bias (`additive_bias`); G = 0: [B, 1, n, S] bool
    prefix_mask: torch.Tensor  # [G, 1, 1, P] bias: 0 where the group's prefix has that key
    rest_limit: torch.Tensor   # [B, heads / kv * n] int32: the rest keys each query may attend to
    prefix_limit: torch.Tensor  # [G, R * heads / kv * n] int32: the group's prefix length, every query
    group: torch.Tensor        # [B] each row's group (0 for a row without one)
    alone: torch.Tensor        # [B, 1, 1] True for rows without a shared prefix

    @staticmethod
    def of(cache: KVCache, layout: Layout, queries_per_kv: int, dtype: torch.dtype) -> PagedForward:
        """The masks as the biases `kernels.attend` adds and as the key counts `kernels.paged` reads,
        made once per forward; a forward without groups keeps a boolean mask for `masked_attention`.
        A row's rest keys are its positions from its first rest position on, so a query at position
        p may attend to the first p - first + 1 of them."""
        b, n = layout.positions.shape
        groups, members = layout.group_rows.shape
        mask = layout.rest_positions[:, None, :] <= layout.positions[:, :, None]       # [B, n, S]
        limit = layout.positions - layout.rest_positions[:, :1] + 1                     # [B, n]
        rest_limit = limit[:, None].expand(-1, queries_per_kv, -1).reshape(b, queries_per_kv * n).int()
        if groups:  # the queries of a kv head side by side (`paged_attention`)
            mask = mask[:, None, None].expand(-1, -1, queries_per_kv, -1, -1).reshape(b, 1, queries_per_kv * n, -1)
            mask = additive_bias(mask, dtype)
        else:
            mask = mask[:, None]
        prefix_limit = layout.prefix_valid.sum(1, dtype=torch.int32)[:, None].expand(
            -1, members * queries_per_kv * n).contiguous()
        return PagedForward(cache, layout, mask, additive_bias(layout.prefix_valid[:, None, None, :], dtype),
                            rest_limit, prefix_limit, layout.row_group.clamp(min=0),
                            (layout.row_group < 0)[:, None, None])

    def attend(self, layer: int, q, k, v, kernels: Kernels) -> torch.Tensor:
        self.cache.write(layer, self.layout, k, v)
        return paged_attention(q, self, layer, kernels)


class Decoder(nn.Module):
    """`language_model.model`: embeddings, layers, final norm. With `graphs` (graphs.py), decode
    forwards over a cache (q <= its `max_q`) run as captured CUDA graphs (or their padded
    eager twin on the CPU). `kernels`: the layers' norms, rotary, softmax and merge, eager
    (the reference) or fused (`hpd_core.model.kernels`: compiled, and on CUDA one attention kernel)."""

    def __init__(self, cfg: LLMConfig):
        super().__init__()
        self.embed_tokens = nn.Embedding(cfg.vocab_size, cfg.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(cfg, i) for i in range(cfg.num_hidden_layers))
        self.norm = RMSNorm(cfg.hidden_size, cfg.rms_norm_eps)
        self.rotary = Rotary(cfg.head_dim, cfg.rope_theta)
        self.queries_per_kv = cfg.num_attention_heads // cfg.num_key_value_heads
        self.graphs = None
        self.kernels = EAGER

    def forward(self, embeds: torch.Tensor, positions: torch.Tensor, cache: KVCache | None = None,
                rows: list[int] | None = None, mask: torch.Tensor | None = None) -> torch.Tensor:
        """Post-norm hidden states [B, q, H] for input embeddings [B, q, H] at positions [B, q]
        (on any device: a decode step's come from the host, where the graphs plan its layout
        without waiting for the device; the eager path moves them to the embeddings').

        With a cache, each row's keys/values are written at its positions and attention reads
        the row's positions [0, position] through its block table; without one, attention is
        causal by position within the input, or follows `mask` [B, 1, q, q] (True = may attend;
        training's tree mask).
        """
        if cache is not None and self.graphs is not None and positions.shape[1] <= self.graphs.max_q:
            return self.graphs.run(self, embeds, positions, cache, rows)
        positions = positions.to(embeds.device)
        layout = None if cache is None else cache.layout(rows, positions)  # once per forward, not per layer
        if cache is None and mask is None:
            mask = (positions[:, None, :] <= positions[:, :, None])[:, None]  # [B, 1, q, q]
        return self.run_layers(embeds, positions, mask, cache, layout)

    def run_layers(self, embeds, positions, mask, cache: KVCache | None, layout: Layout | None) -> torch.Tensor:
        """The layers and final norm over a planned forward (what a CUDA graph captures)."""
        rope = self.rotary(positions, embeds.dtype)
        paged = None if cache is None else PagedForward.of(cache, layout, self.queries_per_kv, embeds.dtype)
        h, delta = embeds, None
        with sdpa_kernel(ATTENTION_BACKENDS):
            for layer in self.layers:
                h, delta = layer(h, delta, rope, mask, paged, self.kernels)
        return self.kernels.add_norm(h, delta, self.norm.weight, self.norm.eps)[1]


class LanguageModel(nn.Module):
    """`language_model`: the decoder, `lm_head` and (when loaded) the P-MTP head `mtp`. With
    `draft_graphs` (graphs.py) a step's drafts run as captured CUDA graphs (`speculative.draft`)."""

    def __init__(self, cfg: LLMConfig, mtp: nn.Module | None = None):
        super().__init__()
        self.config = cfg
        self.model = Decoder(cfg)
        self.lm_head = nn.Linear(cfg.hidden_size, cfg.vocab_size, bias=False)
        if cfg.tie_word_embeddings:
            self.lm_head.weight = self.model.embed_tokens.weight
        self.mtp = mtp
        self.draft_graphs = None

    def fuse_projections(self) -> None:
        """q, k, v and gate, up as one matmul each, in the decoder and the draft head (inference
        only: `fuse_linears`)."""
        for module in self.modules():
            if isinstance(module, (Attention, MLP)):
                module.fuse()

    def embed(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.embed_tokens(ids)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.lm_head(hidden)
