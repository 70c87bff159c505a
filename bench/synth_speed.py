"""Synthetic page generation speed: pages/s for the simple, default and dense presets.

    python -m bench.synth_speed [--pages 200] [--workers 1]   # from the repository root

With --workers 1 (default) the process is pinned to one core. With N > 1, N fresh worker
processes render the pages (what a training data loader does) and the total is reported.
Each preset is timed twice over the same seeds: "cold" is the first pass (fonts, corpus and
formula references load on first use in each process), "warm" the second (all cached, as in
a long-running data worker). Training needs ~300 pages/s from 16 cores, i.e. >= 25 pages/s
per core on typical pages.

Measured on the H200 box's CPUs (2026-11), pages/s cold / warm:
                      16 workers (4800 pages)             1 core (300 pages)
  first version       simple 525/912 default 305/423      simple 81/98 default 37/36
                      dense 215/266                       dense 24/26
  reused PDF document dense 269/408 (others not recorded) simple 95/88 default 41/55
  + path operators                                        dense 31/38
Predicted for the second version: ~10 ms less per dense page (profile: a fresh document per
page re-loads fonts and glyphs, ~6 ms; pymupdf.Shape ~0.2 ms a polyline), 39 -> ~29 ms;
measured 39 -> 26 ms warm on one core.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import time

from hpd_training.synth import SynthConfig, render_page

PRESETS = {"simple": SynthConfig.simple(), "default": SynthConfig(), "dense": SynthConfig.dense()}


def _render(job: tuple[SynthConfig, range]) -> int:
    config, seeds = job
    for seed in seeds:
        render_page(seed, config)
    return len(seeds)


def pages_per_second(config: SynthConfig, seeds: range, pool, workers: int) -> float:
    start = time.perf_counter()
    if pool is None:
        n = _render((config, seeds))
    else:
        n = sum(pool.map(_render, [(config, seeds[i::workers]) for i in range(workers)]))
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=200)
    parser.add_argument("--workers", type=int, default=1)
    args = parser.parse_args()
    if args.workers == 1:
        os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})
    print(f"{args.workers} worker(s), {os.cpu_count()} cpus")
    print(f"{'preset':8} {'cold p/s':>9} {'warm p/s':>9} {'blocks/page':>12}")
    for name, config in PRESETS.items():
        seeds = range(10_000, 10_000 + args.pages)
        pool = multiprocessing.get_context("spawn").Pool(args.workers) if args.workers > 1 else None
        cold = pages_per_second(config, seeds, pool, args.workers)
        warm = pages_per_second(config, seeds, pool, args.workers)
        if pool is not None:
            pool.close()
        blocks = sum(len(render_page(s, config).blocks) for s in seeds[:50]) / 50
        print(f"{name:8} {cold:9.1f} {warm:9.1f} {blocks:12.1f}", flush=True)


if __name__ == "__main__":
    main()
