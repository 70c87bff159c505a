"""The bundled model's BPE tokenizer: special ids, exact round trips, digit tokens."""

from __future__ import annotations

import functools
import sys

from tokenizers import Tokenizer

from hpd_training.synth import SynthConfig
from hpd_training.synth import tokenizer as tok

PROMPT = "<|im_start|>user\n<img><IMG_CONTEXT><IMG_CONTEXT></img>\ndocument parsing with fork.<|im_end|>\n"


@functools.lru_cache(maxsize=None)
def trained() -> Tokenizer:
    return tok.train_tokenizer(tok.corpus_texts(24, seed=0, config=SynthConfig.dense()), vocab_size=800)


def test_special_tokens_hold_the_first_ids_in_order():
    t = trained()
    for i, name in enumerate(tok.SPECIAL_TOKENS):
        assert t.token_to_id(name) == i and t.id_to_token(i) == name
        assert t.encode(name).ids == [i]
    assert t.get_vocab_size() == 800


def test_page_texts_round_trip_exactly():
    t = trained()
    texts = list(tok.corpus_texts(4, seed=1000, config=SynthConfig.dense()))
    assert any("<table>" in s for s in texts) and any("\n" in s for s in texts)
    for text in texts + [PROMPT, "  odd  spacing\t\nand caf\u00e9 \u00b1 \U0001f600"]:
        assert t.decode(t.encode(text).ids, skip_special_tokens=False) == text


def test_prompt_encodes_special_tokens_as_single_ids():
    t = trained()
    ids = t.encode(PROMPT).ids
    special = [i for i in ids if i < len(tok.SPECIAL_TOKENS)]
    name = tok.SPECIAL_TOKENS.index
    assert special == [name("<|im_start|>"), name("<img>"), name("<IMG_CONTEXT>"), name("<IMG_CONTEXT>"),
                       name("</img>"), name("<|im_end|>")]
    assert ids[0] == name("<|im_start|>") and ids[-2] == name("<|im_end|>")


def test_digits_are_single_tokens():
    t = trained()
    assert all(len(token) == 1 for token in t.get_vocab() if any(c.isdigit() for c in token))
    enc = t.encode("<BLOCK>text [115,75,482,1000]<FORK>")
    assert [s for s in enc.tokens if s.isdigit()] == list("115" "75" "482" "1000")


def test_special_token_names_are_not_learned_as_words():
    vocab = trained().get_vocab()
    assert not {"BLOCK", "CHILD", "FORK", "IMG", "_CONTEXT"} & set(vocab)


def test_cli_writes_a_loadable_tokenizer(tmp_path, monkeypatch, capsys):
    out = tmp_path / "tokenizer.json"
    monkeypatch.setattr(sys, "argv", ["tokenizer", "--out", str(out), "--pages", "3", "--vocab", "300"])
    tok.main()
    loaded = Tokenizer.from_file(str(out))
    assert loaded.get_vocab_size() == 300 and loaded.token_to_id("<CHILD>") == 8
    assert "wrote" in capsys.readouterr().out
