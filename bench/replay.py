"""Replayed decoding at any scale: HPD's schedules over many pages with every layer, attention
read and P-MTP draft computed for real, and what is written forced from a trace.

    python -m bench.replay [--model PATH] [--device cuda] [--pages 1,16,64,256,512] [--k 6]
                           [--schedules plain,fork,fork-mtp] [--bandwidth 4800] [--eager | --no-fused | --gather]
                           [--warm] [--resident N] [--profile] [--trace page|vllm-fork]

Random weights (e.g. `bench.real_dims`'s checkpoint at the real dimensions) cannot write real
pages, so a `Trace` says what each page writes: prompt length, layout-branch length, the
children's fork positions and lengths, and the mean accepted length tau of P-MTP. The replay
feeds real forwards of the real shapes: each round, every live branch's pending token and its k
drafts (drafted by the real head) are verified by one batched forward and `lm_head`; then the
trace, not the argmax, decides how many drafts are accepted (a fixed cycle with mean tau - 1)
and when the layout branch forks. KV blocks are the engine's (`KVCache`: forks share their
parent's blocks, the page prompt is the shared prefix read once per round). Schedules:
`plain` = one branch writing the whole page (layout + every child's tokens) without drafts,
`fork` = the layout branch and its children batched, without drafts, `fork-mtp` = with k drafts.
Reports per schedule and page count: tokens/s, pages/s, rounds, ms per round against the
bandwidth floor (weights + the KV a round reads), and KV blocks in use (GPU: peak memory).
Pages are admitted as the KV pool has room for their worst case (`Trace.blocks`): on CUDA the
pool is at most 70% of the free memory, so at the real dimensions 512 pages do not all fit at
once (bench/NOTES.md) and later pages enter as earlier ones finish, as vLLM's scheduler queues
them; the report gives the most pages resident at once. `--profile` prints, for each replay, its
operators by device time and its host functions by own time (`bench.common.profiled`); the
process's first replay also compiles the kernels, so profile a small page count first (or `--warm`:
each row replayed once untimed before it is timed).

Traces (`--trace`): `page` (the default), the real model's dense page of issue 18: a 1,800-token
prompt, a 300-token layout branch and 15 children of 110 tokens forked evenly along it, tau 4 at
k = 6; `vllm-fork`, the fork pattern stock vLLM was measured on (../shared/VLLM_NOTES.md: a
2,000-token prompt and 16 children of ~110 tokens that share it): the layout branch writes only a
token per child, so all 16 are forked within 16 rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import itertools
import time
from dataclasses import dataclass, field, replace

import torch

from bench.common import kv_token_bytes, profiled, step_reads, sync, weight_bytes
from hpd_core import load_engine
from hpd_core.kv_cache import BLOCK_SIZE, KVCache
from hpd_core.speculative import draft


@dataclass(frozen=True)
class Trace:
    """What one page writes."""
    prompt: int = 1800
    layout: int = 300               # tokens of the layout branch
    children: tuple[int, ...] = (110,) * 15
    tau: float = 4.0                # mean accepted length per step with drafts (1 + accepted drafts)

    @staticmethod
    def named(name: str, tau: float) -> Trace:
        return {"page": Trace(tau=tau), "vllm-fork": Trace(2000, 16, (110,) * 16, tau)}[name]

    def forks(self) -> list[int]:
        """Layout-branch token counts after which each child forks (evenly spread)."""
        n = len(self.children)
        return [(i + 1) * self.layout // (n + 1) for i in range(n)]

    @property
    def tokens(self) -> int:
        return self.layout + sum(self.children)

    def blocks(self, block_size: int, k: int) -> int:
        """KV blocks a page can hold at most: its prompt, each branch's tokens plus the k + 1
        positions a verify writes beyond them, and a copied partial block where a child forks."""
        def span(tokens: int) -> int:
            return -(-(tokens + k + 1) // block_size) + 1
        return -(-self.prompt // block_size) + span(self.layout) + sum(span(c) for c in self.children)


@dataclass
class Replayed:
    """One branch being replayed."""
    page: int
    row: int
    goal: int                        # tokens it writes
    forks: list[int] = field(default_factory=list)  # layout branch: pending fork points (token counts)
    children: list[int] = field(default_factory=list)
    written: int = 0


@dataclass(frozen=True)
class Measurement:
    schedule: str
    pages: int
    tokens: int
    rounds: int
    prefill_seconds: float
    decode_seconds: float
    keys_read: int                   # key positions read per layer, summed over rounds
    peak_kv_bytes: int               # KV blocks in use at the fullest round
    peak_pages: int                  # pages resident at once, at most


def accept_cycle(tau: float, k: int) -> itertools.cycle:
    """Accepted drafts per step: a fixed cycle of floor and ceil of tau - 1 with mean tau - 1."""
    mean = min(max(tau - 1.0, 0.0), k)
    low = int(mean)
    highs = round((mean - low) * 10)
    return itertools.cycle([min(low + 1, k)] * highs + [low] * (10 - highs))


@torch.inference_mode()
def prefill(lm, cache: KVCache, trace: Trace, seed: int) -> tuple[int, torch.Tensor]:
    """A page's prompt (random tokens) prefilled into a new row, marked as its shared prefix."""
    device = cache.k.device
    ids = torch.randint(0, lm.config.vocab_size, (1, trace.prompt), generator=torch.Generator().manual_seed(seed))
    row = cache.alloc()
    h = lm.model(lm.embed(ids.to(device)), torch.arange(trace.prompt, device=device)[None], cache, [row])
    cache.crop(row, trace.prompt)
    cache.share(row)
    return row, h[0, -1]


@torch.inference_mode()
def forced_round(lm, cache: KVCache, branches: list[Replayed], hidden: torch.Tensor, k: int,
                 accepted: itertools.cycle) -> torch.Tensor:
    """One real verify forward over `branches` (pending token + k real drafts), then each branch
    keeps 1 + m tokens with m from the trace. Returns the hidden states to draft from next."""
    device = hidden.device
    x0 = torch.full((len(branches),), 5, device=device)
    ids = torch.cat([x0[:, None], draft(lm, hidden, x0, k)], 1) if k else x0[:, None]
    starts = torch.tensor([cache.lengths[b.row] for b in branches], device=device)
    positions = starts[:, None] + torch.arange(ids.shape[1], device=device)
    h = lm.model(lm.embed(ids), positions, cache, [b.row for b in branches])
    lm.logits(h).argmax(-1)  # the verification's lm_head and argmax, as in `speculative.step`
    kept = []
    for b, start in zip(branches, starts.tolist()):
        n = min(1 + (next(accepted) if k else 0), b.goal - b.written)
        b.written += n
        cache.crop(b.row, start + n)
        kept.append(n - 1)
    return h[torch.arange(len(branches), device=device), torch.tensor(kept, device=device)]


def pool_blocks(engine, blocks: int) -> int:
    """`blocks` (every page's worst case at once); on CUDA at most 70% of the free memory, allocated
    once: growing a pool by doubling needs 3x its size for a moment. The rest holds a round's
    activations and the CUDA graphs' pools: at 90%, 512 pages ran out of memory on the H200 (8 GB
    of graph pools, 2 GB of scores at ~250 pages). A replay that needs more fails loudly. The free
    memory is read after handing the allocator's cached blocks back: a previous replay's pool, still
    cached, cut 512 pages to 64 resident on 2026-12-06 (bench/NOTES.md)."""
    if engine.device.type == "cuda":
        gc.collect()
        torch.cuda.empty_cache()
        block_bytes = kv_token_bytes(engine) * BLOCK_SIZE
        blocks = min(blocks, int(torch.cuda.mem_get_info(engine.device)[0] * 0.7) // block_bytes)
    return blocks


def replay(engine, trace: Trace, pages: int, schedule: str, k: int, max_active: int,
           resident: int | None = None) -> Measurement:
    """`resident`: the pages whose worst cases the KV pool holds at once (default: all of them), plus
    the scratch block, where memory allows (`pool_blocks`); the others wait for room."""
    lm, llm = engine.model.lm, engine.config.llm_config
    need = trace.blocks(BLOCK_SIZE, k)
    cache = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=engine.dtype,
                    device=engine.device, blocks=pool_blocks(engine, min(pages, resident or pages) * need + 1))
    capacity = cache.blocks - 1  # less the scratch block
    if need > capacity:
        raise ValueError(f"one page needs {need} KV blocks, the pool holds {capacity}")
    live, hidden = [], torch.empty(0, llm.hidden_size, device=engine.device, dtype=engine.dtype)
    branches = [0] * pages           # live branches of each page
    admitted = rounds = keys = peak = peak_pages = 0
    prefill_seconds = 0.0
    accepted = accept_cycle(trace.tau, k)
    sync()
    start = time.perf_counter()
    while live or admitted < pages:
        fresh = []
        while admitted < pages and (sum(b > 0 for b in branches) + 1) * need <= capacity:
            t = time.perf_counter()
            row, h = prefill(lm, cache, trace, seed=admitted)
            sync()
            prefill_seconds += time.perf_counter() - t
            if schedule == "plain":
                live.append(Replayed(admitted, row, trace.tokens))
            else:
                live.append(Replayed(admitted, row, trace.layout, forks=trace.forks(),
                                     children=list(trace.children)))
            branches[admitted] = 1
            fresh.append(h)
            admitted += 1
        if fresh:
            hidden = torch.cat([hidden, torch.stack(fresh)])
        peak_pages = max(peak_pages, sum(b > 0 for b in branches))
        active, waiting = live[:max_active], live[max_active:]
        keys += step_reads(cache, [b.row for b in active])
        new_hidden = forced_round(lm, cache, active, hidden[:len(active)], k, accepted)
        rounds += 1
        peak = max(peak, cache.blocks_in_use * cache.block_size * cache.token_bytes)
        born, born_hidden = [], []
        for b, h in zip(active, new_hidden):
            while b.forks and b.written >= b.forks[0]:  # the layout branch wrote a <FORK>
                p = cache.lengths[b.row] - (b.written - b.forks.pop(0)) - 1  # where its <FORK> was fed
                born.append(Replayed(b.page, cache.fork(b.row, p), b.children.pop(0)))
                born_hidden.append(h)
                branches[b.page] += 1
        done = [b.written >= b.goal for b in active]
        for b, finished in zip(active, done):
            if finished:
                cache.free(b.row)
                branches[b.page] -= 1
        kept = [i for i, d in enumerate(done) if not d]
        hidden = torch.cat([h[None] for h in born_hidden] + [new_hidden[kept], hidden[len(active):]])
        live = born + [b for b, d in zip(active, done) if not d] + waiting
    sync()
    end = time.perf_counter()
    assert cache.blocks_in_use == 0, "a block outlived its branches"
    assert cache.blocks - 1 == capacity, "the pool grew: a page held more than its worst case"
    return Measurement(schedule, pages, pages * trace.tokens, rounds, prefill_seconds,
                       end - start - prefill_seconds, keys, peak, peak_pages)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", help="checkpoint folder (default: the bundled model)")
    parser.add_argument("--device")
    parser.add_argument("--pages", default="1,16,64")
    parser.add_argument("--schedules", default="plain,fork,fork-mtp")
    parser.add_argument("--k", type=int, default=6)
    parser.add_argument("--trace", choices=["page", "vllm-fork"], default="page", help="what each page writes")
    parser.add_argument("--tau", type=float, default=Trace.tau)
    parser.add_argument("--max-active-branches", type=int, default=64, help="per page (scaled by the pages)")
    parser.add_argument("--resident", type=int,
                        help="pages whose worst cases the KV pool holds at once (default: all, as memory allows)")
    parser.add_argument("--profile", action="store_true",
                        help="print each replay's operators by device time and host functions by own time")
    parser.add_argument("--bandwidth", type=float, default=0.0, help="GB/s for the floor (default: none)")
    parser.add_argument("--threads", type=int, help="torch CPU threads")
    parser.add_argument("--eager", action="store_true",
                        help="on CUDA, no CUDA graphs and no fused kernels (the reference path)")
    parser.add_argument("--fused", action=argparse.BooleanOptionalAction, default=True,
                        help="load_engine's fused kernels (CUDA)")
    parser.add_argument("--warm", action="store_true",
                        help="replay each row once untimed first, so that graph captures and kernel compiles "
                             "stay out of the timed replay")
    parser.add_argument("--gather", action="store_true",
                        help="decode attention over gathered KV blocks, not in place (load_engine's choice "
                             "in bf16 on CUDA: hpd_core.model.paged)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    engine = load_engine(args.model, device=args.device, cuda_graphs=not args.eager,
                         fused=args.fused and not args.eager)
    if args.gather:
        decoder = engine.model.lm.model
        decoder.kernels = replace(decoder.kernels, paged=None)
    trace = Trace.named(args.trace, args.tau)
    weights = weight_bytes(engine)
    token_bytes = kv_token_bytes(engine)
    print(f"{engine.info.name} on {engine.info.device} ({engine.info.dtype}); trace {trace}")
    print("| schedule | pages | resident (peak) | tokens/s | pages/s | rounds | ms/round | floor ms/round | "
          "KV GB in use (peak) | device GB (peak) | prefill s |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for pages in (int(p) for p in args.pages.split(",")):
        for schedule in args.schedules.split(","):
            k = args.k if schedule == "fork-mtp" else 0
            if args.warm:
                replay(engine, trace, pages, schedule, k, args.max_active_branches * pages, args.resident)
            if engine.device.type == "cuda":
                torch.cuda.reset_peak_memory_stats()
            with profiled(str(engine.device)) if args.profile else contextlib.nullcontext():
                m = replay(engine, trace, pages, schedule, k, args.max_active_branches * pages, args.resident)
            per_round = m.decode_seconds / m.rounds
            floor = ((weights * m.rounds + m.keys_read * token_bytes) / m.rounds / args.bandwidth / 1e6
                     if args.bandwidth else float("nan"))
            device = torch.cuda.max_memory_allocated() / 1e9 if engine.device.type == "cuda" else float("nan")
            print(f"| {schedule} | {pages} | {m.peak_pages} | {m.tokens / m.decode_seconds:,.0f} | "
                  f"{pages / m.decode_seconds:.2f} | "
                  f"{m.rounds} | {per_round * 1000:.2f} | {floor:.2f} | {m.peak_kv_bytes / 1e9:.2f} | {device:.1f} | "
                  f"{m.prefill_seconds:.2f} |", flush=True)


if __name__ == "__main__":
    main()
