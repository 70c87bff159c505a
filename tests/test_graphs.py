"""Decode forwards padded to CUDA-graph buckets (hpd_core.graphs) equal the unpadded forwards:
the same hidden states and the same keys written, nothing but the scratch block touched besides,
no NaN anywhere; drafts run all at once over padded rows, the confidence stop applied after them,
are the drafts of the one-by-one loop (float64, run eagerly on the CPU; the replay itself, with
the compiled kernels load_engine chooses there, is checked on CUDA)."""

from dataclasses import fields

import pytest
import torch

from hpd_core import ParseOptions, load_engine
from hpd_core.graphs import Bucket, DecodeGraphs, DraftGraphs, pack, pad_layout, plan, unpack
from hpd_core.kv_cache import KVCache, Layout
from hpd_core.model.kernels import EAGER
from hpd_core.model.language import LanguageModel
from hpd_core.speculative import all_drafts, draft
from tests.test_conformance import VOCAB, ours_config, random_model
from tests.test_engine_exactness import page
from tests.tiny import write_checkpoint


def pages_with_children(lm: LanguageModel, seed: int) -> tuple[KVCache, list[int]]:
    """Two pages (prompts of 11 and 7 positions, shared prefixes) with forked children, and a
    row without a shared prefix; the scratch block reserved first, so block numbers match."""
    llm = lm.config
    cache = KVCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=torch.float64,
                    block_size=4, blocks=2)
    cache.scratch
    gen = torch.Generator().manual_seed(seed)
    rows = []
    for length, children, share in ((11, 3, True), (7, 2, True), (6, 0, False)):
        root = cache.alloc()
        prompt = torch.randint(0, VOCAB, (1, length), generator=gen)
        lm.model(lm.embed(prompt), torch.arange(length)[None], cache, [root])
        cache.crop(root, length)
        if share:
            cache.share(root)
        rows += [root] + [cache.fork(root, length - i) for i in range(children)]
    return cache, rows


@torch.inference_mode()
def test_a_padded_forward_writes_and_returns_what_the_unpadded_one_does():
    lm: LanguageModel = random_model(ours_config(), seed=4).language_model.double()
    for q in (1, 3):
        (eager, rows), (padded, same_rows) = pages_with_children(lm, 7), pages_with_children(lm, 7)
        assert rows == same_rows
        ids = torch.randint(0, VOCAB, (len(rows), q), generator=torch.Generator().manual_seed(q))
        positions = torch.tensor([[eager.lengths[r] + j for j in range(q)] for r in rows])
        want = lm.model(lm.embed(ids), positions, eager, rows)
        lm.model.graphs = DecodeGraphs(capture=False)
        try:
            got = lm.model(lm.embed(ids), positions, padded, rows)
        finally:
            lm.model.graphs = None
        assert got.shape == want.shape
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)
        others = [b for b in range(eager.blocks) if b != padded.scratch]
        torch.testing.assert_close(padded.k[:, others], eager.k[:, others], rtol=1e-12, atol=1e-12)
        torch.testing.assert_close(padded.v[:, others], eager.v[:, others], rtol=1e-12, atol=1e-12)
        assert torch.isfinite(padded.k).all() and torch.isfinite(padded.v).all()


@torch.inference_mode()
def test_drafts_all_at_once_over_padded_rows_then_stopped_are_the_one_by_one_drafts(tmp_path):
    engine = load_engine(write_checkpoint(tmp_path, 5), device="cpu", dtype=torch.float64)
    lm = engine.model.lm
    gen = torch.Generator().manual_seed(0)
    lengths = set()
    for rows in (1, 3, 5):
        hidden = torch.randn(rows, lm.config.hidden_size, generator=gen, dtype=torch.float64)
        pending = torch.randint(0, lm.config.vocab_size, (rows,), generator=gen)
        best = all_drafts(lm, hidden, pending, 6)[1].amax(0)  # each position's most confident row
        for confidence in [0.0] + [float(p) + 1e-9 for p in best]:  # a stop at every position
            want = draft(lm, hidden, pending, 6, confidence)
            lm.draft_graphs = DraftGraphs(capture=False)
            try:
                got = draft(lm, hidden, pending, 6, confidence)
            finally:
                lm.draft_graphs = None
            assert torch.equal(got, want), (rows, confidence)
            lengths.add(want.shape[1])
    assert len(lengths) >= 3 and 6 in lengths  # stops at several positions, and none


def test_a_parse_with_draft_graphs_writes_and_accepts_what_it_does_without(tmp_path):
    engine = load_engine(write_checkpoint(tmp_path, 5), device="cpu", dtype=torch.float64)
    image = page(2)
    for options in (ParseOptions(num_speculative_tokens=4), ParseOptions(batch_children=True)):
        want = engine.parse(image, options)
        engine.model.lm.draft_graphs = DraftGraphs(capture=False)
        try:
            got = engine.parse(image, options)
        finally:
            engine.model.lm.draft_graphs = None
        assert [b.token_ids for b in got.branches] == [b.token_ids for b in want.branches]
        assert (got.stats.accepted_tokens, got.stats.drafted_tokens) == (want.stats.accepted_tokens,
                                                                      want.stats.drafted_tokens) != (0, 0)


def test_buckets_round_every_dimension_up_to_a_power_of_two_and_pad_rows_out_of_every_group():
    lm: LanguageModel = random_model(ours_config(), seed=4).language_model.double()
    cache, rows = pages_with_children(lm, 7)
    positions = torch.tensor([[cache.lengths[r], cache.lengths[r] + 1] for r in rows])
    layout = cache.layout(rows, positions)
    bucket = Bucket.of(layout)
    # pages of 4 and 3 rows sharing 2 and 1 prompt blocks, a row of its own: rest up to 2 blocks
    assert (layout.positions.shape[0], layout.group_rows.shape, layout.prefix_blocks.shape) == (8, (2, 4), (2, 2))
    assert bucket == Bucket(rows=8, q=2, rest=2, groups=2, members=4, prefix=2)
    rows = rows[:7]  # 7 rows: one padded row
    layout = cache.layout(rows, positions[:7])
    bucket = Bucket.of(layout)
    padded = pad_layout(layout, bucket, cache.scratch, cache.block_size)
    assert padded.positions.shape == (8, 2) and padded.slots.shape == (16,)
    assert padded.row_group[7] == -1 and (padded.slots[14:] // cache.block_size == cache.scratch).all()
    assert (padded.rest_blocks[7] == cache.scratch).all()


def test_a_packed_layout_unpacks_to_every_tensor_of_the_layout_and_a_replay_reads_the_next_one():
    """What a graph replay reads: one device buffer, the capture's layout packed, refilled with the
    next decode forward's of the same bucket (the layout's `causal` flag is no tensor; a replay once
    failed on it)."""
    lm: LanguageModel = random_model(ours_config(), seed=4).language_model.double()
    cache, rows = pages_with_children(lm, 7)
    padded = [plan(cache, order, torch.tensor([[cache.lengths[r]] for r in order]))[1] for order in (rows, rows[::-1])]
    static, following = padded
    assert Bucket.of(static) == Bucket.of(following) and not torch.equal(static.slots, following.slots)
    flat = pack(static)
    captured = unpack(flat, static)  # views of `flat`, as the graph holds them
    pack(following, out=flat)
    for f in fields(Layout):
        got, want = getattr(unpack(flat, static), f.name), getattr(following, f.name)
        assert torch.equal(got, want) and got.dtype == want.dtype if isinstance(want, torch.Tensor) else got == want, f.name
    assert torch.equal(captured.slots, following.slots) and captured.slots.data_ptr() == flat.data_ptr()


def test_the_scratch_block_is_not_in_use_and_reset_frees_everything_else():
    cache = KVCache(2, 2, 4, dtype=torch.float64, block_size=4, blocks=4)
    scratch = cache.scratch
    assert cache.blocks_in_use == 0 and cache.refs[scratch] == 1
    row = cache.alloc()
    cache.layout([row], torch.arange(9)[None])
    assert cache.blocks_in_use == 3 and scratch not in cache.tables[row]
    cache.reset()
    assert cache.blocks_in_use == 0 and cache.tables == [] and cache.scratch == scratch
    assert sorted(cache.free_blocks + [scratch]) == list(range(cache.blocks))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="CUDA graphs need a GPU (run on the lent H200)")
def test_cuda_graph_replay_of_fused_kernels_gives_the_eager_tokens_on_the_bundled_model():
    engine = load_engine(None, device="cuda", dtype=torch.float32)
    decoder = engine.model.lm.model
    assert decoder.graphs is not None and decoder.kernels is not EAGER
    image = page(0).resize((640, 800))
    for options in (ParseOptions(use_mtp=False), ParseOptions(batch_children=True, num_speculative_tokens=6)):
        replayed = engine.parse(image, options)
        graphs, kernels, drafts = decoder.graphs, decoder.kernels, engine.model.lm.draft_graphs
        decoder.graphs, decoder.kernels, engine.model.lm.draft_graphs = None, EAGER, None
        eager = engine.parse(image, options)
        decoder.graphs, decoder.kernels, engine.model.lm.draft_graphs = graphs, kernels, drafts
        assert [b.token_ids for b in replayed.branches] == [b.token_ids for b in eager.branches]
        assert len(graphs.graphs) > 0
    assert len(drafts.graphs) > 0
