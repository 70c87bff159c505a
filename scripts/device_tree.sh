#!/usr/bin/env bash
# Fit the working tree into the device's 64 MiB for a training call (docs/training.md), from the repo root:
#   bash scripts/device_tree.sh aside   # before the calls: carry .gpu-site.tar.xz and .carry
#   bash scripts/device_tree.sh back    # after them
# `aside` moves P-MTP/model.safetensors (9.2 MB: the head plus copies of the shared embeddings and
# lm_head), the screenshots and the bench results to /tmp/hpd-aside, and writes the draft head's own
# tensors (2.9 MB) to .carry/P-MTP, for `--init-mtp .carry/P-MTP`.
set -euo pipefail
aside=/tmp/hpd-aside
paths=(P-MTP/model.safetensors docs/images bench/results)
case "${1:-}" in
  aside)
    mkdir -p .carry/P-MTP "$aside"
    "${PYTHON:-python3}" - <<'PY'
from safetensors.torch import load_file, save_file
tensors = load_file("P-MTP/model.safetensors")
save_file({k: v for k, v in tensors.items() if ".mtp." in k}, ".carry/P-MTP/model.safetensors")
PY
    cp P-MTP/config.json .carry/P-MTP/
    for p in "${paths[@]}"; do mkdir -p "$aside/$(dirname "$p")" && mv "$p" "$aside/$p"; done
    size=$( { git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true
              stat -c %s .gpu-site.tar.xz .carry/P-MTP/model.safetensors; } | awk '{s += $1} END {print s}')
    echo "travels: $size bytes (limit $((64 * 2**20)))"
    [ "$size" -le $((64 * 2**20)) ] ;;
  back)
    for p in "${paths[@]}"; do rm -rf "$p" && mv "$aside/$p" "$p"; done
    git status --short ;;
  *) echo "usage: $0 aside|back" >&2; exit 2 ;;
esac
