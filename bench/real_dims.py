"""The engine at the real HPD-Parsing dimensions (docs/format.md §2), with random weights.

    python -m bench.real_dims /tmp/hpd-real [--device cpu] [--new-tokens 16] [--no-fused]   # from the repo root

Writes into the given folder a checkpoint with the real tensor names and shapes (664 tensors,
1,071,912,960 parameters incl. the embedded P-MTP head, bf16, one `model.safetensors` of
2,143,907,448 B: the real file's size to the byte) and a tokenizer of 151,681 ids with the
special tokens at their real ids; loads it with `load_engine`; parses a 896x1344 page (2x3 grid
+ thumbnail = 7 tiles, 1,792 image tokens); then times one decode forward
(`speculative.step`) at batch 1 and 16, greedy (k=0) and with 6 P-MTP drafts, on a KV cache
holding a prompt of the same length: eager and, on CUDA, replayed as CUDA graphs, with the eager
kernels and (unless --no-fused) with the compiled ones (`hpd_core.model.kernels`).

Measured 2026-11-29 on the dev box (2 cores, 24 GiB, fp32, torch 2.13) while other jobs ran
(load average 5.5: this process got ~46% of the two cores, so uncontended times are ~2x lower):
  write checkpoint 41.6 s (2,143,907,448 B), load_engine 14.8-33.3 s (two runs)
  vision 7 tiles 74.5-95.7 s, prefill 2,008 tokens 60.6-74.6 s (byte-level tokenizer: the
  system prompt is 216 byte tokens, the real BPE gives fewer)
  decode 16 greedy tokens 14.4-36.6 s (random weights: no forks)
  step at context 2,008:  batch 1: k=0 1.37 s, k=6 4.32 s;  batch 16: k=0 4.82 s, k=6 10.95 s
  Why: batch-1 decode is bound by reading 4.3 GB of fp32 weights per forward; each
  P-MTP draft token runs the 151,681 x 1024 lm_head (0.62 GB), so 6 drafts cost about as
  much as the forward itself: on CPU k=6 pays off only when tau exceeds ~3.2 tokens per step.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from bench.common import forked_rows, kv_token_bytes, step_reads, sync, weight_bytes
from hpd_core import PageFinished, PageStarted, ParseOptions, load_engine
from hpd_core.graphs import DecodeGraphs, DraftGraphs
from hpd_core.checkpoint import write_tensors
from hpd_core.config import HPDConfig
from hpd_core.kv_cache import KVCache
from hpd_core.model import HPDModel
from hpd_core.model.kernels import EAGER
from hpd_core.speculative import step

# Real ids (docs/format.md §3); <BLOCK> at 151678 is inferred. The other added ids are reserved fillers.
REAL_SPECIALS = {151643: "<|endoftext|>", 151644: "<|im_start|>", 151645: "<|im_end|>", 151669: "<img>",
                 151670: "</img>", 151671: "<IMG_CONTEXT>", 151678: "<BLOCK>", 151679: "<FORK>", 151680: "<CHILD>"}
FIRST_ADDED = 151643
PAGE_SIZE = (896, 1344)  # -> (2, 3) grid


def real_tokenizer(vocab_size: int = 151681) -> Tokenizer:
    """Byte-level BPE: ids 0-255 bytes, fillers up to 151642, then the added tokens 151643.. ."""
    alphabet = sorted(pre_tokenizers.ByteLevel.alphabet())
    vocab = {ch: i for i, ch in enumerate(alphabet)}
    vocab.update({f"<|filler_{i}|>": i for i in range(len(alphabet), FIRST_ADDED)})
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens([REAL_SPECIALS.get(i, f"<|reserved_{i}|>") for i in range(FIRST_ADDED, vocab_size)])
    return tok


def random_tensor(name: str, shape: torch.Size, gen: torch.Generator) -> torch.Tensor:
    """bf16 weights that keep activations in range: norms near 1, layer scales 0.1, fan-in scaling."""
    noise = torch.randn(shape, generator=gen)
    if len(shape) == 1 and ("norm" in name or name.startswith("mlp1.0")):
        noise = 1 + 0.1 * noise
    elif name.endswith(("ls1", "ls2")):
        noise = 0.1 + 0.01 * noise
    elif len(shape) == 1:
        noise = 0.02 * noise
    else:
        noise = noise / (torch.Size(shape)[1:].numel() ** 0.5)
    return noise.bfloat16()


def write_real_checkpoint(folder: Path, seed: int = 0) -> Path:
    """The random checkpoint in `folder`, which must be new or empty: writing it into another
    checkpoint's folder would replace that one's config and tokenizer and delete its shards."""
    if folder.is_dir() and any(folder.iterdir()):
        raise SystemExit(f"{folder} holds other files: give a new or empty folder for the 2.1 GB checkpoint")
    cfg = HPDConfig()
    with torch.device("meta"):
        shapes = {k: v.shape for k, v in HPDModel(cfg).state_dict().items()}
    gen = torch.Generator().manual_seed(seed)
    state = {name: random_tensor(name, shape, gen) for name, shape in shapes.items()}
    folder.mkdir(parents=True, exist_ok=True)
    cfg.save(folder / "config.json")
    real_tokenizer(cfg.llm_config.vocab_size).save(str(folder / "tokenizer.json"))
    write_tensors(state, folder, shard_bytes=2**40)  # one file, like the real checkpoint
    return folder


def page() -> Image.Image:
    rng = np.random.default_rng(0)
    return Image.fromarray(rng.integers(0, 256, (PAGE_SIZE[1], PAGE_SIZE[0], 3), dtype=np.uint8))


def seconds(fn, repeats: int) -> float:
    """Median wall time of `repeats` calls after one warm-up call."""
    fn()
    times = []
    for _ in range(repeats):
        sync()
        start = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def decode_times(engine, context: int, repeats: int, batches: list[int]) -> dict[tuple[int, int, str], tuple[float, int]]:
    """{(batch, k, mode): (seconds of one `step`, key positions it reads per layer)} on rows forked
    from a page row of `context` prompt positions (its shared prefix, read once per step); modes
    "eager" and, on CUDA, "graphs" (`hpd_core.graphs`) and, where the engine was loaded with
    compiled kernels, "graphs+gather" (decode attention over gathered KV blocks) and "graphs+paged"
    (reading them in place: `hpd_core.model.paged`), measured in turn at each batch and k."""
    lm, llm = engine.model.lm, engine.config.llm_config
    cache = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=engine.dtype,
                    device=engine.device, blocks=context // 16 + 2 * max(batches) + 2)
    rows = forked_rows(lm, cache, context, max(batches))
    h = torch.zeros(llm.hidden_size, dtype=engine.dtype, device=engine.device)
    pending = 5
    engine_graphs, engine_kernels, engine_drafts = lm.model.graphs, lm.model.kernels, lm.draft_graphs
    modes = {"eager": (None, EAGER, None)}
    if engine.device.type == "cuda":
        modes["graphs"] = DecodeGraphs(capture=True), EAGER, DraftGraphs(capture=True)
        if engine_kernels is not EAGER:
            from hpd_core.model.paged import paged_attend  # Triton: CUDA only
            for mode, paged in (("graphs+gather", None), ("graphs+paged", paged_attend)):
                modes[mode] = (DecodeGraphs(capture=True), replace(engine_kernels, paged=paged),
                               DraftGraphs(capture=True))
    out = {}
    for batch in batches:
        hidden = h.expand(batch, -1)
        for k in (0, 6):
            def one_step():
                step(lm, cache, rows[:batch], [pending] * batch, hidden, k)
                for r in rows[:batch]:
                    cache.crop(r, context)  # every timed step sees the same context
            for mode, (graphs, kernels, drafts) in modes.items():
                lm.model.graphs, lm.model.kernels, lm.draft_graphs = graphs, kernels, drafts
                out[batch, k, mode] = seconds(one_step, repeats), step_reads(cache, rows[:batch])
    lm.model.graphs, lm.model.kernels, lm.draft_graphs = engine_graphs, engine_kernels, engine_drafts
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("folder", type=Path, help="where to write the ~2.1 GB checkpoint")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--new-tokens", type=int, default=16, help="max_new_tokens of the page parse")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", default="1,16", help="decode batch sizes to time, e.g. 1,16,64")
    parser.add_argument("--fused", action=argparse.BooleanOptionalAction, default=True,
                        help="load_engine's fused kernels (CUDA): --no-fused times eager and graphs only")
    parser.add_argument("--bandwidth", type=float, default=0.0,
                        help="memory bandwidth in GB/s for the floor (default: none printed)")
    args = parser.parse_args()

    start = time.perf_counter()
    folder = args.folder
    if not (folder / "model.safetensors").is_file():  # a checkpoint written by an earlier run is reused
        write_real_checkpoint(folder)
    size = (folder / "model.safetensors").stat().st_size
    print(f"write checkpoint      {time.perf_counter() - start:7.1f} s  model.safetensors {size:,} B")
    print(f"load average          {os.getloadavg()[0]:7.1f}    on {os.cpu_count()} cores")
    start = time.perf_counter()
    engine = load_engine(folder, device=args.device, fused=args.fused)
    print(f"load_engine           {time.perf_counter() - start:7.1f} s  {engine.info.parameters:,} parameters, "
          f"{engine.info.dtype} on {engine.info.device}")
    for event in engine.stream(page(), ParseOptions(max_new_tokens=args.new_tokens, use_mtp=False)):
        if isinstance(event, PageStarted):
            started = event
        elif isinstance(event, PageFinished):
            stats = event.result.stats
    print(f"vision ({started.tiles} tiles)      {started.vision_seconds:7.1f} s")
    print(f"prefill               {started.prefill_seconds:7.1f} s  {started.prompt_tokens} prompt tokens")
    print(f"decode                {stats.decode_seconds:7.1f} s  {stats.generated_tokens} tokens, "
          f"{stats.forwards} forwards, {stats.forked_branches} forks")
    batches = [int(b) for b in args.batches.split(",")]
    weights, token_bytes = weight_bytes(engine), kv_token_bytes(engine)
    for (batch, k, mode), (sec, keys) in decode_times(engine, started.prompt_tokens, args.repeats, batches).items():
        floor = ""
        if args.bandwidth:
            kv = keys * token_bytes
            floor = (f"  floor {(weights + kv) / args.bandwidth / 1e6:6.2f} ms "
                     f"(weights {weights / 1e9:.2f} GB + KV {kv / 1e9:.2f} GB)")
        print(f"step batch {batch:2d} k={k} {mode:12s} {sec * 1000:8.2f} ms  ({batch * (k + 1)} tokens fed){floor}")
    print(f"load average          {os.getloadavg()[0]:7.1f}")


if __name__ == "__main__":
    main()
