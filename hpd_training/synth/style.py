"""The look of one synthetic page: fonts, sizes, spacing, alignment and colours."""

from __future__ import annotations

import random
from dataclasses import dataclass

from hpd_training.synth.config import SynthConfig
from hpd_training.synth.drawing import Color
from hpd_training.synth.fonts import (FAMILY_NAMES, PROSE_FAMILIES, Family, document_families,
                                      document_mono, family)

ACCENTS: tuple[Color, ...] = ((0.1, 0.15, 0.45), (0.5, 0.08, 0.08), (0.05, 0.3, 0.15), (0.2, 0.2, 0.2))


@dataclass(frozen=True, eq=False)
class Style:
    body: Family
    heading: Family
    size: float           # body font size, px
    leading: float        # body baseline-to-baseline distance, px
    align: str            # body alignment: "left" or "justify"
    indent: float         # first-line indent of paragraphs, px
    para_gap: float       # space between paragraphs, px
    title_size: float     # document title font size, px
    small_size: float     # header, footer and page number font size, px
    color: Color          # body text
    accent: Color         # titles
    muted: Color          # header, footer, page number
    real_fraction: float  # P(a block's text is real prose)
    paragraph_words: tuple[int, int]
    source: str = "python"   # text.TEXT_SOURCES
    zoom: float = 1.0        # rendered px per layout unit (pt)
    min_size: float = 11.0   # smallest type a table may shrink to
    document: bool = False   # typesetting "document" or "letter"
    hyphens: bool = False    # paragraphs and footnotes hyphenate at line ends
    mono: Family | None = None  # code blocks (document typesetting)


def pick_style(rng: random.Random, config: SynthConfig) -> Style:
    if config.typesetting in ("document", "letter"):
        return _document_style(rng, config)
    return _classic_style(rng, config)


def _document_style(rng: random.Random, config: SynthConfig) -> Style:
    """Body 8-12 pt in one family, black; paragraphs either indented (TeX) or spaced."""
    families = document_families() if config.fonts == "document" else PROSE_FAMILIES
    body = rng.choice(families)
    heading = body if rng.random() < 0.6 else rng.choice(families)
    size = round(rng.uniform(*config.font_size_range) * 2) / 2
    indented = rng.random() < 0.55
    ink = round(rng.uniform(0.0, 0.08), 3)
    return Style(
        body=family(body), heading=family(heading), size=size,
        leading=size * rng.uniform(*config.line_spacing_range),
        align="justify" if rng.random() < 0.75 else "left",
        indent=size * rng.uniform(1.0, 2.0) if indented else 0.0,
        para_gap=size * (rng.uniform(0.0, 0.25) if indented else rng.uniform(0.4, 1.0)),
        title_size=size * rng.uniform(*config.title_scale_range),
        small_size=max(6.5, size * rng.uniform(0.75, 0.92)),
        color=(ink, ink, ink),
        accent=(ink, ink, ink) if rng.random() < 0.85 else rng.choice(ACCENTS),
        muted=(g := rng.uniform(0.0, 0.35), g, g),
        real_fraction=config.real_text_fraction,
        paragraph_words=config.paragraph_words,
        source=config.text_source, zoom=config.dpi / 72, min_size=6.5, document=True,
        hyphens=rng.random() < 0.5,
        mono=family(document_mono() if config.fonts == "document" else "courier"))


def _classic_style(rng: random.Random, config: SynthConfig) -> Style:
    prose = document_families() if config.fonts == "document" else PROSE_FAMILIES
    body = rng.choice(prose) if rng.random() < 0.9 else rng.choice(FAMILY_NAMES)
    heading = body if rng.random() < 0.6 else rng.choice(prose)
    size = round(rng.uniform(*config.font_size_range) * 2) / 2
    ink = round(rng.uniform(0.0, 0.15), 3)  # pymupdf writes colours with %g: 1e-05 would be a PDF syntax error
    return Style(
        body=family(body), heading=family(heading), size=size,
        leading=size * rng.uniform(*config.line_spacing_range),
        align="justify" if rng.random() < 0.4 else "left",
        indent=0.0 if rng.random() < 0.6 else size * rng.uniform(1.0, 2.5),
        para_gap=size * rng.uniform(0.25, 1.0),
        title_size=size * rng.uniform(*config.title_scale_range),
        small_size=max(11.0, size * rng.uniform(0.7, 0.9)),
        color=(ink, ink, ink),
        accent=(ink, ink, ink) if rng.random() < 0.7 else rng.choice(ACCENTS),
        muted=(g := rng.uniform(0.2, 0.45), g, g),
        real_fraction=config.real_text_fraction,
        paragraph_words=config.paragraph_words,
        source=config.text_source, zoom=config.dpi / 72)
