"""A/B on the GPU: one training step of the bundled model with its tree-masked LM attention as
it was (GQA k/v and a mask: on CUDA, with cuDNN's attention off as in training, only the math
kernel takes that) and as it is (k/v expanded to every head under a mask on CUDA, so the
memory-efficient kernel runs).

    PYTHONPATH=/tmp/site:. python3 bench/ab_train_attention.py [--steps 10] [--stage mix]

One process, the bundled weights, one real batch of the stage (glyph, pointer and joint draft
losses on, as in training), `--steps` timed forward + backward + AdamW steps of each variant in
turn after a warm-up; prints seconds per step, pages/s and peak memory, and the ratio. On a CPU
both variants are the same code (a smoke test).

Measured 2026-11-30 on one H200 (torch 2.11, 4 steps, 28 `mix` pages of 2,569 tokens): 0.529 s
a step, 52.9 pages/s, peak 58.6 GiB as it was; 0.310 s, 90.4 pages/s, 28.3 GiB as it is: 1.71x.
"""

import argparse
import time

import torch
import torch.nn.functional as F

from hpd_core.checkpoint import load_model
from hpd_core.model.language import Attention
from hpd_core.tokenizer import HPDTokenizer
from hpd_training.train.__main__ import TRAIN_SEEDS, glyph_head, lm_losses, loader, to_device
from hpd_training.train.data import STAGES

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=10)
ap.add_argument("--stage", default="mix")
ap.add_argument("--batch", type=int, default=0, help="pages per step (default: the stage's)")
ap.add_argument("--mtp-folder", default="P-MTP", help="the draft head (.carry/P-MTP on the device)")
args = ap.parse_args()
cuda = torch.cuda.is_available()
device = "cuda" if cuda else "cpu"
model = load_model("assets/hpd-tiny", device=device, mtp_folder=args.mtp_folder)
tok = HPDTokenizer.load("assets/hpd-tiny", model.config)
glyphs = glyph_head(model.config).to(device)
batch = next(iter(loader(STAGES[args.stage], model.config, tok, TRAIN_SEEDS, 0, args.batch)))
batch = to_device(batch, device, tok.special.image_context)
params = [*model.parameters(), *glyphs.parameters()]
opt = torch.optim.AdamW(params, lr=1e-5, fused=cuda)
model.train()


def step() -> None:
    with torch.autocast(device, dtype=torch.bfloat16, enabled=cuda):
        out = lm_losses(model, batch, glyphs, 1.0, 1.0, 0.5, 6)
    out["loss"].backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def gqa_forward(self, x, rope, mask, kv):
    """The LM attention before k/v were expanded under a mask (commit 6debc2a)."""
    q, k, v = self.project(x, rope)
    k, v = kv(k, v)
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=self.kv_heads != self.heads)
    return self.o_proj(out.transpose(1, 2).reshape(x.shape[0], x.shape[1], -1))


torch.backends.cuda.enable_cudnn_sdp(False)  # as in training
expanded = Attention.forward
results = {}
for name, forward in (("gqa", gqa_forward), ("expanded", expanded)):
    Attention.forward = forward
    step()  # warm-up
    if cuda:
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    start = time.perf_counter()
    for _ in range(args.steps):
        step()
    if cuda:
        torch.cuda.synchronize()
    seconds = (time.perf_counter() - start) / args.steps
    peak = torch.cuda.max_memory_allocated() / 2**30 if cuda else float("nan")
    results[name] = seconds
    pages = batch["ids"].shape[0]
    print(f"{name}: {seconds:.3f} s/step, {pages / seconds:.1f} pages/s, peak {peak:.1f} GiB "
          f"({pages} pages of {batch['ids'].shape[1]} tokens)")
print(f"gqa / expanded: {results['gqa'] / results['expanded']:.2f}x")
