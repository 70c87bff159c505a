"""The fonts of synthetic pages: pymupdf's Base14 fonts and the TTF files inside matplotlib
(FAMILY_NAMES: they exist wherever our dependencies are installed, so pages render the same
everywhere), and for document-like pages the Debian font families of DOCUMENT_FAMILIES found
on this machine (`document_families()`). Fonts load once per process.
"""

from __future__ import annotations

import functools
import os
import shutil
import string
import sys
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

# Document families: (regular, bold, italic, bold italic) file names, looked up in FONT_DIRS.
# Debian packages: fonts-liberation2, fonts-dejavu-core, fonts-texgyre, fonts-lmodern,
# fonts-urw-base35, fonts-crosextra-carlito, fonts-crosextra-caladea, fonts-noto-core.
_TEX = ("texgyre{}-regular.otf", "texgyre{}-bold.otf", "texgyre{}-italic.otf", "texgyre{}-bolditalic.otf")
_STYLED = ("{}-Regular", "{}-Bold", "{}-Italic", "{}-BoldItalic")
DOCUMENT_FAMILIES: dict[str, tuple[str, str, str, str]] = {
    "liberation-serif": tuple(f.format("LiberationSerif") + ".ttf" for f in _STYLED),
    "liberation-sans": tuple(f.format("LiberationSans") + ".ttf" for f in _STYLED),
    "caladea": tuple(f.format("Caladea") + ".ttf" for f in _STYLED),
    "carlito": tuple(f.format("Carlito") + ".ttf" for f in _STYLED),
    "noto-serif": tuple(f.format("NotoSerif") + ".ttf" for f in _STYLED),
    "noto-sans": tuple(f.format("NotoSans") + ".ttf" for f in _STYLED),
    "texgyre-termes": tuple(f.format("termes") for f in _TEX),
    "texgyre-pagella": tuple(f.format("pagella") for f in _TEX),
    "texgyre-schola": tuple(f.format("schola") for f in _TEX),
    "texgyre-bonum": tuple(f.format("bonum") for f in _TEX),
    "texgyre-heros": tuple(f.format("heros") for f in _TEX),
    "latin-modern-roman": ("lmroman10-regular.otf", "lmroman10-bold.otf", "lmroman10-italic.otf",
                           "lmroman10-bolditalic.otf"),
    "latin-modern-sans": ("lmsans10-regular.otf", "lmsans10-bold.otf", "lmsans10-oblique.otf",
                          "lmsans10-boldoblique.otf"),
    "nimbus-roman": tuple(f.format("NimbusRoman") + ".otf" for f in _STYLED),
    "nimbus-sans": tuple(f.format("NimbusSans") + ".otf" for f in _STYLED),
    "p052": ("P052-Roman.otf", "P052-Bold.otf", "P052-Italic.otf", "P052-BoldItalic.otf"),
    "c059": ("C059-Roman.otf", "C059-Bold.otf", "C059-Italic.otf", "C059-BdIta.otf"),
    "urw-bookman": ("URWBookman-Light.otf", "URWBookman-Demi.otf", "URWBookman-LightItalic.otf",
                    "URWBookman-DemiItalic.otf"),
    "dejavu-serif-condensed": tuple(f"DejaVuSerifCondensed{s}.ttf" for s in
                                    ("", "-Bold", "-Italic", "-BoldItalic")),
    "dejavu-sans-condensed": tuple(f"DejaVuSansCondensed{s}.ttf" for s in
                                   ("", "-Bold", "-Oblique", "-BoldOblique")),
}
DOCUMENT_MONO: dict[str, tuple[str, str, str, str]] = {
    "liberation-mono": tuple(f.format("LiberationMono") + ".ttf" for f in _STYLED),
    "nimbus-mono": tuple(f.format("NimbusMonoPS") + ".otf" for f in _STYLED),
}
# Used when none of DOCUMENT_FAMILIES is installed (tests, a bare machine).
FALLBACK_FAMILIES = ("times", "helvetica")


SYSTEM_FONT_DIRS = (Path("/usr/share/fonts"), Path("/usr/share/texmf/fonts"), Path("/usr/local/share/fonts"))


def font_dirs() -> list[Path]:
    """Where document fonts are searched: $HPD_FONTS (folders; a copied subset, see
    `copy_fonts`), then the system's font folders."""
    extra = [Path(p) for p in os.environ.get("HPD_FONTS", "").split(os.pathsep) if p]
    return extra + list(SYSTEM_FONT_DIRS)


@functools.lru_cache(maxsize=None)
def _font_files(dirs: tuple[Path, ...]) -> dict[str, Path]:
    """File name -> path of every .ttf/.otf under dirs (the first found wins)."""
    found: dict[str, Path] = {}
    for d in dirs:
        if d.is_dir():
            for path in sorted(d.rglob("*")):
                if path.suffix in (".ttf", ".otf"):
                    found.setdefault(path.name, path)
    return found


@functools.lru_cache(maxsize=None)
def installed() -> dict[str, tuple[str, ...]]:
    """Family -> its four font paths, for the DOCUMENT_FAMILIES and DOCUMENT_MONO found."""
    files = _font_files(tuple(font_dirs()))
    return {name: tuple(str(files[f]) for f in faces)
            for name, faces in {**DOCUMENT_FAMILIES, **DOCUMENT_MONO}.items()
            if all(f in files for f in faces)}


def document_families() -> tuple[str, ...]:
    """Names of the installed DOCUMENT_FAMILIES (sorted), or FALLBACK_FAMILIES if none is."""
    return tuple(sorted(set(installed()) & set(DOCUMENT_FAMILIES))) or FALLBACK_FAMILIES


def document_mono() -> str:
    """The first installed DOCUMENT_MONO family, or Base14 Courier."""
    return next((n for n in DOCUMENT_MONO if n in installed()), "courier")


def copy_fonts(target: Path, names: tuple[str, ...]) -> int:
    """Copies the files of the named installed families into target; returns bytes copied."""
    target.mkdir(parents=True, exist_ok=True)
    paths = [Path(p) for name in names for p in installed()[name]]
    for path in paths:
        shutil.copy2(path, target / path.name)
    return sum(p.stat().st_size for p in paths)


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
    if name.startswith("/"):  # a document family's file
        font = pymupdf.Font(fontfile=name)
    else:
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
    return Family(name, *(_face(n) for n in (_FAMILIES.get(name) or installed()[name])))


# The subset copied for machines without the Debian packages (~12 MB): every document family
# but the largest files (Noto, DejaVu Sans Condensed), and one monospaced family.
CARRY_FAMILIES = tuple(n for n in DOCUMENT_FAMILIES if not n.startswith(("noto-", "dejavu-sans"))) + (
    "liberation-mono",)


if __name__ == "__main__":
    # python -m hpd_training.synth.fonts DIR: copies CARRY_FAMILIES there; point HPD_FONTS at DIR.
    size = copy_fonts(Path(sys.argv[1]), CARRY_FAMILIES)
    print(f"{len(CARRY_FAMILIES)} families, {size / 1e6:.1f} MB in {sys.argv[1]}", file=sys.stderr)
