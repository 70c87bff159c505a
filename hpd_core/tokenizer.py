"""Tokenizer, special tokens and the chat prompt (docs/format.md §3-4).

Special ids are read from `tokenizer.json` and checked against `config.json`; the 151xxx ids
of the real model appear only as config defaults.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer
from tokenizers.decoders import DecodeStream

from hpd_core.config import HPDConfig

SYSTEM_PROMPT = ("你是书生·万象，英文名是InternVL，是由上海人工智能实验室、清华大学及多家合作单位"
                 "联合开发的多模态大语言模型。")
INSTRUCTIONS = {"fork": "document parsing with fork.", "plain": "document parsing."}
IMG_CONTEXT = "<IMG_CONTEXT>"


class TokenizerError(ValueError):
    """A tokenizer.json that lacks what the HPD protocol needs."""


def build_prompt(instruction: str, image_tokens: int) -> str:
    return (f"<|im_start|>system\n{SYSTEM_PROMPT}<|im_end|>\n<|im_start|>user\n<img>"
            f"{IMG_CONTEXT * image_tokens}</img>\n{instruction}<|im_end|>\n<|im_start|>assistant\n")


@dataclass(frozen=True)
class SpecialTokens:
    im_start: int
    im_end: int
    image_context: int
    fork: int
    child: int
    block: int | None
    stop: frozenset[int]  # dropped when text is decoded; im_end ends a branch


class HPDTokenizer:
    def __init__(self, tokenizer: Tokenizer, config: HPDConfig):
        self.tokenizer = tokenizer
        ids = {name: tokenizer.token_to_id(name) for name in
               ("<|im_start|>", "<|im_end|>", "<img>", "</img>", IMG_CONTEXT, "<FORK>", "<CHILD>")}
        missing = [name for name, i in ids.items() if i is None]
        if missing:
            raise TokenizerError(f"tokenizer.json lacks the special tokens {missing}")
        for name, expected in (("<FORK>", config.fork_token_id), ("<CHILD>", config.child_token_id),
                               ("<|im_end|>", config.eos_token_id)):
            if ids[name] != expected:
                raise TokenizerError(f"{name} is id {ids[name]} in tokenizer.json but {expected} in config.json")
        self.special = SpecialTokens(
            im_start=ids["<|im_start|>"], im_end=ids["<|im_end|>"], image_context=ids[IMG_CONTEXT],
            fork=ids["<FORK>"], child=ids["<CHILD>"], block=tokenizer.token_to_id("<BLOCK>"),
            stop=frozenset({ids["<|im_end|>"], config.eos_token_id}))

    @classmethod
    def load(cls, folder: str | Path, config: HPDConfig) -> "HPDTokenizer":
        path = Path(folder) / "tokenizer.json"
        if not path.is_file():
            raise TokenizerError(f"no tokenizer.json in {folder}")
        return cls(Tokenizer.from_file(str(path)), config)

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def prompt_ids(self, instruction: str, image_tokens: int) -> list[int]:
        return self.encode(build_prompt(instruction, image_tokens))

    def decode(self, ids: list[int]) -> str:
        """Text of ids with only the stop ids dropped (protocol markers stay)."""
        return self.tokenizer.decode([i for i in ids if i not in self.special.stop], skip_special_tokens=False)

    def stream(self) -> "TextStream":
        return TextStream(self)


class TextStream:
    """Incremental detokenizer: `pieces(ids)` returns, per token, the text it completed ("" while
    a multi-byte character is still open, and for stop tokens); `push(ids)` their concatenation."""

    def __init__(self, tok: HPDTokenizer):
        self.tok, self.decoder = tok, DecodeStream(skip_special_tokens=False)

    def pieces(self, ids: list[int]) -> list[str]:
        return ["" if i in self.tok.special.stop else self.decoder.step(self.tok.tokenizer, i) or "" for i in ids]

    def push(self, ids: list[int]) -> str:
        return "".join(self.pieces(ids))
