"""The kernels a decoder layer launches in one decode forward: eager, and with its kernel functions
(`hpd_core.model.kernels`) compiled by Inductor.

    python -m bench.layer_ops [--batch 4] [--q 1] [--compile]

A tiny random decoder in bf16 (the real model's dtype on CUDA, so the fp32 casts of norm and
rotary count) on the CPU; one decode forward of `batch` rows forked from a shared prompt. Counts
the aten operators that launch a kernel (not views or metadata) inside the decoder layers, per
layer, by the kernel function they run in ("layer" for the rest: projections, q, k, v and gate,
up as one matmul each as `load_engine` fuses them; KV writes and gathers). With `--compile`, each kernel function is also compiled by Inductor (C++
on the CPU) at the shapes it met, and the kernels its generated code launches (fused loops and
extern matmuls) replace its eager count: the estimate of a fused layer's kernels. Inductor fuses
the same way for Triton on CUDA, so the counts carry over as an estimate, not a measurement.
"""

from __future__ import annotations

import argparse
import re
from collections import Counter
from dataclasses import fields

import torch
from torch._inductor.utils import run_and_get_code
from torch.utils._python_dispatch import TorchDispatchMode

from bench.common import forked_rows
from hpd_core.config import LLMConfig
from hpd_core.kv_cache import KVCache
from hpd_core.model.kernels import EAGER, Kernels
from hpd_core.model.language import LanguageModel

METADATA = {"_unsafe_view", "promote_types", "scalar_tensor", "lift_fresh", "detach", "alias"}  # no device kernel
# EAGER's kernel functions by name; it has no paged kernel (a Triton kernel, CUDA only), so the
# attention gathers: the reference path
FUNCTIONS = {f.name: fn for f in fields(Kernels) if (fn := getattr(EAGER, f.name)) is not None}
LAUNCH = re.compile(r"^\s+(\w+\.run|cpp_fused_\w+|extern_kernels\.\w+|torch\.ops\.aten\.[\w.]+)\(", re.M)


class OpCounter(TorchDispatchMode):
    """Kernel-launching aten ops by the kernel function running them, while `on`."""

    def __init__(self):
        super().__init__()
        self.ops: Counter[str] = Counter()
        self.calls: Counter[str] = Counter()
        self.args: dict[str, tuple] = {}  # each kernel function's first arguments
        self.inside: list[str] = []
        self.on = False

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        if self.on and not func.is_view and func.overloadpacket.__name__ not in METADATA:
            self.ops[self.inside[-1] if self.inside else "layer"] += 1
        return func(*args, **(kwargs or {}))

    def tagged(self, name: str, fn):
        def call(*args):
            self.calls[name] += self.on
            self.args.setdefault(name, args)
            self.inside.append(name)
            try:
                return fn(*args)
            finally:
                self.inside.pop()
        return call


def launches(fn, args) -> int:
    """Kernel launches of `fn` compiled by Inductor (dynamic shapes) at these arguments."""
    _, code = run_and_get_code(torch.compile(fn, dynamic=True, fullgraph=True), *args)
    return sum(len(LAUNCH.findall(c[c.index("def call("):])) for c in code)


@torch.no_grad()  # not inference mode: there composite ops (`to`, `linear`) reach the counter undecomposed
def count(batch: int, q: int) -> tuple[OpCounter, int]:
    """The counter after one decode forward of a tiny bf16 decoder (`batch` rows forked from a
    shared prompt, `q` positions each), and its number of layers."""
    cfg = LLMConfig(vocab_size=97, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                    num_key_value_heads=2, head_dim=16, max_position_embeddings=512)
    torch.manual_seed(0)
    lm = LanguageModel(cfg).to(torch.bfloat16)
    lm.fuse_projections()  # as load_engine does
    cache = KVCache(cfg.num_hidden_layers, cfg.num_key_value_heads, cfg.head_dim, dtype=torch.bfloat16)
    rows = forked_rows(lm, cache, 40, batch, own=3)
    positions = torch.tensor([[cache.lengths[r] + j for j in range(q)] for r in rows])
    counter = OpCounter()
    lm.model.kernels = Kernels(**{name: counter.tagged(name, fn) for name, fn in FUNCTIONS.items()})
    for layer in lm.model.layers:
        layer.register_forward_pre_hook(lambda *_: setattr(counter, "on", True))
        layer.register_forward_hook(lambda *_: setattr(counter, "on", False))
    with counter:
        lm.model(lm.embed(torch.randint(0, cfg.vocab_size, positions.shape)), positions, cache, rows)
    return counter, cfg.num_hidden_layers


@torch.no_grad()
def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--q", type=int, default=1, help="positions a row feeds (1 + drafts)")
    parser.add_argument("--compile", action="store_true", help="count Inductor's kernels for each kernel function")
    args = parser.parse_args()
    counter, layers = count(args.batch, args.q)
    print(f"batch {args.batch}, q {args.q}: per layer, kernel-launching aten ops (eager)"
          + (" and Inductor's kernels (fused)" if args.compile else ""))
    eager = fused = 0
    for name in ["layer", *FUNCTIONS]:
        calls, ops = counter.calls[name] / layers, counter.ops[name] / layers
        each = launches(FUNCTIONS[name], counter.args[name]) if args.compile and name != "layer" else None
        after = ops if each is None else calls * each
        eager, fused = eager + ops, fused + after
        label = f"{name} x{calls:g}" if name != "layer" else name
        print(f"  {label:14s} eager {ops:4g}" + (f"  fused {after:4g}" if args.compile else ""))
    print(f"  {'total':14s} eager {eager:4g}" + (f"  fused {fused:4g}" if args.compile else ""))


if __name__ == "__main__":
    main()
