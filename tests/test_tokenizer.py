"""Special tokens, their check against config.json, decoding and streaming (docs/format.md §3-4)."""

import dataclasses

import pytest
from tokenizers import Tokenizer, models

from hpd_core.tokenizer import HPDTokenizer, TokenizerError
from tests.tiny import byte_tokenizer, tiny_config


@pytest.fixture
def tok() -> HPDTokenizer:
    raw = byte_tokenizer()
    return HPDTokenizer(raw, tiny_config(raw))


def test_special_ids_come_from_tokenizer_json(tok):
    raw = tok.tokenizer
    sp = tok.special
    assert (sp.im_start, sp.im_end, sp.image_context, sp.fork, sp.child, sp.block) == tuple(
        raw.token_to_id(s) for s in ("<|im_start|>", "<|im_end|>", "<IMG_CONTEXT>", "<FORK>", "<CHILD>", "<BLOCK>"))
    assert sp.stop == {sp.im_end}


def test_specials_encode_to_single_ids_without_added_tokens(tok):
    sp = tok.special
    assert tok.encode("<BLOCK>x<FORK>") == [sp.block, tok.encode("x")[0], sp.fork]
    assert tok.encode("") == []


def test_decode_drops_only_stop_ids(tok):
    sp = tok.special
    ids = tok.encode("<BLOCK>text [1,2,3,4]<FORK>") + [sp.child] + tok.encode("héllo") + [sp.im_end]
    assert tok.decode(ids) == "<BLOCK>text [1,2,3,4]<FORK><CHILD>héllo"


def test_stream_equals_decode_when_fed_one_id_at_a_time(tok):
    """Multi-byte characters split over byte tokens appear once complete, never as U+FFFD."""
    ids = tok.encode("<BLOCK>标题 ∑x²<FORK>") + [tok.special.im_end] + tok.encode("表格€")
    stream = tok.stream()
    pieces = [stream.push([i]) for i in ids]
    assert "".join(pieces) == tok.decode(ids)
    assert all("\ufffd" not in p for p in pieces)
    assert pieces[len(tok.encode("<BLOCK>"))] == ""  # first byte of 标 alone: nothing yet


def test_stream_accepts_chunks_of_ids(tok):
    ids = tok.encode("中文 and ascii<FORK>more")
    stream = tok.stream()
    assert "".join(stream.push(ids[i:i + 5]) for i in range(0, len(ids), 5)) == tok.decode(ids)


@pytest.mark.parametrize("field,name", [("fork_token_id", "<FORK>"), ("child_token_id", "<CHILD>"),
                                        ("eos_token_id", "<|im_end|>")])
def test_config_ids_that_disagree_with_the_tokenizer_are_named(field, name):
    raw = byte_tokenizer()
    cfg = tiny_config(raw)
    wrong = dataclasses.replace(cfg, **{field: getattr(cfg, field) + 1000}, extra={})
    with pytest.raises(TokenizerError, match=rf"{name}.*{getattr(cfg, field)}.*{getattr(cfg, field) + 1000}"):
        HPDTokenizer(raw, wrong)


def test_missing_special_tokens_are_listed():
    raw = Tokenizer(models.WordLevel({"a": 0, "[UNK]": 1}, unk_token="[UNK]"))
    raw.add_special_tokens(["<|im_start|>", "<|im_end|>"])
    with pytest.raises(TokenizerError, match=r"<img>.*</img>.*<IMG_CONTEXT>.*<FORK>.*<CHILD>"):
        HPDTokenizer(raw, tiny_config(byte_tokenizer()))


def test_missing_tokenizer_json_is_a_tokenizer_error(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        HPDTokenizer.load(tmp_path, tiny_config(byte_tokenizer()))
