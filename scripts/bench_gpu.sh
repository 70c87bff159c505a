#!/usr/bin/env bash
# The GPU benchmarks of bench/NOTES.md on the lent H200, from the repo root there, one step a device
# call (each fits the 600-s limit). The pages are PNGs rendered here beforehand (no pymupdf there):
#   python -c "from hpd_training.synth import SynthConfig, render_page; c = SynthConfig.dense(font_size_range=(20, 26));
#     [render_page(s, c).image.save(f'.benchpages/dense20-{s}.png') for s in (10_000_000, 10_000_001)]"
# The vllm steps need scripts/vllm_gpu.sh's install on the same warm machine. Results land in $OUT/.
#   bash scripts/bench_gpu.sh hpd          # our engine, the bundled model: modes x k, pages per batch 1/64/512
#   bash scripts/bench_gpu.sh vllm         # the same on the vllm backend (stock vLLM, CUDA graphs; synchronous
#                                          # scheduling, the backend's CUDA default: bench/NOTES.md)
#   bash scripts/bench_gpu.sh vllm-eager   # its P-MTP acceptance without torch.compile / CUDA graphs
#   bash scripts/bench_gpu.sh graphs       # the CUDA-graph and fused-kernel tests (tests/test_graphs.py: replay of
#                                          # the compiled kernels == eager tokens; tests/test_kernels.py: Triton == eager);
#                                          # one parses with the bundled hpd-tiny: not with the tree `light`
#   bash scripts/bench_gpu.sh real         # the real dimensions: our decode step (eager vs graphs vs graphs+fused)
#   bash scripts/bench_gpu.sh profile      # the real dimensions: where a graph step's time goes, fused and not
#   bash scripts/bench_gpu.sh replay       # our replay at the real dimensions, 1 and 64 pages (graphs; pages wait
#                                          # for room in the KV pool: bench/NOTES.md)
#   bash scripts/bench_gpu.sh replay-512 [SCHEDULE [RESIDENT]]  # the same, 512 pages of SCHEDULE (fork-mtp: 205 s; fork;
#                                          # plain AR at 512 pages, ~3,900 rounds of ~0.4 s, does not fit one call;
#                                          # RESIDENT: pages in the KV pool at once, default all that fit)
#   bash scripts/bench_gpu.sh replay-profile [SCHEDULE]  # where a replay's time goes: 16 pages (compiles the
#                                          # kernels), then 64 resident, fork-mtp (or SCHEDULE: plain AR's 90-ms rounds
#                                          # at 64 pages are 14x vLLM's step), both profiled (operators, host functions)
#   bash scripts/bench_gpu.sh replay-vllm-fork [RESIDENT]  # 512 pages of vLLM's fork pattern, no drafts (its
#                                          # 16,100 tokens/s: issue 18), RESIDENT (default 64) in the pool at once
#   bash scripts/bench_gpu.sh paged        # a Triton kernel reading KV blocks in place vs gather + attention
#                                          # (bench/paged_kernel.py: hpd_core.model.paged, one call at a time)
#   bash scripts/bench_gpu.sh real-eager   # the same replay without CUDA graphs (the reference path)
#   bash scripts/bench_gpu.sh vllm-real    # the real dimensions replayed on vLLM, plain and fork (fork-mtp: its own
#                                          # process, `--schedules fork-mtp`; results/vllm-replay-cuda.md)
set -uo pipefail
export PYTHONPATH=$PWD PYTHONUNBUFFERED=1 HPD_VLLM_CACHE=/tmp/hpd-vllm
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
pages=(.benchpages/*.png)
bench=(python3 -m hpd_tools.bench --device cuda --dtype bfloat16 --inputs "${pages[@]}" --ks 6)
real() { [ -e /tmp/hpd-real/model.safetensors ] ||
  python3 -c "from pathlib import Path; from bench.real_dims import write_real_checkpoint; write_real_checkpoint(Path('/tmp/hpd-real'))"; }
case "${1:-}" in
  hpd) timeout 560 "${bench[@]}" --pages-per-batch 1,64,512 --out "$OUT/hpd-tiny-cuda" 2>&1 | tee "$OUT/bench.log" ;;
  vllm|vllm-eager|vllm-real) eval "$(bash scripts/vllm_gpu.sh env)" || exit 1 ;;&
  vllm) timeout 560 "${bench[@]}" --backend vllm --pages-per-batch 1,64,512 \
          --out "$OUT/bundled-vllm-cuda" \
          >"$OUT/bench-vllm.log" 2>&1; grep '^\[ ' "$OUT/bench-vllm.log" ;;
  vllm-eager) timeout 560 "${bench[@]}" --backend vllm --vllm-arg enforce_eager=true \
                --pages-per-batch 1 \
                --out "$OUT/bundled-vllm-cuda-eager" >"$OUT/bench-vllm-eager.log" 2>&1; grep '^\[ ' "$OUT/bench-vllm-eager.log" ;;
  graphs) timeout 400 python3 -m pytest -p no:cacheprovider tests/test_graphs.py tests/test_kernels.py 2>&1 |
            tee "$OUT/graphs-test.log" ;;
  real) real
        timeout 540 python3 -m bench.real_dims /tmp/hpd-real --device cuda --batches 1,16,64 --bandwidth 4800 \
          --repeats 20 2>&1 | tee "$OUT/real-dims-cuda.log" ;;
  profile) real
        timeout 270 python3 -m bench.step_profile --model /tmp/hpd-real --device cuda --batches 1,64 2>&1 |
          tee "$OUT/step-profile-cuda.log"
        timeout 270 python3 -m bench.step_profile --model /tmp/hpd-real --device cuda --batches 1,64 --no-fused 2>&1 |
          tee "$OUT/step-profile-cuda-unfused.log" ;;
  replay) real
        timeout 540 python3 -m bench.replay --model /tmp/hpd-real --device cuda --pages 1,64 \
          --bandwidth 4800 2>&1 | tee "$OUT/replay-cuda.log" ;;
  replay-512) real
        timeout 540 python3 -m bench.replay --model /tmp/hpd-real --device cuda --pages 512 \
          --schedules "${2:-fork-mtp}" --bandwidth 4800 ${3:+--resident "$3"} 2>&1 | tee "$OUT/replay-512-cuda.log" ;;
  replay-profile) real
        timeout 540 python3 -m bench.replay --model /tmp/hpd-real --device cuda --pages 16,64 \
          --schedules "${2:-fork-mtp}" --bandwidth 4800 --profile 2>&1 | tee "$OUT/replay-profile-cuda.log" ;;
  replay-vllm-fork) real
        timeout 540 python3 -m bench.replay --model /tmp/hpd-real --device cuda --pages 512 --schedules fork \
          --trace vllm-fork --resident "${2:-64}" --bandwidth 4800 2>&1 | tee "$OUT/replay-vllm-fork-cuda.log" ;;
  paged) timeout 300 python3 -m bench.paged_kernel 2>&1 | tee "$OUT/paged-kernel-cuda.log" ;;
  real-eager) real
        timeout 540 python3 -m bench.replay --model /tmp/hpd-real --device cuda --pages 1,64,512 --eager \
          --bandwidth 4800 2>&1 | tee "$OUT/replay-cuda-eager.log" ;;
  vllm-real) real
             timeout 540 python3 -m bench.vllm_replay --model /tmp/hpd-real --pages 1,64,512 --schedules plain,fork \
               >"$OUT/replay-vllm.log" 2>&1; grep '^|' "$OUT/replay-vllm.log" ;;
  *) echo "usage: $0 hpd | vllm | vllm-eager | graphs | real | profile | replay | replay-512 | replay-profile" \
          "| replay-vllm-fork | paged | real-eager | vllm-real" >&2
     exit 2 ;;
esac
