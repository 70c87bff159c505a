#!/usr/bin/env bash
# One training run on the lent H200 (see docs/training.md). Usage, from the repo root there:
#   [GPUS=2] [WIDEN=runs/w0] bash scripts/train_gpu.sh RUN_NAME STAGES [extra hpd_training.train args...]
# The packages the GPU image lacks (pymupdf, rapidfuzz, apted) travel as .gpu-site.tar.xz, built
# here as docs/training.md says, and stay unpacked in /tmp/site on a warm machine (a call within
# 30 s of the last), which needs no .gpu-site.tar.xz again; the checkpoint always comes back as
# $OUT/ckpt-NAME.tar.part-* (it also stays in runs/NAME for a next call on the still-warm machine; a
# run kept only there was lost in session 14 when the machine went cold between calls). The fonts of
# the synthetic document pages and letters travel as .carry/fonts.tar.xz (`python -m
# hpd_training.synth.fonts .carry/fonts`, then tar and xz: 4.2 MB) and stay in /tmp/fonts ($HPD_FONTS);
# without them those pages fall back to Base14 Times and Helvetica (the log's "document fonts"). GPUS=N
# trains one model data-parallel on N GPUs (torchrun). WIDEN=DIR first converts the bundled
# one-tile weights (assets/hpd-tiny, the draft head in .carry/P-MTP) to the tiled layout in DIR
# (`hpd_training.train.widen`), for `--init DIR/hpd-tiny` (the draft head in DIR/hpd-tiny/P-MTP).
set -uo pipefail
name=$1; stages=$2; shift 2
if [ ! -e /tmp/site/.unpacked ]; then
  [ -e .gpu-site.tar.xz ] || { echo "a fresh machine: no /tmp/site and no .gpu-site.tar.xz carried" >&2; exit 3; }
  { mkdir -p /tmp/site && tar xJf .gpu-site.tar.xz -C /tmp/site && touch /tmp/site/.unpacked; } || exit 1
fi
if [ ! -e /tmp/fonts/.unpacked ] && [ -e .carry/fonts.tar.xz ]; then  # the synthetic pages' fonts
  { tar xJf .carry/fonts.tar.xz -C /tmp && touch /tmp/fonts/.unpacked; } || exit 1
fi
[ -d /tmp/fonts ] && export HPD_FONTS=/tmp/fonts
export PYTHONPATH=/tmp/site:$PWD PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
python3 -c "import torch; print('torch', torch.__version__)"
python3 -c "from hpd_training.synth.fonts import document_families as f; print('document fonts:', len(f()), ', '.join(f()))"
if [ -n "${WIDEN:-}" ]; then
  python3 -m hpd_training.train.widen --out "$WIDEN" --init assets/hpd-tiny --init-mtp .carry/P-MTP || exit 1
fi
launch=(python3)
[ "${GPUS:-1}" -gt 1 ] && launch=(python3 -m torch.distributed.run --standalone --nproc_per_node="$GPUS")
timeout "${TRAIN_TIMEOUT:-540}" "${launch[@]}" -m hpd_training.train --out "runs/$name" --stages "$stages" "$@" 2>&1 | tee "$OUT/train-$name.log"
(cd "runs/$name" && tar cf - hpd-tiny log.jsonl | split -b 15m - "$OUT/ckpt-$name.tar.part-")
ls -la "$OUT"
