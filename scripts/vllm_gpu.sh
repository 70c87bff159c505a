#!/usr/bin/env bash
# Stock vLLM 0.26.0 on the lent H200, which has no internet (shared/VLLM_NOTES.md, section GPU).
# Status: run on the lent H200 on 2026-12-01 (twice: the machine went cold between two calls once); ~150 s
# of device time for the 8 calls, 60 s of it the install (bench/NOTES.md, "the vLLM backend on the H200").
# .vllm-gpu/ was lost with the old machine; `prepare` rebuilt it here on 2026-12-02 (87 wheels, 48.3 MiB,
# its local check clean), and it installed on the H200 that day in 8 calls ("UNMET: none", pip 11 s).
# Runs ON the device, from the repo root there:
#   bash scripts/vllm_gpu.sh piece PATH...   # move carried pieces / wheel folders to /tmp/vllm-gpu
#   bash scripts/vllm_gpu.sh install         # reassemble, verify, install into /tmp/vllm-site
#   eval "$(bash scripts/vllm_gpu.sh env)"   # then run vLLM (PYTHONPATH, VLLM_* variables)
#   bash scripts/vllm_gpu.sh check           # what the install's requirements find there (install runs it)
# Runs here, where PyPI can be reached (~1 min; its check fills ~1 GB of /tmp for a while):
#   bash scripts/vllm_gpu.sh prepare         # rebuild .vllm-gpu/ below from PyPI alone, then check it
# What travels is prepared here by `bash scripts/vllm_gpu.sh prepare`, in .vllm-gpu/ (ignored by git
# through .git/info/exclude, which prepare sees to):
#   .vllm-gpu/vllm/part-aa .. part-ag  vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl (303.7 MB) cut
#                                      by `split -b 44m`; SHA256 (its hash) and PARTS (name, size)
#   .vllm-gpu/wheels1/                 the 87 small wheels for CPython 3.12 (48.3 MiB) + SHA256SUMS:
#                                      scripts/vllm_wheels.py resolves them (the Requires-Dist closure
#                                      less the image) and checks them with vllm in a pip --target
# The image already has torch 2.11.0+cu130, torchvision 0.26.0, transformers 5.17 and the rest
# (KINDS.md); vLLM's CUDA-kernel extras (flashinfer, tilelang, quack, tokenspeed-mla, humming,
# PyNvVideoCodec, torchcodec, fastsafetensors, nvidia-cutlass-dsl, nvidia-cudnn-frontend) are not
# carried, as in the measured install: hence VLLM_USE_FLASHINFER_SAMPLER=0.
#
# Plan: 8 device calls, each <= 64 MiB with the working tree made light first, here, by
# `bash scripts/device_tree.sh light .vllm-gpu/wheels1` (about 4.1 MiB of tree; the weights go aside
# until `bash scripts/device_tree.sh back`). Chain them: the machine stays warm only ~30 s after a
# call, and a fresh machine has lost /tmp/vllm-gpu (then start again at call 1).
#   call 1  carry .vllm-gpu/wheels1 .vllm-gpu/vllm/SHA256 .vllm-gpu/vllm/PARTS     (~52.5 MiB)
#           bash scripts/vllm_gpu.sh piece .vllm-gpu/wheels1 .vllm-gpu/vllm/SHA256 .vllm-gpu/vllm/PARTS
#   call 2  carry .vllm-gpu/vllm/part-aa   bash scripts/vllm_gpu.sh piece .vllm-gpu/vllm/part-aa   (~48.1 MiB)
#   call 3..7  likewise part-ab, part-ac, part-ad, part-ae, part-af                             (~48.1 MiB each)
#   call 8  carry .vllm-gpu/vllm/part-ag   (~29.7 MiB; install: ~1 min there, 40 s on 2 cores here)
#           bash scripts/vllm_gpu.sh piece .vllm-gpu/vllm/part-ag && bash scripts/vllm_gpu.sh install
# Later calls on the still-warm machine carry nothing of this; they start with
#   eval "$(bash scripts/vllm_gpu.sh env)" && python3 ...
set -euo pipefail
store=${VLLM_GPU_STORE:-/tmp/vllm-gpu}  # overridable only for a dry run elsewhere
site=${VLLM_GPU_SITE:-/tmp/vllm-site}
wheel=vllm-0.26.0-cp38-abi3-manylinux_2_28_x86_64.whl

holds() {  # what /tmp/vllm-gpu holds, and which pieces are still to come
  [ -d "$store" ] || { echo "no $store: nothing carried yet on this machine"; return; }
  echo "$store holds:"
  (cd "$store" && for f in *; do
     if [ -d "$f" ]; then echo "  $f/ ($(ls "$f"/*.whl 2>/dev/null | wc -l) wheels, $(du -sm "$f" | cut -f1) MB)"
     else echo "  $f ($(stat -c %s "$f") bytes)"; fi
   done)
  if [ -e "$store/PARTS" ]; then
    local missing=()
    while read -r name size; do [ -e "$store/$name" ] || missing+=("$name"); done <"$store/PARTS"
    ls -d "$store"/wheels* >/dev/null 2>&1 || missing+=(wheels1)
    echo "still to come: ${missing[*]:-nothing: run install}"
  else
    echo "no PARTS yet: a fresh machine? call 1 carries .vllm-gpu/vllm/PARTS and SHA256"
  fi
}

case "${1:-}" in
  piece)
    shift
    [ $# -gt 0 ] || { echo "usage: $0 piece PATH..." >&2; exit 2; }
    mkdir -p "$store"
    for p in "$@"; do
      [ -e "$p" ] || { echo "not carried: $p" >&2; exit 1; }
      rm -rf "$store/$(basename "$p")"
      mv "$p" "$store/"
    done
    holds ;;
  install)
    for f in SHA256 PARTS; do [ -e "$store/$f" ] || { echo "missing $store/$f (call 1)" >&2; holds; exit 1; }; done
    while read -r name size; do
      [ "$(stat -c %s "$store/$name" 2>/dev/null || echo 0)" = "$size" ] ||
        { echo "piece $name missing or of the wrong size (want $size)" >&2; holds; exit 1; }
    done <"$store/PARTS"
    ls -d "$store"/wheels* >/dev/null 2>&1 || { echo "no wheel folder in $store (call 1)" >&2; exit 1; }
    if ! (cd "$store" && sha256sum --status -c SHA256 2>/dev/null); then
      (cd "$store" && cat $(cut -d' ' -f1 PARTS) >"$wheel")
      (cd "$store" && sha256sum -c SHA256) || { echo "sha256 mismatch: $wheel" >&2; exit 1; }
    fi
    for d in "$store"/wheels*/; do (cd "$d" && sha256sum --quiet -c SHA256SUMS) || exit 1; done
    echo "glibc: $(ldd --version | head -1)"
    rm -rf "$site"
    time python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
      --target "$site" "$store/$wheel" "$store"/wheels*/*.whl
    export PYTHONPATH=$site:$PWD VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_ENABLE_V1_MULTIPROCESSING=0
    python3 -c 'import vllm; print("vllm", vllm.__version__)'
    # The `hpd` plugin's entry point (pyproject.toml), so that vLLM finds the P-MTP draft architecture
    # without this project being pip-installed there (the tree is on PYTHONPATH, see `env`).
    mkdir -p "$site/hpd_parsing_demo-0.dist-info"
    printf 'Metadata-Version: 2.1\nName: hpd-parsing-demo\nVersion: 0\n' >"$site/hpd_parsing_demo-0.dist-info/METADATA"
    printf '[vllm.general_plugins]\nhpd = hpd_vllm.plugin:register\n' >"$site/hpd_parsing_demo-0.dist-info/entry_points.txt"
    touch "$site/.installed"
    bash "$0" check || true
    python3 -c 'import torch; from vllm import LLM, SamplingParams; print("from vllm import LLM: ok; torch", torch.__version__, torch.cuda.get_device_name())' ;;
  env)
    if [ ! -e "$site/.installed" ]; then
      echo "echo 'vllm_gpu.sh: no $site/.installed (a fresh machine? run the install calls)' >&2; false"
      exit 1
    fi
    echo "export PYTHONPATH=$site:$PWD\${PYTHONPATH:+:\$PYTHONPATH}"
    echo "export VLLM_USE_FLASHINFER_SAMPLER=0 VLLM_ENABLE_V1_MULTIPROCESSING=0" ;;
  check)
    # Every Requires-Dist of what $site holds (extras followed where asked for), against this
    # machine's Python with $site first: what is unmet or was left out on purpose (LEFT_OUT and
    # WAIVED of scripts/vllm_wheels.py).
    PYTHONPATH=$site python3 - "$site" "$(dirname "$0")" <<'PY'
import sys, importlib.metadata as md
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name as canon
site = sys.argv[1]
sys.path.append(sys.argv[2])
from vllm_wheels import LEFT_OUT, WAIVED  # as prepare resolved wheels1
dists = {canon(d.metadata["Name"]): d for d in md.distributions(path=[site])}
unmet, waived, todo, seen = [], [], [(n, frozenset()) for n in ["vllm"]], set()
while todo:
    n, extras = todo.pop()
    if (n, extras) in seen or n not in dists:
        continue
    seen.add((n, extras))
    for line in dists[n].requires or []:
        r = Requirement(line)
        if r.marker and not any(r.marker.evaluate({"extra": e}) for e in [""] + sorted(extras)):
            continue
        m = canon(r.name)
        try:
            v = md.version(r.name)
        except md.PackageNotFoundError:
            v = None
        if m in dists:
            todo.append((m, frozenset(r.extras)))
        if v is not None and r.specifier.contains(v, prereleases=True):
            continue
        (waived if m in LEFT_OUT or (n, m) in WAIVED else unmet).append(
            f"{n} needs {line} -> {v or 'absent'}")
shadow = [f"{k} {dists[k].version}" for k in sorted(dists)
          if any(canon(d.metadata["Name"]) == k and str(d._path).find(site) < 0 for d in md.distributions())]
print(f"check: {len(dists)} distributions in {site}")
unmet, waived = sorted(set(unmet)), sorted(set(waived))
print("left out on purpose:", *waived, sep="\n  ")
print("shadowing the image's copy:", ", ".join(shadow) or "none")
print("UNMET:", *unmet, sep="\n  ") if unmet else print("UNMET: none")
sys.exit(1 if unmet else 0)
PY
    ;;
  prepare)
    cd "$(dirname "$0")/.."
    exclude=$(git rev-parse --git-path info/exclude)
    mkdir -p "$(dirname "$exclude")"
    grep -qsx /.vllm-gpu/ "$exclude" || echo /.vllm-gpu/ >>"$exclude"
    export PIP_CONFIG_FILE=/dev/null PIP_FIND_LINKS=  # PyPI alone: not this machine's pip.conf indexes
    rm -rf .vllm-gpu/vllm
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
      --platform manylinux_2_28_x86_64 -d .vllm-gpu/vllm vllm==0.26.0
    python3 scripts/vllm_wheels.py resolve ".vllm-gpu/vllm/$wheel" .vllm-gpu/wheels1
    python3 scripts/vllm_wheels.py check ".vllm-gpu/vllm/$wheel" .vllm-gpu/wheels1
    (cd .vllm-gpu/wheels1 && sha256sum *.whl >SHA256SUMS)
    (cd .vllm-gpu/vllm && sha256sum "$wheel" >SHA256 && split -b 44m "$wheel" part- &&
       stat -c '%n %s' part-* >PARTS && rm "$wheel")  # install reassembles it
    cat .vllm-gpu/vllm/PARTS
    du -ch .vllm-gpu/wheels1 .vllm-gpu/vllm/SHA256 .vllm-gpu/vllm/PARTS | tail -1 ;;  # call 1 carries these
  *) echo "usage: $0 piece PATH... | install | env | check | prepare" >&2; exit 2 ;;
esac
