"""The replay benchmark (bench/replay.py) at tiny dimensions: it writes what the trace says, the
fork schedules need fewer rounds than plain AR, drafts fewer still, every block is freed, and
pages wait for room in a pool too small to hold them all."""

import torch

from bench.replay import Trace, accept_cycle, replay
from hpd_core import load_engine
from tests.tiny import write_checkpoint

TRACE = Trace(prompt=37, layout=24, children=(9, 5, 12), tau=3.0)


def test_the_accept_cycle_has_the_traces_mean(tmp_path):
    cycle = accept_cycle(3.4, 6)
    assert sum(next(cycle) for _ in range(100)) == 240
    assert {next(accept_cycle(9.0, 6)) for _ in range(3)} == {6}


def test_replay_writes_the_trace_and_forks_cut_rounds(tmp_path):
    engine = load_engine(write_checkpoint(tmp_path / "ck", seed=0), dtype=torch.float32)
    runs = {s: replay(engine, TRACE, pages=2, schedule=s, k=3 if s == "fork-mtp" else 0, max_active=128)
            for s in ("plain", "fork", "fork-mtp")}
    assert {m.tokens for m in runs.values()} == {2 * (24 + 9 + 5 + 12)}
    assert runs["plain"].rounds == 24 + 9 + 5 + 12
    assert runs["fork-mtp"].rounds < runs["fork"].rounds < runs["plain"].rounds
    assert runs["fork"].peak_kv_bytes < 2 * runs["plain"].peak_kv_bytes  # children share the prompt


def test_pages_wait_for_room_in_a_small_pool_and_still_write_the_trace(tmp_path):
    engine = load_engine(write_checkpoint(tmp_path / "ck", seed=0), dtype=torch.float32)
    whole = replay(engine, TRACE, pages=5, schedule="fork-mtp", k=3, max_active=640)
    small = replay(engine, TRACE, pages=5, schedule="fork-mtp", k=3, max_active=640, resident=2)
    assert (whole.peak_pages, small.peak_pages) == (5, 2)
    assert small.tokens == whole.tokens == 5 * TRACE.tokens
    assert small.rounds > whole.rounds  # the pages ran in turns, not all at once
    assert small.peak_kv_bytes < whole.peak_kv_bytes  # (and the pool never grew: replay asserts it)


def test_the_default_pool_holds_every_pages_worst_case_at_once(tmp_path):
    # 40 pages' worst cases (12 blocks each) exceed 40 pages' written positions (87 each) by far more
    # than a margin: a pool sized by positions kept pages waiting (55-59 of 64 resident on the H200).
    engine = load_engine(write_checkpoint(tmp_path / "ck", seed=0), dtype=torch.float32)
    assert 40 * TRACE.blocks(16, 3) > 40 * (TRACE.prompt + TRACE.tokens) // 16 + 64
    m = replay(engine, TRACE, pages=40, schedule="fork-mtp", k=3, max_active=40 * 64)
    assert m.peak_pages == 40 and m.tokens == 40 * TRACE.tokens


def test_the_vllm_fork_trace_forks_every_child_within_its_first_rounds(tmp_path):
    # vLLM's fork pattern has no layout branch to decode: ours writes a token per child, so the
    # 16 children are all writing after 16 rounds and the page takes ~16 + 110 rounds, not 16 x 110.
    engine = load_engine(write_checkpoint(tmp_path / "ck", seed=0), dtype=torch.float32)
    trace = Trace.named("vllm-fork", 4.0)
    assert (trace.prompt, trace.layout, trace.children) == (2000, 16, (110,) * 16)
    m = replay(engine, trace, pages=1, schedule="fork", k=0, max_active=64)
    assert m.tokens == 16 + 16 * 110
    assert m.rounds <= 16 + 110 + 1
