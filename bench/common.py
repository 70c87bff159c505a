"""What the bench scripts share: a free loopback port, waiting for a server process, sampling its
memory, the model to serve (--model, or a tiny random checkpoint with --tiny), a CUDA sync
for timing, a page row with children forked from it for decode-step timing, and the bytes a
forward reads (weights, a position's KV) for bandwidth floors."""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import socket
import subprocess
import threading
import time
from pathlib import Path

import httpx
import psutil
import torch

from hpd_core.kv_cache import KVCache

HOST = "127.0.0.1"  # the scripts only ever talk to loopback


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


def weight_bytes(engine) -> int:
    """Bytes of the language model's weights that every forward reads (not the embedding table,
    whose rows are gathered, nor the draft head)."""
    return sum(p.numel() * p.element_size() for n, p in engine.model.lm.named_parameters()
               if "embed_tokens" not in n and not n.startswith("mtp."))


def kv_token_bytes(engine) -> int:
    """Bytes of K and V of one position over all layers, in the engine's dtype (as
    `KVCache.token_bytes`, before a cache exists)."""
    llm = engine.config.llm_config
    return 2 * llm.num_hidden_layers * llm.num_key_value_heads * llm.head_dim * torch.finfo(engine.dtype).bits // 8


def sync() -> None:
    """Wait for queued GPU work, so that a wall-clock reading includes it (no-op without CUDA)."""
    if torch.cuda.is_available():
        torch.cuda.synchronize()


@contextlib.contextmanager
def profiled(device: str, operators: int = 12, functions: int = 15):
    """Profile the block's host Python (cProfile, functions by own time) and operators (torch
    profiler, by their own time on the device that ran them: CUDA or CPU), printed when it ends."""
    host = cProfile.Profile()
    with torch.profiler.profile() as prof:
        host.enable()
        try:
            yield
        finally:
            host.disable()
    sort = "self_cuda_time_total" if device.startswith("cuda") else "self_cpu_time_total"
    print(prof.key_averages().table(sort_by=sort, row_limit=operators), flush=True)
    pstats.Stats(host).sort_stats("tottime").print_stats(functions)


@torch.inference_mode()
def forked_rows(lm, cache: KVCache, context: int, children: int, own: int = 0, seed: int = 0) -> list[int]:
    """`children` rows forked from a page row of `context` random prompt positions (marked as the
    shared prefix, as the engine does; the page row is freed), each then `own` random positions of
    its own. All rows end at context + own."""
    device = cache.k.device
    gen = torch.Generator().manual_seed(seed)
    vocab = lm.config.vocab_size
    root = cache.alloc()
    prompt = torch.randint(0, vocab, (1, context), generator=gen).to(device)
    lm.model(lm.embed(prompt), torch.arange(context, device=device)[None], cache, [root])
    cache.crop(root, context)
    cache.share(root)
    rows = [cache.fork(root, context) for _ in range(children)]
    cache.free(root)
    if own:
        suffix = torch.randint(0, vocab, (children, own), generator=gen).to(device)
        positions = context + torch.arange(own, device=device)[None].expand(children, -1)
        lm.model(lm.embed(suffix), positions, cache, rows)
        for r in rows:
            cache.crop(r, context + own)
    return rows


def step_reads(cache: KVCache, rows: list[int]) -> int:
    """Key positions per layer that one decode step over `rows` reads (`Layout.keys_read`)."""
    lengths = [cache.lengths[r] for r in rows]
    keys = cache.layout(rows, torch.tensor(lengths, device=cache.k.device)[:, None]).keys_read
    for r, n in zip(rows, lengths):
        cache.crop(r, n)  # the blocks the layout reserved for the step
    return keys


def wait_ready(process: subprocess.Popen, health_url: str, name: str, seconds: float = 300) -> None:
    """Until `health_url` answers 200; raises if `process` exits first or the time runs out."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise RuntimeError(f"{name} exited with {process.returncode} before it was ready")
        try:
            if httpx.get(health_url, timeout=2).status_code == 200:
                return
        except httpx.HTTPError:
            pass  # not listening yet
        time.sleep(0.2)
    raise RuntimeError(f"{name} did not become ready")


class RssSampler(threading.Thread):
    """Peak resident memory of a process and its children, sampled every `every` seconds."""

    def __init__(self, pid: int, every: float = 0.1):
        super().__init__(daemon=True)
        self.process, self.every = psutil.Process(pid), every
        self.peak, self.stop = 0, threading.Event()

    def rss(self) -> int:
        processes = [self.process] + self.process.children(recursive=True)
        return sum(p.memory_info().rss for p in processes)

    def run(self) -> None:
        while not self.stop.is_set():
            self.peak = max(self.peak, self.rss())
            time.sleep(self.every)


def add_model_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--model", default=None, help="checkpoint folder (default: the bundled model)")
    parser.add_argument("--tiny", action="store_true", help="a tiny random checkpoint (tests/tiny.py) instead")


def model_of(args: argparse.Namespace, tmp: str) -> str | None:
    """The checkpoint to serve: --model, a tiny random one written into `tmp` with --tiny, or None."""
    if not args.tiny:
        return args.model
    from tests.tiny import write_checkpoint
    return str(write_checkpoint(Path(tmp) / "tiny", seed=0, noise=0.5))


def run_metadata(args: argparse.Namespace, argv: list[str] | None) -> dict:
    """Command, date, machine and model of a run, for its report."""
    import os
    import platform
    import sys
    return {"command": " ".join(argv if argv is not None else sys.argv[1:]), "date": time.strftime("%Y-%m-%d"),
            "machine": f"{platform.processor() or platform.machine()}, {os.cpu_count()} cores",
            "model": "tiny random checkpoint (tests/tiny.py)" if args.tiny else (args.model or "bundled hpd-tiny")}


def app_option_values(**given) -> list:
    """The app API's option inputs (one per ParseOptions field, in field order): defaults and `given`."""
    from hpd_tools.forms import option_specs
    return [given.get(spec.name, spec.default) for spec in option_specs()]
