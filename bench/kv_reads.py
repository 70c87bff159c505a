"""KV reads and time of one decode step vs the number of children sharing a page prompt.

    python -m bench.kv_reads [--model PATH] [--context 1800] [--own 100] [--children 1,2,4,8,16]

One page row prefilled with `context` random prompt tokens, then N children forked from it at
the prompt's end, each having written `own` tokens of its own. Times one greedy decode step
(`speculative.step`, k=0) over the N children, median of `--repeats`, twice in the same run:
with the prompt marked as the page's shared prefix (as the engine does: read once per step) and
without (the same shared blocks, but every row reads all of its blocks). Reports key positions
read per layer (`Layout.keys_read`), bytes over all layers, and blocks in use, beside what the
copying cache it replaced read and held: N x (context + own) positions.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time

import torch

from bench.common import forked_rows, step_reads
from hpd_core import load_engine
from hpd_core.kv_cache import KVCache
from hpd_core.speculative import step


def time_step(engine, cache: KVCache, rows: list[int], repeats: int) -> float:
    """Median seconds of one greedy step over `rows` (after one warm-up step)."""
    lm, hidden = engine.model.lm, torch.zeros(len(rows), engine.config.llm_config.hidden_size, dtype=engine.dtype)
    length = cache.lengths[rows[0]]
    times = []
    for _ in range(repeats + 1):
        start = time.perf_counter()
        step(lm, cache, rows, [5] * len(rows), hidden, 0)
        times.append(time.perf_counter() - start)
        for r in rows:
            cache.crop(r, length)  # every timed step sees the same context
    return statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: the bundled model)")
    parser.add_argument("--context", type=int, default=1800, help="page prompt positions")
    parser.add_argument("--own", type=int, default=100, help="positions each child wrote itself")
    parser.add_argument("--children", default="1,2,4,8,16")
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    engine = load_engine(args.model)
    llm = engine.config.llm_config
    print(f"load average {os.getloadavg()[0]:.1f}, {torch.get_num_threads()} thread(s), {engine.info.dtype}, "
          f"context {args.context} + {args.own} own positions per child")
    print("| children | copying cache: keys read / held | shared prefix: keys read, MB | ms/step | "
          "no shared prefix: keys read, MB | ms/step | blocks in use (x16 positions) |")
    print("|---|---|---|---|---|---|---|")
    with torch.inference_mode():
        for n in (int(c) for c in args.children.split(",")):
            row = [f"{n}", f"{n * (args.context + args.own):,}"]
            for shared in (True, False):
                cache = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=engine.dtype)
                rows = forked_rows(engine.model.lm, cache, args.context, n, args.own)
                if not shared:
                    for r in rows:
                        cache.shared[r] = 0  # same blocks, but each row reads all of its own
                seconds, keys = time_step(engine, cache, rows, args.repeats), step_reads(cache, rows)
                row += [f"{keys:,}, {keys * cache.token_bytes / 1e6:.1f}", f"{seconds * 1000:.2f}"]
            row.append(f"{cache.blocks_in_use:,}")
            print("| " + " | ".join(row) + " |", flush=True)


if __name__ == "__main__":
    main()
