"""Train the bundled model: `python -m hpd_training.train --out DIR --stages one:180,few:180,dense:240,mtp:120`.

Stages run for the given seconds each, on fresh synthetic pages (never reused). After each stage
the weights are written to DIR/hpd-tiny (the draft head in DIR/hpd-tiny/P-MTP), and the image test and a greedy
evaluation on held-out pages are logged to DIR/log.jsonl. Under `torchrun --nproc_per_node=N`
it trains data-parallel on N GPUs (`distributed`): rank 0 logs, evaluates and saves.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib
import json
import math
import os
import shutil
import time
from pathlib import Path

import torch
import torch.nn.functional as F
from tokenizers import Tokenizer
from torch.utils.data import DataLoader

from hpd_core.checkpoint import load_model, save_model
from hpd_core.config import HPDConfig, LLMConfig, VisionConfig
from hpd_core.engine import Engine
from hpd_core.model import HPDModel
from hpd_core.options import ParseOptions
from hpd_core.preprocess import normalize_bytes
from hpd_core.tokenizer import HPDTokenizer
from hpd_training.realpage import DPI
from hpd_training.train import distributed
from hpd_training.train.data import GLYPH_CLASSES, STAGES, UNSEEN, PageSource, Pages, Stage, batch_of, glyph_slots, stages
from hpd_training.train.packing import IGNORE, tree_mask

TRAIN_SEEDS = 1_000_000      # stage s, --seed-run r: seeds from TRAIN_SEEDS * (1 + s) + r * 100_000_000
EVAL_SEEDS = 20_000_000      # held out: never used for training


TILE_GRID = 16           # a page is a 4x4 grid of 320-px tiles (preprocess.grid_for picks (4, 4) for
TILE_SIZE = 320          # portrait and landscape pages): the 1280-px canvas of a 2x2 grid of 640-px tiles
                         # (`widen`'s). hpd-tiny-docs has 20 since r38 (4x5 portrait, 5x4 landscape: its
                         # config.json; runs --init from it keep it; docs/training.md, session 19)
DOWNSAMPLE_RATIO = 0.25  # at a quarter of the ViT's attention; 4x4 pixel shuffle: 100 image tokens a tile


def bundled_config(tok: Tokenizer, small: bool = False) -> HPDConfig:
    """The bundled model: a page as sixteen 320-px tiles (8-px patches, 4x4 shuffle: 16 x 100 =
    1,600 image tokens), a 6-layer 256-wide InternViT and a 6-layer 384-wide Qwen3 (`small`: a CPU
    smoke-test size). Runs r1-r15 had one 640-px tile and a 2x2 shuffle (`widen` converts them)."""
    ids = {s: tok.token_to_id(s) for s in ("<FORK>", "<CHILD>", "<|im_end|>", "<|endoftext|>")}
    if small:
        vision = VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2,
                              image_size=32, patch_size=8)  # a widened 64-px one-tile model
        llm = LLMConfig(vocab_size=tok.get_vocab_size(), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                        num_attention_heads=2, num_key_value_heads=1, head_dim=16, max_position_embeddings=8192,
                        rope_theta=10000.0)
    else:
        vision = VisionConfig(hidden_size=256, intermediate_size=1024, num_hidden_layers=6, num_attention_heads=4,
                              image_size=TILE_SIZE, patch_size=8)
        llm = LLMConfig(vocab_size=tok.get_vocab_size(), hidden_size=384, intermediate_size=1024, num_hidden_layers=6,
                        num_attention_heads=6, num_key_value_heads=2, head_dim=64, max_position_embeddings=8192,
                        rope_theta=10000.0)
    return HPDConfig(vision_config=vision, llm_config=llm, downsample_ratio=DOWNSAMPLE_RATIO,
                     force_image_size=vision.image_size, min_dynamic_patch=TILE_GRID, max_dynamic_patch=TILE_GRID,
                     use_thumbnail=False, fork_token_id=ids["<FORK>"], child_token_id=ids["<CHILD>"],
                     eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"], render_dpi=DPI)


def init_weights(model: HPDModel) -> None:
    depth = 2 * max(model.config.llm_config.num_hidden_layers, model.config.vision_config.num_hidden_layers)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith(("ls1", "ls2")):
                p.fill_(0.1)
            elif p.dim() == 1:
                p.fill_(1.0 if "norm" in name or name.startswith("mlp1.0") else 0.0)
            else:
                std = 0.02 / math.sqrt(depth) if name.endswith(("o_proj.weight", "down_proj.weight", "fc2.weight",
                                                                  "attn.proj.weight")) else 0.02
                p.normal_(0.0, std)


def forward_hidden(model: HPDModel, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """Post-norm hidden states [B, L, H] of a packed batch (image rows in the <IMG_CONTEXT>
    slots), and the image rows [image rows of the batch, H] themselves."""
    rows = model.encode_images(batch["pixels"], chunk=batch["pixels"].shape[0])
    ids = batch["ids"]
    embeds = model.lm.embed(ids)
    slots = ids == batch["image_id"]
    embeds = embeds.masked_scatter(slots[..., None], rows.to(embeds.dtype))
    mask = tree_mask(batch["segments"], batch["forks"], batch["positions"])
    return model.lm.model(embeds, batch["positions"], mask=mask), rows


def glyph_head(config: HPDConfig) -> torch.nn.Linear:
    """Training-only probe: from each image row, the characters centred in each slot of its cell
    (`data.glyph_targets`, `data.glyph_slots`). Not part of the checkpoint."""
    return torch.nn.Linear(config.llm_config.hidden_size, glyph_slots(config) * GLYPH_CLASSES)


def pointer_layers(layers: int) -> tuple[tuple[int, str], ...]:
    """Decoder layers whose head 0 the pointer loss teaches where to look: at the cells of the
    token it reads ("here", 1 of 6) and of the token it writes next ("next", 3 of 6)."""
    return (max(0, layers // 3 - 1), "here"), (layers // 2, "next")


def lm_losses(model: HPDModel, batch: dict, glyphs: torch.nn.Linear | None = None, glyph_weight: float = 0.0,
              pointer_weight: float = 0.0, mtp_weight: float = 0.0, mtp_k: int = 0,
              hidden=forward_hidden, glyphs_detached: bool = False) -> dict[str, torch.Tensor]:
    """Next-token loss over both branch kinds; with a glyph head, plus `glyph_weight` x the
    per-cell character loss that teaches the vision tower to see glyphs where they are (with
    `glyphs_detached`, the head reads the image rows detached: it learns, the model gets none of its
    gradient); plus
    `pointer_weight` x the pointer loss (`pointer_losses`); plus `mtp_weight` x the draft head's
    teacher-forced loss on the true text, its gradient reaching the LM too, so that the hidden
    state learns to carry the tokens after the next. `hidden`: forward_hidden, or its
    torch.compile'd form."""
    inputs, layers = {}, model.lm.model.layers
    hooks = [layers[i].self_attn.register_forward_pre_hook(lambda _, args, i=i: inputs.__setitem__(i, args[:2]))
             for i, _ in pointer_layers(len(layers))] if pointer_weight else []
    try:
        h, rows = hidden(model, batch)
    finally:
        for hook in hooks:
            hook.remove()
    labels, kinds = batch["labels"], batch["kinds"]
    sel = labels != IGNORE
    loss = F.cross_entropy(model.lm.logits(h[sel]).float(), labels[sel], reduction="none")
    k = kinds[sel]
    out = {"loss": loss.mean(), "parent": loss[k == 1].mean(), "child": loss[k == 2].mean()}
    if glyphs is not None:
        logits = glyphs(rows.detach() if glyphs_detached else rows).float().view(-1, GLYPH_CLASSES)
        target = batch["glyphs"].reshape(-1)
        ink, blank = target > 0, target == 0  # neither: UNSEEN (a thumbnail's slots)
        loss = F.cross_entropy(logits, target, reduction="none", ignore_index=UNSEEN)
        out["glyph"] = loss[ink].mean() + loss[blank].mean()  # inked slots are few: weigh them as much as the blank
        out["glyph_acc"] = (logits[ink].argmax(-1) == target[ink]).float().mean()
        out["loss"] = out["loss"] + glyph_weight * out["glyph"]
    if mtp_weight:
        drafts = draft_losses(model, h, labels, batch, mtp_k, teacher_forced=True)
        out.update({"mtp": drafts["loss"]}, **{f"mtp_{k}": v for k, v in drafts.items() if k.startswith("acc")})
        out["loss"] = out["loss"] + mtp_weight * drafts["loss"]
    if pointer_weight:
        for name, value in pointer_losses(model, batch, inputs).items():
            out[name] = value
            if not name.endswith("_acc"):
                out["loss"] = out["loss"] + pointer_weight * value
    return out


def pointer_losses(model: HPDModel, batch: dict, inputs: dict) -> dict[str, torch.Tensor]:
    """Guided attention: at every content token with known cells, -log of the attention mass
    that head 0 of a pointer layer puts, among the image rows, on the target cells (the cells of
    the token read, or of the token to write). `inputs`: each pointer layer's attention inputs."""
    layers = model.lm.model.layers
    slots = batch["ids"] == batch["image_id"]
    following = batch["cells"]
    here = torch.full_like(following, -1)
    same = (batch["segments"][:, 1:] == batch["segments"][:, :-1])[..., None]
    here[:, 1:] = torch.where(same, following[:, :-1], -1)
    # pages may have different tile counts (a 21-tile grid beside 20): each page's image rows are
    # gathered to the front of a [B, most image tokens] table, the rest masked out
    count = slots.sum(1)
    page, token = slots.nonzero(as_tuple=True)
    place = (slots.cumsum(1) - 1)[page, token]
    present = torch.arange(int(count.max()), device=slots.device) < count[:, None]  # [B, most image tokens]
    out = {}
    for i, name in pointer_layers(len(layers)):
        q, k, _ = layers[i].self_attn.project(*inputs[i])
        keys = k.new_zeros(q.shape[0], present.shape[1], q.shape[-1])
        keys[page, place] = k[page, 0, token]                            # [B, image tokens, D]
        target = here if name == "here" else following
        rows = target[..., 0] >= 0
        logits = (q[:, 0] @ keys.transpose(1, 2))[rows].float() * q.shape[-1] ** -0.5  # [N, image tokens]
        logits = logits.masked_fill(~present[rows.nonzero()[:, 0]], -math.inf)  # each token's page's own
        logp, cells = logits.log_softmax(-1), target[rows]
        mass = logp.gather(1, cells.clamp(min=0)).masked_fill(cells < 0, -math.inf).logsumexp(-1)
        n = max(1, int(rows.sum()))  # a batch of `plain` samples only has no pointer targets
        out[f"ptr_{name}"] = -mass.sum() / n
        out[f"ptr_{name}_acc"] = (logp.argmax(-1)[:, None] == cells).any(-1).float().sum() / n
    return out


def mtp_losses(model: HPDModel, batch: dict, k: int) -> dict[str, torch.Tensor]:
    """Progressive P-MTP loss, distilled from the frozen model: from the hidden state at t and the
    model's own greedy token there, draft i must predict the model's greedy token at t + i; draft
    i starts from the head's own drafts 1..i-1, as at inference."""
    with torch.no_grad():
        h, _ = forward_hidden(model, batch)
        greedy = model.lm.logits(h).argmax(-1)  # [B, L]: the model's next token at every position
    return draft_losses(model, h, greedy, batch, k, teacher_forced=False)


def draft_losses(model: HPDModel, h: torch.Tensor, following: torch.Tensor, batch: dict, k: int,
                 teacher_forced: bool) -> dict[str, torch.Tensor]:
    """The draft head's loss over k drafts from every position with a label: draft i, from the
    hidden state h at t, must predict following[t + i] (the token after position t + i, in the same
    branch). Its input token is following[t] for draft 1, then the head's own previous draft, or,
    `teacher_forced`, the right one."""
    segments = batch["segments"]
    sel = batch["labels"] != IGNORE
    hidden, token = h[sel], following[sel]
    total, accepted_so_far, stats = 0.0, torch.ones_like(token, dtype=torch.bool), {}
    for i in range(1, k + 1):
        shifted = torch.full_like(following, IGNORE)
        shifted[:, :-i] = torch.where(segments[:, i:] == segments[:, :-i], following[:, i:], IGNORE)
        target = shifted[sel]
        hidden = model.lm.mtp(hidden, model.lm.embed(token))
        logits = model.lm.logits(hidden).float()
        valid = target != IGNORE
        loss = F.cross_entropy(logits[valid], target[valid]) if valid.any() else logits.sum() * 0
        total = total + loss / k
        drafted = logits.argmax(-1)
        token = target.clamp(min=0) if teacher_forced else drafted
        accepted_so_far &= (drafted == target) & valid
        stats[f"acc{i}"] = accepted_so_far.float().sum() / valid.float().sum().clamp(min=1)
    stats["loss"] = total
    return stats


def to_device(batch: dict, device, image_id: int) -> dict:
    """The batch on the device, its uint8 tiles normalised there (`preprocess.normalize_bytes`)."""
    out = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
    return {**out, "pixels": normalize_bytes(out["pixels"]), "image_id": image_id}


def loader(stage: Stage, config: HPDConfig, tok: HPDTokenizer, first_seed: int, workers: int, batch: int,
           rank: int = 0, world: int = 1):
    return DataLoader(Pages(stage, config, tok, first_seed, rank, world), batch_size=batch or stage.batch,
                      num_workers=workers, collate_fn=lambda items: batch_of(items, config.pad_token_id),
                      pin_memory=torch.cuda.is_available(),
                      prefetch_factor=4 if workers else None, persistent_workers=False)


def replica_parameters(model: HPDModel, glyphs: torch.nn.Linear | None) -> list[torch.nn.Parameter]:
    """Every parameter a rank holds, trained in this stage or not: the model's and the glyph head's."""
    return [*model.parameters(), *(glyphs.parameters() if glyphs is not None else ())]


def lr_factor(step: int, done: float, span: tuple[float, float] = (0.0, 1.0)) -> float:
    """The learning rate's factor at `step`, `done` (0-1) of the way through a stage that covers
    `span` of one schedule: a 50-step warm-up (a stage starts a fresh optimizer), then a cosine
    from 1 to 0.1 over the whole schedule, so runs chained with spans 0:0.33, 0.33:0.67, 0.67:1
    decay once instead of once each."""
    t = span[0] + (span[1] - span[0]) * min(1.0, done)
    return min(1.0, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))


def parse_span(text: str) -> tuple[float, float]:
    start, end = (float(x) for x in text.split(":"))
    if not 0.0 <= start < end <= 1.0:
        raise argparse.ArgumentTypeError(f"--lr-span wants START:END with 0 <= START < END <= 1, got {text!r}")
    return start, end


def train_stage(model, name: str, seconds: float, args, config, tok, log, first_seed: int,
                glyphs: torch.nn.Linear | None, glyph_warmup: int = 0) -> int:
    """Train one stage; its first `glyph_warmup` steps keep the glyph head's gradient out of the
    model (`lm_losses`' glyphs_detached). Returns the steps it took."""
    mtp = name == "mtp"
    data_stage = args.mtp_data if mtp else name
    params = list(model.lm.mtp.parameters()) if mtp else [p for n, p in model.named_parameters()
                                                         if args.mtp_weight or not n.startswith("language_model.mtp.")]
    if glyphs is not None and not mtp:
        params += list(glyphs.parameters())
    for p in model.parameters():
        p.requires_grad_(False)
    for p in params:
        p.requires_grad_(True)
    # all of rank 0's weights, the frozen ones too: an `mtp` stage after a fresh init needs them
    distributed.broadcast_parameters(replica_parameters(model, glyphs), args.world)
    lr = args.lr or (1e-3 if mtp else args.stages_by_name[data_stage].lr)
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0 if mtp else 0.05, fused=args.cuda)
    model.train()
    hidden = torch.compile(forward_hidden, dynamic=True) if args.compile else forward_hidden
    start, step, pages = time.perf_counter(), 0, 0
    for batch in loader(args.stages_by_name[data_stage], config, tok, first_seed, args.workers, args.batch, args.rank,
                        args.world):
        elapsed = distributed.max_over_ranks(time.perf_counter() - start, args.world, args.device)
        if elapsed > seconds or (args.max_steps and step >= args.max_steps):
            break
        for g in opt.param_groups:
            g["lr"] = lr * lr_factor(step, elapsed / seconds, args.lr_span)
        batch = to_device(batch, args.device, tok.special.image_context)
        with torch.autocast(args.device_type, dtype=torch.bfloat16, enabled=args.cuda):
            out = (mtp_losses(model, batch, args.mtp_k) if mtp
                   else lm_losses(model, batch, glyphs, args.glyph_weight, args.pointer_weight, args.mtp_weight,
                                  args.mtp_k, hidden, glyphs_detached=step < glyph_warmup))
        out["loss"].backward()
        distributed.average_gradients(params, args.world)
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        step += 1
        pages += batch["ids"].shape[0]
        if args.rank == 0 and (step % args.log_every == 0 or step == 1):
            row = {"stage": name, "step": step, "seconds": round(time.perf_counter() - start, 1),
                   "pages_per_s": round(pages * args.world / (time.perf_counter() - start), 1),
                   "lr": opt.param_groups[0]["lr"],
                   **{k: round(float(v.detach()), 4) for k, v in out.items()}}
            log(row)
    model.eval()
    return step


def other_pages(pixels: torch.Tensor, pages: int) -> torch.Tensor:
    """The tiles [pages * T, 3, S, S] of a batch with each page's T tiles replaced by the previous page's
    (pages of one tile count; a batch with a 21-tile page beside 20-tile ones gets them shifted)."""
    return pixels.roll(pixels.shape[0] // pages, 0)


@torch.no_grad()
def image_test(model, args, config, tok, stage: Stage) -> dict:
    """Content-branch loss with the page's own image, another page's image, and a blank page."""
    batch = to_device(next(iter(loader(stage, config, tok, EVAL_SEEDS + 500_000, 0, 8))), args.device,
                      tok.special.image_context)
    out = {}
    blank = torch.zeros_like(batch["pixels"][:1]) + batch["pixels"].amax()
    for name, pixels in (("right", batch["pixels"]), ("wrong", other_pages(batch["pixels"], batch["ids"].shape[0])),
                         ("blank", blank.expand_as(batch["pixels"]))):
        with torch.autocast(args.device_type, dtype=torch.bfloat16, enabled=args.cuda):
            out[name] = round(float(lm_losses(model, {**batch, "pixels": pixels})["child"]), 4)
    return out


@torch.no_grad()
def greedy_eval(model, config, tok, stage: Stage, pages: int, max_new_tokens: int, use_mtp: bool) -> dict:
    from hpd_tools.metrics import aggregate, evaluate_page

    engine = Engine(model, tok, name="training")
    synth = [stage.page(EVAL_SEEDS + i) for i in range(pages)]
    start = time.perf_counter()
    results = engine.parse_batch([p.image for p in synth], ParseOptions(
        use_mtp=use_mtp, batch_children=True, max_new_tokens=max_new_tokens))
    summary = aggregate([evaluate_page(r.blocks, p.blocks) for r, p in zip(results, synth)]).as_dict()
    summary["seconds"] = round(time.perf_counter() - start, 1)
    summary["tau_k6"] = sum(r.stats.mean_accepted_length for r in results) / len(results) if use_mtp else None
    summary["example"] = results[0].text[:600]
    return summary


def real_source(spec: str, data: Path | None) -> PageSource:
    """The page source `module:factory` names, built from `data`: factory(data) -> seed -> page."""
    module, _, factory = spec.partition(":")
    if not factory:
        raise SystemExit(f"--real-source wants MODULE:FACTORY, got {spec!r}")
    return getattr(importlib.import_module(module), factory)(data)


def save_run(model: HPDModel, out: Path, tokenizer: Path) -> None:
    """A run folder: the model, a copy of `tokenizer` and the draft head in `out/hpd-tiny/P-MTP`: a model
    folder as the bundled hpd-tiny-docs is, which load_engine, hpd-eval and --init take whole."""
    save_model(model, out / "hpd-tiny", mtp_folder=out / "hpd-tiny" / "P-MTP")
    shutil.copy(tokenizer, out / "hpd-tiny" / "tokenizer.json")


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--stages", required=True,
                    help="name:seconds,... with names from " + ",".join([*STAGES, "real", "real-wide", "mtp"]))
    ap.add_argument("--real-source", metavar="MODULE:FACTORY",
                    help="real pages for the `real` stage: FACTORY(--real-data) returns a callable seed -> page")
    ap.add_argument("--real-data", type=Path, help="the argument of --real-source (e.g. a manifest)")
    ap.add_argument("--init", type=Path, help="checkpoint folder to start from")
    ap.add_argument("--init-mtp", type=Path, help="P-MTP folder to start the draft head from")
    ap.add_argument("--tokenizer", type=Path, default=Path("assets/hpd-tiny/tokenizer.json"))
    ap.add_argument("--workers", type=int,
                    help="DataLoader workers per rank (default: the CPU cores less 2, shared among the ranks)")
    ap.add_argument("--batch", type=int, default=0, help="override the stage batch size")
    ap.add_argument("--lr", type=float, default=0.0, help="override the stage learning rate")
    ap.add_argument("--lr-span", type=parse_span, default=(0.0, 1.0), metavar="START:END",
                    help="the part of one learning-rate schedule each stage covers, for runs chained over calls")
    ap.add_argument("--seed-run", type=int, default=0,
                    help="run number: shifts the training seeds (not --run, which torchrun takes for its --run-path)")
    ap.add_argument("--mtp-k", type=int, default=10)
    ap.add_argument("--glyph-weight", type=float, default=0.0,
                    help="weight of the per-cell character loss on the image rows (0: off)")
    ap.add_argument("--glyph-warmup", type=int, default=100,
                    help="the first steps of the run in which the glyph head, new in every run (it is not in "
                         "the checkpoint), learns from detached image rows, so that its random start sends the "
                         "model no gradient")
    ap.add_argument("--pointer-weight", type=float, default=0.0,
                    help="weight of the guided-attention loss that points heads at the cells being read (0: off)")
    ap.add_argument("--mtp-weight", type=float, default=0.0,
                    help="train the draft head with the LM (teacher-forced, --mtp-k drafts) at this weight (0: off)")
    ap.add_argument("--box-noise", type=float, default=0.0,
                    help="share of the layout branch's boxes moved in its input, without loss on them "
                         "(`data.noised_parent`; 0: off)")
    ap.add_argument("--mtp-data", default="dense")
    ap.add_argument("--eval-pages", type=int, default=8)
    ap.add_argument("--eval-tokens", type=int, default=700)
    ap.add_argument("--log-every", type=int, default=25)
    ap.add_argument("--max-steps", type=int, default=0)
    ap.add_argument("--small", action="store_true", help="a tiny model, for a CPU smoke test")
    ap.add_argument("--compile", action="store_true",
                    help="torch.compile the training forward (~100 s to compile on a fresh H200 machine)")
    args = ap.parse_args(argv)
    args.stages_by_name = {name: dataclasses.replace(stage, box_noise=args.box_noise) for name, stage in
                           stages(real_source(args.real_source, args.real_data) if args.real_source else None).items()}
    args.cuda = torch.cuda.is_available()
    args.device_type = "cuda" if args.cuda else "cpu"  # for autocast
    args.rank, args.world, args.device = distributed.init(args.cuda)
    if args.workers is None:
        args.workers = max(1, ((os.cpu_count() or 2) - 2) // args.world)
    if args.cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cuda.enable_cudnn_sdp(False)
    args.out.mkdir(parents=True, exist_ok=True)
    log_file = (args.out / "log.jsonl").open("a") if args.rank == 0 else None

    def log(row):
        if args.rank:
            return
        print(json.dumps(row), flush=True)
        log_file.write(json.dumps(row) + "\n")
        log_file.flush()

    raw_tok = Tokenizer.from_file(str(args.init / "tokenizer.json" if args.init else args.tokenizer))
    if args.init:
        model = load_model(args.init, dtype=torch.float32, device=args.device, mtp_folder=args.init_mtp)
        config = model.config
        if not model.has_mtp:
            fresh = HPDModel(config).to(args.device)
            init_weights(fresh)
            model.language_model.mtp = fresh.language_model.mtp
    else:
        config = bundled_config(raw_tok, args.small)
        model = HPDModel(config)
        init_weights(model)
        model = model.to(args.device)
    tok = HPDTokenizer(raw_tok, config)
    glyphs = glyph_head(config).to(args.device) if args.glyph_weight > 0 else None
    log({"event": "start", "parameters": sum(p.numel() for p in model.parameters()), "stages": args.stages,
         "device": torch.cuda.get_device_name() if args.cuda else "cpu", "init": str(args.init or ""),
         "world": args.world})
    glyph_warmup = args.glyph_warmup  # the head's steps left to learn on detached rows, over the run
    for index, item in enumerate(args.stages.split(",")):
        name, seconds = item.split(":")
        first_seed = TRAIN_SEEDS * (1 + index) + args.seed_run * 100_000_000
        steps = train_stage(model, name, float(seconds), args, config, tok, log, first_seed, glyphs, glyph_warmup)
        glyph_warmup = glyph_warmup if name == "mtp" else max(0, glyph_warmup - steps)
        agree = distributed.replicas_agree(replica_parameters(model, glyphs), args.world)
        if args.rank == 0:
            eval_stage = args.stages_by_name[args.mtp_data if name == "mtp" else name]
            log({"stage": name, "image_test": image_test(model, args, config, tok, eval_stage)})
            if not args.small:
                log({"stage": name, "greedy": greedy_eval(model, config, tok, eval_stage, args.eval_pages,
                                                          args.eval_tokens,
                                                          use_mtp=name == "mtp" or args.mtp_weight > 0)})
            save_run(model, args.out, args.init / "tokenizer.json" if args.init else args.tokenizer)
            log({"event": "saved", "stage": name, "replicas_agree": agree})
        distributed.barrier(args.world)
        if not agree:  # every rank knows: all stop together, after rank 0 saved its weights
            raise RuntimeError(f"the replicas' weights differ after stage {name}: a data-parallel bug")
    if log_file:
        log_file.close()
    distributed.finish(args.world)
    os._exit(0)  # DataLoader workers can take a minute to wind down; everything is written


if __name__ == "__main__":
    main()
