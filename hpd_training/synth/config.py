"""SynthConfig: what kind of synthetic pages to draw, with presets for the training stages."""

from __future__ import annotations

from dataclasses import dataclass, replace

LABELS = ("title", "text", "list", "table", "formula", "image", "image_caption",
          "header", "footer", "page_number")
# Labels drawn in the body flow; captions follow images, the margins hold the rest.
BODY_LABELS = ("title", "text", "list", "table", "formula", "image")
# Labels whose every rendered line becomes a `Line` of the page.
LINE_LABELS = frozenset({"title", "text", "list", "image_caption", "header", "footer",
                         "page_number"})

Range = tuple[float, float]

# The bundled model's type sizes: body text in px on a 768-px-wide page, seen squeezed into one
# 640-px tile (x-height about 7-9 px at 8-px patches); dense pages a little smaller.
LARGE_TYPE: Range = (22.0, 28.0)
DENSE_LARGE_TYPE: Range = (20.0, 26.0)

# Real page sizes in points (width, height), drawn uniformly: US letter and A4 most often, then
# landscape, A5 and a 6 x 9 in book page.
PAGE_SIZES: tuple[tuple[float, float], ...] = (
    (612.0, 792.0), (612.0, 792.0), (612.0, 792.0), (595.0, 842.0), (595.0, 842.0), (595.0, 842.0),
    (792.0, 612.0), (842.0, 595.0), (420.0, 595.0), (432.0, 648.0))
# Landscape pages only: letter and A4 turned, and beamer's 4:3 (128 x 96 mm) and 16:9 slides. The
# 20-tile grid lays a landscape page out 5 x 4 where a portrait one is 4 x 5, and the LM sees only
# the sequence of tiles, so it must learn both placements from pages of both (docs/training.md,
# session 19: at 3% landscape pages every held-out slide lost its boxes).
LANDSCAPE_SIZES: tuple[tuple[float, float], ...] = (
    (792.0, 612.0), (842.0, 595.0), (363.0, 272.0), (455.0, 256.0))
LETTER_SIZES: tuple[tuple[float, float], ...] = ((612.0, 792.0), (595.0, 842.0))  # US letter, A4
TEXT_SOURCES = ("python", "general")  # data/corpus.txt (Python's docs) | data/general.txt.xz (Debian)
FONT_SETS = ("builtin", "document")   # fonts.FAMILY_NAMES | fonts.document_families()
TYPESETTINGS = ("classic", "document", "letter")


@dataclass(frozen=True)
class SynthConfig:
    width: int = 768                       # page image width in px
    aspect_range: Range = (11 / 8.5, 297 / 210)  # height / width: US letter .. A4
    min_blocks: int = 3                    # body blocks (BODY_LABELS) asked for; a full page stops early
    max_blocks: int = 10
    label_weights: tuple[tuple[str, float], ...] = (
        ("title", 0.8), ("text", 5.0), ("list", 1.0), ("table", 1.0), ("formula", 0.6),
        ("image", 0.8))
    doc_title_prob: float = 0.5            # a full-width title opens the body
    caption_prob: float = 0.7              # an image_caption under an image
    header_prob: float = 0.4
    footer_prob: float = 0.3
    page_number_prob: float = 0.5
    two_column_prob: float = 0.3
    font_size_range: Range = (14.0, 20.0)  # body text size in px (x-height about half of it)
    title_scale_range: Range = (1.3, 2.0)  # document title size / body size
    line_spacing_range: Range = (1.15, 1.5)
    block_gap_scale: Range = (1.0, 1.0)    # the body's gaps between blocks x a factor drawn per page
    paragraph_words: tuple[int, int] = (12, 110)  # words drawn for a text block (it may be cut)
    real_text_fraction: float = 0.5        # P(a block's text is real prose rather than random words)
    noise_prob: float = 0.3
    blur_prob: float = 0.2
    jpeg_prob: float = 0.3
    contrast_prob: float = 0.3
    formula_pool: int = 512                # distinct formulas (rendered once per process, cached)
    # Layout units are points; the page renders at dpi (72: 1 pt = 1 px, the classic presets).
    dpi: float = 72.0
    page_sizes: tuple[tuple[float, float], ...] = ()  # drawn per page; () = width x aspect_range
    text_source: str = "python"            # TEXT_SOURCES
    fonts: str = "builtin"                 # FONT_SETS
    typesetting: str = "classic"           # "document": numbered headings, footnotes, table captions;
                                           # "letter": addresses, a date, paragraphs, a signature

    def __post_init__(self) -> None:
        if self.width < 128:
            raise ValueError(f"width must be >= 128 px, got {self.width}")
        if not 1 <= self.min_blocks <= self.max_blocks:
            raise ValueError(f"need 1 <= min_blocks <= max_blocks, got {self.min_blocks}, {self.max_blocks}")
        for name in ("aspect_range", "font_size_range", "title_scale_range", "line_spacing_range",
                     "block_gap_scale"):
            lo, hi = getattr(self, name)
            if not 0 < lo <= hi:
                raise ValueError(f"{name} must be an increasing positive range, got {(lo, hi)}")
        if not 1 <= self.paragraph_words[0] <= self.paragraph_words[1]:
            raise ValueError(f"paragraph_words must be an increasing range >= 1, got {self.paragraph_words}")
        if self.line_spacing_range[0] < 1.1:
            raise ValueError("line_spacing_range must start at >= 1.1 (lines would touch)")
        for name in ("doc_title_prob", "caption_prob", "header_prob", "footer_prob",
                     "page_number_prob", "two_column_prob", "real_text_fraction", "noise_prob",
                     "blur_prob", "jpeg_prob", "contrast_prob"):
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ValueError(f"{name} must be a probability, got {getattr(self, name)}")
        weights = dict(self.label_weights)
        if unknown := set(weights) - set(BODY_LABELS):
            raise ValueError(f"label_weights: not body labels: {sorted(unknown)}")
        if any(w < 0 for w in weights.values()) or sum(weights.values()) <= 0:
            raise ValueError("label_weights must be >= 0 with a positive sum")
        if self.formula_pool < 1:
            raise ValueError("formula_pool must be >= 1")
        if not 36 <= self.dpi <= 600:
            raise ValueError(f"dpi must be in [36, 600], got {self.dpi}")
        if any(not (100 <= w <= 2000 and 100 <= h <= 2000) for w, h in self.page_sizes):
            raise ValueError(f"page_sizes must be 100-2000 pt a side, got {self.page_sizes}")
        for name, allowed in (("text_source", TEXT_SOURCES), ("fonts", FONT_SETS),
                              ("typesetting", TYPESETTINGS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} must be one of {allowed}, got {getattr(self, name)!r}")

    @classmethod
    def simple(cls, n_blocks: int = 2, **overrides) -> SynthConfig:
        """1..n_blocks paragraphs of large type in one column, nothing else: early training."""
        base = cls(min_blocks=1, max_blocks=n_blocks, label_weights=(("text", 1.0),),
                   doc_title_prob=0.0, caption_prob=0.0, header_prob=0.0, footer_prob=0.0,
                   page_number_prob=0.0, two_column_prob=0.0, font_size_range=(24.0, 32.0),
                   noise_prob=0.1, blur_prob=0.1, jpeg_prob=0.1, contrast_prob=0.1)
        return replace(base, **overrides)

    @classmethod
    def lines(cls, **overrides) -> SynthConfig:
        """10-24 short blocks (2-6 random words: one or two lines each) in large type: the most
        reading targets per page, no language shortcut."""
        base = cls(min_blocks=10, max_blocks=24, font_size_range=LARGE_TYPE, real_text_fraction=0.0,
                   label_weights=(("text", 1.0),), doc_title_prob=0.0, caption_prob=0.0, header_prob=0.0,
                   footer_prob=0.0, page_number_prob=0.0, two_column_prob=0.5, paragraph_words=(2, 6))
        return replace(base, **overrides)

    @classmethod
    def sparse(cls, **overrides) -> SynthConfig:
        """1-5 body blocks of any label, the margins' blocks sometimes, gaps between blocks up to
        4x the usual and often white space below: a letter, a memo, a short note. The bundled
        model's type sizes."""
        base = cls(min_blocks=1, max_blocks=5, font_size_range=DENSE_LARGE_TYPE, doc_title_prob=0.4,
                   header_prob=0.3, footer_prob=0.3, page_number_prob=0.4, two_column_prob=0.2,
                   paragraph_words=(8, 80), block_gap_scale=(1.0, 4.0))
        return replace(base, **overrides)

    @classmethod
    def dense(cls, **overrides) -> SynthConfig:
        """Full pages with every label: header, footer, page number, often two columns."""
        base = cls(min_blocks=14, max_blocks=24, doc_title_prob=0.8, caption_prob=0.9,
                   header_prob=0.9, footer_prob=0.8, page_number_prob=0.9, two_column_prob=0.5,
                   font_size_range=(14.0, 17.0), paragraph_words=(10, 70), label_weights=(
                       ("title", 1.0), ("text", 4.0), ("list", 1.2), ("table", 1.2),
                       ("formula", 0.8), ("image", 0.8)))
        return replace(base, **overrides)

    @classmethod
    def document(cls, **overrides) -> SynthConfig:
        """Pages that look like real documents, at the resolution real pages reach the model:
        letter, A4 and other real sizes (some landscape) rendered at 150 dpi, 8-12 pt body text
        in Debian's fonts, general English and technical text, mostly justified paragraphs with
        indents or spacing, numbered section headings, running headers, page numbers,
        footnotes, captioned tables and figures, display formulas, one or two columns."""
        base = cls(dpi=150.0, page_sizes=PAGE_SIZES, text_source="general", fonts="document",
                   typesetting="document", min_blocks=8, max_blocks=30, doc_title_prob=0.35,
                   caption_prob=0.9, header_prob=0.6, footer_prob=0.35, page_number_prob=0.85,
                   two_column_prob=0.4, font_size_range=(8.0, 12.0), title_scale_range=(1.4, 2.2),
                   line_spacing_range=(1.12, 1.35), paragraph_words=(20, 150),
                   real_text_fraction=0.8, noise_prob=0.15, blur_prob=0.1, jpeg_prob=0.2,
                   contrast_prob=0.2, label_weights=(
                       ("title", 1.0), ("text", 6.0), ("list", 0.8), ("table", 0.7),
                       ("formula", 0.5), ("image", 0.5)))
        return replace(base, **overrides)

    @classmethod
    def letter(cls, **overrides) -> SynthConfig:
        """Letters as `document()` sets its pages (150 dpi, Debian's fonts, general text), on US
        letter and A4, body 9-13 pt: addresses, a date, a salutation, 1-5 paragraphs, a closing and
        a signature's name (`layout._letter`); a footer line on some, rarely a running header or a
        page number."""
        base = cls.document(typesetting="letter", page_sizes=LETTER_SIZES, min_blocks=1, max_blocks=5,
                            header_prob=0.15, footer_prob=0.4, page_number_prob=0.15, two_column_prob=0.0,
                            font_size_range=(9.0, 13.0), paragraph_words=(15, 110))
        return replace(base, **overrides)
