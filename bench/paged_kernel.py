"""A prototype for issue 18: attention that reads the KV pool's blocks in place (a Triton kernel
over block tables), against what the engine does now (gather each row's blocks into new tensors,
then `kernels.fused_when_wide`'s attention), at the replay's shapes.

    python -m bench.paged_kernel [--check]          # on CUDA: both, timed, at each shape
    TRITON_INTERPRET=1 python -m bench.paged_kernel --check   # CPU: Triton's interpreter, tiny shapes

The gathers cost 23% of a 64-page replay round's device time and write a copy of every key a step
reads (bench/NOTES.md); a kernel that walks the block table reads each key once. `--check` compares
the kernel's output and log-sum-exp with the eager `attend` over gathered keys (float32). Not used by
the engine: it moves into `hpd_core.model.kernels` if it wins here.

Kernel: one program per (row, kv head, block of 16 queries, split); it walks its share of the row's
block table, loads each block's keys and values from the pool [blocks, 16, kv, D], and keeps an
online softmax; with splits > 1 (few rows over long keys: one row's 2,000-key prompt gives 8
programs for 132 multiprocessors) the splits' results merge by log-sum-exp. Query m of row n may
attend to the row's first `limit[n, m]` keys (a prefix: its valid length; a row's own keys: its
position minus its first own position, plus one).
"""

from __future__ import annotations

import argparse
import time

import torch
import triton
import triton.language as tl

from hpd_core.model.kernels import EAGER, additive_bias


@triton.jit
def _paged_attention(q, pool_k, pool_v, table, limit, out, lse, scale, queries, table_width, per_split,
                     sq_n, sq_h, sq_m, sp_b, sp_s, sp_h, so_s, so_n, so_h, so_m, sl_s, sl_n, sl_h,
                     BLOCK: tl.constexpr, QUERIES: tl.constexpr, D: tl.constexpr):
    n, h, program = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    mb, split = program % tl.cdiv(queries, QUERIES), program // tl.cdiv(queries, QUERIES)
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
        scores = tl.dot(qs, tl.trans(k), input_precision="ieee") * scale  # no TF32 for float32
        scores = tl.where((b * BLOCK + s)[None, :] < lim[:, None], scores, float("-inf"))
        new_top = tl.maximum(top, tl.max(scores, 1))
        safe = tl.where(new_top == float("-inf"), 0.0, new_top)
        p = tl.exp(scores - safe[:, None])
        keep = tl.exp(top - safe)
        total = total * keep + tl.sum(p, 1)
        acc = acc * keep[:, None] + tl.dot(p.to(v.dtype), v, input_precision="ieee")
        top = new_top
    seen = total > 0  # a split past a query's keys (or a query past the end) saw none: lse -inf
    out_at = out + split * so_s + n * so_n + h * so_h + m[:, None] * so_m + d[None, :]
    tl.store(out_at, acc / tl.where(seen, total, 1.0)[:, None], mask=live[:, None])
    tl.store(lse + split * sl_s + n * sl_n + h * sl_h + m, tl.where(seen, top + tl.log(tl.where(seen, total, 1.0)),
                                                                    float("-inf")), mask=live)


def paged_attention(q: torch.Tensor, pool_k: torch.Tensor, pool_v: torch.Tensor, table: torch.Tensor,
                    limit: torch.Tensor, splits: int = 1) -> tuple[torch.Tensor, torch.Tensor]:
    """q [N, kv, M, D] over the blocks `table` [N, B] of one layer's pool [blocks, 16, kv, D]; query
    m of row n attends to the row's first limit[n, m] keys -> out [N, kv, M, D], lse [N, kv, M].
    `splits` > 1 divides each row's blocks among that many programs (for few rows over long keys),
    whose partial results merge by log-sum-exp."""
    n, heads, queries, dim = q.shape
    block = pool_k.shape[1]
    per = 16
    per_split = -(-table.shape[1] // splits)
    out = torch.empty((splits, n, heads, queries, dim), dtype=torch.float32, device=q.device)
    lse = torch.empty((splits, n, heads, queries), dtype=torch.float32, device=q.device)
    grid = (n, heads, triton.cdiv(queries, per) * splits)
    _paged_attention[grid](q, pool_k, pool_v, table, limit.to(torch.int32).contiguous(), out, lse,
                           dim ** -0.5, queries, table.shape[1], per_split, *q.stride()[:3], *pool_k.stride()[:3],
                           *out.stride()[:4], *lse.stride()[:3], BLOCK=block, QUERIES=per, D=dim)
    if splits == 1:
        return out[0].to(q.dtype), lse[0].to(q.dtype)
    top = lse.amax(0)
    weight = torch.exp(lse - top)                                     # 0 for a split that saw no keys
    total = weight.sum(0)
    merged = (weight[..., None] * torch.nan_to_num(out)).sum(0) / total[..., None]
    return merged.to(q.dtype), (top + total.log()).to(q.dtype)


def case(rows: int, heads: int, queries: int, keys: int, dim: int, device: str, dtype, seed: int = 0):
    """A pool holding `rows` rows of `keys` keys each in shuffled blocks, their block tables, queries,
    and per-query limits (a ragged causal front: each row's queries see all but their last few keys)."""
    gen = torch.Generator().manual_seed(seed)
    per_row = -(-keys // 16)
    pool_k, pool_v = (torch.randn((rows * per_row + 3, 16, heads, dim), generator=gen).to(device, dtype)
                      for _ in range(2))
    table = torch.randperm(rows * per_row + 3, generator=gen)[:rows * per_row].view(rows, per_row).to(device)
    limit = keys - torch.randint(0, min(keys, 40), (rows, queries), generator=gen)
    q = torch.randn((rows, heads, queries, dim), generator=gen).to(device, dtype)
    return q, pool_k, pool_v, table.to(torch.int32), limit.to(device)


def gathered(q, pool_k, pool_v, table, limit, attend=EAGER.attend):
    """What the engine does now: gather the blocks, then attention with an additive bias."""
    n, blocks = table.shape
    k, v = (pool[table.long()].view(n, blocks * 16, *pool.shape[2:]).transpose(1, 2) for pool in (pool_k, pool_v))
    keys = torch.arange(blocks * 16, device=q.device)
    mask = keys[None, None, :] < limit[:, :, None]                    # [N, M, L]
    return attend(q, k, v, additive_bias(mask[:, None], q.dtype))


def check() -> None:
    for rows, heads, queries, keys, splits in ((1, 2, 3, 40, 1), (3, 2, 17, 100, 1), (2, 1, 5, 16, 1),
                                               (1, 2, 3, 100, 4), (3, 2, 17, 100, 3)):
        args = case(rows, heads, queries, keys, 16, "cuda" if torch.cuda.is_available() else "cpu", torch.float32)
        (out, lse), (e_out, e_lse) = paged_attention(*args, splits=splits), gathered(*args)
        torch.testing.assert_close(out, e_out, rtol=1e-4, atol=1e-4)
        torch.testing.assert_close(lse, e_lse, rtol=1e-4, atol=1e-4)
        print(f"rows {rows} kv heads {heads} queries {queries} keys {keys} splits {splits}: "
              "== eager attention over gathered keys")


def timed(fn, repeats: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="only compare with eager attention (float32)")
    args = parser.parse_args()
    check()
    if args.check:
        return
    from hpd_core.model.kernels import compiled, fused_when_wide
    now = fused_when_wide(compiled().attend)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    print("| shape | rows | queries | keys | gather + attention ms | paged kernel ms | splits | split kernel ms |")
    print("|---|---|---|---|---|---|---|---|")
    for name, rows, queries, keys in (("one row: prefix", 1, 2, 2000), ("64 rows of a page: prefix", 1, 128, 2000),
                                      ("64 pages: prefixes", 64, 238, 1800), ("64 pages: own keys", 1088, 14, 300),
                                      ("plain AR, 64 pages", 64, 2, 3750)):
        args_ = case(rows, 8, queries, keys, 128, "cuda", torch.bfloat16)
        splits = max(1, min(16, 2 * sms // (rows * 8 * -(-queries // 16))))
        print(f"| {name} | {rows} | {queries} | {keys} | {timed(lambda: gathered(*args_, attend=now)):.3f} | "
              f"{timed(lambda: paged_attention(*args_)):.3f} | {splits} | "
              f"{timed(lambda: paged_attention(*args_, splits=splits)):.3f} |", flush=True)


if __name__ == "__main__":
    main()
