"""TextLayer: the characters, lines and MuPDF blocks of a PDF page, in PDF points.

Read with `rawdict` without TEXT_PRESERVE_LIGATURES, so MuPDF splits ligature glyphs into their
letters; any ligature code point left (U+FB00-FB06) is expanded here, its letters sharing the
glyph's box; a lone surrogate (some fonts' ToUnicode maps give MuPDF half of a pair) becomes
U+FFFD, an unreadable glyph; a spacing accent drawn over the next letter is composed with it
(`compose_accents`: old TeX fonts draw `\\"o` as `¨` + `o`). Spaces are MuPDF's (TeX writes none;
MuPDF inserts them at word gaps) and are kept in the text but carry no glyph. Order is the content
stream's, which for TeX output is the typesetting order: columns one after another, footnotes after
the body.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass

import pymupdf

FLAGS = pymupdf.TEXT_PRESERVE_WHITESPACE | pymupdf.TEXT_MEDIABOX_CLIP
# spacing accents -> their combining marks
ACCENTS = {"\u00a8": "\u0308", "\u00b4": "\u0301", "`": "\u0300", "\u02c6": "\u0302", "^": "\u0302",
           "\u02dc": "\u0303", "~": "\u0303", "\u00b8": "\u0327", "\u02c7": "\u030c", "\u02d8": "\u0306",
           "\u00af": "\u0304", "\u02d9": "\u0307", "\u02da": "\u030a", "\u02dd": "\u030b", "\u02db": "\u0328"}
LIGATURES = {"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
             "\ufb05": "st", "\ufb06": "st"}
# fonts of TeX math and symbols (Computer Modern, AMS, Latin Modern, STIX, TX/PX, Euler, rsfs ...)
_MATH_FONT = re.compile(r"^(CMMI|CMSY|CMEX|CMMIB|CMBSY|MSAM|MSBM|EUFM|EUFB|EUSM|EUSB|EUEX|EURM|RSFS|"
                        r"LMMathItalic|LMMathSymbols|LMMathExtension|STIXMath|STIXTwoMath|"
                        r"txsy|txex|txmi|pxsy|pxex|pxmi|rtxmi|rtxsy|zxlr|zplm|ntxmi|ntxsy|ntxex|"
                        r"LatinModernMath|TeXGyre\w*Math|XITSMath|FiraMath|Asana|Cambria Math)",
                        re.IGNORECASE)
_BOLD_FONT = re.compile(r"bold|black|heavy|semibold|demi|CMBX|CMB\d|CMSSBX|SFBX|LinLibertineTB|LinBiolinumTB|"
                        r"-B$|\.B$|Bd\b|Medi", re.IGNORECASE)
BOLD_FLAG = 16


@dataclass(frozen=True)
class Char:
    c: str          # one character (a ligature's letters are separate Chars)
    x: float        # centre of the glyph's box (pt)
    y: float        # mid x-height: 0.3 em above the baseline (pt), as the synthetic pages' glyphs
    size: float     # font size (pt)
    bold: bool
    math: bool      # drawn in a math font


@dataclass(frozen=True)
class Line:
    chars: tuple[Char, ...]
    bbox: tuple[float, float, float, float]
    horizontal: bool

    @property
    def text(self) -> str:
        return "".join(ch.c for ch in self.chars)

    @property
    def ink(self) -> tuple[Char, ...]:
        return tuple(ch for ch in self.chars if not ch.c.isspace())


@dataclass(frozen=True)
class TextBlock:
    lines: tuple[Line, ...]
    bbox: tuple[float, float, float, float]


def is_math_font(name: str) -> bool:
    return bool(_MATH_FONT.match(name.split("+")[-1]))


def is_bold(font: str, flags: int) -> bool:
    return bool(flags & BOLD_FLAG) or bool(_BOLD_FONT.search(font.split("+")[-1]))


def _chars(span: dict) -> list[Char]:
    size, font = span["size"], span["font"]
    bold, math = is_bold(font, span["flags"]), is_math_font(font)
    out = []
    for raw in span["chars"]:
        x0, _, x1, _ = raw["bbox"]
        c = "\ufffd" if "\ud800" <= raw["c"] <= "\udfff" else raw["c"]  # a lone surrogate: no tokenizer takes it
        letters = LIGATURES.get(c, c)
        step = (x1 - x0) / len(letters)
        y = raw["origin"][1] - 0.3 * size
        out += [Char(c, x0 + step * (i + 0.5), y, size, bold, math) for i, c in enumerate(letters)]
    return out


def compose_accents(chars: list[Char]) -> list[Char]:
    """A spacing accent drawn over the next letter (TeX's OT1 `\\"o` writes `¨` then `o`) becomes
    one composed character (`ö`) at the letter's place; an accent standing apart stays."""
    out: list[Char] = []
    i = 0
    while i < len(chars):
        ch, nxt = chars[i], chars[i + 1] if i + 1 < len(chars) else None
        mark = ACCENTS.get(ch.c)
        if mark and nxt is not None and nxt.c.isalpha() and abs(ch.x - nxt.x) < 0.35 * nxt.size:
            composed = unicodedata.normalize("NFC", nxt.c + mark)
            out.append(Char(composed if len(composed) == 1 else nxt.c, nxt.x, nxt.y, nxt.size, nxt.bold, nxt.math))
            i += 2
            continue
        out.append(ch)
        i += 1
    return out


def _line(raw: dict) -> Line:
    chars = tuple(compose_accents([ch for span in raw["spans"] for ch in _chars(span)]))
    dx, dy = raw["dir"]
    return Line(chars, tuple(raw["bbox"]), abs(dy) < 1e-3 and dx > 0)


def read_blocks(page: pymupdf.Page) -> list[TextBlock]:
    """The page's text blocks in stream order; lines without characters are dropped."""
    out = []
    for raw in page.get_text("rawdict", flags=FLAGS)["blocks"]:
        if raw["type"] != 0:
            continue
        lines = tuple(line for line in map(_line, raw["lines"]) if line.ink)
        if lines:
            out.append(TextBlock(lines, tuple(raw["bbox"])))
    return out
