"""Real-page text scores (hpd_tools.metrics: plain_text, word_f1, words_read, score_text)."""

from __future__ import annotations

import pytest

from hpd_core.grammar import Block
from hpd_tools.metrics import aggregate_text, plain_text, score_text, size_bucket, word_f1, words, words_read

BOX = (0, 0, 10, 10)


def test_plain_text_strips_grammar_tags_markdown_and_unscored_labels():
    blocks = [Block("title", BOX, "## **Results**"), Block("formula", BOX, "\\frac{a}{b}"),
              Block("image", BOX, ""), Block("table", BOX, "<table><tr><td>a &amp; b</td><td>2</td></tr></table>"),
              Block("text", BOX, "two\n  lines")]
    assert plain_text(blocks) == "Results a & b 2 two lines"


def test_identical_text_scores_zero_distance_full_f1_and_every_word_read():
    truth = [("Small", 8.0), ("body", 10.0), ("text", 10.0), ("Heading", 14.0)]
    scores = score_text([Block("text", BOX, "Small body text Heading")], truth)
    assert scores.edit_distance == 0 and scores.word_f1 == 1
    assert scores.read_by_size == (("<9", 1, 1), ("9-11.5", 2, 2), ("11.5-14", 0, 0), (">=14", 1, 1))


def test_word_f1_ignores_order_but_edit_distance_and_words_read_do_not():
    truth = [(w, 10.0) for w in "a b c d".split()]
    scores = score_text([Block("text", BOX, "d c b a")], truth)
    assert scores.word_f1 == 1 and scores.edit_distance > 0
    assert sum(r for _, r, _ in scores.read_by_size) == 1  # one word in order


def test_words_read_pairs_each_truth_word_at_most_once_in_order():
    read = words_read(["the", "cat", "the"], ["the", "the", "dog", "the"])
    assert sum(read) == 2 and not read[2]  # two "the" in order; "dog" never
    assert words_read([], ["a"]) == [False]


@pytest.mark.parametrize("pred, truth, f1", [([], [], 1.0), (["a"], [], 0.0), (["a", "a", "b"], ["a", "b", "b"], 2 / 3)])
def test_word_f1_is_multiset_overlap(pred, truth, f1):
    assert word_f1(pred, truth) == pytest.approx(f1)


def test_dot_leaders_are_not_words_so_a_page_of_dots_matches_no_table_of_contents():
    assert words(["Intro", ".......", "3", "-", "(a)", "§", "x."]) == ["Intro", "3", "(a)", "x."]
    truth = [("Contents", 14.0)] + [(".", 10.0)] * 20 + [("Usage", 10.0), ("2", 10.0)]
    scores = score_text([Block("text", BOX, ". " * 40)], truth)
    assert scores.word_f1 == 0 and scores.truth_words == 3
    assert scores.read_by_size == (("<9", 0, 0), ("9-11.5", 0, 2), ("11.5-14", 0, 0), (">=14", 0, 1))


@pytest.mark.parametrize("size, bucket", [(8.99, "<9"), (9.0, "9-11.5"), (11.5, "11.5-14"), (14.0, ">=14"), (40, ">=14")])
def test_size_buckets_are_half_open(size, bucket):
    assert size_bucket(size) == bucket


def test_aggregate_text_micro_averages_over_pages():
    a = score_text([Block("text", BOX, "x")], [("x", 10.0)])
    b = score_text([], [("yyyy", 20.0)])
    out = aggregate_text([a, b])
    assert out["text_edit_distance"] == pytest.approx(4 / 5)  # 0 of 1 and 4 of 4 characters
    assert out["word_f1"] == pytest.approx(2 / 3)
    assert out["read 9-11.5 pt"] == 1.0 and out["read >=14 pt"] == 0.0 and out["read <9 pt"] is None
