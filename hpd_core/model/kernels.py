"""The decoder's elementwise and reduction chains as small pure functions, and their fused twins.

`EAGER` is the reference: plain PyTorch, a kernel per op (72.5 of the 84.5 kernels a layer of a
bf16 decode forward launches; `bench.layer_ops`). `compiled()` is the same functions through
`torch.compile` (Inductor: Triton kernels on CUDA), a few fused kernels each (14 of ~26 a layer);
`fused_attend` is attention in one kernel that returns its log-sum-exp (CUDA; `fused_when_wide`),
and `Kernels.paged` attention that reads the KV pool's blocks in place (CUDA:
`hpd_core.model.paged`, set by `load_engine` in bf16; `reads_in_place` says where it runs). The
others read only small activations and keys already gathered from the KV pool: the pool's writes and gathers
stay outside (a compiled graph that mutates the pool risks a functionalization copy of it).
Dynamic shapes, so new batch sizes, key lengths and graph buckets reuse the kernels (Dynamo still
specialises a dimension of size 1, a stride pattern, sizes that happen to be equal: a few graphs
per function); the first call of a shape compiles, which a CUDA graph's warm-up run does before
its capture.

Norm and rotary compute in at least fp32, as transformers' Qwen3 does."""

from __future__ import annotations

import functools
from dataclasses import dataclass, fields
from typing import Callable

import torch
import torch.nn.functional as F


def norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """RMSNorm over the last dimension, in >= fp32 (fp64 stays fp64)."""
    wide = x.to(torch.promote_types(x.dtype, torch.float32))
    wide = wide * torch.rsqrt(wide.pow(2).mean(-1, keepdim=True) + eps)
    return weight * wide.to(x.dtype)


def add_norm(residual: torch.Tensor, delta: torch.Tensor, weight: torch.Tensor, eps: float
             ) -> tuple[torch.Tensor, torch.Tensor]:
    """A residual add and the RMSNorm after it: (residual + delta, its norm)."""
    h = residual + delta
    return h, norm(h, weight, eps)


def norm_rotate(x: torch.Tensor, weight: torch.Tensor, eps: float, cos: torch.Tensor,
                sin: torch.Tensor) -> torch.Tensor:
    """q_norm or k_norm, then rotary: x [B, q, heads, D], cos and sin [B, q, 1, D] (`Rotary`).
    `sin` carries the sign of rotate_half (its first half negated), so rotate_half(x) * sin of
    transformers is the plain swap of halves times it: the same products, exactly."""
    x = norm(x, weight, eps)
    return x * cos + x.roll(x.shape[-1] // 2, -1) * sin


def additive_bias(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """A may-attend mask (True = may attend) as the bias `attend` adds to the scores: 0 where True,
    -inf elsewhere. x + 0 and x + -inf are exact, so this is the masked softmax to the bit."""
    return torch.zeros(mask.shape, dtype=dtype, device=mask.device).masked_fill_(~mask, float("-inf"))


def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Softmax attention and its log-sum-exp: q [N, kv, n, D], k and v [N, kv, L, D], an additive
    bias (`additive_bias`) broadcast to [N, kv, n, L] -> out [N, kv, n, D], lse [N, kv, n]."""
    scores = (q @ k.transpose(-1, -2)) * q.shape[-1] ** -0.5 + bias
    lse = scores.logsumexp(-1, keepdim=True)
    return (scores - lse).exp() @ v, lse[..., 0]


def paged_reference(q: torch.Tensor, pool_k: torch.Tensor, pool_v: torch.Tensor, blocks: torch.Tensor,
                    limit: torch.Tensor, attend: Callable = attend) -> tuple[torch.Tensor, torch.Tensor]:
    """`Kernels.paged`'s contract in PyTorch, its reference: the rows' blocks [N, b] of one layer's
    pool [blocks, bs, kv, D] gathered, query m of row i attending (`attend`) to the row's first
    limit[i, m] keys -> out [N, kv, M, D], lse [N, kv, M]."""
    n = blocks.shape[0]
    k, v = (pool[blocks].view(n, -1, *pool.shape[2:]).transpose(1, 2) for pool in (pool_k, pool_v))
    mask = torch.arange(k.shape[2], device=q.device) < limit[..., None]  # [N, M, L]
    return attend(q, k, v, additive_bias(mask[:, None], q.dtype))


def fused_attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor
                 ) -> tuple[torch.Tensor, torch.Tensor]:
    """`attend` as one memory-efficient attention kernel (CUDA only), the bias viewed at every kv
    head (not copied); the kernel returns the log-sum-exp, so the [N, kv, n, L] scores and their
    softmax are never written out. Those took most of a 64-page replay round's device time with the
    compiled `attend` (bench/NOTES.md). Key lengths are whole KV blocks (multiples of 16), as the
    kernel's bias alignment needs."""
    bias = bias.expand(q.shape[0], q.shape[1], q.shape[2], k.shape[2])
    out, lse = torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, bias, True)[:2]
    return out, lse[..., :q.shape[2]].to(q.dtype)


@functools.cache
def multiprocessors(device: torch.device) -> int:
    return torch.cuda.get_device_properties(device).multi_processor_count


WIDE_SCORES = 1 << 22  # scores [N, kv, n, L] from which writing them out costs more than the fused kernel


def fused_when_wide(small: Callable) -> Callable:
    """`attend` on CUDA: `fused_attend` when its blocks of 64 queries at every kv head fill the
    GPU's multiprocessors and the scores are large, else `small` (the compiled `attend`). The
    fused kernel walks all of a block's keys in one multiprocessor, so a step of few rows over a
    2,000-key prompt ran on 8 of 132 (one H100: one row's step 3.7 -> 6.1 ms), and over rows' few
    own keys it lost to the compiled `attend` too (64 rows 5.4 -> 6.6 ms), while with many pages
    the scores the compiled `attend` writes out cost more (bench/NOTES.md). A captured graph's
    shapes are fixed, so each graph keeps its choice."""
    def attend(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, bias: torch.Tensor):
        return (fused_attend if wide(q, k.shape[2]) else small)(q, k, v, bias)
    return attend


def wide(q: torch.Tensor, keys: int) -> bool:
    """Whether attention of q [N, kv, n, D] over `keys` keys a row is wide (`fused_when_wide`);
    never on the CPU, which has no fused kernel."""
    n, heads, queries = q.shape[:3]
    blocks, scores = n * heads * -(-queries // 64), n * heads * queries * keys
    return q.is_cuda and blocks >= multiprocessors(q.device) and scores >= WIDE_SCORES


PAGED_QUERIES = 64  # queries a row from which the paged kernel may lose to gathering (`reads_in_place`)


def reads_in_place(q: torch.Tensor, keys: int) -> bool:
    """Where `Kernels.paged` is set, whether attention of q [N, kv, n, D] over `keys` keys a row
    reads the KV blocks in place rather than gathered: rows of at most 64 queries (a kv head's
    queries of a decode or verification round) always, more (a group's shared prefix read by all
    its rows' queries) unless wide. A paged program reads all of its row's keys for 16 queries, the
    fused kernel for 64: one call at a time, 64 pages' prefixes (238 queries a group) were 1.4x
    slower in place, rows' own keys at 64 pages 3.3x faster (bench/NOTES.md)."""
    return q.shape[2] <= PAGED_QUERIES or not wide(q, keys)


def merge(out: torch.Tensor, lse: torch.Tensor, shared: torch.Tensor, shared_lse: torch.Tensor,
          group: torch.Tensor, slot: torch.Tensor, alone: torch.Tensor) -> torch.Tensor:
    """Each row's attention over its own keys (out [B, kv, n, D], lse [B, kv, n]) and over its
    group's shared prefix (shared [G, kv, R * n, D], shared_lse [G, kv, R * n]: the group's R rows'
    queries side by side; the row is `slot` of `group` [B]), merged by log-sum-exp -> [B, kv, n, D].
    Rows `alone` [B, 1, 1] have no shared prefix: their own keys only."""
    groups, kv, _, d = shared.shape
    n = out.shape[2]
    shared = shared.view(groups, kv, -1, n, d).transpose(1, 2)[group, slot]
    shared_lse = shared_lse.view(groups, kv, -1, n).transpose(1, 2)[group, slot]
    shared_lse = torch.where(alone, float("-inf"), shared_lse)
    top = torch.maximum(lse, shared_lse)
    w_rest, w_shared = (lse - top).exp()[..., None], (shared_lse - top).exp()[..., None]
    return (w_rest * out + w_shared * shared) / (w_rest + w_shared)


def silu_mul(gate: torch.Tensor, up: torch.Tensor) -> torch.Tensor:
    return F.silu(gate) * up


@dataclass(frozen=True)
class Kernels:
    """The functions a decoder layer calls (`Decoder.kernels`, chosen once at load)."""
    norm: Callable
    add_norm: Callable
    norm_rotate: Callable
    attend: Callable
    merge: Callable
    silu_mul: Callable
    paged: Callable | None = None  # `hpd_core.model.paged.paged_attend`; its contract: `paged_reference`


EAGER = Kernels(norm, add_norm, norm_rotate, attend, merge, silu_mul)


def compiled(backend: str = "inductor") -> Kernels:
    """`EAGER`'s functions compiled, each a whole graph (a graph break fails loudly), with dynamic
    shapes; backend "eager" runs Dynamo's traced graphs without compiling them (the CPU tests).
    The engine on CUDA chooses `fused_attend` for wide attention (`fused_when_wide`, `hpd_core.loader`).
    The recompile limit is far above the few graphs a decoder needs, since with `fullgraph`
    reaching it is an error. Not mode="reduce-overhead": the decoder captures its own CUDA graphs
    (graphs.py)."""
    torch._dynamo.config.recompile_limit = max(torch._dynamo.config.recompile_limit, 64)  # torch 2.11 has no kwarg
    return Kernels(*(torch.compile(getattr(EAGER, f.name), backend=backend, dynamic=True, fullgraph=True)
                     for f in fields(Kernels) if f.name != "paged"))
