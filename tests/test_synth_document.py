"""Document-like synthetic pages (SynthConfig.document(), and letters: SynthConfig.letter()): real
page sizes at 150 dpi, exact ground truth at that zoom, general text, many fonts with a Base14
fallback; the classic presets unchanged."""

from __future__ import annotations

import functools
import hashlib
import math
import re
from dataclasses import replace
from pathlib import Path

import matplotlib
import numpy as np
import pymupdf
import pytest

from hpd_training.synth import SynthConfig, fonts, render_page, text
from hpd_training.synth.config import PAGE_SIZES
from hpd_training.synth.debian import CHARSET, clean
from hpd_training.synth.elements import hyphen_points, joined
from hpd_training.synth.layout import compose_page
from hpd_training.synth.page import INK, draw_pdf, ink_box, rasterize, to_grid
from hpd_training.textlayer import BOLD_FLAG, is_bold

DOCUMENT = SynthConfig.document()
LETTER = SynthConfig.letter()
CLEAN = replace(DOCUMENT, noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0, contrast_prob=0.0)
CLEAN_LETTER = replace(LETTER, noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0, contrast_prob=0.0)
TEXT_LIKE = ("title", "text", "list", "image_caption", "header", "footer", "page_number")
SEEDS = range(6)


@functools.lru_cache(maxsize=None)
def document_page(seed: int):
    return render_page(seed, DOCUMENT)


def test_classic_presets_render_byte_identically():
    """Pages of the presets that existed before the document preset, hashed before it was added
    (pymupdf 1.28.2): image, blocks, lines and glyphs."""
    expected = {("classic", 0): "dd80913d4c52f888", ("classic", 1): "931f4fb3f0c1d4dd",
                ("simple", 0): "b953ee0686d14af2", ("simple", 1): "d2e2b17db29e8e4f",
                ("lines", 0): "298531d9ad8697c1", ("lines", 1): "4e7cda549ee16e33",
                ("sparse", 0): "9ca59f78ad8b0ed6", ("sparse", 1): "4a707c7cd1c1cf25",
                ("dense", 0): "2fb2dae8003432a5", ("dense", 1): "70efac82940d3c0a"}
    for (name, seed), digest in expected.items():
        config = SynthConfig() if name == "classic" else getattr(SynthConfig, name)()
        p = render_page(seed, config)
        blob = p.image.tobytes() + repr((p.blocks, p.lines, p.glyphs.tobytes())).encode()
        assert hashlib.sha256(blob).hexdigest()[:16] == digest, (name, seed)


def test_document_pages_are_real_page_sizes_rendered_at_150_dpi():
    sizes = set()
    for seed in SEEDS:
        layout = compose_page(seed, DOCUMENT)
        assert (layout.width, layout.height) in PAGE_SIZES and layout.zoom == 150 / 72
        w, h = document_page(seed).image.size
        assert (w, h) == tuple(math.ceil(v * layout.zoom - 0.001) for v in (layout.width, layout.height))
        sizes.add((layout.width, layout.height))
    assert len(sizes) > 1


def test_document_body_type_is_8_to_12_pt_and_nothing_is_under_6_5_pt():
    for seed in SEEDS:
        layout = compose_page(seed, DOCUMENT)
        sizes = [r.size for e in layout.elements if e.label == "text" for r in e.runs]
        assert sizes and 8 <= max(set(sizes), key=sizes.count) <= 12
        assert min(r.size for e in layout.elements for r in e.runs) >= 6.5


@pytest.mark.parametrize("clean", [CLEAN, CLEAN_LETTER], ids=["document", "letter"])
def test_document_boxes_are_the_tight_ink_and_cover_all_ink_but_the_rules(clean):
    for seed in SEEDS:
        layout = compose_page(seed, clean)
        z = layout.zoom
        pixels = rasterize(draw_pdf(layout), z)
        ink = pixels.min(axis=2) < INK
        h, w = ink.shape
        boxes = [b for b in (ink_box(ink, tuple(v * z for v in e.rect)) for e in layout.elements) if b]
        assert [to_grid(b, w, h) for b in boxes] == [b.bbox for b in render_page(seed, clean).blocks]
        assert np.array_equal(np.asarray(render_page(seed, clean).image), pixels)
        for x0, y0, x1, y1 in boxes:
            assert ink[y0, x0:x1].any() and ink[y1 - 1, x0:x1].any()  # tight
            assert ink[y0:y1, x0].any() and ink[y0:y1, x1 - 1].any()
            ink[y0:y1, x0:x1] = False
        for rule in layout.decorations:  # header and footnote rules belong to no block
            (a, y), (b, _) = rule.points
            ink[int(y * z) - 3:int(y * z) + 4, int(a * z) - 1:int(b * z) + 2] = False
        assert not ink.any(), seed
        for i, a in enumerate(boxes):
            assert not any(min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])
                           for b in boxes[i + 1:])


def _read_back(shown: str) -> str:
    """Fonts that share one glyph between "-" and U+00AD, or ";" and U+037E (Greek question
    mark), read back as the latter."""
    return shown.replace("\xad", "-").replace("\u037e", ";")


@pytest.mark.parametrize("config", [DOCUMENT, LETTER], ids=["document", "letter"])
def test_document_text_is_what_the_pdf_page_shows_in_order(config):
    checked = 0
    for seed in SEEDS:
        layout = compose_page(seed, config)
        pdf_page = draw_pdf(layout)[0]
        for e in layout.elements:
            clip = pymupdf.Rect(e.rect)
            if e.label in TEXT_LIKE:
                shown = _read_back(pdf_page.get_text("text", clip=clip))
                assert shown.split() == " ".join(t.text for t in e.lines).split(), e.label
                checked += 1
            elif e.label == "table":
                cells = re.findall(r"<td>(.*?)</td>", e.text)
                words = [_read_back(w[4]) for w in pdf_page.get_text("words", clip=clip)]
                assert sorted(words) == sorted(" ".join(cells).split())
    assert checked > 30


def test_document_glyph_centres_are_the_characters_of_each_line_inside_its_ink_box():
    for seed in SEEDS:
        page = document_page(seed)
        x, y = page.glyphs[:, 0], page.glyphs[:, 1]
        w, h = page.image.size
        assert x.max() < w and y.max() < h
        for line in page.lines:
            x0, y0, x1, y1 = line.bbox_px
            inside = (x >= x0 - 1) & (x <= x1 + 1) & (y >= y0 - 1) & (y <= y1 + 1)
            drawn = [c for c in line.text if not c.isspace()]
            assert sorted(chr(int(c)) for c in page.glyphs[inside, 2]) == sorted(drawn), line.text


def test_document_pages_have_headings_footnotes_and_captions_in_the_label_set():
    blocks = [b for s in range(12) for b in document_page(s).blocks]
    labels = {b.label for b in blocks}
    assert {"title", "text", "page_number"} <= labels
    assert any(re.match(r"\d+(\.\d+)? \S", b.text) for b in blocks if b.label == "title")
    assert any(b.text.startswith(("Table", "TABLE", "Fig")) for b in blocks if b.label == "image_caption")
    assert any(len(document_page(s).layout.decorations) for s in range(12))
    assert any(b.text == "Abstract" for s in range(40) for b in document_page(s).blocks)


def test_general_text_is_in_the_charset_and_not_pythons_docs():
    c = text.corpus("general")
    assert len(c.words) > 300_000 and len(c.vocabulary) > 30_000 and len(c.proper) > 5_000
    sample = [b.text for s in SEEDS for b in document_page(s).blocks if b.label != "formula"]
    assert all(set(t) <= CHARSET | {"\n"} for t in sample)
    assert set(text.corpus("general").words[:50_000]) != set(text.corpus().words[:50_000])


def test_clean_keeps_prose_and_drops_code_and_rules():
    assert clean("The quick brown fox jumps over the lazy dog near the river bank.") is not None
    assert clean("========== ========== ==========  ===== ==== === == =") is None
    assert clean("x = f(y); z = g(x); return z + 1; /* the end of it all */") is None
    assert clean("Short line.") is None


def test_document_families_fall_back_to_base14_without_font_folders(monkeypatch):
    monkeypatch.setattr(fonts, "font_dirs", lambda: [])
    fonts.installed.cache_clear()
    try:
        assert fonts.document_families() == fonts.FALLBACK_FAMILIES
        page = render_page(2, DOCUMENT)
        used = {r.face.font.name for e in page.layout.elements for r in e.runs}
        assert page.blocks and used and all(n.startswith(("Times-", "Helvetica")) for n in used)
    finally:
        fonts.installed.cache_clear()


def test_fonts_under_hpd_fonts_are_found_and_copied(monkeypatch, tmp_path):
    mpl = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    table = {"mpl-dejavu": ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf",
                            "DejaVuSans-BoldOblique.ttf")}
    monkeypatch.setattr(fonts, "DOCUMENT_FAMILIES", table)
    monkeypatch.setattr(fonts, "SYSTEM_FONT_DIRS", ())
    monkeypatch.setenv("HPD_FONTS", str(mpl))
    fonts.installed.cache_clear()
    try:
        assert fonts.document_families() == ("mpl-dejavu",)
        size = fonts.copy_fonts(tmp_path / "carry", ("mpl-dejavu",))
        assert sorted(p.name for p in (tmp_path / "carry").iterdir()) == sorted(table["mpl-dejavu"])
        assert size == sum((mpl / n).stat().st_size for n in table["mpl-dejavu"])
        monkeypatch.setenv("HPD_FONTS", str(tmp_path / "carry"))
        fonts.installed.cache_clear()
        assert fonts.installed()["mpl-dejavu"][0].startswith(str(tmp_path / "carry"))
    finally:
        fonts.installed.cache_clear()


def test_document_list_items_start_with_one_kind_of_marker_and_a_space():
    lists = [b for s in range(30) for b in document_page(s).blocks if b.label == "list"]
    assert len(lists) >= 3
    kinds = set()
    for block in lists:
        markers = [item.split(" ")[0] for item in block.text.split("\n")]
        assert all(" " in item for item in block.text.split("\n"))
        numbered = [re.sub(r"[0-9a-f]", "#", m) for m in markers]
        assert len(set(numbered)) == 1, markers
        kinds.add(numbered[0])
    assert len(kinds) >= 2


def test_document_content_is_its_lines_joined_and_hyphenated_words_are_whole():
    hyphenated = 0
    for seed in range(12):
        page = document_page(seed)
        for i, block in enumerate(page.blocks):
            lines = [l.text for l in page.lines if l.block == i]
            if block.label == "list" or not lines:
                continue
            assert block.text in (" ".join(lines), joined([l.split(" ") for l in lines], True))
            breaks = sum(a[-1] == "-" and a[-2].isalpha() for a in lines[:-1])
            if block.text != " ".join(lines):
                hyphenated += breaks
                assert len(block.text.split()) == len(" ".join(lines).split()) - breaks
    assert hyphenated > 0


def test_hyphen_points_keep_three_letters_and_a_vowel_each_side():
    assert [("example"[:i], "example"[i:]) for i in hyphen_points("example")] == [("exam", "ple")]
    assert hyphen_points("strength") == [] and hyphen_points("Kerberos-enabled") == []
    assert hyphen_points("HTTPS") == [] and hyphen_points("abc") == []


def test_hpd_eval_offers_every_preset_including_document_and_letter():
    from hpd_tools.evaluate import SYNTH_PRESETS
    assert {"document", "letter"} <= set(SYNTH_PRESETS)
    assert all(isinstance(getattr(SynthConfig, p)(), SynthConfig) for p in SYNTH_PRESETS)


def test_document_paragraphs_set_some_words_in_italic_or_bold_within_their_lines():
    mixed = 0
    for seed in SEEDS:
        for e in compose_page(seed, DOCUMENT).elements:
            if e.label == "text" and len({r.face for r in e.runs}) > 1:
                mixed += 1
                regular = max({r.face for r in e.runs}, key=[r.face for r in e.runs].count)
                assert all(r.face is regular or " " not in r.text for r in e.runs)  # a run a word
    assert mixed > 0


def test_document_code_blocks_are_monospaced_text_and_their_panel_is_not_ink():
    codes = [(s, e) for s in range(40) for e in compose_page(s, DOCUMENT).elements
             if e.label == "text" and e.runs and e.runs[0].face.font.is_monospaced]
    assert codes
    panels = [(s, e) for s, e in codes if e.polys]
    assert panels and all(max(e.polys[0].fill) * 255 > INK for _, e in panels)


def test_letters_are_addresses_a_date_a_salutation_paragraphs_and_a_closing_labelled_as_real_pages_are():
    """Each letter in reading order: the date before the salutation, the paragraphs after it, the
    closing after them; only the labels a letter's text layer gets, by the real pages' rules
    (hpd_training/labels.py): a subject line at body size is a title only as a short bold line
    (rule 5), a letterhead by its size (>= 1.15 x body); body text 9-13 pt on US letter or A4."""
    date = re.compile(r"\w+ \d{1,2}, \d{4}|\d{4}-\d\d-\d\d|\d\d/\d\d/\d{4}|\d{1,2} \w{3} \d{4}")
    closings = re.compile(r"(Yours|Sincerely|Best|Kind|With|Regards|Warm)\b.*,")
    closed = 0
    for seed in range(12):
        layout = compose_page(seed, LETTER)
        assert (layout.width, layout.height) in ((612.0, 792.0), (595.0, 842.0))
        texts = [e.text for e in layout.elements]
        assert {e.label for e in layout.elements} <= {"title", "text", "header", "footer", "page_number"}
        salutation = next(i for i, t in enumerate(texts) if re.match(r"(Dear|Hello|To whom) ", t))
        assert any(date.fullmatch(t) for t in texts[:salutation]), texts
        body = [r.size for e in layout.elements[salutation:] if e.label == "text" for r in e.runs]
        size = max(set(body), key=body.count)
        assert 9 <= size <= 13
        for e in layout.elements:
            if e.label == "title" and e.runs[0].size == size:  # a subject line
                assert all(is_bold(r.face.font.name, BOLD_FLAG * r.face.font.is_bold) for r in e.runs)  # as the text layer says
                assert len(e.text.split()) <= 15
                assert len(e.lines) <= 2 and not e.text.endswith(".")
            elif e.label == "title":                           # a letterhead
                assert e.runs[0].size >= 1.15 * size
        ending = [i for i, t in enumerate(texts) if closings.fullmatch(t)]
        if ending:
            assert ending[0] > salutation + 1 and layout.elements[ending[0] - 1].label == "text"
            closed += 1
    assert closed >= 6  # the others are letters whose paragraphs fill the page
