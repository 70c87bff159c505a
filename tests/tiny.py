"""Tiny random HPD checkpoints in the real tensor layout, built by the tests themselves.

`write_checkpoint(folder, seed, forking=True)` biases the random weights so that greedy
decoding really forks: the layout branch follows a strong cycle `<BLOCK> # <FORK>`, content
branches follow a weaker chain `a -> b -> ... -> <|im_end|>` that the random attention and
MLP perturb (so children differ in length and drafts are sometimes rejected), and the P-MTP
head drafts the same successor chain.
"""

from __future__ import annotations

from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from hpd_core.checkpoint import save_model
from hpd_core.config import HPDConfig, LLMConfig, VisionConfig
from hpd_core.model import HPDModel

SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>",
            "<BLOCK>", "<FORK>", "<CHILD>"]
ALPHABET = pre_tokenizers.ByteLevel.alphabet()


def byte_tokenizer() -> Tokenizer:
    """Byte-level tokenizer: ids 0-255 are bytes, then the HPD special tokens."""
    vocab = {ch: i for i, ch in enumerate(sorted(ALPHABET))}
    tok = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()
    tok.add_special_tokens(SPECIALS)
    return tok


def tiny_config(tok: Tokenizer, **llm) -> HPDConfig:
    ids = {s: tok.token_to_id(s) for s in SPECIALS}
    vision = VisionConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=2,
                          image_size=28, patch_size=14)
    llm_cfg = LLMConfig(**{**dict(vocab_size=tok.get_vocab_size(), hidden_size=64, intermediate_size=128,
                                  num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                                  max_position_embeddings=4096), **llm})
    return HPDConfig(vision_config=vision, llm_config=llm_cfg, force_image_size=28, min_dynamic_patch=1,
                     max_dynamic_patch=4, fork_token_id=ids["<FORK>"], child_token_id=ids["<CHILD>"],
                     eos_token_id=ids["<|im_end|>"], pad_token_id=ids["<|endoftext|>"])


def byte_id(tok: Tokenizer, ch: str) -> int:
    return tok.encode(ch, add_special_tokens=False).ids[0]


def bias_for_forking(model: HPDModel, tok: Tokenizer, gen: torch.Generator, noise: float) -> None:
    lm = model.language_model
    h, vocab = lm.config.hidden_size, lm.config.vocab_size
    special = {s: tok.token_to_id(s) for s in SPECIALS}
    letters = [byte_id(tok, c) for c in "abcdefghijklmnopqrst"]
    loop = [byte_id(tok, "\n"), special["<BLOCK>"], byte_id(tok, "#"), special["<FORK>"]]
    # Orthogonal embeddings for the tokens that matter, so a head row answers only its predecessor.
    used = loop + letters + [special["<CHILD>"], special["<|im_end|>"]]
    basis = torch.linalg.qr(torch.randn(h, h, generator=gen))[0].T * h ** 0.5
    emb = torch.randn(vocab, h, generator=gen)
    emb[used] = basis[:len(used)]
    successor = {loop[0]: loop[1], loop[1]: loop[2], loop[2]: loop[3], loop[3]: loop[1]}
    order = torch.randperm(len(letters), generator=gen).tolist()
    for i, a in enumerate(order):  # an acyclic chain over the letters that ends in <|im_end|>
        j = i + 1 + int(torch.randint(0, 3, (1,), generator=gen))
        successor[letters[a]] = letters[order[j]] if j < len(order) else special["<|im_end|>"]
    head = torch.randn(vocab, h, generator=gen) * 0.02
    for x, y in successor.items():
        head[y] += emb[x] / h ** 0.5
    for y in letters:  # after <CHILD>, every letter is equally likely: the context decides
        head[y] += 0.3 * emb[special["<CHILD>"]] / h ** 0.5
    with torch.no_grad():
        lm.model.embed_tokens.weight.copy_(emb)
        lm.lm_head.weight.copy_(head)
        for name, p in lm.model.layers.named_parameters():
            if p.dim() == 2:  # sharp random attention makes each child's context (its position) matter
                sharp = 4.0 if name.endswith(("q_proj.weight", "k_proj.weight")) else 1.0
                p.copy_(torch.randn(p.shape, generator=gen) * sharp * noise / p.shape[1] ** 0.5)
        mtp = lm.mtp  # drafts the successor of its input token, slightly perturbed
        mtp.fc.weight.zero_()
        mtp.fc.weight[:, h:] = torch.eye(h)
        mtp.fc.weight.add_(torch.randn(mtp.fc.weight.shape, generator=gen) * 0.05)
        for p in mtp.layers.parameters():
            p.copy_(torch.randn(p.shape, generator=gen) * 0.1 / p.shape[1] ** 0.5)


def random_like(name: str, p: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
    noise = torch.randn(p.shape, generator=gen)
    if p.dim() == 1 and ("norm" in name or name.startswith("mlp1.0")):
        return 1 + 0.1 * noise       # norm weights
    if name.endswith(("ls1", "ls2")):
        return 0.5 + 0.1 * noise     # layer scales
    if p.dim() == 1:
        return 0.1 * noise           # biases
    return noise / p[0].numel() ** 0.5 if p.dim() > 1 else noise


def write_checkpoint(folder: str | Path, seed: int = 0, *, forking: bool = True, noise: float = 1.0,
                     mtp_folder: str | Path | None = None, **llm) -> Path:
    """A checkpoint folder (config.json, tokenizer.json, safetensors) with random weights."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = byte_tokenizer()
    cfg = tiny_config(tok, **llm)
    gen = torch.Generator().manual_seed(seed)
    torch.manual_seed(seed)
    model = HPDModel(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(random_like(name, p, gen))
    if forking:
        bias_for_forking(model, tok, gen, noise)
    tok.save(str(folder / "tokenizer.json"))
    save_model(model, folder, dtype=torch.float32, mtp_folder=mtp_folder)
    return folder
