"""Bad model output: loops and runaway pages are bounded, extra forks wait their turn, a child's
<FORK> stays text, malformed headers and boxes never break the result, the JSON or the UI.

The tiny forking checkpoint (tests/tiny.py) is such a model: its layout branch cycles
`<BLOCK>#<FORK>` forever (period 3, no label, no box).
"""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest
import torch
from PIL import Image

from app.boxes import page_html
from hpd_core import load_engine
from hpd_core.events import BranchForked, PageFinished
from hpd_core.grammar import GRID, Block, parse_blocks
from hpd_core.markdown import to_markdown
from hpd_core.options import ParseOptions
from hpd_core.result import ParseResult, Stats
from tests.boxes import boxes_of
from tests.tiny import byte_id, byte_tokenizer

PAGE = Image.new("RGB", (60, 80), "white")
STOPPED = {"stop", "length", "loop", "page_budget"}  # every reason but "cancelled"


def reasons(result: ParseResult) -> list[str]:
    return [b.finish_reason for b in result.branches]


def test_the_loop_detector_stops_a_layout_branch_that_repeats_forever(app_engine):
    result = app_engine.parse(PAGE, ParseOptions(max_new_tokens=100_000))  # loop_window 240 by default
    parent = result.branches[0]
    assert parent.finish_reason == "loop" and result.to_dict()["branches"][0]["finish_reason"] == "loop"
    assert 240 <= len(parent.token_ids) < 240 + 7  # stopped within the step that completed the window
    assert set(reasons(result)[1:]) <= STOPPED
    assert json.loads(json.dumps(result.to_dict()))["branches"][0]["finish_reason"] == "loop"


def test_without_the_loop_detector_max_new_tokens_bounds_the_branch(app_engine):
    result = app_engine.parse(PAGE, ParseOptions(max_new_tokens=120, loop_window=0))
    assert reasons(result)[0] == "length" and len(result.branches[0].token_ids) == 120
    assert all(len(b.token_ids) <= 120 for b in result.branches)


@pytest.mark.parametrize("batch_children", [False, True])
def test_max_page_tokens_bounds_a_page_of_looping_branches(app_engine, batch_children):
    options = ParseOptions(max_new_tokens=100_000, loop_window=0, max_page_tokens=150, batch_children=batch_children)
    result = app_engine.parse(PAGE, options)
    assert "page_budget" in reasons(result) and set(reasons(result)) <= STOPPED
    # the budget is checked after each step: branches in flight add at most one step (k + 1 tokens) each
    late = sum(1 for b in result.branches if b.finish_reason == "page_budget" or len(b.token_ids) <= 7)
    assert 150 <= result.stats.generated_tokens <= 150 + 7 * late


def test_a_loop_shorter_than_an_eighth_of_the_window_is_what_the_detector_sees():
    from hpd_core.branch import is_looping
    cycle = [6, 35, 7] * 100  # <BLOCK> # <FORK>, period 3
    assert is_looping(cycle, 240) and is_looping(cycle, 24)
    assert not is_looping(cycle, 16)  # n <= 16 // 8 = 2 < 3: use loop_window >= 24 for period-3 loops
    assert not is_looping(list(range(300)), 240)


@settings(max_examples=400, deadline=None)
@given(st.lists(st.integers(0, 3), min_size=0, max_size=80), st.integers(8, 64))
def test_loop_detector_equals_its_definition(tokens, window):
    """The fast detector against the definition: the last `window` tokens are periodic with some
    period n <= window // 8 (few-symbol alphabets make loops and near-loops common)."""
    from hpd_core.branch import is_looping
    tail = tokens[-window:]
    expected = len(tokens) >= window and any(tail[n:] == tail[:-n] for n in range(1, window // 8 + 1))
    assert is_looping(tokens, window) == expected


@pytest.mark.parametrize("active", [1, 3])
def test_more_forks_than_max_active_branches_are_all_decoded_with_identical_results(app_engine, active):
    wide = app_engine.parse(PAGE, ParseOptions(max_new_tokens=60, batch_children=True, max_active_branches=64))
    narrow = app_engine.parse(PAGE, ParseOptions(max_new_tokens=60, batch_children=True, max_active_branches=active))
    assert wide.stats.forked_branches == 20 > active
    assert narrow.stats.peak_active_branches == active
    assert narrow.text == wide.text
    assert [(b.token_ids, b.finish_reason) for b in narrow.branches] == [
        (b.token_ids, b.finish_reason) for b in wide.branches]
    assert set(reasons(narrow)) <= STOPPED


@pytest.fixture(scope="module")
def forking_children(app_checkpoint):
    """The tiny checkpoint with every content letter followed by <FORK>: children write `n<FORK><BLOCK>#...`."""
    engine = load_engine(app_checkpoint)
    lm, tok = engine.model.lm, byte_tokenizer()
    with torch.no_grad():
        for letter in "abcdefghijklmnopqrst":
            lm.lm_head.weight[engine.special.fork] += 2 * lm.model.embed_tokens.weight[byte_id(tok, letter)] \
                / lm.config.hidden_size ** 0.5
    return engine


@pytest.mark.parametrize("batch_children", [False, True])
def test_a_childs_fork_stays_text_and_forks_nothing(forking_children, batch_children):
    engine = forking_children
    options = ParseOptions(max_new_tokens=400, batch_children=batch_children, loop_window=24)
    events = list(engine.stream(PAGE, options))
    result = events[-1].result
    parent, children = result.branches[0], result.branches[1:]
    fork = engine.special.fork
    assert all(b.token_ids.count(fork) >= 5 for b in children) and children  # children wrote <FORK>s ...
    assert result.stats.forked_branches == len(children) == parent.token_ids.count(fork)  # ... none forked
    assert [e.branch for e in events if isinstance(e, BranchForked)] == list(range(1, len(children) + 1))
    assert all("<FORK>" in b.text for b in children)
    assert {b.finish_reason for b in children} == {"loop"}  # each child loops `<BLOCK>#<FORK>` and is stopped


def test_headers_without_label_or_box_give_blocks_the_json_and_the_page_can_show(app_engine):
    result = app_engine.parse(PAGE, ParseOptions(max_new_tokens=30))
    assert result.blocks and all(b.bbox is None for b in result.blocks)
    data = json.loads(json.dumps(result.to_dict()))
    assert all(b["bbox"] is None and b["bbox_1000"] is None for b in data["blocks"])
    assert boxes_of(page_html(PAGE, result.blocks)) == []  # nothing to draw


MALFORMED = (
    "stray text first<BLOCK>text [1,2,3]<CHILD>three numbers<BLOCK>text [a,b,c,d]<CHILD>letters"
    "<BLOCK>title [900,950,100,50]<CHILD>reversed<BLOCK>text [-5,0,2000,1e999]<CHILD>infinite"
    "<BLOCK>table [nan,0,1,1]<CHILD><table><tr><td>x<BLOCK>image [5,5,5,5]<BLOCK>[10,10,20,20]<CHILD>no label"
    "<BLOCK>text [1,2,3,4,5]<CHILD>five<BLOCK>formula [0,0,1000<CHILD>\\[x^2\\]<BLOCK>text [0,0,10")


def test_malformed_boxes_give_no_box_or_a_clamped_ordered_one_and_everything_downstream_works():
    blocks = parse_blocks(MALFORMED)
    assert [(b.label, b.bbox) for b in blocks] == [
        ("text", None), ("text", None), ("text", None), ("title", (100, 50, 900, 950)), ("text", None),
        ("table", None), ("image", (5, 5, 5, 5)), ("text", (10, 10, 20, 20)), ("text", None), ("formula", None),
        ("text", None)]
    assert [b.text for b in blocks[:4]] == ["stray text first", "three numbers", "letters", "reversed"]
    result = ParseResult(MALFORMED, blocks, to_markdown(blocks), Stats(), (300, 400))
    data = json.loads(json.dumps(result.to_dict()))
    assert data["blocks"][3]["bbox"] == [30, 20, 270, 380]
    shown = boxes_of(page_html(Image.new("RGB", (300, 400), "white"), blocks))
    assert [n for n, *_ in shown] == [4, 7, 8]  # the readable boxes are drawn, the others skipped
    assert "reversed" in result.markdown and "no label" in result.markdown


def test_every_box_on_the_page_stays_inside_it():
    blocks = [Block("text", box) for box in ((0, 0, GRID, GRID), (0, 0, 0, 0), (999, 999, GRID, GRID))]
    for width, height in ((1, 1), (7, 3), (4000, 3)):
        for block in blocks:
            x1, y1, x2, y2 = block.page_bbox(width, height)
            assert 0 <= x1 <= x2 <= width and 0 <= y1 <= y2 <= height
        for _, _, _, left, top, w, h in boxes_of(page_html(Image.new("RGB", (width, height)), blocks)):
            assert 0 <= left <= left + w <= 100 and 0 <= top <= top + h <= 100


def test_the_stream_ends_with_the_page_for_every_kind_of_stop(app_engine):
    for options in (ParseOptions(max_new_tokens=100_000), ParseOptions(max_page_tokens=40, loop_window=0),
                    ParseOptions(max_new_tokens=5)):
        events = list(app_engine.stream(PAGE, options))
        assert isinstance(events[-1], PageFinished) and not events[-1].result.cancelled


def scripted_branch(engine, budget: int = 100_000, can_fork: bool = False):
    """A content branch (or with `can_fork` a layout branch) fed a script of tokens instead of a
    model's (Branch.accept is the guard)."""
    from hpd_core.branch import Branch
    return Branch(page=0, id=1 - can_fork, row=0, pending=0, hidden=torch.zeros(1), budget=budget,
                  can_fork=can_fork, stream=engine.tokenizer.stream())


def feed(branch, engine, text: str, window: int) -> int:
    """Feed `text` token by token until the branch stops; the number of characters fed."""
    fed = 0
    for token in engine.tokenizer.encode(text):
        branch.accept([token], [False], engine.special.stop, window, engine.special.fork)
        fed += len(branch.stream.tok.decode([token]))
        if branch.finished:
            break
    return fed


@pytest.mark.parametrize("script", ["1 2 3 4 5 6 7 8 9 10 11 12 ", "0.000123, 45.3; (17) 2023/11/30 99% -7 "])
def test_a_long_run_of_numbers_that_never_repeats_stops_the_branch(app_engine, script):
    from hpd_core.branch import NUMBER_RUN, is_looping
    counting = "".join(f"{n} " for n in range(1, 2000)) if script.startswith("1 2") else script * 200
    branch = scripted_branch(app_engine)
    fed = feed(branch, app_engine, counting, 64)
    assert branch.finish_reason == "loop" and fed <= NUMBER_RUN * 64 + 8
    assert not is_looping(branch.tokens, 64)  # what stopped it is the number run, not a repeated n-gram


def headers(*boxes: str) -> str:
    return "".join(f"<BLOCK>text [{box}]<FORK>" for box in boxes)


def test_a_layout_branch_that_writes_blocks_over_earlier_boxes_in_a_row_is_stopped(app_engine):
    """A real slide page's runaway: after its blocks the layout branch writes the last box again and
    again with a unit or two of jitter (no repeated n-gram). The third such block in a row ends it."""
    from hpd_core.branch import BOX_REPEATS, is_looping
    page = headers("100,100,900,200", "100,220,900,300", "100,320,900,400")
    again = headers(*(f"100,{320 + d},900,{400 + d}" for d in (1, 0, 2, 1, 0, 1, 2, 0, 1, 2)))
    branch = scripted_branch(app_engine, can_fork=True)
    feed(branch, app_engine, page + again, 240)
    assert branch.finish_reason == "loop" and len(branch.headers) == 3 + BOX_REPEATS
    assert not is_looping(branch.tokens, 240)  # what stopped it is the boxes, not a repeated n-gram
    off = scripted_branch(app_engine, can_fork=True)
    feed(off, app_engine, page + again, 0)
    assert not off.finished and len(off.headers) == 13  # loop_window 0 turns the guards off


def test_blocks_that_touch_or_repeat_a_box_now_and_then_go_on(app_engine):
    """Neighbouring blocks (IoU well under 0.9), a child's <FORK> (not a layout branch), and
    repeats that a new box interrupts before the third in a row never stop a branch."""
    column = headers(*(f"100,{100 + 30 * i},900,{128 + 30 * i}" for i in range(20)))
    nested = headers("100,100,900,400", "100,100,900,380", "120,120,880,370")  # IoU 0.93, then 0.79 and 0.85
    interrupted = headers("100,100,900,200", "100,300,900,400", "100,101,900,201", "100,301,900,401",
                          "100,500,900,600", "100,100,900,200", "100,300,900,400", "100,700,900,800")
    for script in (column, nested, interrupted):
        branch = scripted_branch(app_engine, can_fork=True)
        feed(branch, app_engine, script, 240)
        assert not branch.finished, script
    child = scripted_branch(app_engine)
    feed(child, app_engine, headers(*["100,100,900,200"] * 6), 240)
    assert not child.finished and child.headers == {}


def test_numbers_between_words_or_table_tags_are_no_runaway(app_engine):
    table = "".join(f"<tr><td>{n}</td><td>{n * 3.25:.2f}</td></tr>" for n in range(200))
    prose = "".join(f"In {1900 + n} the rate was {n * 0.37:.3f} per cent; " for n in range(200))
    for text in (table, prose):
        branch = scripted_branch(app_engine)
        feed(branch, app_engine, text, 64)
        assert not branch.finished and branch.number_run < 64


def test_a_scripted_model_that_writes_a_digit_cycle_is_stopped_early(app_checkpoint):
    """The engine itself: a tiny model made to write `0123456789 ` forever (period 11, longer than
    the n-gram detector's 64 // 8 = 8) is stopped by the number-run guard, long before its budget."""
    from hpd_core.branch import NUMBER_RUN
    engine = load_engine(app_checkpoint)
    lm, tok = engine.model.lm, byte_tokenizer()
    cycle = [byte_id(tok, ch) for ch in "0123456789 "]
    h = lm.config.hidden_size
    with torch.no_grad():
        basis = torch.linalg.qr(torch.randn(h, h, generator=torch.Generator().manual_seed(0)))[0].T * h ** 0.5
        lm.model.embed_tokens.weight[cycle] = basis[:len(cycle)]
        for p in lm.model.layers.parameters():
            p.zero_()  # the residual stream carries the input embedding to the head
        head = torch.zeros_like(lm.lm_head.weight)
        head[cycle[0]] = 0.5 * lm.model.embed_tokens.weight.mean(0)  # from the prompt into the cycle
        for a, b in zip(cycle, cycle[1:] + cycle[:1]):
            head[b] += 8 * lm.model.embed_tokens.weight[a] / h ** 0.5
        lm.lm_head.weight.copy_(head)
    result = engine.parse(PAGE, ParseOptions(prompt="plain", use_mtp=False, max_new_tokens=20_000, loop_window=64))
    [branch] = result.branches
    assert branch.finish_reason == "loop" and set(branch.text) <= set("0123456789 ")
    assert len(branch.token_ids) <= NUMBER_RUN * 64 + 16
