"""The host's share of a decode round at many rows: `KVCache.layout` (block reservations, the
forward's write slots and read tables) for the fork pattern of the replay's trace.

    python -m bench.host_layout [--pages 200] [--children 17] [--prompt 1800] [--q 1,7] [--repeats 5]

Each page: a row holding a `prompt`-token shared prefix and `children` rows forked from it at its
end; the median time of planning one forward over all rows (each feeding q positions) on the CPU,
where the host does this work on any device. No model: only the cache's bookkeeping.
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from hpd_core.kv_cache import KVCache


def forked_pages(pages: int, children: int, prompt: int) -> tuple[KVCache, list[int]]:
    cache = KVCache(1, 1, 8, dtype=torch.float32)
    rows = []
    for _ in range(pages):
        root = cache.alloc()
        cache.layout([root], torch.arange(prompt)[None])  # reserves the prompt's blocks
        cache.lengths[root] = prompt
        cache.share(root)
        rows += [root] + [cache.fork(root, prompt) for _ in range(children)]
    return cache, rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--children", type=int, default=17)
    parser.add_argument("--prompt", type=int, default=1800)
    parser.add_argument("--q", default="1,7", help="positions a row feeds (1 + drafts)")
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    cache, rows = forked_pages(args.pages, args.children, args.prompt)
    for q in (int(x) for x in args.q.split(",")):
        positions = torch.tensor([[cache.lengths[r] + j for j in range(q)] for r in rows])
        cache.layout(rows, positions)  # the first call reserves the new blocks
        times = []
        for _ in range(args.repeats):
            start = time.perf_counter()
            cache.layout(rows, positions)
            times.append(time.perf_counter() - start)
        print(f"{len(rows)} rows, q {q}: layout {statistics.median(times) * 1000:.1f} ms (median of {args.repeats})")


if __name__ == "__main__":
    main()
