import pytest
from hypothesis import given, strategies as st

from hpd_core.grammar import Block
from hpd_tools.metrics import (aggregate, edits_by_kind, evaluate_page, iou, match_blocks, parse_table,
                              teds, text_edit_distance, unread_column)

TABLE = "<table><tr><td>a</td><td>b</td></tr><tr><td>c</td><td>12.5</td></tr></table>"
# Nodes: table, 2 tr, 4 td = 7.
PAGE = [
    Block("title", (80, 40, 920, 90), "Annual report"),   # 13 characters
    Block("text", (80, 100, 920, 200), "Hello world"),    # 11 characters
    Block("image", (80, 210, 500, 400)),
    Block("table", (80, 420, 920, 700), TABLE),           # 78 characters
]
PAGE_CHARS = 13 + 11 + len(TABLE)


def _replace(blocks, i, **changes):
    b = blocks[i]
    fields = {"label": b.label, "bbox": b.bbox, "text": b.text, **changes}
    return blocks[:i] + [Block(**fields)] + blocks[i + 1:]


def test_text_edit_distance_is_edits_over_longer_length():
    assert text_edit_distance("", "") == 0.0
    assert text_edit_distance("abce", "abcd") == 0.25
    assert text_edit_distance("", "abc") == 1.0


def test_identical_page_is_perfect():
    scores = evaluate_page(PAGE, PAGE)
    summary = aggregate([scores])
    assert scores.edit_errors == 0 and scores.edit_length == PAGE_CHARS
    assert summary.edit_distance == 0.0
    assert (summary.precision, summary.recall, summary.f1) == (1.0, 1.0, 1.0)
    assert summary.label_accuracy == 1.0
    assert summary.reading_order == 0.0
    assert summary.teds == 1.0


def test_one_character_edit_costs_one_over_page_length():
    pred = _replace(PAGE, 1, text="Hello word")
    assert evaluate_page(pred, PAGE).edit_distance == 1 / PAGE_CHARS


def test_unmatched_predicted_block_costs_its_length():
    pred = PAGE + [Block("text", (80, 800, 920, 900), "xyz")]
    scores = evaluate_page(pred, PAGE)
    assert (scores.edit_errors, scores.edit_length) == (3, PAGE_CHARS + 3)
    assert (scores.tp, scores.fp, scores.fn) == (4, 1, 0)


def test_image_blocks_count_for_detection_not_text():
    scores = evaluate_page([b for b in PAGE if b.label != "image"], PAGE)
    assert scores.edit_errors == 0
    assert (scores.tp, scores.fn) == (3, 1)


def test_empty_prediction_scores_zero():
    summary = aggregate([evaluate_page([], PAGE)])
    assert summary.edit_distance == 1.0
    assert (summary.precision, summary.recall, summary.f1) == (0.0, 0.0, 0.0)
    assert summary.label_accuracy is None and summary.reading_order is None
    assert summary.teds == 0.0  # a missed table counts as a failed table


def test_table_with_one_wrong_cell_loses_its_cell_distance_over_node_count():
    pred = TABLE.replace("12.5", "12.6")
    assert parse_table(TABLE).size() == 7
    assert teds(pred, TABLE) == pytest.approx(1 - 0.25 / 7)
    assert evaluate_page(_replace(PAGE, 3, text=pred), PAGE).table_scores == (teds(pred, TABLE),)


def test_table_structure_change_costs_one_per_node():
    merged = "<table><tr><td colspan='2'>a b</td></tr><tr><td>c</td><td>12.5</td></tr></table>"
    # Rename td(a) -> td colspan=2 costs 1, deleting td(b) costs 1: TED 2 over 7 nodes.
    assert teds(merged, TABLE) == pytest.approx(1 - 2 / 7)


def test_unclosed_cells_and_rows_parse_like_closed_ones():
    assert teds("<table><tr><td>a<td>b<tr><td>c<td>12.5", TABLE) == 1.0


def test_prediction_without_table_scores_zero():
    assert teds("| a | b |", TABLE) == 0.0
    assert teds("", TABLE) == 0.0


@given(st.lists(st.sampled_from(["<table>", "</table>", "<tr>", "</tr>", "<td>", "</td>",
                                 "<th colspan='x'>", "<tbody>", "<![x[", "<!", "<", "a",
                                 " ", "&amp;", "12"]), max_size=30))
def test_teds_never_raises_on_malformed_prediction(pieces):
    assert 0.0 <= teds("".join(pieces), TABLE) <= 1.0


def test_swapped_reading_order_costs_two_over_matched_count():
    swapped = [PAGE[0], PAGE[2], PAGE[1], PAGE[3]]
    assert evaluate_page(swapped, PAGE).reading_order == 2 / 4
    # Predicted order 2,1,0 of three matched blocks: 2 substitutions over 3.
    assert evaluate_page(PAGE[2::-1], PAGE).reading_order == 2 / 3


def test_reading_order_ignores_unmatched_blocks():
    pred = [PAGE[0], Block("text", (0, 950, 10, 960), "stray"), PAGE[1]]
    assert evaluate_page(pred, PAGE).reading_order == 0.0


@pytest.mark.parametrize("height, matched", [(49, False), (50, True), (51, True)])
def test_match_needs_iou_of_at_least_half(height, matched):
    gt = [Block("text", (0, 0, 100, 100), "x")]
    pred = [Block("text", (0, 0, 100, height), "x")]
    assert iou(pred[0].bbox, gt[0].bbox) == height / 100
    assert (evaluate_page(pred, gt).tp == 1) == matched


def test_matching_is_one_to_one_and_prefers_higher_iou():
    gt = [Block("text", (0, 0, 100, 100))]
    pred = [Block("text", (0, 0, 100, 60)), Block("text", (0, 0, 100, 90))]
    assert match_blocks(pred, gt) == [(1, 0)]
    scores = evaluate_page(pred, gt)
    assert (scores.tp, scores.fp, scores.fn) == (1, 1, 0)


def test_label_mismatch_counts_against_label_accuracy_not_detection():
    pred = _replace(PAGE, 0, label="text")
    summary = aggregate([evaluate_page(pred, PAGE)])
    assert summary.f1 == 1.0
    assert summary.label_accuracy == 3 / 4


def test_aggregate_weights_pages_by_length():
    short = [Block("text", (0, 0, 100, 100), "ab")]
    long = [Block("text", (0, 0, 100, 100), "abcdefgh")]
    pages = [evaluate_page([Block("text", (0, 0, 100, 100), "xb")], short),
             evaluate_page(long, long)]
    summary = aggregate(pages)
    assert summary.edit_distance == 1 / 10  # not the page mean 0.25
    assert summary.as_dict()["pages"] == 2


def test_edits_are_split_by_true_label_and_into_missed_and_extra_blocks():
    pred = _replace(PAGE, 1, text="Hello word", label="title")[:3]  # one edit; the table missed
    pred.append(Block("text", (80, 800, 920, 900), "xyz"))        # and an extra block
    pages = [evaluate_page(pred, PAGE), evaluate_page(PAGE, PAGE)]
    by_kind = edits_by_kind(pages)
    errors = 1 + len(TABLE) + 3
    assert list(by_kind)[:3] == ["missed", "extra", "text"]  # by share, descending
    assert set(by_kind) == {"missed", "extra", "text", "title", "table", "image"}
    assert by_kind["missed"] == {"blocks": 1, "edit_distance": 1.0, "share_of_edits": len(TABLE) / errors}
    assert by_kind["extra"]["share_of_edits"] == 3 / errors
    assert by_kind["text"] == {"blocks": 2, "edit_distance": 1 / 22, "share_of_edits": 1 / errors}  # by true label
    assert by_kind["table"] == {"blocks": 1, "edit_distance": 0.0, "share_of_edits": 0.0}
    assert sum(row["share_of_edits"] for row in by_kind.values()) == pytest.approx(1.0)
    assert sum(p.edit_errors for p in pages) == errors


# A paper page: a full-width title, then three paragraphs in each column.
TWO_COLUMNS = [Block("title", (80, 40, 920, 90), "Title")] + [
    Block("text", (x, y, x + 400, y + 250), "words") for x in (60, 540) for y in (120, 400, 680)]


def test_a_two_column_page_read_whole_leaves_no_column_unread():
    assert unread_column(TWO_COLUMNS, TWO_COLUMNS) is False
    # one predicted box over a whole column reaches each of its paragraphs
    merged = [TWO_COLUMNS[0], Block("text", (60, 120, 460, 930)), Block("text", (540, 120, 940, 930))]
    assert unread_column(merged, TWO_COLUMNS) is False


@pytest.mark.parametrize("kept", ["left", "right"])
def test_a_column_the_layout_branch_skipped_is_unread(kept):
    x = 60 if kept == "left" else 540
    one_side = [b for b in TWO_COLUMNS if b.bbox[0] in (80, x)]
    assert unread_column(one_side, TWO_COLUMNS) is True
    # reaching one of the skipped side's three paragraphs (a third: over the quarter) reads the column
    other = next(b for b in TWO_COLUMNS if b.bbox[0] not in (80, x))
    assert unread_column(one_side + [other], TWO_COLUMNS) is False


def test_a_page_without_two_columns_has_no_column_to_leave_unread():
    assert unread_column([], PAGE) is None
    assert unread_column([], TWO_COLUMNS[:4] + TWO_COLUMNS[5:]) is None  # two paragraphs on the right: no column
