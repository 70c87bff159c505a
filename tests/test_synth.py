"""Synthetic pages: deterministic, and their ground truth is exactly what is drawn."""

from __future__ import annotations

import functools
import re
from dataclasses import replace
from html.parser import HTMLParser

import numpy as np
import pymupdf
import pytest
from matplotlib.font_manager import FontProperties
from matplotlib.mathtext import MathTextParser

from hpd_core.grammar import parse_blocks
from hpd_training.synth import LABELS, SynthConfig, render_page
from hpd_training.synth import formula, text
from hpd_training.synth.config import BODY_LABELS
from hpd_training.synth.drawing import Poly, Run, append, draw
from hpd_training.synth.fonts import FAMILY_NAMES, family
from hpd_training.synth.layout import compose_page
from hpd_training.synth.page import INK, Canvas, draw_pdf, ink_box, rasterize, to_grid

DENSE = SynthConfig.dense()
TEXT_LIKE = ("title", "text", "list", "image_caption", "header", "footer", "page_number")


@functools.lru_cache(maxsize=None)
def dense_page(seed: int):
    return render_page(seed, DENSE)


def _overlap(a, b) -> bool:
    return min(a[2], b[2]) > max(a[0], b[0]) and min(a[3], b[3]) > max(a[1], b[1])


def test_same_seed_gives_identical_page():
    for config in (SynthConfig(), DENSE):
        a, b = render_page(5, config), render_page(5, config)
        assert a.image.tobytes() == b.image.tobytes()
        assert a.blocks == b.blocks and a.lines == b.lines


def test_different_seeds_give_different_pages():
    a, b = render_page(1), render_page(2)
    assert a.image.tobytes() != b.image.tobytes()
    assert a.blocks != b.blocks


def test_image_is_768_px_wide_portrait_between_letter_and_a4():
    for seed in range(6):
        w, h = dense_page(seed).image.size
        assert w == 768 and 11 / 8.5 * w - 1 <= h <= 297 / 210 * w + 1


def test_boxes_are_inside_the_page_nonempty_and_disjoint():
    for seed in range(8):
        boxes = [b.bbox for b in dense_page(seed).blocks]
        assert boxes
        for x0, y0, x1, y1 in boxes:
            assert 0 <= x0 < x1 <= 1000 and 0 <= y0 < y1 <= 1000
        for i, a in enumerate(boxes):
            assert not any(_overlap(a, b) for b in boxes[i + 1:])


def test_block_boxes_are_the_tight_ink_and_cover_all_ink():
    for seed in range(6):
        layout = compose_page(seed, DENSE)
        pixels = rasterize(draw_pdf(layout))
        ink = pixels.min(axis=2) < INK
        h, w = ink.shape
        page = render_page(seed, DENSE)
        boxes = [b for b in (ink_box(ink, e.rect) for e in layout.elements) if b is not None]
        assert [to_grid(b, w, h) for b in boxes] == [b.bbox for b in page.blocks]
        for x0, y0, x1, y1 in boxes:
            assert ink[y0, x0:x1].any() and ink[y1 - 1, x0:x1].any()  # tight
            assert ink[y0:y1, x0].any() and ink[y0:y1, x1 - 1].any()
            ink[y0:y1, x0:x1] = False
        assert not ink.any()  # no ink outside the blocks


def test_text_blocks_words_are_on_the_pdf_page_in_order():
    checked = 0
    for seed in range(10):
        layout = compose_page(seed, DENSE)
        pdf_page = draw_pdf(layout)[0]
        for e in layout.elements:
            clip = pymupdf.Rect(e.rect)
            if e.label in TEXT_LIKE:
                extracted = pdf_page.get_text("text", clip=clip).split()
                assert extracted == e.text.split(), e.label
                checked += 1
            elif e.label == "table":
                cells = re.findall(r"<td>(.*?)</td>", e.text)
                words = [w[4] for w in pdf_page.get_text("words", clip=clip)]
                assert sorted(words) == sorted(" ".join(cells).split())
    assert checked > 50


def test_text_content_is_single_spaced_and_lines_rebuild_it():
    for seed in range(8):
        page = dense_page(seed)
        for i, block in enumerate(page.blocks):
            if block.label not in TEXT_LIKE:
                continue
            lines = [l.text for l in page.lines if l.block == i]
            assert lines, block.label
            flat = block.text.replace("\n", " ")
            assert "  " not in flat and flat == flat.strip()
            assert " ".join(lines) == flat
            if block.label != "list":
                assert "\n" not in block.text


def test_lines_lie_inside_their_block():
    for seed in range(6):
        page = dense_page(seed)
        w, h = page.image.size
        for line in page.lines:
            x0, y0, x1, y1 = page.blocks[line.block].page_bbox(w, h)
            lx0, ly0, lx1, ly1 = line.bbox_px
            assert lx0 >= x0 - 1 and ly0 >= y0 - 1 and lx1 <= x1 + 1 and ly1 <= y1 + 1


def test_glyph_centres_are_the_characters_of_each_line_inside_its_ink_box():
    for seed in range(6):
        page = dense_page(seed)
        x, y = page.glyphs[:, 0], page.glyphs[:, 1]
        for line in page.lines:
            x0, y0, x1, y1 = line.bbox_px
            inside = (x >= x0 - 1) & (x <= x1 + 1) & (y >= y0 - 1) & (y <= y1 + 1)
            drawn = [c for c in line.text if not c.isspace()]
            assert sorted(chr(int(c)) for c in page.glyphs[inside, 2]) == sorted(drawn), line.text


def test_list_items_start_with_their_marker():
    lists = [b for s in range(10) for b in dense_page(s).blocks if b.label == "list"]
    assert lists
    for block in lists:
        items = block.text.split("\n")
        if items[0].startswith("-"):
            assert all(item.startswith("- ") for item in items)
        else:
            assert [item.split(" ")[0] for item in items] == [f"{k}." for k in range(1, len(items) + 1)]


class _Cells(HTMLParser):
    def __init__(self):
        super().__init__()
        self.rows: list[int] = []

    def handle_starttag(self, tag, attrs):
        if tag == "tr":
            self.rows.append(0)
        elif tag == "td":
            self.rows[-1] += 1


def test_table_content_parses_as_html_with_all_cells():
    tables = [b for s in range(12) for b in dense_page(s).blocks if b.label == "table"]
    assert len(tables) >= 3
    for block in tables:
        assert block.text.startswith("<table><tr><td>") and block.text.endswith("</td></tr></table>")
        assert not re.search(r">\s+<", block.text)
        parser = _Cells()
        parser.feed(block.text)
        assert 2 <= len(parser.rows) <= 6 and len(set(parser.rows)) == 1 and 2 <= parser.rows[0] <= 5
        assert block.text.count("<td>") == len(parser.rows) * parser.rows[0]


def test_formula_content_is_bare_latex_that_mathtext_renders():
    formulas = [b for s in range(12) for b in dense_page(s).blocks if b.label == "formula"]
    assert formulas
    for block in formulas:
        assert "$" not in block.text and block.text in {formula.latex(i) for i in range(DENSE.formula_pool)}
    parser = MathTextParser("path")
    for i in range(0, 200, 7):
        parser.parse(f"${formula.latex(i)}$", prop=FontProperties(size=12))


def test_images_have_no_content_and_captions_name_a_figure():
    blocks = [b for s in range(12) for b in dense_page(s).blocks]
    assert all(b.text == "" for b in blocks if b.label == "image")
    captions = [b for b in blocks if b.label == "image_caption"]
    assert captions and all(re.match(r"(Figure|Fig\.) \d+[:.] ", b.text) for b in captions)


def test_two_column_pages_read_left_column_before_right():
    pages = [p for p in (dense_page(s) for s in range(12)) if p.two_columns]
    assert len(pages) >= 2
    for page in pages:
        order = [r for r in page.regions if r in ("left", "right")]
        assert "left" in order and "right" in order
        assert order == sorted(order)  # every "left" before every "right"
        lefts = [b.bbox for b, r in zip(page.blocks, page.regions) if r == "left"]
        rights = [b.bbox for b, r in zip(page.blocks, page.regions) if r == "right"]
        assert max(b[2] for b in lefts) < min(b[0] for b in rights)


def test_reading_order_is_header_body_then_footer_and_page_number():
    for seed in range(12):
        labels = [b.label for b in dense_page(seed).blocks]
        margins = [l for l in labels if l in ("header", "footer", "page_number")]
        body = [l for l in labels if l not in margins]
        expected = (["header"] if "header" in labels else []) + body + [
            l for l in ("footer", "page_number") if l in labels]
        assert labels == expected


def test_assembled_text_parses_back_to_the_blocks():
    for seed in range(6):
        page = dense_page(seed)
        assert parse_blocks(page.assembled_text) == [b for b in page.blocks]
        assert page.parent_text.count("<FORK>") == len(page.children_texts)


def test_simple_preset_gives_one_or_two_large_text_blocks():
    config = SynthConfig.simple(n_blocks=2)
    counts = set()
    for seed in range(8):
        page = render_page(seed, config)
        assert {b.label for b in page.blocks} == {"text"}
        counts.add(len(page.blocks))
        heights = [l.bbox_px[3] - l.bbox_px[1] for l in page.lines]
        assert np.median(heights) >= 0.85 * 24  # 24-32 px type: ascender to descender ~0.95 em
    assert counts == {1, 2}
    assert all(len(render_page(s, SynthConfig.simple(n_blocks=1)).blocks) == 1 for s in range(3))


def _bodies(config: SynthConfig, seeds: range) -> tuple[list, list[list]]:
    """The config's pages of these seeds, and each page's body blocks (BODY_LABELS)."""
    pages = [render_page(seed, config) for seed in seeds]
    return pages, [[b for b in page.blocks if b.label in BODY_LABELS] for page in pages]


def _mean_gap(bodies: list[list]) -> float:
    """Mean vertical gap (0-1000 grid) between consecutive body blocks of one column."""
    gaps = [b.bbox[1] - a.bbox[3] for body in bodies for a, b in zip(body, body[1:])
            if b.bbox[1] > a.bbox[3] and abs(b.bbox[0] - a.bbox[0]) < 50]
    return sum(gaps) / len(gaps)


def test_sparse_preset_leaves_white_space_around_few_blocks():
    pages, bodies = _bodies(SynthConfig.sparse(), range(20))
    assert all(1 <= len(body) <= 5 for body in bodies)
    assert len({len(body) for body in bodies}) >= 3
    assert sum(max(b.bbox[3] for b in body) < 600 for body in bodies) >= 4  # the rest of the page blank
    assert {b.label for page in pages for b in page.blocks} >= {"text", "title", "header", "page_number"}
    # block_gap_scale (1, 4) widens the gaps between blocks: the mean about doubles
    _, usual = _bodies(SynthConfig.sparse(block_gap_scale=(1.0, 1.0)), range(20))
    assert _mean_gap(bodies) > 1.5 * _mean_gap(usual)


def test_dense_preset_fills_pages_with_every_label():
    pages = [dense_page(s) for s in range(12)]
    assert {b.label for p in pages for b in p.blocks} == set(LABELS)
    for page in pages:
        assert len(page.blocks) >= 7
        assert max(b.bbox[3] for b in page.blocks if b.label not in ("footer", "page_number")) > 800


def test_real_text_fraction_picks_the_text_source():
    corpus = text.corpus()
    prose = " ".join(corpus.words)
    vocabulary = set(corpus.vocabulary)
    for fraction, check in ((1.0, lambda t: t in prose),
                            (0.0, lambda t: all(w in vocabulary for w in re.findall(r"[A-Za-z]+", t.lower())))):
        config = replace(DENSE, real_text_fraction=fraction)
        texts = [b.text for s in range(3) for b in render_page(s, config).blocks if b.label == "text"]
        assert texts and all(check(t) for t in texts)


def test_no_augmentation_leaves_the_clean_render():
    config = replace(SynthConfig(), noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0, contrast_prob=0.0)
    clean = rasterize(draw_pdf(compose_page(3, config)))
    assert np.array_equal(np.asarray(render_page(3, config).image), clean)
    noisy = replace(config, noise_prob=1.0, blur_prob=1.0, jpeg_prob=1.0, contrast_prob=1.0)
    assert not np.array_equal(np.asarray(render_page(3, noisy).image), clean)


def test_fast_text_append_matches_textwriter_append():
    fast_doc, slow_doc = pymupdf.open(), pymupdf.open()
    fast, slow = fast_doc.new_page(width=300, height=200), slow_doc.new_page(width=300, height=200)
    runs = [Run(10 + 3 * i, 20 + 20 * i, "Tg 1,234 (ok).", getattr(family(name), style), 13.5, (0.1, 0.2, 0.3))
            for i, (name, style) in enumerate(zip(FAMILY_NAMES, ("regular", "bold", "italic", "bold_italic") * 2))]
    fast_writer, slow_writer = pymupdf.TextWriter(fast.rect, color=(0.1, 0.2, 0.3)), pymupdf.TextWriter(
        slow.rect, color=(0.1, 0.2, 0.3))
    for run in runs:
        append(fast_writer, fast.rect.height, run)
        slow_writer.append((run.x, run.y), run.text, font=run.face.font, fontsize=run.size)
    fast_writer.write_text(fast)
    slow_writer.write_text(slow)
    assert fast.get_pixmap().samples == slow.get_pixmap().samples
    assert fast.get_text() == slow.get_text()


def test_reused_canvas_renders_the_same_pixels_as_a_fresh_document():
    canvas = Canvas(pages_per_document=3)
    for seed in range(7):
        layout = compose_page(seed, DENSE)
        assert np.array_equal(canvas.render(layout), rasterize(draw_pdf(layout)))


def test_path_operators_draw_what_pymupdf_shape_draws():
    for seed in range(12):
        layout = compose_page(seed, DENSE)
        polys = [p for e in layout.elements for p in e.polys]
        fast_doc, shape_doc = pymupdf.open(), pymupdf.open()
        fast = fast_doc.new_page(width=layout.width, height=layout.height)
        draw(fast, polys, [], [])
        reference = shape_doc.new_page(width=layout.width, height=layout.height)
        shape = reference.new_shape()
        for p in polys:
            shape.draw_polyline(p.points)
            shape.finish(color=p.stroke, fill=p.fill, width=p.width, closePath=p.closed, lineCap=0, lineJoin=0)
        shape.commit()
        a = np.frombuffer(fast.get_pixmap().samples, np.uint8).astype(int)
        b = np.frombuffer(reference.get_pixmap().samples, np.uint8).astype(int)
        # Shape rounds coordinates slightly differently: a few anti-aliased edge pixels differ.
        assert (a != b).mean() < 1e-4 and np.abs(a - b).max() <= 32


def test_tiny_colours_and_widths_draw_without_mupdf_errors():
    pymupdf.TOOLS.mupdf_warnings(reset=True)
    doc = pymupdf.open()
    page = doc.new_page(width=100, height=100)
    draw(page, [Poly(((10, 50), (90, 50)), (3.9e-05, 1e-7, 0.0), width=2.0),
                Poly(((10, 10), (20, 10), (20, 20)), None, (1e-9, 0.0, 0.0), closed=True)], [], [])
    pixels = np.frombuffer(page.get_pixmap().samples, np.uint8).reshape(100, 100, 3)
    assert pymupdf.TOOLS.mupdf_warnings() == ""
    assert pixels[49:51, 10:90].max() < 10 and pixels[11:14, 16:19].max() < 10  # black line, filled triangle


def test_config_rejects_invalid_values():
    for bad in (dict(min_blocks=5, max_blocks=2), dict(label_weights=(("chart", 1.0),)),
                dict(noise_prob=1.5), dict(font_size_range=(20.0, 10.0)), dict(line_spacing_range=(1.0, 1.2))):
        with pytest.raises(ValueError):
            SynthConfig(**bad)
