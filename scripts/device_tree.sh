#!/usr/bin/env bash
# Fit the working tree into the device's 64 MiB for a training call (docs/training.md), from the repo root:
#   bash scripts/device_tree.sh aside [CARRIED...]  # before a call on a fresh machine: carry .gpu-site.tar.xz, .carry/P-MTP
#   bash scripts/device_tree.sh light [CARRIED...]  # before a call on the warm machine, which holds /tmp/site and runs/
#   bash scripts/device_tree.sh back                # after the calls
# `aside` moves P-MTP/model.safetensors (9.2 MB: the head plus copies of the shared embeddings and
# lm_head), the screenshots, the bench results and the app's examples to /tmp/hpd-aside, and writes the draft head's own
# tensors (2.9 MB) to .carry/P-MTP, for `--init-mtp .carry/P-MTP`. `light` also moves both bundled
# models' weights (assets/hpd-tiny and assets/hpd-tiny-docs, 39 + 42 MB) aside, for calls that start
# from runs/ on the warm machine and carry data instead, or carry the starting weights compressed
# (docs/training.md, session 14). .gpu-site.tar.xz, .carry and data/ are git-ignored: they travel
# only when the call carries them (run's `carry`), so pass each CARRIED path there too. Both print
# the size that will travel: the tree, .gpu-site.tar.xz and .carry/P-MTP (aside only), and the
# CARRIED paths, and refuse above 62 MiB: the device counts more than this sum (a call estimated
# here under 64 MiB was refused at 66.97 MB in session 25), so 2 MiB stay free.
set -euo pipefail
aside=/tmp/hpd-aside
paths=(P-MTP/model.safetensors docs/images bench/results assets/examples)
light_paths=(assets/hpd-tiny{,-docs}/model-0000{1,2,3}-of-00003.safetensors
             assets/hpd-tiny-docs/P-MTP/model.safetensors)

move_aside() {
  for p in "$@"; do
    [ -e "$p" ] || continue
    mkdir -p "$aside/$(dirname "$p")" && mv "$p" "$aside/$p"
  done
}

travels() {  # the tree (tracked files present, untracked not ignored) and the carried paths
  { git ls-files -z --cached --others --exclude-standard | xargs -0 stat -c %s 2>/dev/null || true
    for p in "$@"; do
      if [ -e "$p" ]; then find "$p" -type f -exec stat -c %s {} +; else echo "not here: $p" >&2; fi
    done; } | awk '{s += $1} END {print s}'
}

case "${1:-}" in
  aside|light)
    mode=$1; shift
    if [ ! -e .carry/P-MTP/model.safetensors ]; then
      mkdir -p .carry/P-MTP
      "${PYTHON:-python3}" - <<'PY'
from safetensors.torch import load_file, save_file
tensors = load_file("P-MTP/model.safetensors")
save_file({k: v for k, v in tensors.items() if ".mtp." in k}, ".carry/P-MTP/model.safetensors")
PY
      cp P-MTP/config.json .carry/P-MTP/
    fi
    move_aside "${paths[@]}"
    carried=("$@")
    if [ "$mode" = aside ]; then carried+=(.gpu-site.tar.xz .carry/P-MTP); else move_aside "${light_paths[@]}"; fi
    size=$(travels "${carried[@]}")
    limit=$((62 * 2**20))
    echo "travels: $size bytes (limit $limit, 2 MiB under the device's 64 MiB; $(( (limit - size) / 2**20 )) MiB left)"
    [ "$size" -le "$limit" ] ;;
  back)
    for p in "${paths[@]}" "${light_paths[@]}"; do
      [ -e "$aside/$p" ] || continue
      rm -rf "$p" && mv "$aside/$p" "$p"
    done
    git status --short ;;
  *) echo "usage: $0 aside|light [CARRIED...] | back" >&2; exit 2 ;;
esac
