"""The host's share of a decode round at many rows: `KVCache.layout` (block reservations, the
forward's write slots and read tables) for the fork pattern of the replay's trace.

    python -m bench.host_layout [--pages 200] [--children 17] [--prompt 1800] [--q 1,7] [--repeats 5] [--ops]

Each page: a row holding a `prompt`-token shared prefix and `children` rows forked from it at its
end; the median time of planning one forward over all rows (each feeding q positions) on the CPU,
where the host does this work on any device, and of a CUDA-graph decode step's whole host work
outside its replay (`graphs.plan`: the layout padded to the graph's bucket; `graphs.pack`: into the
one buffer the step copies to the device). No model: only the cache's bookkeeping. With `--ops`,
also the tensor operations of each part (`bench.layer_ops.OpCounter`; all on host tensors, so on
CUDA none launches a kernel) and the tensors made from host data (`torch.tensor`).
"""

from __future__ import annotations

import argparse
import statistics
import time
from dataclasses import dataclass

import torch

from bench.layer_ops import OpCounter
from hpd_core.graphs import Bucket, pack, pad_layout, plan
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


class HostOps(OpCounter):
    """OpCounter, and the tensors made from host data (`torch.tensor`: on CUDA a host-to-device copy each)."""

    def __init__(self):
        super().__init__()
        self.made = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.made += self.on and func.overloadpacket.__name__ == "lift_fresh"
        return super().__torch_dispatch__(func, types, args, kwargs)

    def count(self, work):
        """work()'s result and the kernel-launching operations it ran."""
        self.on, before = True, sum(self.ops.values())
        try:
            return work(), sum(self.ops.values()) - before
        finally:
            self.on = False


@dataclass(frozen=True)
class HostWork:
    """Tensor operations of a graph step's host work outside its graph (module docstring)."""
    layout: int
    padding: int
    packing: int
    made: int  # tensors made from host data

    def __str__(self) -> str:
        return (f"layout {self.layout} ops, pad_layout {self.padding}, pack {self.packing}; "
                f"{self.made} tensors made from host data")


def host_ops(cache: KVCache, rows: list[int], positions: torch.Tensor) -> HostWork:
    with HostOps() as ops:
        layout, planned = ops.count(lambda: cache.layout(rows, positions))
        padded, padding = ops.count(lambda: pad_layout(layout, Bucket.of(layout), cache.scratch, cache.block_size))
        _, packing = ops.count(lambda: pack(padded))
    return HostWork(planned, padding, packing, ops.made)


def median_ms(work, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--children", type=int, default=17)
    parser.add_argument("--prompt", type=int, default=1800)
    parser.add_argument("--q", default="1,7", help="positions a row feeds (1 + drafts)")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ops", action="store_true", help="count a graph step's host operations (docstring)")
    args = parser.parse_args()
    cache, rows = forked_pages(args.pages, args.children, args.prompt)
    for q in (int(x) for x in args.q.split(",")):
        positions = torch.tensor([[cache.lengths[r] + j for j in range(q)] for r in rows])
        cache.layout(rows, positions)  # the first call reserves the new blocks
        layout, step = (median_ms(work, args.repeats) for work in (
            lambda: cache.layout(rows, positions), lambda: pack(plan(cache, rows, positions)[1])))
        print(f"{len(rows)} rows, q {q}: layout {layout:.2f} ms, a graph step's host work {step:.2f} ms "
              f"(medians of {args.repeats})")
        if args.ops:
            print(f"  {host_ops(cache, rows, positions)}")


if __name__ == "__main__":
    main()
