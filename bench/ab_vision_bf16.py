"""A/B on the CPU: the bundled model with its vision tower in fp32 and in bf16 autocast.

    python bench/ab_vision_bf16.py

Two engines in one process, the 2 dense pages of `hpd-bench`, fork-batched + P-MTP (k = 6),
two passes of each page on each engine after a warm-up: prints the vision time (preprocess,
ViT, projector, prompt embedding) and the whole parse per page, and their ratios.
"""

import time

import torch

from hpd_core import ParseOptions, load_engine
from hpd_training.synth import SynthConfig, render_page

torch.set_num_threads(2)
pages = [render_page(10_000_000 + i, SynthConfig.dense()).image for i in range(2)]
engines = {"fp32": load_engine(None, vision_bf16=False), "bf16": load_engine(None, vision_bf16=True)}
options = ParseOptions(batch_children=True)
for engine in engines.values():
    engine.parse(pages[0], options)  # warm-up
seconds = {name: [0.0, 0.0] for name in engines}
for _ in range(2):
    for name, engine in engines.items():
        for page in pages:
            start = time.perf_counter()
            engine.prompt(page)
            middle = time.perf_counter()
            engine.parse(page, options)
            seconds[name][0] += middle - start
            seconds[name][1] += time.perf_counter() - middle
runs = 2 * len(pages)
for name, (vision, parse) in seconds.items():
    print(f"{name} vision: {vision / runs:.3f} s/page vision, {parse / runs:.2f} s/page parse")
(v32, p32), (v16, p16) = seconds["fp32"], seconds["bf16"]
print(f"fp32 / bf16: vision {v32 / v16:.2f}x, parse {p32 / p16:.2f}x")
