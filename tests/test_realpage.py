"""Real-page extraction: PDFs drawn here with pymupdf (no TeX Live files) come back as the blocks,
labels, reading order and glyphs the rules promise (hpd_training.pagelayout, labels, table)."""

from __future__ import annotations

import re
from pathlib import Path

import matplotlib
import numpy as np
import pymupdf
import pytest
from tokenizers import Tokenizer

from hpd_core.grammar import has_content, parse_blocks
from hpd_core.loader import BUNDLED
from hpd_training import labels
from hpd_training.pagelayout import Rejected, extract
from hpd_training.realpage import DPI, real_page
from hpd_training.textlayer import Char, Line, compose_accents, is_bold, is_math_font

TTF = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
PROSE = ("Reading order follows the content stream of the page, which is the order in which TeX "
         "typeset the material: the left column first and then the right one.")


def new_page(width: float = 612, height: float = 792) -> tuple[pymupdf.Document, pymupdf.Page]:
    doc = pymupdf.open()
    return doc, doc.new_page(width=width, height=height)


def paragraph(page: pymupdf.Page, rect, text: str = PROSE, size: float = 10, font: str = "tiro") -> None:
    assert page.insert_textbox(pymupdf.Rect(rect), text, fontsize=size, fontname=font) >= 0


def labelled(page: pymupdf.Page) -> list[tuple[str, str]]:
    return [(b.label, b.text) for b in extract(page).blocks]


def test_two_column_page_reads_header_title_left_column_right_column_page_number():
    doc, page = new_page()
    page.insert_text((72, 50), "Journal of Examples, Volume 3", fontsize=8, fontname="tiro")
    page.insert_text((72, 110), "A Study of Reading Order", fontsize=18, fontname="tibo")
    paragraph(page, (72, 140, 296, 300), "Left column. " + PROSE)
    paragraph(page, (316, 140, 540, 300), "Right column. " + PROSE)
    page.insert_text((300, 760), "7", fontsize=9, fontname="tiro")
    layout = extract(page)
    got = [(b.label, b.text.split()[0]) for b in layout.blocks]
    assert got == [("header", "Journal"), ("title", "A"), ("text", "Left"), ("text", "Right"),
                   ("page_number", "7")]
    assert layout.columns == 2 and layout.body_size == 10


def test_bold_body_size_line_is_a_title_and_bold_sentence_is_not():
    doc, page = new_page()
    page.insert_text((72, 100), "2 Related Work", fontsize=10, fontname="tibo")
    paragraph(page, (72, 110, 540, 200))
    page.insert_text((72, 240), "This is important.", fontsize=10, fontname="tibo")
    paragraph(page, (72, 250, 540, 340))
    assert [label for label, _ in labelled(page)] == ["title", "text", "text", "text"]


def test_hyphen_at_line_end_joins_the_next_line_without_a_space():
    doc, page = new_page()
    page.insert_text((72, 100), "a line ending in a hyphen-", fontsize=10, fontname="tiro")
    page.insert_text((72, 112), "ation and a next line", fontsize=10, fontname="tiro")
    page.insert_text((72, 124), "and a third one.", fontsize=10, fontname="tiro")
    assert labelled(page) == [("text", "a line ending in a hyphen-ation and a next line and a third one.")]


def test_ligature_glyph_is_expanded_to_its_letters():
    doc, page = new_page()
    font = pymupdf.Font(fontfile=str(TTF / "DejaVuSerif.ttf"))
    writer = pymupdf.TextWriter(page.rect)
    writer.append((72, 100), "We \ufb01nd the \ufb02ow of e\ufb03cient text.", font=font, fontsize=10)
    writer.write_text(page)
    sample = real_page(page)
    assert sample.blocks[0].text == "We find the flow of efficient text."
    assert len(sample.child_glyphs[0]) == len(re.sub(r"\s", "", sample.blocks[0].text))


def test_bulleted_lines_are_one_list_block_with_one_item_a_line():
    doc, page = new_page()
    paragraph(page, (72, 80, 540, 120), "Some lead-in text for the list that follows.")
    for i, item in enumerate(("first item", "second item", "third item")):
        page.insert_text((90, 140 + 13 * i), f"\u2022 {item}", fontsize=10, fontname="dejavu",
                         fontfile=str(TTF / "DejaVuSans.ttf"))
    assert labelled(page)[1] == ("list", "\u2022 first item\n\u2022 second item\n\u2022 third item")


def test_caption_is_image_caption_and_raster_image_is_an_image_block_without_content():
    doc, page = new_page()
    pix = pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 40, 30), False)
    pix.set_rect(pix.irect, (200, 30, 30))
    page.insert_image(pymupdf.Rect(150, 100, 450, 325), pixmap=pix)
    page.insert_text((150, 345), "Figure 3: A red rectangle.", fontsize=9, fontname="tiro")
    paragraph(page, (72, 360, 540, 450))
    sample = real_page(page)
    assert [b.label for b in sample.blocks] == ["image", "image_caption", "text"]
    assert sample.blocks[0].bbox == (245, 126, 735, 410)
    assert sample.children_texts[0] == "Figure 3: A red rectangle." and len(sample.children_texts) == 2


def test_a_lone_surrogate_in_the_text_layer_is_an_unreadable_glyph_that_tokenizes(monkeypatch):
    # Some fonts' ToUnicode maps give MuPDF half of a surrogate pair; the tokenizer refuses such a
    # string ("TextInputSequence must be str"), which stopped a training run (docs/training.md, session 37).
    doc, page = new_page()
    paragraph(page, (72, 72, 540, 200))
    get_text = pymupdf.Page.get_text

    def with_surrogate(self, option="text", **kw):
        out = get_text(self, option, **kw)
        if option == "rawdict":
            out["blocks"][0]["lines"][0]["spans"][0]["chars"][1]["c"] = "\ud835"
        return out

    monkeypatch.setattr(pymupdf.Page, "get_text", with_surrogate)
    record = real_page(page)
    tokenizer = Tokenizer.from_file(str(BUNDLED["hpd-tiny-docs"][0] / "tokenizer.json"))
    for text in record.children_texts:
        tokenizer.encode(text, add_special_tokens=False)
    assert "\ufffd" in record.children_texts[0] and record.child_trained == [False]


def test_math_font_block_is_a_formula_whose_content_is_not_trained():
    doc, page = new_page()
    paragraph(page, (72, 80, 540, 130))
    font = pymupdf.Font(fontfile=str(TTF / "cmmi10.ttf"))
    assert is_math_font(font.name)
    writer = pymupdf.TextWriter(page.rect)
    writer.append((250, 160), "xyzab", font=font, fontsize=12)
    writer.write_text(page)
    page.insert_text((500, 160), "(1)", fontsize=10, fontname="tiro")
    paragraph(page, (72, 180, 540, 230))
    sample = real_page(page)
    assert [b.label for b in sample.blocks] == ["text", "formula", "text"]
    assert sample.child_trained == [True, False, True]


def test_table_between_rules_gives_html_cells_and_glyphs_that_spell_them():
    doc, page = new_page()
    rows = [("Name", "Size", "Kind"), ("alpha", "10 pt", "serif"), ("beta", "12 pt", "sans serif")]
    for r, row in enumerate(rows):
        for c, cell in enumerate(row):
            page.insert_text((100 + 120 * c, 120 + 16 * r), cell, fontsize=10, fontname="helv")
    for y in (105, 126, 158):
        page.draw_line((90, y), (470, y), width=0.6)
    paragraph(page, (72, 200, 540, 260))
    sample = real_page(page)
    assert [b.label for b in sample.blocks] == ["table", "text"]
    assert sample.blocks[0].text == ("<table><tr><td>Name</td><td>Size</td><td>Kind</td></tr>"
                                     "<tr><td>alpha</td><td>10 pt</td><td>serif</td></tr>"
                                     "<tr><td>beta</td><td>12 pt</td><td>sans serif</td></tr></table>")
    spelled = re.sub(r"<[^>]*>|\s", "", sample.blocks[0].text)
    assert len(sample.child_glyphs[0]) == len(spelled)


def test_two_columns_of_prose_between_rules_are_not_a_table():
    doc, page = new_page()
    page.draw_line((72, 70), (540, 70))
    paragraph(page, (72, 80, 296, 400), PROSE * 3)
    paragraph(page, (316, 80, 540, 400), PROSE * 3)
    page.draw_line((72, 410), (540, 410))
    assert {label for label, _ in labelled(page)} == {"text"}


def test_record_glyphs_are_image_pixels_at_the_render_dpi_and_spell_each_child():
    doc, page = new_page()
    page.insert_text((72, 50), "Running head", fontsize=8, fontname="tiro")
    page.insert_text((72, 110), "Title of the page", fontsize=18, fontname="tibo")
    paragraph(page, (72, 140, 540, 300))
    sample = real_page(page)
    assert sample.image.size == (round(612 * DPI / 72), round(792 * DPI / 72))
    ink = sum(len(re.sub(r"\s", "", t)) for t in sample.children_texts)
    assert sample.glyphs.shape == (ink, 3) and sample.glyphs.dtype == np.float32
    # "Title" is drawn at x = 72 pt (DPI px): its first glyph centre is a little right of that
    first = next(g for g in sample.glyphs if chr(int(g[2])) == "T")
    assert DPI < first[0] < DPI + 18 * DPI / 72 and first[1] < 110 * DPI / 72
    for text, glyphs in zip(sample.children_texts, sample.child_glyphs):
        assert len(glyphs) == len(re.sub(r"\s", "", text))
    assert parse_blocks(sample.assembled_text) == [b for b in sample.blocks]
    assert len(sample.children_texts) == sum(has_content(b.label) for b in sample.blocks)


@pytest.mark.parametrize("make, reason", [
    (lambda page: None, "no_text"),
    (lambda page: (paragraph(page, (72, 72, 540, 300)), page.set_rotation(90)), "rotated"),
    (lambda page: (page.insert_image(page.rect, pixmap=pymupdf.Pixmap(pymupdf.csRGB, pymupdf.IRect(0, 0, 20, 20), False)),
                   page.insert_text((72, 72), "the text layer of a scanned page", fontsize=10)), "scanned"),
])
def test_pages_the_rules_cannot_handle_are_rejected_with_a_reason(make, reason):
    doc, page = new_page()
    make(page)
    with pytest.raises(Rejected) as err:
        extract(page)
    assert err.value.reason == reason


def line_of(text: str, size: float) -> Line:
    return Line(tuple(Char(c, 0, 0, size, False, False) for c in text), (0, 0, 1, 1), True)


def test_body_size_is_the_most_common_size_of_long_lines_by_characters():
    prose = [line_of("a" * 30, 10.02)] * 3 + [line_of("b" * 40, 18)]
    footer = [line_of("tiny", 6)] * 100  # a letterhead's short lines in small type
    assert labels.body_size(prose + footer) == 10.0
    assert labels.body_size(footer) == 6.0


def test_spacing_accent_over_the_next_letter_is_composed_with_it():
    a = Char("\u00a8", 10.0, 0, 10, False, False)
    o = Char("o", 10.5, 0, 10, False, False)
    quote = Char("`", 3.0, 0, 10, False, False)
    assert [c.c for c in compose_accents([Char("h", 5, 0, 10, False, False), a, o])] == ["h", "\u00f6"]
    assert [c.c for c in compose_accents([quote, o])] == ["`", "o"]  # apart: a backquote


@pytest.mark.parametrize("text, number", [("12", True), ("– 12 –", True), ("xiv", True), ("Page 3 of 9", True),
                                          ("12 Angry Men", False), ("Chapter 1", False)])
def test_page_numbers(text, number):
    assert labels.is_page_number(text) is number


@pytest.mark.parametrize("text, caption", [("Figure 3: A plot", True), ("Fig. 2. Results", True),
                                           ("Table 1: Sizes", True), ("Tables are useful", False),
                                           ("Figure out the rest", False)])
def test_captions(text, caption):
    assert labels.is_caption(text) is caption


@pytest.mark.parametrize("text, item", [("• item", True), ("– item", True), ("1. item", True), ("(a) item", True),
                                        ("iii) item", True), ("-5 degrees", False), ("1.5 kg", False),
                                        ("The end.", False)])
def test_item_markers(text, item):
    assert labels.starts_item(text) is item


def test_page_number_at_latex_default_height_is_a_page_number_when_nothing_lies_below():
    doc, page = new_page()
    paragraph(page, (72, 100, 540, 300))
    page.insert_text((300, 700), "4", fontsize=10, fontname="tiro")  # 88 % down: above the 9 % band
    assert [label for label, _ in labelled(page)] == ["text", "page_number"]
    doc, page = new_page()
    page.insert_text((300, 690), "4", fontsize=10, fontname="tiro")
    paragraph(page, (72, 700, 540, 760))  # text below it: a number in the text
    assert [label for label, _ in labelled(page)][0] == "text"


def test_running_head_with_its_page_number_below_the_top_band_is_a_header():
    doc, page = new_page(595, 842)
    page.insert_text((90, 92), "7. Printing the Thesis 66", fontsize=11, fontname="tiro")  # 11 % down
    paragraph(page, (90, 120, 505, 300), size=11)
    assert [label for label, _ in labelled(page)] == ["header", "text"]
    doc, page = new_page(595, 842)
    page.insert_text((90, 92), "1. A list item at the top of the page", fontsize=11, fontname="tiro")
    paragraph(page, (90, 120, 505, 300), size=11)
    assert [label for label, _ in labelled(page)][0] == "list"


@pytest.mark.parametrize("font, bold", [("CMBX10", True), ("CMSSBX10", True), ("SFBX1000", True),
                                        ("ABCDEF+NimbusSans-Bold", True), ("CMR10", False), ("CMSS10", False)])
def test_bold_fonts_by_name(font, bold):
    assert is_bold(font, 0) is bold
