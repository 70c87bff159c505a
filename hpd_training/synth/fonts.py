"""The fonts of synthetic pages: pymupdf's Base14 fonts and the TTF files inside matplotlib.

Both exist wherever our dependencies are installed, so pages render the same everywhere.
Fonts load once per process.
"""

from __future__ import annotations

import functools
import string
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib
import numpy as np
import pymupdf

_TTF = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
# family -> (regular, bold, italic, bold italic); a name ending in .ttf is a file in _TTF.
_FAMILIES = {
    "helvetica": ("helv", "hebo", "heit", "hebi"),
    "times": ("tiro", "tibo", "tiit", "tibi"),
    "courier": ("cour", "cobo", "coit", "cobi"),
    "dejavu-sans": ("DejaVuSans.ttf", "DejaVuSans-Bold.ttf", "DejaVuSans-Oblique.ttf",
                    "DejaVuSans-BoldOblique.ttf"),
    "dejavu-serif": ("DejaVuSerif.ttf", "DejaVuSerif-Bold.ttf", "DejaVuSerif-Italic.ttf",
                     "DejaVuSerif-BoldItalic.ttf"),
    "dejavu-mono": ("DejaVuSansMono.ttf", "DejaVuSansMono-Bold.ttf", "DejaVuSansMono-Oblique.ttf",
                    "DejaVuSansMono-BoldOblique.ttf"),
    "stix": ("STIXGeneral.ttf", "STIXGeneralBol.ttf", "STIXGeneralItalic.ttf",
             "STIXGeneralBolIta.ttf"),
}
FAMILY_NAMES = tuple(_FAMILIES)
PROSE_FAMILIES = ("helvetica", "times", "dejavu-sans", "dejavu-serif", "stix")


@dataclass(frozen=True, eq=False)
class Face:
    """One font with the vertical ink extents of its printable ASCII glyphs (in em)."""
    font: pymupdf.Font
    ascent: float   # highest ink above the baseline
    descent: float  # lowest ink below the baseline, positive
    advances: dict[str, float] = field(default_factory=dict)  # char -> advance in em (a cache)

    def width(self, text: str, size: float) -> float:
        """Advance width of text in px; == font.text_length (no kerning), ~50x faster."""
        adv = self.advances
        try:
            return size * sum(map(adv.__getitem__, text))
        except KeyError:
            adv.update((c, self.font.text_length(c, fontsize=1.0)) for c in set(text) - adv.keys())
            return size * sum(map(adv.__getitem__, text))


@dataclass(frozen=True, eq=False)
class Family:
    name: str
    regular: Face
    bold: Face
    italic: Face
    bold_italic: Face


@functools.lru_cache(maxsize=None)
def _face(name: str) -> Face:
    font = pymupdf.Font(fontfile=str(_TTF / name)) if name.endswith(".ttf") else pymupdf.Font(name)
    return Face(font, *_ink_extent(font))


def _ink_extent(font: pymupdf.Font, size: int = 100) -> tuple[float, float]:
    """(ascent, descent) in em of the ink of all printable ASCII glyphs, measured by rendering.

    (Font.glyph_bbox gives only the font's bounding box for TTF fonts.)
    """
    doc = pymupdf.open()
    page = doc.new_page(width=size * 60, height=3 * size)
    writer = pymupdf.TextWriter(page.rect)
    writer.append((size, 2 * size), string.printable.strip(), font=font, fontsize=size)
    writer.write_text(page)
    pix = page.get_pixmap(colorspace=pymupdf.csGRAY)
    ink = np.frombuffer(pix.samples, np.uint8).reshape(pix.height, pix.stride)[:, :pix.width] < 250
    rows = np.flatnonzero(ink.any(axis=1))
    return float(2 * size - rows[0]) / size, float(rows[-1] + 1 - 2 * size) / size


@functools.lru_cache(maxsize=None)
def family(name: str) -> Family:
    return Family(name, *(_face(n) for n in _FAMILIES[name]))
