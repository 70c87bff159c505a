"""Pure rendering functions of the app: boxes, HTML panels, SVG charts, file names."""

import base64
import io
import re
import xml.etree.ElementTree as ET

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from PIL import Image

from app.boxes import MAX_SIDE, image_uri, page_html
from app.comparison import MODES, Comparison
from app.downloads import safe_stem
from app.examples import examples
from app.latex import katex_markdown
from app.selection import block_of_branch, marked_markdown
from app.palette import colour
from app.render import BUNDLED_NOTES, branches_html, comparison_html, diff_html, info_markdown, stats_html, tree_html
from app.state import BranchView, Summary
from app.timeline import sparkline_svg, timeline_svg
from hpd_core.engine import EngineInfo
from hpd_core.grammar import Block
from hpd_core.loader import BUNDLED
from hpd_core.markdown import to_markdown
from hpd_core.result import ParseResult, Stats
from tests.boxes import boxes_of
from hpd_training.synth import SynthConfig, render_page


@pytest.fixture(scope="module")
def synth_page():
    return render_page(5, SynthConfig.dense())


def test_boxes_sit_on_the_page_in_percent_in_label_colours_numbered_in_reading_order(synth_page):
    image, blocks = synth_page.image, synth_page.blocks
    shown = boxes_of(page_html(image, blocks))
    assert len(blocks) >= 10 and len(shown) == len(blocks)
    for (number, tag, c, left, top, width, height), (i, block) in zip(shown, enumerate(blocks, start=1)):
        x1, y1, x2, y2 = block.bbox
        assert (number, tag, c) == (i, i, colour(block.label))
        assert (left, top, width, height) == pytest.approx((x1 / 10, y1 / 10, (x2 - x1) / 10, (y2 - y1) / 10), abs=0.01)


def test_blocks_without_boxes_keep_their_number_and_show_nothing():
    html = page_html(Image.new("RGB", (120, 160)), [Block("text", None, "a"), Block("title", (0, 0, 500, 500), "b")])
    assert [(number, tag) for number, tag, *_ in boxes_of(html)] == [(2, 2)]
    assert "hpd-box" not in page_html(Image.new("RGB", (120, 160)), [Block("#", None, "nkpcft")])


def test_the_page_is_sent_as_one_jpeg_of_at_most_max_side_pixels():
    big = Image.new("RGB", (MAX_SIDE * 2, MAX_SIDE), "red")
    uri = image_uri(big)
    assert uri.startswith("data:image/jpeg;base64,")
    assert Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))).size == (MAX_SIDE, MAX_SIDE // 2)
    assert page_html(None, [Block("text", (0, 0, 9, 9))], uri).count(uri) == 1


def test_box_labels_are_escaped():
    assert "<script>" not in page_html(Image.new("RGB", (10, 10)), [Block("<script>", (0, 0, 9, 9))])


def test_model_text_is_escaped_and_accepted_drafts_are_marked():
    branch = BranchView(1, label="text", bbox=(1, 2, 3, 4))
    branch.add_piece("<script>alert(1)</script>", False)
    branch.add_piece("ab", True)
    branch.add_piece("c", True)   # same flag: merged into one run
    html = branches_html(_view({1: branch}))
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert '<mark class="hpd-draft">abc</mark>' in html


def test_protocol_markers_are_shown_as_tags():
    parent = BranchView(0)
    parent.add_piece("<BLOCK>title [1,2,3,4]<FORK>", False)
    html = branches_html(_view({0: parent}))
    assert '<span class="hpd-tag">&lt;FORK&gt;</span>' in html
    assert '<span class="hpd-tag">&lt;BLOCK&gt;</span>' in html


def test_tree_shows_each_branch_with_label_box_and_state():
    parent = BranchView(0, steps=[(1, 3, 2), (2, 3, 2)], tokens=6)
    done = BranchView(1, label="table", bbox=(10, 20, 30, 40), finished=1.0, reason="stop", tokens=5,
                      steps=[(2, 5, 4)])
    waiting = BranchView(2, label="text", bbox=(1, 2, 3, 4))
    html = tree_html(_view({0: parent, 1: done, 2: waiting}, round=2))
    assert 'data-branch="0" data-state="decoding"' in html
    assert 'data-branch="1" data-state="done"' in html and "[10,20,30,40]" in html
    assert 'data-branch="2" data-state="waiting"' in html
    assert "1 layout branch → 2 children" in html


def test_timeline_has_one_row_per_branch_and_marks_drafts():
    branches = [BranchView(0, steps=[(r, 3, 2) for r in range(1, 11)]),
                BranchView(1, label="text", steps=[(r, 1, 0) for r in range(3, 6)]),
                BranchView(2, label="title", steps=[(9, 1, 0), (20, 1, 0)])]  # a gap: two bars
    svg = ET.fromstring(timeline_svg(branches, rounds=20, draft_tokens=6))
    ns = "{http://www.w3.org/2000/svg}"
    bars = [r for r in svg.iter(ns + "rect") if r.get("fill") != "#f8fafc"]
    assert len(bars) == 1 + 1 + 2
    assert {r.get("fill") for r in bars} == {colour("layout"), colour("text"), colour("title")}
    ticks = [p for p in svg.iter(ns + "path")]
    assert len(ticks) == 1 and ticks[0].get("d").count("M") == 10  # only branch 0 had accepted drafts
    assert not list(ET.fromstring(timeline_svg(branches, rounds=20, draft_tokens=0)).iter(ns + "path"))


def test_timeline_and_sparkline_are_valid_svg_when_empty_or_large():
    for svg in (timeline_svg([], 0, 6), sparkline_svg([]), sparkline_svg([(0.0, 0.0), (1.0, 50.0), (2.0, 10.0)]),
                timeline_svg([BranchView(i, steps=[(r, 1, 1) for r in range(i, 5000, 11)]) for i in range(120)],
                             5000, 6)):
        ET.fromstring(svg)


def test_stats_show_live_rate_while_decoding_and_page_rate_when_finished():
    live = Summary(elapsed=2.0, tokens=100, rate_now=80.0, rate_avg=50.0, rounds=10, forwards=12, branches=5,
                   live=3, peak_active=4, shared_prefix_tokens=900, drafted=60, accepted=30,
                   mean_accepted_length=4.0, finished=False, cancelled=False, wall_seconds=None)
    assert "tokens/s now" in stats_html(live) and ">80<" in stats_html(live)
    done = Summary(**{**live.__dict__, "finished": True, "wall_seconds": 2.5})
    assert "tokens/s (page)" in stats_html(done) and "2.50 s" in stats_html(done)


@pytest.mark.parametrize("name, pages, stem", [
    ("report.pdf", [1], "report-p1"),
    ("../../etc/passwd", [2], "passwd-p2"),
    ("..\\..\\win\\evil name.png", [3], "evil_name-p3"),
    ("/tmp/gradio/abc/Annual Report (final).v2.PDF", [1], "Annual_Report_final_.v2-p1"),
    (".hidden", [1], "hidden-p1"),
    ("....", [1], "document-p1"),
    ("", [4], "document-p4"),
    (None, [1], "document-p1"),
    ("x" * 300 + ".png", [1], "x" * 80 + "-p1"),
    ("report.pdf", [2, 3, 4, 5], "report-p2-5"),  # a range of pages
])
def test_download_names_are_safe(name, pages, stem):
    assert safe_stem(name, pages) == stem


def _result(text: str, wall: float, forwards: int) -> ParseResult:
    return ParseResult(text, [], "", Stats(wall_seconds=wall, forwards=forwards), (10, 10))


HELLO = "<BLOCK>title [1,2,3,4]<CHILD>Hello<BLOCK>text [1,2,3,4]<CHILD>same"
HALLO = "<BLOCK>title [1,2,3,4]<CHILD>Hallo<BLOCK>text [1,2,3,4]<CHILD>same"
ROUNDING = "rounds differently from a one-token step"


@pytest.mark.parametrize("dtype", ["bfloat16", "float32"])
def test_comparison_reports_speedup_and_exact_match(dtype):
    a, b = _result("<BLOCK>text [1,2,3,4]<CHILD>same", 4.0, 100), _result("<BLOCK>text [1,2,3,4]<CHILD>same", 1.0, 20)
    comparison = Comparison(a, b, dtype, same_tokens=True)
    assert comparison.exact and comparison.speedup == 4.0 and comparison.forward_ratio == 5.0
    html = comparison_html(("MTP off", "MTP on"), comparison)
    assert 'data-match="exact"' in html and "✓ Exact match" in html and "4.00×" in html and ROUNDING not in html
    assert diff_html(comparison) == ""


def test_comparison_shows_a_diff_when_outputs_differ():
    comparison = Comparison(_result(HELLO, 1.0, 10), _result(HALLO, 1.0, 10), "float32", same_tokens=True)
    assert not comparison.exact
    assert 'data-match="differs"' in comparison_html(("A", "B"), comparison)
    diff = diff_html(comparison)
    assert '<div class="del">-&lt;BLOCK&gt;title [1,2,3,4]&lt;CHILD&gt;Hello</div>' in diff
    assert '<div class="add">+&lt;BLOCK&gt;title [1,2,3,4]&lt;CHILD&gt;Hallo</div>' in diff


def test_mtp_and_batching_promise_the_same_tokens_and_plain_vs_fork_does_not():
    assert {name for name, mode in MODES.items() if mode.same_tokens} == {"MTP off vs on", "children serial vs batched"}


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_a_difference_in_reduced_precision_names_the_dtype_and_the_float32_check(dtype):
    html = comparison_html(("A", "B"), Comparison(_result(HELLO, 1.0, 10), _result(HALLO, 1.0, 10), dtype, True))
    [verdict] = re.findall(r'<div class="hpd-verdict bad" data-match="differs">(.*?)</div>', html)
    assert verdict.startswith("✗ The outputs differ (diff below)")
    assert f"in {dtype} a k+1-token verify or a batched forward {ROUNDING}" in verdict
    assert "near-tie can flip the greedy argmax" in verdict and "--dtype float32" in verdict


@pytest.mark.parametrize("dtype, same_tokens", [("float32", True), ("float64", True), ("", True),
                                                ("bfloat16", False)])  # "": a server that does not say
def test_a_difference_rounding_cannot_explain_is_shown_bare(dtype, same_tokens):
    """In float32 MTP or batching changing a token is a bug; plain vs fork decode other prompts."""
    comparison = Comparison(_result(HELLO, 1.0, 10), _result(HALLO, 1.0, 10), dtype, same_tokens)
    assert not comparison.rounding
    assert ('<div class="hpd-verdict bad" data-match="differs">✗ The outputs differ (diff below)</div>'
            in comparison_html(("A", "B"), comparison))


class _View:
    """The part of PageView the HTML renderers read."""

    def __init__(self, branches, round, elapsed):
        self.branches, self.round, self.elapsed = branches, round, elapsed


def _view(branches, round=1, elapsed=1.0):
    return _View(branches, round, elapsed)


def test_each_bundled_model_says_what_it_can_read_and_others_do_not():
    for name, read in (("hpd-tiny", "reads large print"), ("hpd-tiny-docs", "three words in four")):
        bundled = info_markdown(EngineInfo(f"bundled {name}", str(BUNDLED[name][0]), "cpu", "float32", 21_037_824, True))
        assert bundled.endswith(BUNDLED_NOTES[name]) and read in bundled
    other = info_markdown(EngineInfo("HPD-Parsing", "/models/HPD-Parsing", "cuda", "bfloat16", 1_070_000_000, True))
    assert "demo" not in other and "preview" not in other and "`HPD-Parsing`" in other


# ---- which dollars are math ----------------------------------------------------------------------

def test_prices_stay_dollar_signs_and_make_no_formula():
    assert katex_markdown("costs $48,848.81 and later $20,598.20") == r"costs \$48,848.81 and later \$20,598.20"


def test_a_dollar_pair_by_pandocs_rule_is_one_inline_formula():
    assert katex_markdown("where $x^2$ holds") == r"where \(x^2\) holds"
    assert katex_markdown("costs $5, where $x^2$ holds") == r"costs \$5, where \(x^2\) holds"


@pytest.mark.parametrize("text", ["$ x$", "$x $", "$x$1", "$a\n\nb$", "$", "a $5 b"],
                         ids=["space after opening", "space before closing", "digit after closing",
                              "across paragraphs", "alone", "price"])
def test_dollars_that_break_pandocs_rule_are_dollar_signs(text):
    assert "\\(" not in katex_markdown(text) and katex_markdown(text).count("\\$") == text.count("$")


def test_display_formulas_escapes_and_model_delimiters_are_kept():
    for text in ("$$\nE = mc^2\n$$", r"\[ a+b \]", r"\(a_1\)", r"a \$ b", "a $x\\$y$ b"):
        assert katex_markdown(text) == text.replace("$x\\$y$", "\\(x\\$y\\)")


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="$ x1\n,.", max_size=40))
def test_only_delimiters_change_text_without_backslashes(text):
    """Undoing the rewrite gives the input back: no character is lost, added or moved."""
    undone = katex_markdown(text).replace("\\(", "$").replace("\\)", "$").replace("\\$", "$")
    assert undone == text


# ---- selecting a block ---------------------------------------------------------------------------

def test_each_child_belongs_to_the_next_block_with_its_header():
    blocks = [Block("title", (1, 1, 9, 9), "a"), Block("text", None, "b"), Block("text", (2, 2, 8, 8), "c")]
    children = [(1, "title", (1, 1, 9, 9)), (2, "table", (5, 5, 6, 6)), (3, None, None), (4, "text", (2, 2, 8, 8))]
    assert block_of_branch(blocks, children) == {1: 1, 3: 2, 4: 3}  # child 2 wrote no block shown here


def test_the_markdown_has_one_marker_per_shown_block_and_is_the_pages_markdown_without_them():
    blocks = [Block("title", None, "T"), Block("header", None, "dropped"), Block("text", None, "costs $5")]
    marked = marked_markdown(blocks)
    assert re.findall(r'class="hpd-mark (hpd-b\d+)"', marked) == ["hpd-b1", "hpd-b3"]
    assert re.sub(r'<div class="hpd-mark hpd-b\d+"></div>\n\n', "", marked) == to_markdown(blocks)


def test_tree_rows_and_branch_cards_carry_their_blocks_class():
    view = _view({0: BranchView(0), 1: BranchView(1, label="text"), 2: BranchView(2, label="title")})
    blocks = {1: 3}
    assert 'data-branch="1" data-state="waiting" class="hpd-b3"' in tree_html(view, blocks)
    assert '<div class="hpd-branch hpd-b3" data-branch="1">' in branches_html(view, blocks)
    assert "hpd-b" not in tree_html(view).replace("hpd-branch", "")


def test_examples_show_the_one_line_description_of_the_json_beside_them(tmp_path):
    for name in ("letter.pdf", "paper.png", "notes.txt"):
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / "examples.json").write_text('{"paper.png": {"description": "A page of a paper,\\n two columns", '
                                            '"model": "hpd-tiny-docs"}, "gone.pdf": {"description": "x"}}')
    assert [e.label for e in examples(tmp_path)] == ["letter.pdf", "paper.png: A page of a paper, two columns"]
    assert [e.label for e in examples(tmp_path, "hpd-tiny")] == ["letter.pdf"]  # paper.png is another model's
    assert [e.path.name for e in examples(tmp_path, "hpd-tiny-docs")] == ["letter.pdf", "paper.png"]
    (tmp_path / "examples.json").unlink()
    assert [e.label for e in examples(tmp_path)] == ["letter.pdf", "paper.png"]
