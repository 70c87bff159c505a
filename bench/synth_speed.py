"""Synthetic page generation speed on one CPU core: pages/s for the simple, default and dense presets.

    python -m bench.synth_speed [--pages 200]   # from the repository root

Each preset is timed twice over the same seeds in one process: "cold" is the first pass of a
fresh process (fonts, corpus and formula references load on first use), "warm" the second
pass (everything cached, as in a long-running data worker). Training needs ~300 pages/s from
16 cores, i.e. >= 25 pages/s per core on typical pages.
"""

from __future__ import annotations

import argparse
import os
import time

from hpd_core.synth import SynthConfig, render_page

PRESETS = {"simple": SynthConfig.simple(), "default": SynthConfig(), "dense": SynthConfig.dense()}


def pages_per_second(config: SynthConfig, seeds: range) -> float:
    start = time.perf_counter()
    for seed in seeds:
        render_page(seed, config)
    return len(seeds) / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--pages", type=int, default=200)
    args = parser.parse_args()
    os.sched_setaffinity(0, {min(os.sched_getaffinity(0))})  # one core
    print(f"{'preset':8} {'cold p/s':>9} {'warm p/s':>9} {'blocks/page':>12}")
    for name, config in PRESETS.items():
        seeds = range(10_000, 10_000 + args.pages)
        cold = pages_per_second(config, seeds)
        warm = pages_per_second(config, seeds)
        blocks = sum(len(render_page(s, config).blocks) for s in seeds[:50]) / 50
        print(f"{name:8} {cold:9.1f} {warm:9.1f} {blocks:12.1f}")


if __name__ == "__main__":
    main()
