"""A/B of the decoder's attention backends on CUDA: with and without cuDNN's fused attention.

    python bench/ab_cudnn.py cudnn 300 && python bench/ab_cudnn.py default 300   # fresh processes

Parses one page twice (plain AR, `max_new_tokens` from argv) in a fresh process and prints both
passes: the first pass meets every key length for the first time, the second repeats them.
`cudnn` puts cuDNN first in `hpd_core.model.language.ATTENTION_BACKENDS` (torch's own default
order); `default` runs the engine as shipped. Needs .benchpages/dense-10000000.png
(scripts/bench_gpu.sh says how to render it).
"""

import sys
import time

import torch
from PIL import Image
from torch.nn.attention import SDPBackend

import hpd_core.model.language as language
from hpd_core import ParseOptions, load_engine

if sys.argv[1] == "cudnn":
    language.ATTENTION_BACKENDS = [SDPBackend.CUDNN_ATTENTION, *language.ATTENTION_BACKENDS]
engine = load_engine(None, device="cuda" if torch.cuda.is_available() else "cpu")
page = Image.open(".benchpages/dense-10000000.png")
for attempt in range(2):
    start = time.perf_counter()
    result = engine.parse(page, ParseOptions(prompt="plain", use_mtp=False, max_new_tokens=int(sys.argv[2])))
    print(f"{sys.argv[1]} pass {attempt}: {time.perf_counter() - start:.2f} s, decode "
          f"{result.stats.decode_seconds:.2f} s, {result.stats.forwards} forwards", flush=True)
