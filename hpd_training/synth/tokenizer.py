"""A small byte-level BPE tokenizer for the bundled model, trained on synthetic page texts.

Digits are split one by one (bbox numbers become digit tokens), the ByteLevel decoder makes
decode(encode(s)) == s, and the special tokens of the real model's grammar and chat template
hold the first ids, in SPECIAL_TOKENS order.

    python -m hpd_training.synth.tokenizer --out assets/tokenizer.json --pages 2000 --vocab 4096
    [--synth-config document]
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterable, Iterator
from dataclasses import replace
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers, trainers

from hpd_training.synth.config import SynthConfig
from hpd_training.synth.page import render_page

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<img>", "</img>", "<IMG_CONTEXT>",
                  "<BLOCK>", "<FORK>", "<CHILD>")

_SPECIAL = re.compile("|".join(map(re.escape, SPECIAL_TOKENS)))


def train_tokenizer(texts: Iterable[str], vocab_size: int) -> Tokenizer:
    if vocab_size < 256 + len(SPECIAL_TOKENS):
        raise ValueError(f"vocab_size must be >= {256 + len(SPECIAL_TOKENS)} (bytes + specials)")
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Digits(individual_digits=True),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)])
    tokenizer.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS]
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=specials,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(_without_specials(texts), trainer)
    return tokenizer


def _without_specials(texts: Iterable[str]) -> Iterator[str]:
    """The pieces between special tokens (the trainer would otherwise learn "BLOCK" etc.)."""
    for text in texts:
        yield from filter(None, _SPECIAL.split(text))


def corpus_texts(n_pages: int, seed: int = 0, config: SynthConfig = SynthConfig()) -> Iterator[str]:
    """Parent, children and assembled texts of n_pages synthetic pages, seeds seed..seed+n-1.

    Pages alternate between random words and real prose so both text sources are learned;
    augmentation is off (the texts do not depend on it).
    """
    sources = [replace(config, real_text_fraction=f, noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0,
                       contrast_prob=0.0) for f in (0.0, 1.0)]
    for i in range(n_pages):
        page = render_page(seed + i, sources[i % 2])
        yield page.parent_text
        yield from page.children_texts
        yield page.assembled_text


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", type=Path, required=True, help="tokenizer.json to write")
    parser.add_argument("--pages", type=int, default=2000, help="synthetic pages to train on")
    parser.add_argument("--vocab", type=int, default=4096, help="vocabulary size")
    parser.add_argument("--seed", type=int, default=0, help="first page seed")
    parser.add_argument("--synth-config", choices=("dense", "document"), default="dense",
                        help="SynthConfig preset of the pages (document: general text, Debian's docs)")
    args = parser.parse_args()
    tokenizer = train_tokenizer(corpus_texts(args.pages, args.seed, getattr(SynthConfig, args.synth_config)()), args.vocab)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(args.out))
    print(f"wrote {args.out}: {tokenizer.get_vocab_size()} tokens from {args.pages} pages")


if __name__ == "__main__":
    main()
