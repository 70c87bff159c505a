"""Attention that reads the KV pool's blocks in place: a Triton kernel over block tables (CUDA).

The reference reads a row's keys by gathering its blocks into new tensors, then attends
(`kernels.attend` over `KVCache.gather`); at the real dimensions the gathers cost a quarter of a
64-page round's device time and write a copy of every key a step reads (bench/NOTES.md). This
kernel walks the block table instead and reads each key once per 16 queries. It takes no bias:
query m of row n attends to the row's first `limit[n, m]` keys, which is every mask a decode
forward has (a row's own keys up to its position; a group's whole shared prefix).

One program per (row, kv head, block of 16 queries, split of the row's blocks): it loads each of
its blocks from the pool [blocks, 16, kv, D] and keeps an online softmax in float32 (products in
IEEE float32, no TF32, so float32 stays the exact check's dtype); the splits' results merge by
log-sum-exp in a second kernel (`_merge_splits`: one launch, where the same merge in PyTorch took
~11 a call, at one row ~40% of a decode layer's graph nodes). Triton is not installed with the CPU
wheel; its interpreter (`TRITON_INTERPRET=1`) runs the kernels on the CPU in float32 (its bf16
`tl.dot` is wrong even for a bare product).

The engine's decode attention in bf16 on CUDA (`hpd_core.loader.load_engine`): with key splits
(`key_splits`, so that one row's 2,000-key prefix spreads over the GPU instead of 8 programs) it tied
the gather inside CUDA graphs at a page's shapes (one H200: 0.97-1.01x) and gave 1.12x the gather's
tokens/s on the 64-page fork + P-MTP replay (one H100; bench/NOTES.md). float32, the exact check's
dtype, keeps the gather: the split count follows the batch, so a row's sums would not be the same
batched and alone. `bench.replay --gather` and `bench.real_dims`' modes "graphs+gather" and
"graphs+paged" measure the two.
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from hpd_core.model.kernels import multiprocessors

QUERIES = 16  # queries a program reads the keys for


@triton.jit
def _paged_attend(q, pool_k, pool_v, table, limit, out, lse, scale, queries, table_width, per_split,
                  sq_n, sq_h, sq_m, sp_b, sp_s, sp_h, so_s, so_n, so_h, so_m, sl_s, sl_n, sl_h,
                  BLOCK: tl.constexpr, QUERIES: tl.constexpr, D: tl.constexpr):
    n, h, program = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    query_blocks = tl.cdiv(queries, QUERIES)
    mb, split = program % query_blocks, program // query_blocks
    m = mb * QUERIES + tl.arange(0, QUERIES)
    d = tl.arange(0, D)
    live = m < queries
    qs = tl.load(q + n * sq_n + h * sq_h + m[:, None] * sq_m + d[None, :], mask=live[:, None], other=0.0)
    lim = tl.load(limit + n * queries + m, mask=live, other=0)
    top = tl.full([QUERIES], float("-inf"), tl.float32)
    total = tl.zeros([QUERIES], tl.float32)
    acc = tl.zeros([QUERIES, D], tl.float32)
    s = tl.arange(0, BLOCK)
    first = split * per_split
    for b in range(first, tl.minimum(first + per_split, tl.cdiv(tl.max(lim, 0), BLOCK))):
        block = tl.load(table + n * table_width + b)
        where = block * sp_b + s[:, None] * sp_s + h * sp_h + d[None, :]
        k = tl.load(pool_k + where)
        v = tl.load(pool_v + where)
        scores = tl.dot(qs, tl.trans(k), input_precision="ieee") * scale
        scores = tl.where((b * BLOCK + s)[None, :] < lim[:, None], scores, float("-inf"))
        new_top = tl.maximum(top, tl.max(scores, 1))
        safe = tl.where(new_top == float("-inf"), 0.0, new_top)
        p = tl.exp(scores - safe[:, None])
        keep = tl.exp(top - safe)
        total = total * keep + tl.sum(p, 1)
        acc = acc * keep[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        top = new_top
    seen = total > 0  # a query with no keys in this split has out 0 and lse -inf
    result = acc / tl.where(seen, total, 1.0)[:, None]
    tl.store(out + split * so_s + n * so_n + h * so_h + m[:, None] * so_m + d[None, :],
             result.to(out.dtype.element_ty), mask=live[:, None])
    log_sum = tl.where(seen, top + tl.log(tl.where(seen, total, 1.0)), float("-inf"))
    tl.store(lse + split * sl_s + n * sl_n + h * sl_h + m, log_sum.to(lse.dtype.element_ty), mask=live)


@triton.jit
def _merge_splits(out, lse, merged, merged_lse, splits, queries, so_s, so_n, so_h, so_m, sl_s, sl_n, sl_h,
                  sm_n, sm_h, sm_m, se_n, se_h, QUERIES: tl.constexpr, D: tl.constexpr):
    n, h, mb = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    m = mb * QUERIES + tl.arange(0, QUERIES)
    d = tl.arange(0, D)
    live = m < queries
    top = tl.full([QUERIES], float("-inf"), tl.float32)
    for split in range(splits):
        top = tl.maximum(top, tl.load(lse + split * sl_s + n * sl_n + h * sl_h + m, mask=live, other=0.0))
    total = tl.zeros([QUERIES], tl.float32)
    acc = tl.zeros([QUERIES, D], tl.float32)
    for split in range(splits):  # a split that saw none of its keys: lse -inf, weight 0
        weight = tl.exp(tl.load(lse + split * sl_s + n * sl_n + h * sl_h + m, mask=live, other=0.0) - top)
        part = tl.load(out + split * so_s + n * so_n + h * so_h + m[:, None] * so_m + d[None, :], mask=live[:, None],
                       other=0.0)
        total += weight
        acc += weight[:, None] * part
    tl.store(merged + n * sm_n + h * sm_h + m[:, None] * sm_m + d[None, :],
             (acc / total[:, None]).to(merged.dtype.element_ty), mask=live[:, None])
    tl.store(merged_lse + n * se_n + h * se_h + m, (top + tl.log(total)).to(merged_lse.dtype.element_ty), mask=live)


def key_splits(programs: int, blocks: int, device: torch.device) -> int:
    """How many programs share a row's keys: enough that the grid covers the GPU's multiprocessors
    twice, each split at least 8 blocks (128 keys), at most 16."""
    return max(1, min(16, blocks // 8, 2 * multiprocessors(device) // programs))


def paged_attend(q: torch.Tensor, pool_k: torch.Tensor, pool_v: torch.Tensor, blocks: torch.Tensor,
                 limit: torch.Tensor, splits: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """q [N, kv, M, D] (its last dimension contiguous) over the blocks `blocks` [N, B] of one
    layer's pool [blocks, bs, kv, D]; query m of row n attends to the row's first limit[n, m] keys
    (int32 [N, M], contiguous, each at least 1) -> out [N, kv, M, D], lse [N, kv, M] in q's dtype,
    as `kernels.attend` over the gathered blocks with that mask. `splits` programs share each row's
    blocks (0: `key_splits`), their partial results (float32) merged by log-sum-exp (`_merge_splits`)."""
    n, heads, queries, dim = q.shape
    assert q.stride(3) == 1 and pool_k.is_contiguous() and pool_v.is_contiguous()
    assert limit.dtype == torch.int32 and limit.is_contiguous() and limit.shape == (n, queries)
    query_blocks = triton.cdiv(queries, QUERIES)
    splits = splits or key_splits(n * heads * query_blocks, blocks.shape[1], q.device)
    partial = torch.float32 if splits > 1 else q.dtype
    out = torch.empty((splits, n, heads, queries, dim), dtype=partial, device=q.device)
    lse = torch.empty((splits, n, heads, queries), dtype=partial, device=q.device)
    _paged_attend[(n, heads, query_blocks * splits)](
        q, pool_k, pool_v, blocks, limit, out, lse, dim ** -0.5, queries, blocks.shape[1],
        triton.cdiv(blocks.shape[1], splits), *q.stride()[:3], *pool_k.stride()[:3], *out.stride()[:4],
        *lse.stride()[:3], BLOCK=pool_k.shape[1], QUERIES=QUERIES, D=dim)
    if splits == 1:
        return out[0], lse[0]
    merged = torch.empty((n, heads, queries, dim), dtype=q.dtype, device=q.device)
    merged_lse = torch.empty((n, heads, queries), dtype=q.dtype, device=q.device)
    _merge_splits[(n, heads, query_blocks)](
        out, lse, merged, merged_lse, splits, queries, *out.stride()[:4], *lse.stride()[:3], *merged.stride()[:3],
        *merged_lse.stride()[:2], QUERIES=QUERIES, D=dim)
    return merged, merged_lse
