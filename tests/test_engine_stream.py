"""The event stream and statistics agree with the result; cancellation and odd images."""

import threading

import numpy as np
import pytest
import torch
from PIL import Image

from hpd_core import ParseOptions, load_engine
from hpd_core.events import BranchFinished, BranchForked, PageFinished, PageStarted, TokensAppended
from tests.test_engine_exactness import page
from tests.tiny import write_checkpoint


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    return load_engine(write_checkpoint(tmp_path_factory.mktemp("ck") / "t", 3, noise=0.5), dtype=torch.float64)


@pytest.mark.parametrize("batch", [False, True])
def test_events_rebuild_the_result_and_stats_add_up(engine, batch):
    options = ParseOptions(use_mtp=True, num_speculative_tokens=4, batch_children=batch, max_new_tokens=40)
    events = list(engine.stream(page(3), options))
    assert isinstance(events[0], PageStarted) and isinstance(events[-1], PageFinished)
    result = events[-1].result
    texts, forked, finished, drafts = {}, [], set(), 0
    for e in events:
        if isinstance(e, BranchForked):
            assert e.branch not in texts  # forked before its first token
            forked.append(e)
        if isinstance(e, TokensAppended):
            assert e.text == "".join(e.pieces) and len(e.pieces) == len(e.token_ids) == len(e.drafted)
            texts[e.branch] = texts.get(e.branch, "") + e.text
            drafts += e.drafts
        if isinstance(e, BranchFinished):
            finished.add(e.branch)
    assert [texts.get(r.branch, "") for r in result.branches] == [r.text for r in result.branches]
    assert finished == {r.branch for r in result.branches}
    s = result.stats
    children = result.branches[1:]
    assert s.parent_tokens == len(result.branches[0].token_ids)
    assert s.child_tokens == tuple(len(c.token_ids) for c in children)
    assert s.forked_branches == len(children) == len(forked)
    assert s.shared_prefix_tokens == sum(c.position for c in children)
    assert s.drafted_tokens == drafts and s.branch_steps <= drafts <= 4 * s.branch_steps
    assert s.mean_accepted_length == pytest.approx(1 + s.accepted_tokens / s.branch_steps)
    assert list(s.accepted_by_position) == sorted(s.accepted_by_position, reverse=True)
    assert s.rounds <= s.forwards and s.generated_tokens == sum(len(r.token_ids) for r in result.branches)
    assert sum(sum(r.drafted) for r in result.branches) <= s.accepted_tokens


def test_cancelling_gives_every_page_a_cancelled_result_and_the_engine_stays_usable(engine):
    cancel = threading.Event()
    cancel.set()
    for batch in (False, True):
        results = engine.parse_batch([page(0), page(1)], ParseOptions(batch_children=batch, max_new_tokens=40), cancel)
        assert [r.cancelled for r in results] == [True, True]
    assert engine.parse(page(0), ParseOptions(max_new_tokens=40)).text


@pytest.mark.parametrize("batch", [False, True])
def test_a_cancel_after_the_first_page_started_skips_the_vision_of_the_others(engine, batch):
    cancel = threading.Event()
    events = []
    for event in engine.stream_batch([page(0), page(1), page(2)], ParseOptions(batch_children=batch,
                                                                                max_new_tokens=40), cancel):
        events.append(event)
        if isinstance(event, PageStarted):
            cancel.set()
    started = [e.page for e in events if isinstance(e, PageStarted)]
    finished = {e.page: e.result for e in events if isinstance(e, PageFinished)}
    assert started == [0] and sorted(finished) == [0, 1, 2]
    assert all(r.cancelled for r in finished.values()) and finished[1].stats.tiles == 0


def test_sixteen_bit_transparent_and_empty_images(engine):
    wide = Image.fromarray((np.arange(40 * 60, dtype=np.uint16).reshape(40, 60) * 27).astype(np.uint16))
    clear = Image.new("RGBA", (60, 40), (0, 0, 0, 0))
    white = Image.new("RGB", (60, 40), "white")
    options = ParseOptions(use_mtp=False, max_new_tokens=20)
    assert engine.parse(clear, options).text == engine.parse(white, options).text  # alpha composited on white
    assert engine.parse(wide, options).stats.tiles >= 1
    with pytest.raises(ValueError, match="empty"):
        engine.parse(Image.new("RGB", (0, 10)), options)
