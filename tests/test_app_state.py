"""The app's view model and background job, fed by a real engine on a tiny forking checkpoint."""

import time

import pytest
from PIL import Image

from app.job import ParseJob
from app.state import PageView
from hpd_core import ParseOptions

PAGE = Image.new("RGB", (96, 128), "white")
MODES = {
    "serial": ParseOptions(max_new_tokens=60),
    "batched": ParseOptions(batch_children=True, max_new_tokens=60, max_active_branches=4),
    "serial, MTP off": ParseOptions(use_mtp=False, max_new_tokens=40),
    "batched, MTP off": ParseOptions(use_mtp=False, batch_children=True, max_new_tokens=40),
    "plain": ParseOptions(prompt="plain", max_new_tokens=60),
}


def replay(engine, options, on_event=None) -> PageView:
    view = PageView(options)
    for event in engine.stream(PAGE, options):
        view.apply(event)
        if on_event is not None:
            on_event(view)
    return view


@pytest.fixture(scope="module")
def replays(app_engine):
    """mode -> (finished view, the live summaries seen after each event before the end)"""
    out = {}
    for mode, options in MODES.items():
        live = []
        view = replay(app_engine, options, lambda v: live.append(v.summary()) if v.result is None else None)
        out[mode] = view, live
    return out


@pytest.mark.parametrize("mode", MODES)
def test_live_counters_agree_with_the_final_statistics(replays, mode):
    view, live = replays[mode]
    last, stats = live[-1], view.result.stats
    assert last.forwards == stats.forwards
    assert last.rounds == stats.rounds
    assert last.peak_active == stats.peak_active_branches
    assert last.shared_prefix_tokens == stats.shared_prefix_tokens
    assert last.tokens == stats.generated_tokens
    assert last.drafted == stats.drafted_tokens
    assert last.branches == len(view.result.branches) and last.live == 0
    assert view.summary().finished and view.summary().forwards == stats.forwards


@pytest.mark.parametrize("mode", MODES)
def test_branch_texts_and_draft_marks_match_the_result(replays, mode):
    view, _ = replays[mode]
    assert len(view.branches) == len(view.result.branches) >= (1 if mode == "plain" else 5)
    for record in view.result.branches:
        branch = view.branches[record.branch]
        assert branch.text == record.text
        assert branch.tokens == len(record.token_ids)
        assert branch.accepted == sum(record.drafted)
        assert branch.label == record.label and branch.bbox == record.bbox
        assert branch.state(view.round) == "done" and branch.reason == record.finish_reason
    if MODES[mode].use_mtp:
        assert any(drafted for b in view.branches.values() for _, drafted in b.pieces)
    else:
        assert not any(drafted for b in view.branches.values() for _, drafted in b.pieces)


def test_tree_grows_and_children_wait_beyond_max_active_branches(app_engine):
    seen = []
    options = ParseOptions(batch_children=True, max_new_tokens=60, max_active_branches=2)
    replay(app_engine, options, lambda v: seen.append({b.branch: b.state(v.round) for b in v.branches.values()}))
    sizes = [len(s) for s in seen]
    assert sizes == sorted(sizes) and sizes[-1] > 10           # the tree only grows
    assert any("waiting" in s.values() for s in seen)           # forked, not yet advanced
    assert max(sum(v == "decoding" for v in s.values()) for s in seen) >= 2
    assert set(seen[-1].values()) == {"done"}


def test_layout_blocks_appear_while_the_parent_writes(app_engine):
    counts = []
    view = replay(app_engine, ParseOptions(max_new_tokens=30), lambda v: counts.append(len(v.layout_blocks())))
    assert counts == sorted(counts) and len(set(counts)) >= 4
    assert view.layout_blocks() == view.result.blocks


def test_tokens_per_second_history_is_sampled_over_decoding(replays):
    view, _ = replays["serial, MTP off"]
    times = [t for t, _ in view.history]
    assert len(times) >= 3 and times == sorted(times)
    assert all(rate > 0 for _, rate in view.history[1:])
    assert view.summary().rate_avg == pytest.approx(view.result.stats.tokens_per_second)


def test_cancel_stops_a_long_parse_within_a_round_and_frees_the_engine(app_engine):
    job = ParseJob(app_engine, [PAGE], ParseOptions(use_mtp=False, max_new_tokens=8000))
    while len(job.view.branches) < 3:
        assert job.running
        time.sleep(0.01)
    with job.lock:  # no event is applied meanwhile
        seen = job.view.round
        job.cancel_event.set()
    job.cancel()
    assert not job.running and job.error is None
    assert job.view.result.stats.rounds <= seen + 1  # at most the round that was computing
    assert job.view.result.cancelled
    assert app_engine.lock.acquire(blocking=False)
    app_engine.lock.release()


def test_frames_are_throttled_and_end_with_the_job(app_engine):
    job = ParseJob(app_engine, [PAGE], ParseOptions(max_new_tokens=120))
    started = time.monotonic()
    frames = sum(1 for _ in job.frames(interval=0.2))
    duration = time.monotonic() - started
    assert not job.running and job.view.result is not None
    assert 1 <= frames <= duration / 0.2 + 1


def test_decoding_errors_are_kept_for_the_ui_thread(app_engine):
    job = ParseJob(app_engine, ["not an image"], ParseOptions())
    job.done.wait(10)
    assert isinstance(job.error, TypeError)
    assert list(job.frames()) == []
    assert not app_engine.lock.locked()
