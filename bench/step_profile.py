"""Where one decode step of the bundled model spends its time, by batch size.

    python -m bench.step_profile [--model PATH] [--device cuda] [--batches 1,16,64,256] [--context 2000] [--no-fused]
    python -m bench.step_profile [--device cuda] --engine PAGE.png --batches 64 [--tokens 100]

Times `speculative.step` (greedy, k=0) on rows forked from one page row of `context` prompt
positions (its shared prefix, as in the engine), then prints the
top operators of three steps by device time (CUDA) or CPU time and the host functions by own
time: the evidence for what bounds a decode step (kernel launches, attention, matmuls, the
host's bookkeeping) in bench/NOTES.md. On CUDA the step replays CUDA graphs of the compiled
kernels (load_engine's defaults; `--no-fused`: of the eager ones). With `--engine`, the
whole engine instead: `parse_batch` of that page repeated, plain AR, under cProfile (host
functions by own time) and the torch profiler.
"""

from __future__ import annotations

import argparse
import time

import torch
from PIL import Image

from bench.common import forked_rows, profiled, sync
from hpd_core import ParseOptions, load_engine
from hpd_core.kv_cache import KVCache
from hpd_core.speculative import step


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: the bundled model)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--batches", default="1,16,64,256")
    parser.add_argument("--context", type=int, default=2000)
    parser.add_argument("--engine", help="a page image: profile parse_batch of it instead of one step")
    parser.add_argument("--tokens", type=int, default=100, help="--engine: max_new_tokens")
    parser.add_argument("--fused", action=argparse.BooleanOptionalAction, default=True,
                        help="load_engine's fused kernels (CUDA)")
    args = parser.parse_args()
    engine = load_engine(args.model, device=args.device, fused=args.fused)
    if args.engine:
        return profile_engine(engine, args)
    lm, llm = engine.model.lm, engine.config.llm_config
    for batch in (int(b) for b in args.batches.split(",")):
        cache = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=engine.dtype,
                        device=engine.device, blocks=args.context // 16 + 2 * batch + 2)
        rows = forked_rows(lm, cache, args.context, batch)
        hidden = torch.zeros(batch, llm.hidden_size, dtype=engine.dtype, device=engine.device)

        def one_step():
            step(lm, cache, rows, [5] * batch, hidden, 0)
            for r in rows:
                cache.crop(r, args.context)

        with torch.inference_mode():
            one_step()
            one_step()
            sync()
            start = time.perf_counter()
            for _ in range(10):
                one_step()
            sync()
            print(f"batch {batch}: {(time.perf_counter() - start) * 100:.2f} ms per step", flush=True)
            with profiled(args.device, operators=10, functions=12):
                for _ in range(3):
                    one_step()


def profile_engine(engine, args) -> None:
    page = Image.open(args.engine)
    options = ParseOptions(prompt="plain", use_mtp=False, max_new_tokens=args.tokens)
    for batch in (int(b) for b in args.batches.split(",")):
        engine.parse_batch([page] * batch, options)  # warm-up: the allocator, kernels for these shapes
        with profiled(args.device):
            start = time.perf_counter()
            results = engine.parse_batch([page] * batch, options)
            wall = time.perf_counter() - start
            decode = max(r.stats.decode_seconds for r in results)
            print(f"engine batch {batch}: wall {wall:.2f} s, decode {decode:.2f} s, "
                  f"{decode / args.tokens * 1000:.1f} ms per round", flush=True)


if __name__ == "__main__":
    main()
