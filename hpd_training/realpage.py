"""RealPage: a training sample from a born-digital PDF page (the `TrainingPage` contract of
`hpd_training.train.data`): the page rendered at `dpi`, its blocks in the HPD grammar from
`pagelayout.extract`, and the glyph centres the pointer loss and glyph probe need.

Coordinates: boxes on the 0-1000 grid of the page; glyphs in image px (pt x dpi / 72).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymupdf
from PIL import Image

from hpd_core.grammar import GRID, Block, has_content
from hpd_training.pagelayout import PageLayout, RealBlock, extract
from hpd_training.texts import BlockTexts

DPI = 150  # real pages reach the tiled model at 150 DPI: 10-pt type ~16 px on its 1280-px canvas (docs/training.md)
MAX_SIDE = 5000


@dataclass(frozen=True, eq=False)
class RealPage(BlockTexts):
    image: Image.Image                      # RGB at `dpi`
    blocks: list[Block]                     # reading order; bbox on the 0-1000 grid
    glyphs: np.ndarray                      # [N, 3] float32: x, y (image px), code point
    child_glyphs: list[np.ndarray | None]   # per content block (fork order): [n, 2] px, or None
    child_trained: list[bool]               # per content block: False when its content is no target
    layout: PageLayout                      # what was read, in pt


def render(page: pymupdf.Page, dpi: float = DPI) -> Image.Image:
    """RGB at `dpi` as hpd_core.documents renders it, the long side capped at MAX_SIDE px
    (posters: the model sees a page resized to 1280 px anyway)."""
    zoom = min(dpi / 72, MAX_SIDE / max(page.rect.width, page.rect.height))
    pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom), colorspace=pymupdf.csRGB, alpha=False)
    return Image.frombuffer("RGB", (pix.width, pix.height), pix.samples, "raw", "RGB", pix.stride, 1).copy()


def to_grid(box: tuple[float, float, float, float], width: float, height: float) -> tuple[int, int, int, int]:
    x0, y0, x1, y1 = box
    clamp = lambda v: min(max(v, 0), GRID)  # noqa: E731
    return (clamp(round(x0 * GRID / width)), clamp(round(y0 * GRID / height)),
            clamp(round(x1 * GRID / width)), clamp(round(y1 * GRID / height)))


def from_layout(layout: PageLayout, image: Image.Image) -> RealPage:
    scale = np.float32(image.size[0] / layout.width)  # px per pt
    blocks = [Block(b.label, to_grid(b.bbox, layout.width, layout.height), b.text) for b in layout.blocks]
    content: list[RealBlock] = [b for b in layout.blocks if has_content(b.label)]
    glyphs = layout.glyphs.copy()
    glyphs[:, :2] *= scale
    child_glyphs = [None if b.glyphs is None else b.glyphs * scale for b in content]
    return RealPage(image, blocks, glyphs, child_glyphs, [b.trained for b in content], layout)


def real_page(page: pymupdf.Page, dpi: float = DPI) -> RealPage:
    """Raises pagelayout.Rejected for pages the rules cannot handle."""
    return from_layout(extract(page), render(page, dpi))
