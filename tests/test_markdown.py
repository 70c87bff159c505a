"""Blocks -> Markdown: the expected output of every label, and robustness."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hpd_core.grammar import BLOCK, CHILD, Block, parse_blocks
from hpd_core.markdown import RENDERERS, render_block, to_markdown

BOX = (0, 0, 10, 10)


def md(label: str, text: str = "") -> str:
    return to_markdown([Block(label, BOX, text)])


@pytest.mark.parametrize("text, expected", [
    ("Annual report", "## Annual report"),
    ("Annual\nreport  2024", "## Annual report 2024"),
    ("# Already marked", "## Already marked"),
    ("#1 Priority", "## #1 Priority")])
def test_title_is_a_level_two_heading_on_one_line(text, expected):
    assert md("title", text) == expected


def test_text_is_a_paragraph_as_written():
    assert md("text", "  First line\nsecond line.  ") == "First line\nsecond line."


@pytest.mark.parametrize("text, expected", [
    ("- apples\n* pears\n• plums\n+ figs", "- apples\n- pears\n- plums\n- figs"),
    ("1. one\n2) two\n10. ten", "1. one\n2. two\n10. ten"),
    ("•tight bullet\n· middle dot", "- tight bullet\n- middle dot"),
    ("no marker\n\n  - indented", "- no marker\n- indented"),
    ("-5 degrees\n1.5 kg\n*bold*", "- -5 degrees\n- 1.5 kg\n- *bold*"),
    ("- \n- real", "- real")])
def test_list_lines_become_normalised_markdown_items(text, expected):
    assert md("list", text) == expected


def test_table_html_is_kept_as_is():
    html = "<table><tr><td>a</td><td>b</td></tr>\n<tr><td>1</td><td>2</td></tr></table>"
    assert md("table", html) == html


@pytest.mark.parametrize("text", [
    "E = mc^2", "$$E = mc^2$$", "\\[ E = mc^2 \\]", "$E = mc^2$", "\\(E = mc^2\\)",
    "$$\nE = mc^2\n$$"])
def test_formula_is_display_math_with_model_delimiters_removed(text):
    assert md("formula", text) == "$$\nE = mc^2\n$$"


def test_formula_keeps_inner_dollars_and_drops_empty_bodies():
    assert md("formula", "a = \\$5") == "$$\na = \\$5\n$$"
    assert md("formula", "$$ $$") == ""
    assert md("formula", "\\[\\]") == ""


@pytest.mark.parametrize("label", ["image", "chart"])
def test_image_and_chart_are_visible_placeholders(label):
    assert md(label) == f"*[{label}]*"
    assert md(label, "ignored text") == f"*[{label}]*"


def test_image_caption_is_one_italic_line():
    assert md("image_caption", "Figure 1:\nsales *by* region") == (
        "*Figure 1: sales \\*by\\* region*")


@pytest.mark.parametrize("label", ["header", "footer", "page_number", "seal"])
def test_page_furniture_and_seals_are_dropped(label):
    assert md(label, "Confidential - page 3") == ""


def test_unknown_labels_render_as_paragraphs():
    assert md("algorithm", "step 1\nstep 2") == "step 1\nstep 2"
    assert "algorithm" not in RENDERERS


def test_a_page_renders_blocks_in_order_separated_by_blank_lines():
    page = ("<BLOCK>header [0,0,1000,30]<CHILD>ACME Corp"
            "<BLOCK>title [80,40,920,90]<CHILD>Results"
            "<BLOCK>text [80,100,920,200]<CHILD>Revenue grew."
            "<BLOCK>text [80,210,920,220]<CHILD>   "
            "<BLOCK>image [80,230,500,400]"
            "<BLOCK>image_caption [80,410,500,430]<CHILD>Figure 1"
            "<BLOCK>formula [80,440,920,480]<CHILD>\\[x^2\\]"
            "<BLOCK>list [80,490,920,560]<CHILD>• a\n• b"
            "<BLOCK>page_number [480,970,520,990]<CHILD>7")
    assert to_markdown(parse_blocks(page)) == (
        "## Results\n\nRevenue grew.\n\n*[image]*\n\n*Figure 1*\n\n$$\nx^2\n$$\n\n- a\n- b")


def test_no_blocks_give_empty_markdown():
    assert to_markdown([]) == ""
    assert to_markdown([Block("text", None, ""), Block("footer", None, "x")]) == ""


fragments = st.one_of(
    st.sampled_from([BLOCK, CHILD, "title [1,2,3,4]", "list []", "formula [", "table ",
                     "image_caption ", "page_number ", "- ", "1. ", "•", "$$", "$", "\\[",
                     "\\]", "#", "*", "\n", " "]),
    st.text(max_size=10))


@settings(max_examples=1000, deadline=None)
@given(st.lists(fragments, max_size=25).map("".join))
def test_markdown_of_any_parsed_text_is_its_blocks_joined_by_blank_lines(text):
    blocks = parse_blocks(text)
    markdown = to_markdown(blocks)
    assert markdown == markdown.strip()
    assert markdown == "\n\n".join(filter(None, map(render_block, blocks)))
