"""render_page: one synthetic page image with its exact ground truth.

The page is built in pymupdf in points and rendered at config.dpi: layout.zoom = dpi / 72 px a
point (the classic presets: 72 dpi, so layout coordinates are image pixels). A block's box is
the tight box of its ink in the clean render (before augmentation), searched inside the
rectangle the block reserved (scaled to px); reserved rectangles are disjoint, so boxes never
overlap. Lines and glyph centres are in image px too.
"""

from __future__ import annotations

import functools
import math
import os
import random
from dataclasses import dataclass

import numpy as np
import pymupdf
from PIL import Image

from hpd_core.grammar import GRID, Block, drawn_positions, has_content
from hpd_training.synth.augment import augment
from hpd_training.synth.config import LINE_LABELS, SynthConfig
from hpd_training.synth.drawing import Rect, draw
from hpd_training.synth.elements import Element
from hpd_training.synth.layout import Layout, compose_page
from hpd_training.texts import BlockTexts

INK = 200  # a pixel is ink when its darkest channel is below this
PixelBox = tuple[int, int, int, int]  # x0, y0, x1, y1 in px, x1/y1 exclusive


@dataclass(frozen=True)
class Line:
    bbox_px: PixelBox  # tight ink box of the line (searched in its layout box)
    text: str
    block: int         # index into SynthPage.blocks


@dataclass(frozen=True, eq=False)
class SynthPage(BlockTexts):
    seed: int
    image: Image.Image    # RGB, augmented
    blocks: list[Block]   # reading order; bbox on the 0-1000 grid of image
    lines: list[Line]     # every rendered line of the text-like blocks (LINE_LABELS)
    regions: list[str]    # per block: top | span | body | left | right | bottom
    layout: Layout        # what was drawn

    @property
    def two_columns(self) -> bool:
        return self.layout.two_columns

    @functools.cached_property
    def element_glyphs(self) -> list[np.ndarray]:
        """Per layout element, `glyph_centres` of its characters (computed when asked: only
        training needs them)."""
        return [glyph_centres(e, self.layout.zoom) for e in self.layout.elements]

    @functools.cached_property
    def glyphs(self) -> np.ndarray:
        """[N, 3] float32: centre x, y (px) and code point of every drawn non-space character."""
        return np.concatenate([*self.element_glyphs, np.zeros((0, 3), np.float32)])

    @functools.cached_property
    def child_glyphs(self) -> list[np.ndarray | None]:
        """Per content branch (fork order): the glyph centres [n, 3] spelling its drawn characters
        (`grammar.drawn_positions`) in order, or None where the drawn characters do not spell its
        text (formulas: LaTeX text, rendered symbols)."""
        elements = iter((e, g) for e, g in zip(self.layout.elements, self.element_glyphs) if has_content(e.label))
        out = []
        for text in self.children_texts:
            glyphs = next(g for e, g in elements if e.text == text)  # blocks are the elements with ink, in order
            spelled = "".join(text[i] for i in drawn_positions(text))
            out.append(glyphs if spelled == "".join(map(chr, glyphs[:, 2].astype(np.int64))) else None)
        return out

    @property
    def child_trained(self) -> list[bool]:
        """Per content branch: whether its content is a training target (always, on synthetic pages)."""
        return [True] * len(self.children_texts)


def render_page(seed: int, config: SynthConfig = SynthConfig()) -> SynthPage:
    """Not thread-safe (pymupdf is not): use processes for parallel generation."""
    layout = compose_page(seed, config)
    pixels = _canvas().render(layout)
    blocks, lines, regions = ground_truth(layout, pixels)
    image = augment(pixels, random.Random(f"augment:{seed}"), config)
    return SynthPage(seed, image, blocks, lines, regions, layout)


def glyph_centres(element: Element, zoom: float = 1.0) -> np.ndarray:
    """[N, 3] float32: for every non-space character of the element's text runs, in the order
    drawn, the centre of its advance box (x) at mid x-height (y, 0.3 em above the baseline) in
    image px (layout units x zoom), and its code point. Training uses them as per-cell
    character targets for the vision tower."""
    out = []
    for run in element.runs:
        x = run.x
        for ch in run.text:
            advance = run.face.width(ch, run.size)
            if not ch.isspace():
                out.append(((x + advance / 2) * zoom, (run.y - 0.3 * run.size) * zoom, ord(ch)))
            x += advance
    return np.array(out, dtype=np.float32).reshape(-1, 3)


def draw_pdf(layout: Layout) -> pymupdf.Document:
    """A one-page PDF of the layout, layout.width x layout.height points."""
    doc = pymupdf.open()
    _draw(doc.new_page(width=layout.width, height=layout.height), layout)
    return doc


def rasterize(doc: pymupdf.Document, zoom: float = 1.0) -> np.ndarray:
    """uint8 [H, W, 3] of the first page at 72 x zoom dpi (zoom px per point)."""
    return _pixels(doc[0], zoom)


class Canvas:
    """Draws layouts as pages of one reused PDF document and renders them.

    Same pixels as rasterize(draw_pdf(layout)) (tested), ~6 ms a page faster: MuPDF keeps the
    document's fonts loaded and their glyphs cached. A new document is started every
    `pages_per_document` pages (bounding its growth) and after a fork.
    """

    def __init__(self, pages_per_document: int = 500):
        self._pages_per_document = pages_per_document
        self._doc: pymupdf.Document | None = None
        self._left = 0
        self._pid = os.getpid()

    def render(self, layout: Layout) -> np.ndarray:
        if self._doc is None or self._left == 0 or self._pid != os.getpid():
            self._doc, self._left, self._pid = pymupdf.open(), self._pages_per_document, os.getpid()
        self._left -= 1
        page = self._doc.new_page(width=layout.width, height=layout.height)
        _draw(page, layout)
        pixels = _pixels(page, layout.zoom)
        self._doc.delete_page(page.number)
        return pixels


@functools.lru_cache(maxsize=1)
def _canvas() -> Canvas:
    return Canvas()


def _draw(page: pymupdf.Page, layout: Layout) -> None:
    es = layout.elements
    draw(page, [p for e in es for p in e.polys] + list(layout.decorations),
         [p for e in es for p in e.pictures], [r for e in es for r in e.runs])


def _pixels(page: pymupdf.Page, zoom: float = 1.0) -> np.ndarray:
    pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), alpha=False)
    rows = np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.stride)
    return rows[:, :pix.width * 3].reshape(pix.height, pix.width, 3)


def ground_truth(layout: Layout, pixels: np.ndarray) -> tuple[list[Block], list[Line], list[str]]:
    """Blocks with ink boxes, in reading order; elements without ink are dropped."""
    ink = np.minimum(np.minimum(pixels[..., 0], pixels[..., 1]), pixels[..., 2]) < INK  # [H, W]
    h, w = ink.shape
    px = lambda r: tuple(v * layout.zoom for v in r)  # layout rectangle -> image px
    blocks, lines, regions = [], [], []
    for element, region in zip(layout.elements, layout.regions):
        box = ink_box(ink, px(element.rect))
        if box is None:
            continue
        if element.label in LINE_LABELS:
            lines += [Line(ink_box(ink, px(t.box)) or _outward(px(t.box), w, h), t.text, len(blocks))
                      for t in element.lines]
        blocks.append(Block(element.label, to_grid(box, w, h), element.text))
        regions.append(region)
    return blocks, lines, regions


def ink_box(ink: np.ndarray, rect: Rect) -> PixelBox | None:
    """Tight box of the ink pixels inside rect, or None if there are none."""
    h, w = ink.shape
    x0, y0, x1, y1 = _outward(rect, w, h)
    window = ink[y0:y1, x0:x1]
    rows, cols = np.flatnonzero(window.any(axis=1)), np.flatnonzero(window.any(axis=0))
    if rows.size == 0:
        return None
    return (x0 + int(cols[0]), y0 + int(rows[0]), x0 + int(cols[-1]) + 1, y0 + int(rows[-1]) + 1)


def to_grid(box: PixelBox, width: int, height: int) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = box
    return (round(x0 * GRID / width), round(y0 * GRID / height),
            round(x1 * GRID / width), round(y1 * GRID / height))


def _outward(r: Rect, width: int, height: int) -> PixelBox:
    """The pixels a float rectangle touches, clipped to the page."""
    return (max(0, math.floor(r[0])), max(0, math.floor(r[1])),
            min(width, math.ceil(r[2])), min(height, math.ceil(r[3])))
