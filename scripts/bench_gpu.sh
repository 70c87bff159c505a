#!/usr/bin/env bash
# The GPU benchmarks of bench/NOTES.md on the lent H200, from the repo root there. They need no
# package the GPU image lacks: the pages are PNGs rendered here beforehand (no pymupdf there):
#   python -c "from hpd_training.synth import SynthConfig, render_page; [render_page(10_000_000 + i,
#     SynthConfig.dense()).image.save(f'.benchpages/dense-{10_000_000 + i}.png') for i in range(8)]"
# Results land in $OUT/: the hpd-bench matrix + page-batch sweep, and the 1B decode timing.
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
timeout "${BENCH_TIMEOUT:-300}" python3 -m hpd_tools.bench --device cuda --inputs .benchpages/*.png \
    --pages-per-batch 1,16,64,256 --out "$OUT/hpd-tiny-cuda" 2>&1 | tee "$OUT/bench.log"
timeout "${BENCH512_TIMEOUT:-100}" python3 -m hpd_tools.bench --device cuda --inputs .benchpages/*.png --ks 6 \
    --pages-per-batch 512 --out "$OUT/hpd-tiny-cuda-512" 2>&1 | tee "$OUT/bench-512.log"
timeout "${REAL_TIMEOUT:-150}" python3 -m bench.real_dims /tmp/hpd-real --device cuda --batches 1,16,64 \
    --bandwidth 4800 --repeats 20 2>&1 | tee "$OUT/real-dims-cuda.log"
