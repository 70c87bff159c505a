"""The HPD output grammar: parse never raises, format -> parse round-trips, edge cases."""

from __future__ import annotations

import os

from hypothesis import example, given, settings
from hypothesis import strategies as st

from hpd_core.grammar import (
    BLOCK, CHILD, FORK, GRID, NO_CONTENT_LABELS, Block, format_assembled, format_children,
    format_parent, has_content, parse_blocks)

LABELS = ["text", "title", "list", "table", "formula", "image", "chart", "image_caption",
          "header", "footer", "page_number", "seal"]
PROPERTY = settings(max_examples=int(os.environ.get("HPD_FUZZ_EXAMPLES", 2000)), deadline=None)

# --- strategies -----------------------------------------------------------------------

numbers = st.one_of(
    st.integers(-10**6, 10**6).map(str),
    st.integers(min_value=10**18).map(str),  # huge
    st.floats(allow_nan=True, allow_infinity=True).map(repr),  # nan, inf, 1e+300, -0.0
    st.sampled_from(["", " ", "1e999", "-1e999", "0x10", "1_000", "--1", "+5", "1.5.2"]))
brackets = st.lists(numbers, min_size=3, max_size=5).map(lambda xs: "[" + ",".join(xs) + "]")
fragments = st.one_of(
    st.sampled_from([BLOCK, FORK, CHILD, "<BLOCK", "BLOCK>", "<CHILD", "<FORK", "<", ">",
                     "[", "]", ",", " ", "\n", "<table><tr><td>", "$$"]),
    st.sampled_from(LABELS), brackets, numbers, st.text(max_size=12))
grammar_soup = st.lists(fragments, max_size=30).map("".join)


def free_of_markers(text: str) -> bool:
    return not any(marker in text for marker in (BLOCK, FORK, CHILD))


contents = st.text(max_size=40).map(str.strip).filter(free_of_markers)
grid = st.integers(0, GRID)
bboxes = st.one_of(st.none(), st.tuples(grid, grid, grid, grid).map(
    lambda v: (min(v[0], v[2]), min(v[1], v[3]), max(v[0], v[2]), max(v[1], v[3]))))


@st.composite
def well_formed_blocks(draw) -> Block:
    label = draw(st.sampled_from(LABELS))
    return Block(label, draw(bboxes), draw(contents) if has_content(label) else "")


# --- properties -----------------------------------------------------------------------

@PROPERTY
@given(st.one_of(st.text(), grammar_soup))
@example("<BLOCK<FORK>>")  # removing a marker forms another (found by CI on a fresh machine)
@example("a<FO<CHILD>RK>b")
def test_parse_blocks_never_raises_and_returns_clean_blocks(text):
    for block in parse_blocks(text):
        assert block.label and not any(m in block.text for m in (BLOCK, FORK, CHILD))
        assert block.text == block.text.strip()
        if block.bbox is not None:
            x1, y1, x2, y2 = block.bbox
            assert 0 <= x1 <= x2 <= GRID and 0 <= y1 <= y2 <= GRID
            assert all(type(v) is int for v in block.bbox)


@PROPERTY
@given(st.lists(well_formed_blocks(), max_size=8))
def test_format_assembled_then_parse_round_trips(blocks):
    assert parse_blocks(format_assembled(blocks)) == blocks


@PROPERTY
@given(st.lists(well_formed_blocks(), max_size=8))
def test_parent_with_children_spliced_in_is_the_assembled_text(blocks):
    parent, children = format_parent(blocks), format_children(blocks)
    assert parent.count(FORK) == len(children)
    pieces = parent.split(FORK)
    spliced = pieces[0] + "".join(CHILD + c + p for c, p in zip(children, pieces[1:]))
    assert spliced == format_assembled(blocks)


@PROPERTY
@given(bboxes, st.integers(1, 20_000), st.integers(1, 20_000))
def test_page_bbox_maps_the_grid_to_pixels_within_the_page(bbox, width, height):
    box = Block("text", bbox).page_bbox(width, height)
    if bbox is None:
        assert box is None
        return
    x1, y1, x2, y2 = box
    assert 0 <= x1 <= x2 <= width and 0 <= y1 <= y2 <= height
    assert abs(x1 - bbox[0] * width / GRID) <= 0.5 and abs(y2 - bbox[3] * height / GRID) <= 0.5


def test_page_bbox_examples():
    assert Block("text", (0, 0, 1000, 1000)).page_bbox(800, 600) == (0, 0, 800, 600)
    assert Block("text", (250, 500, 750, 1000)).page_bbox(800, 600) == (200, 300, 600, 600)


# --- edge cases -----------------------------------------------------------------------

def test_empty_input_has_no_blocks():
    assert parse_blocks("") == []
    assert parse_blocks("  \n ") == []


def test_header_without_bbox_keeps_label_and_content():
    assert parse_blocks("<BLOCK>title<CHILD>Annual report") == [
        Block("title", None, "Annual report")]
    assert parse_blocks("<BLOCK>title []<CHILD>x") == [Block("title", None, "x")]


def test_bbox_with_three_or_five_numbers_is_dropped_but_content_kept():
    assert parse_blocks("<BLOCK>text [1,2,3]<CHILD>a<BLOCK>text [1,2,3,4,5]<CHILD>b") == [
        Block("text", None, "a"), Block("text", None, "b")]


def test_out_of_grid_numbers_are_clamped_rounded_and_ordered():
    assert parse_blocks("<BLOCK>text [-5, 10.6, 2000, 3]<CHILD>x") == [
        Block("text", (0, 3, 1000, 11), "x")]


def test_non_finite_numbers_give_no_bbox():
    for raw in ("inf,0,1,1", "1e999,0,1,1", "nan,0,1,1", "-inf,0,1,1"):
        assert parse_blocks(f"<BLOCK>text [{raw}]<CHILD>x") == [Block("text", None, "x")]


def test_text_before_the_first_block_becomes_a_text_block_without_box():
    assert parse_blocks("preamble <BLOCK>title [1,2,3,4]<CHILD>T") == [
        Block("text", None, "preamble"), Block("title", (1, 2, 3, 4), "T")]


def test_stray_fork_and_child_markers_in_content_are_dropped():
    assert parse_blocks("<BLOCK>text [1,2,3,4]<CHILD>a<FORK>b<CHILD>c") == [
        Block("text", (1, 2, 3, 4), "abc")]


def test_missing_child_marker_still_gives_the_content():
    assert parse_blocks("<BLOCK>text [1,2,3,4] Hello") == [Block("text", (1, 2, 3, 4), "Hello")]


def test_image_block_without_content_followed_by_a_text_block():
    text = "<BLOCK>image [10,20,300,400]<BLOCK>image_caption [10,410,300,440]<CHILD>Fig. 1"
    assert parse_blocks(text) == [Block("image", (10, 20, 300, 400), ""),
                                  Block("image_caption", (10, 410, 300, 440), "Fig. 1")]
    assert format_assembled(parse_blocks(text)) == text


def test_unclosed_bbox_is_dropped_without_losing_content_or_following_blocks():
    blocks = parse_blocks("<BLOCK>text [1,2<CHILD>a<BLOCK>title [5,6,7,8]<CHILD>b")
    assert blocks == [Block("text", None, "a"), Block("title", (5, 6, 7, 8), "b")]


def test_output_cut_off_inside_a_header_gives_an_empty_block():
    assert parse_blocks("<BLOCK>title [1,2,3,4]<CHILD>T<BLOCK>text [10,2") == [
        Block("title", (1, 2, 3, 4), "T"), Block("text", None, "")]


def test_an_unclosed_tag_stays_in_the_content():
    assert parse_blocks("<BLOCK>text [1,2,3,4]<CHILD>b<BLOCK") == [
        Block("text", (1, 2, 3, 4), "b<BLOCK")]


def test_header_with_missing_label_defaults_to_text():
    assert parse_blocks("<BLOCK>[1,2,3,4]<CHILD>x") == [Block("text", (1, 2, 3, 4), "x")]


def test_no_content_labels_have_no_fork():
    blocks = [Block(label, (0, 0, 1, 1), "") for label in sorted(NO_CONTENT_LABELS)]
    assert FORK not in format_parent(blocks) and CHILD not in format_assembled(blocks)
