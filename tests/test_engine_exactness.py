"""Every decoding mode emits the same tokens as plain greedy decoding.

Tiny random checkpoints in the real tensor layout, biased so that pages really fork (tiny.py),
decoded in float64 so that batching cannot flip a near-tie through rounding.
"""

import numpy as np
import pytest
import torch
from PIL import Image

from hpd_core import ParseOptions, load_engine
from hpd_core import reference
from hpd_core.events import PageFinished, PageStarted
from hpd_core.graphs import DecodeGraphs
from hpd_core.kv_cache import KVCache
from hpd_core.model.kernels import EAGER, compiled
from tests.tiny import write_checkpoint

SEEDS = range(30)
BUDGET = 40


def page(seed: int) -> Image.Image:
    rng = np.random.default_rng(seed)
    w, h = rng.integers(20, 120, size=2)
    return Image.fromarray(rng.integers(0, 255, (h, w, 3), dtype=np.uint8))


@pytest.fixture(scope="module")
def engines(tmp_path_factory):
    root = tmp_path_factory.mktemp("ckpt")
    return {seed: load_engine(write_checkpoint(root / str(seed), seed, noise=0.5), dtype=torch.float64)
            for seed in SEEDS}


def tokens(result):
    return [b.token_ids for b in result.branches]


@pytest.fixture(scope="module")
def baselines(engines):
    """Serial, MTP off: the reference every other mode must match."""
    return {seed: e.parse(page(seed), ParseOptions(use_mtp=False, max_new_tokens=BUDGET))
            for seed, e in engines.items()}


def test_pages_really_fork_with_children_of_different_lengths(baselines):
    for seed, result in baselines.items():
        assert len(result.stats.child_tokens) >= 5, seed
        assert all(b.finish_reason == "stop" for b in result.branches[1:]), seed
    varied = [s for s, r in baselines.items() if len(set(r.stats.child_tokens)) > 1]
    assert len(varied) >= 10


@pytest.mark.parametrize("k, confidence", [(1, 0.0), (3, 0.0), (6, 0.0), (10, 0.0), (6, 0.9)])
def test_mtp_gives_the_same_tokens_as_greedy(engines, baselines, k, confidence):
    rates, steps, accepted, full, drafted = [], 0, 0, 0, 0
    for seed, engine in engines.items():
        options = ParseOptions(use_mtp=True, num_speculative_tokens=k, draft_confidence=confidence,
                               max_new_tokens=BUDGET)
        result = engine.parse(page(seed), options)
        assert tokens(result) == tokens(baselines[seed]), seed
        assert result.text == baselines[seed].text
        assert result.stats.forwards < baselines[seed].stats.forwards
        rates.append(result.stats.acceptance_rate)
        steps += result.stats.branch_steps
        accepted += result.stats.accepted_tokens
        full += result.stats.accepted_by_position[-1] if len(result.stats.accepted_by_position) == k else 0
        drafted += result.stats.drafted_tokens
    assert accepted < drafted  # drafts are rejected on some steps ...
    if confidence:
        assert drafted < k * steps  # ... drafting stops early where the head is unsure ...
    else:
        assert full > 0  # ... and all k drafts are accepted on others
    assert 0.1 < np.mean(rates) < 0.99


@pytest.mark.parametrize("use_mtp", [False, True])
@pytest.mark.parametrize("max_active", [1, 2, 64])
def test_batched_children_match_serial_whatever_the_branch_limit(engines, baselines, use_mtp, max_active):
    for seed, engine in engines.items():
        options = ParseOptions(use_mtp=use_mtp, num_speculative_tokens=3, batch_children=True,
                               max_active_branches=max_active, max_new_tokens=BUDGET)
        result = engine.parse(page(seed), options)
        assert tokens(result) == tokens(baselines[seed]), seed
        assert result.stats.peak_active_branches <= max_active
        if max_active == 64:
            assert result.stats.peak_active_branches >= 2
            assert result.stats.rounds < baselines[seed].stats.rounds


def test_each_child_equals_a_from_scratch_decode_of_its_prefix(engines, baselines):
    for seed in list(SEEDS)[:20]:
        engine, result = engines[seed], baselines[seed]
        ids, embeds, _ = engine.prompt(page(seed), "fork")
        parent = result.branches[0]
        lm = engine.model.lm
        for child in result.branches[1:]:
            prefix = list(parent.token_ids[:child.position - len(ids)]) + [engine.special.child]
            seq = torch.cat([embeds, lm.embed(torch.tensor(prefix))])
            assert tuple(reference.greedy(lm, seq, BUDGET, engine.special.stop)) == child.token_ids, seed
        assert tuple(reference.greedy(lm, embeds, BUDGET, engine.special.stop)) == parent.token_ids


def test_pages_decoded_together_match_pages_decoded_alone(engines, baselines):
    engine = engines[0]
    pages = [page(0), page(1), page(2)]
    alone = [engine.parse(p, ParseOptions(use_mtp=False, max_new_tokens=BUDGET)) for p in pages]
    together = engine.parse_batch(pages, ParseOptions(use_mtp=True, batch_children=True, max_new_tokens=BUDGET))
    assert [tokens(r) for r in together] == [tokens(r) for r in alone]


@pytest.mark.parametrize("prompt", ["fork", "plain"])
def test_pages_in_flight_are_capped_and_later_pages_give_the_same_tokens(engines, prompt):
    """Five pages with at most two in flight: a page starts only when fewer than two are
    unfinished, the KV pool holds fewer blocks than with all five at once, and every page writes
    the tokens it writes alone."""
    engine = engines[0]
    pages = [page(s) for s in range(5)]
    options = ParseOptions(prompt=prompt, use_mtp=True, batch_children=True, max_new_tokens=BUDGET)
    alone = [tokens(engine.parse(p, options)) for p in pages]
    runs = {}
    for limit in (2, 0):
        engine.max_pages_in_flight = limit
        in_flight, most, peak, results = 0, 0, 0, {}
        for event in engine.stream_batch(pages, options):
            peak = max(peak, engine.cache.blocks_in_use)
            if isinstance(event, PageStarted):
                in_flight += 1
                most = max(most, in_flight)
            elif isinstance(event, PageFinished):
                in_flight -= 1
                results[event.page] = tokens(event.result)
        assert in_flight == 0 and [results[i] for i in range(5)] == alone
        runs[limit] = most, peak
    assert runs[2][0] == 2 and runs[0][0] == 5
    assert runs[2][1] < runs[0][1]


@pytest.mark.parametrize("use_mtp", [False, True])
def test_decode_forwards_padded_to_graph_buckets_give_the_same_tokens(engines, baselines, use_mtp):
    """What a CUDA graph replays (hpd_core.graphs: rows, groups and key blocks padded to powers of
    two), run eagerly: serial, batched and pages together equal the unpadded forwards."""
    pages = [page(0), page(1), page(2)]
    alone = [engines[0].parse(p, ParseOptions(use_mtp=False, max_new_tokens=BUDGET)) for p in pages]
    for seed in list(SEEDS)[:15]:
        engine = engines[seed]
        engine.model.lm.model.graphs = DecodeGraphs(capture=False)
        try:
            for batch_children in (False, True):
                options = ParseOptions(use_mtp=use_mtp, num_speculative_tokens=3, batch_children=batch_children,
                                       max_new_tokens=BUDGET)
                assert tokens(engine.parse(page(seed), options)) == tokens(baselines[seed]), seed
            if seed == 0:
                together = engine.parse_batch(pages, ParseOptions(use_mtp=use_mtp, batch_children=True,
                                                                  max_new_tokens=BUDGET))
                assert [tokens(r) for r in together] == [tokens(r) for r in alone]
        finally:
            engine.model.lm.model.graphs = None


def test_compiled_kernels_give_the_same_tokens_in_every_mode(engines, baselines):
    """The decoder's compiled kernels (hpd_core.model.kernels), unpadded and padded to graph
    buckets, give in every mode the tokens of the eager serial decode and of the naive reference.
    Dynamo traces each as on CUDA (whole graphs, dynamic shapes, a graph per size-1 or stride
    pattern met) and its eager backend runs the traced graphs: Inductor's C++ compile of every
    graph met here would take ~1 minute on the 2-core CPU (tests/test_kernels.py checks Inductor's
    kernels against the eager ones)."""
    kernels, pages = compiled("eager"), [page(0), page(1), page(2)]
    alone = [engines[0].parse(p, ParseOptions(use_mtp=False, max_new_tokens=BUDGET)) for p in pages]
    for seed in list(SEEDS)[:3]:
        engine = engines[seed]
        decoder, stop = engine.model.lm.model, engine.special.stop
        plain = tuple(reference.greedy(engine.model.lm, engine.prompt(page(seed), "plain")[1], BUDGET, stop))
        for graphs in (None, DecodeGraphs(capture=False)):
            decoder.kernels, decoder.graphs = kernels, graphs
            try:
                for use_mtp in (False, True):
                    for batch_children in (False, True):
                        options = ParseOptions(use_mtp=use_mtp, num_speculative_tokens=3,
                                               batch_children=batch_children, max_new_tokens=BUDGET)
                        assert tokens(engine.parse(page(seed), options)) == tokens(baselines[seed]), seed
                options = ParseOptions(prompt="plain", use_mtp=True, num_speculative_tokens=3, max_new_tokens=BUDGET)
                assert engine.parse(page(seed), options).branches[0].token_ids == plain, seed
                if seed == 0:
                    together = engine.parse_batch(pages, ParseOptions(use_mtp=True, batch_children=True,
                                                                      max_new_tokens=BUDGET))
                    assert [tokens(r) for r in together] == [tokens(r) for r in alone]
            finally:
                decoder.kernels, decoder.graphs = EAGER, None


class RecordingCache(KVCache):
    """The engine's cache, recording each fork's block tables and the peak memory."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.forks, self.peak_blocks, self.peak_dense = [], 0, 0
        self.handed_out: set[int] = set()
        self.reused = 0  # blocks handed out again after being freed

    def fork(self, src, length):
        row = super().fork(src, length)
        self.forks.append((length, list(self.tables[src]), list(self.tables[row])))
        return row

    def layout(self, rows, positions):
        layout = super().layout(rows, positions)
        live = [t for t in self.tables if t]
        assert self.blocks_in_use == len({b for t in live for b in t})  # no leaked block
        self.peak_blocks = max(self.peak_blocks, self.blocks_in_use)
        self.peak_dense = max(self.peak_dense, len(live) * max(map(len, live)))  # rows x longest row
        return layout

    def _new_block(self):
        block = super()._new_block()
        self.reused += block in self.handed_out
        self.handed_out.add(block)
        return block


def recording(engine, block_size: int) -> RecordingCache:
    llm = engine.config.llm_config
    return RecordingCache(llm.num_hidden_layers, llm.num_key_value_heads, llm.head_dim, dtype=engine.dtype,
                          block_size=block_size, blocks=4)


@pytest.mark.parametrize("block_size", [1, 3, 16])
def test_a_fork_shares_its_parents_blocks_and_memory_follows_written_tokens(engines, baselines, monkeypatch,
                                                                           block_size):
    for seed in list(SEEDS)[:12]:
        engine, caches = engines[seed], []
        monkeypatch.setattr(engine, "_new_cache", lambda: caches.append(recording(engine, block_size)) or caches[-1])
        options = ParseOptions(use_mtp=True, num_speculative_tokens=3, batch_children=True, max_new_tokens=BUDGET)
        result = engine.parse(page(seed), options)
        assert tokens(result) == tokens(baselines[seed]), seed
        [cache] = caches
        assert len(cache.forks) == len(result.branches) - 1
        for length, parent, child in cache.forks:
            full = length // block_size
            assert child[:full] == parent[:full]                   # the parent's physical blocks ...
            assert len(child) == -(-length // block_size)          # ... and at most one copied block
        assert cache.peak_blocks * 2 < cache.peak_dense            # not rows x longest row
        written = result.stats.prompt_tokens + result.stats.generated_tokens
        per_row = 2 + -(-3 // block_size)  # a copied block, a partly filled last block, the drafts' blocks
        assert cache.peak_blocks <= -(-written // block_size) + per_row * len(result.branches)
        assert cache.blocks_in_use == 0 and set(cache.refs) == {0}  # every block freed at the end
        assert cache.reused > 0                                    # ... and freed blocks were reused


def test_plain_and_fork_prompts_equal_the_naive_reference_in_every_mode(engines):
    for seed in list(SEEDS)[:10]:
        engine = engines[seed]
        lm = engine.model.lm
        for prompt in ("plain", "fork"):
            _, embeds, _ = engine.prompt(page(seed), prompt)
            parent = tuple(reference.greedy(lm, embeds, BUDGET, engine.special.stop))
            for batch_children in (False, True):
                options = ParseOptions(prompt=prompt, use_mtp=True, num_speculative_tokens=3,
                                       batch_children=batch_children, max_new_tokens=BUDGET)
                assert engine.parse(page(seed), options).branches[0].token_ids == parent, (seed, prompt)
