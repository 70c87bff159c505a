#!/usr/bin/env bash
# One training run on the lent H200 (see docs/training.md). Usage, from the repo root there:
#   bash scripts/train_gpu.sh RUN_NAME STAGES [extra hpd_core.train args...]
# The packages the GPU image lacks (pymupdf, rapidfuzz, apted) travel as .gpu-site.tar.xz, built
# here as docs/training.md says; the checkpoint comes back as $OUT/ckpt-NAME.tar.part-*.
set -uo pipefail
name=$1; stages=$2; shift 2
mkdir -p /tmp/site && tar xJf .gpu-site.tar.xz -C /tmp/site || exit 1
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
timeout "${TRAIN_TIMEOUT:-540}" python3 -m hpd_core.train --out "runs/$name" --stages "$stages" "$@" 2>&1 | tee "$OUT/train-$name.log"
cd "runs/$name" && tar cf - hpd-tiny P-MTP log.jsonl | split -b 15m - "$OUT/ckpt-$name.tar.part-"
ls -la "$OUT"
