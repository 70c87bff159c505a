"""The paged kernel (`hpd_core.model.paged`: attention that reads the KV pool's blocks in place)
against what the engine did before it (gather each row's blocks into new tensors, then
`kernels.fused_when_wide`'s attention), at the replay's shapes, one attention call at a time.

    python -m bench.paged_kernel          # on CUDA: both, timed, at each shape

The gathers cost 23% of a 64-page replay round's device time and write a copy of every key a step
reads (bench/NOTES.md); the kernel walks the block table and reads each key once per 16 queries
(tests/test_kernels.py checks it against its PyTorch contract, `kernels.paged_reference`, in
float64). Query m of row n attends to the row's first `limit[n, m]` keys (a prefix: its valid
length; a row's own keys: its position minus its first own position, plus one).
"""

from __future__ import annotations

import argparse
import time

import torch

from hpd_core.model.kernels import compiled, fused_when_wide, paged_reference
from hpd_core.model.paged import paged_attend


def case(rows: int, heads: int, queries: int, keys: int, dim: int, gen: torch.Generator, fewest: int = 1):
    """A float64 pool on the CPU holding `rows` rows of `keys` keys each in shuffled blocks (three
    more blocks than they use), their block tables [rows, blocks], queries [rows, heads, queries,
    dim] and per-query key counts [rows, queries] int32, each from `fewest` to all of the row's keys."""
    per_row = -(-keys // 16)
    pool_k, pool_v = (torch.randn((rows * per_row + 3, 16, heads, dim), generator=gen, dtype=torch.float64)
                      for _ in range(2))
    table = torch.randperm(rows * per_row + 3, generator=gen)[:rows * per_row].view(rows, per_row)
    limit = torch.randint(fewest, keys + 1, (rows, queries), generator=gen, dtype=torch.int32)
    q = torch.randn((rows, heads, queries, dim), generator=gen, dtype=torch.float64)
    return q, pool_k, pool_v, table, limit


def timed(fn, repeats: int = 20) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats * 1000


def main() -> None:
    argparse.ArgumentParser(description=__doc__.split("\n")[0]).parse_args()
    now = fused_when_wide(compiled().attend)
    print("| shape | rows | queries | keys | gather + attention ms | paged kernel ms |")
    print("|---|---|---|---|---|---|")
    for name, rows, queries, keys in (("one row: prefix", 1, 2, 2000), ("64 rows of a page: prefix", 1, 128, 2000),
                                      ("64 pages: prefixes", 64, 238, 1800), ("64 pages: own keys", 1088, 14, 300),
                                      ("plain AR, 64 pages", 64, 2, 3750)):
        q, pool_k, pool_v, table, limit = case(rows, 8, queries, keys, 128, torch.Generator().manual_seed(0),
                                               fewest=keys - 39)  # a ragged causal front
        args_ = (*(t.to("cuda", torch.bfloat16) for t in (q, pool_k, pool_v)), table.cuda(), limit.cuda())
        gather = timed(lambda: paged_reference(*args_, attend=now))
        print(f"| {name} | {rows} | {queries} | {keys} | {gather:.3f} | {timed(lambda: paged_attend(*args_)):.3f} |",
              flush=True)


if __name__ == "__main__":
    main()
