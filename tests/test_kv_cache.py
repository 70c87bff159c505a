"""The block-paged KV cache: forks share blocks, memory follows written tokens, blocks are reused,
and attention over shared prefixes equals attention over each row's own copy (float64)."""

import pytest
import torch

from hpd_core.kv_cache import KVCache
from hpd_core.model.language import LanguageModel
from tests.test_conformance import VOCAB, ours_config, random_model

LAYERS, HEADS, DIM = 2, 2, 4


def cache(block_size: int = 4, blocks: int = 2) -> KVCache:
    return KVCache(LAYERS, HEADS, DIM, dtype=torch.float64, block_size=block_size, blocks=blocks)


def fill(c: KVCache, row: int, start: int, end: int) -> None:
    """Write random keys at positions [start, end) of `row` (every layer) and set its length."""
    positions = torch.arange(start, end)[None]
    layout = c.layout([row], positions)
    for layer in range(LAYERS):
        c.write(layer, layout, torch.randn(1, HEADS, end - start, DIM, dtype=torch.float64),
                torch.randn(1, HEADS, end - start, DIM, dtype=torch.float64))
    c.crop(row, end)


def test_a_fork_references_the_parents_full_blocks_and_copies_only_a_partial_one():
    c = cache()
    parent = c.alloc()
    fill(c, parent, 0, 10)                       # blocks: [0-3] [4-7] [8-9]
    assert len(c.tables[parent]) == 3 and c.blocks_in_use == 3
    aligned = c.fork(parent, 8)                  # two full blocks: nothing copied
    assert c.tables[aligned] == c.tables[parent][:2] and c.blocks_in_use == 3
    partial = c.fork(parent, 9)                  # two full blocks shared, the third copied
    assert c.tables[partial][:2] == c.tables[parent][:2]
    assert c.tables[partial][2] != c.tables[parent][2] and c.blocks_in_use == 4
    assert [c.refs[b] for b in c.tables[parent]] == [3, 3, 1]
    copy, source = c.tables[partial][2], c.tables[parent][2]
    assert torch.equal(c.k[:, copy, :1], c.k[:, source, :1]) and torch.equal(c.v[:, copy, :1], c.v[:, source, :1])


def test_blocks_are_freed_when_their_last_reference_goes_and_then_reused():
    c = cache()
    parent = c.alloc()
    fill(c, parent, 0, 10)
    child = c.fork(parent, 9)
    fill(c, child, 9, 14)
    c.free(parent)
    assert c.blocks_in_use == len(c.tables[child]) == 4   # the shared blocks live on in the child
    c.free(child)
    assert c.blocks_in_use == 0 and set(c.refs) == {0}
    pool = c.blocks
    again = c.alloc()
    fill(c, again, 0, 16)
    assert c.blocks == pool and again in (parent, child)  # no growth: freed blocks and rows are reused


def test_crop_frees_the_blocks_of_rejected_drafts():
    c = cache()
    row = c.alloc()
    fill(c, row, 0, 13)
    assert c.blocks_in_use == 4
    c.crop(row, 5)
    assert c.blocks_in_use == 2 and c.lengths[row] == 5


def test_writing_into_a_shared_block_is_refused():
    c = cache()
    parent = c.alloc()
    fill(c, parent, 0, 10)
    c.fork(parent, 8)
    with pytest.raises(AssertionError):
        c.layout([parent], torch.tensor([[5]]))  # block [4-7] is referenced by the child


def test_the_shared_prefix_is_read_once_however_many_rows_hold_it():
    c = cache()
    root = c.alloc()
    fill(c, root, 0, 20)
    c.share(root)                                # 5 full blocks = 20 prompt positions
    reads = []
    for n in (1, 4, 16):
        rows = [c.fork(root, 20) for _ in range(n)]
        for r in rows:
            fill(c, r, 20, 23)
        layout = c.layout(rows, torch.tensor([[23]] * n))
        assert layout.prefix_valid.shape == (1, 20)
        reads.append(layout.keys_read)
        for r in rows:
            c.free(r)
    assert reads == [20 + 4 * n for n in (1, 4, 16)]  # prefix once + each row's own block


@torch.inference_mode()
def test_attention_over_a_shared_prefix_equals_attention_over_private_copies():
    """The same rows decoded with the prompt marked shared (read once, merged by log-sum-exp)
    and not (every row reads all its blocks), and with the full causal forward."""
    lm: LanguageModel = random_model(ours_config(), seed=3).language_model.double()
    llm = lm.config
    prompt = torch.randint(0, VOCAB, (11,), generator=torch.Generator().manual_seed(5))
    suffixes = torch.randint(0, VOCAB, (3, 6), generator=torch.Generator().manual_seed(6))
    logits = []
    for shared in (True, False):
        c = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=torch.float64,
                    block_size=4, blocks=2)
        root = c.alloc()
        lm.model(lm.embed(prompt)[None], torch.arange(11)[None], c, [root])
        c.crop(root, 11)
        if shared:
            c.share(root)
        rows = [c.fork(root, 11 - i) for i in range(3)]   # rows fork at 11, 10 and 9
        positions = torch.tensor([[11 - i + j for j in range(6)] for i in range(3)])
        logits.append(lm.logits(lm.model(lm.embed(suffixes), positions, c, rows)))
    full = torch.stack([lm.logits(lm.model(lm.embed(torch.cat([prompt[:11 - i], suffixes[i]]))[None],
                                           torch.arange(17 - i)[None]))[0, -6:] for i in range(3)])
    torch.testing.assert_close(logits[0], logits[1], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(logits[0], full, rtol=1e-10, atol=1e-10)


def test_only_rows_written_from_position_0_attend_causally():
    """`Layout.causal` sends a forward to plain causal attention over its own keys (a page's
    prefill; tests/test_conformance.py checks its logits against the full forward): only when
    every row is written from position 0 in order."""
    c = cache()
    first, second = c.alloc(), c.alloc()
    assert c.layout([first, second], torch.arange(6)[None].expand(2, -1)).causal
    assert not c.layout([first], torch.tensor([[1, 0, 2]])).causal  # out of order
    fill(c, first, 0, 6)
    assert not c.layout([first], torch.arange(6, 9)[None]).causal  # a later step
    assert not c.layout([first], torch.arange(3, 9)[None]).causal  # a prefill of the row's end
