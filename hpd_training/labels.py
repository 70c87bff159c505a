"""The label rules: which grammar label a block of a real page's text layer gets.

All rules look at the block's characters (size, weight, math font), its text and its position on
the page; sizes are relative to the page's body size (the most common type size by characters,
of the lines with >= 25 characters).
In the order they are tried (`label_of`):

1. header / footer / page_number: a block of at most 2 lines lying wholly in the top 9 % of the
   page (header) or the bottom 9 % (footer), not larger than 1.25 x body; page_number when its
   text is a page number (`12`, `- 12 -`, `xii`, `Page 3 of 9`), also in the top or bottom 15 %
   when no text lies above it (or below it): LaTeX's default page number sits ~12 % up; so
   does a running head on one row with its page number, not bold (`7. Printing 66`,
   `12 Introduction`; a bold `2 Related Work` is a section title).
2. image_caption: the text starts `Figure 3:`, `Fig. 2.`, `Table 1:`, `Listing 4.`, ... (the
   grammar has one caption label, so table captions are image_caption too).
3. formula: at least half of its non-space characters are math (a TeX math font: CMMI, CMSY,
   CMEX, MSAM, MSBM, Latin Modern Math, ...; or a Unicode math symbol or Greek letter), or a
   third when it has at most 2 lines.
4. list: its first line starts with an item marker (`•`, `–`, `*`, `1.`, `(a)`, `iii)`, ...).
5. title: at most 4 lines and 30 words at >= 1.15 x body size, or at most 2 lines and 15 words
   of which >= 80 % of the characters are bold, not ending in `.` (a run of bold prose ends so).
6. text: everything else.

Tables (pymupdf `find_tables`) and images (raster images, vector drawing clusters holding little
text) are found from the page's drawings, not by these rules (see `pagelayout`).
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter
from collections.abc import Sequence

from hpd_training.textlayer import Char, Line, TextBlock

MARGIN_BAND = 0.09      # share of the page height holding headers (top) and footers (bottom)
NUMBER_BAND = 0.15      # ... and page numbers that are the page's top or bottom text
TITLE_SCALE = 1.15
BODY_LINE = 25          # characters of a line that counts for the body size
_PAGE_NUMBER = re.compile(r"^[-–—\s]*(\d{1,3}|[ivxlcdm]{1,7}|[IVXLCDM]{1,7})[-–—\s]*$|"
                          r"^(page|seite|p\.)\s*\d{1,4}(\s*(of|/|von)\s*\d{1,4})?$", re.IGNORECASE)
_RUNNING_HEAD = re.compile(r"^\d{1,3}\s+\D.*\D$|\S\s+\d{1,3}$")  # "12 Chapter title", "7. Title 66"
_CAPTION = re.compile(r"^(figure|fig\.|table|tab\.|listing|algorithm|abbildung|abb\.|tabelle|"
                      r"tableau|figura|tabla)\s*[\dIVX]+(\.\d+)*\s*[.:|—–-]", re.IGNORECASE)
_MARKER = re.compile(r"^(?:[•◦▪▫‣∙·●○■□►▶➢➤✓✗⋆★∗]\s*|[-–—*]\s+|(?:\d{1,3}|[a-z]|[ivx]{1,5})[.)]\s|"
                     r"\((?:\d{1,3}|[a-z]|[ivx]{1,5})\)\s)")


def body_size(lines: list[Line]) -> float:
    """The most common type size, to 0.5 pt (ties: smaller), of the non-space characters of the
    lines holding >= BODY_LINE characters (prose; a letterhead's or footer's short lines in
    small type are not the body), or of all lines when none is that long."""
    long = [line for line in lines if len(line.ink) >= BODY_LINE] or lines
    counts = Counter(round(ch.size * 2) / 2 for line in long for ch in line.ink)
    if not counts:
        return 0.0
    return min(counts, key=lambda s: (-counts[s], s))


def block_size(block: TextBlock) -> float:
    """The median size of the block's non-space characters."""
    sizes = sorted(ch.size for line in block.lines for ch in line.ink)
    return sizes[len(sizes) // 2]


def is_page_number(text: str) -> bool:
    return bool(_PAGE_NUMBER.match(text.strip()))


def is_caption(text: str) -> bool:
    return bool(_CAPTION.match(text.strip()))


def starts_item(text: str) -> bool:
    return bool(_MARKER.match(text.strip()))


def is_math(ch: Char) -> bool:
    if ch.math:
        return True
    if unicodedata.category(ch.c) == "Sm":
        return True
    return "\u0370" <= ch.c <= "\u03ff" or "\U0001d400" <= ch.c <= "\U0001d7ff"


def math_share(block: TextBlock) -> float:
    ink = [ch for line in block.lines for ch in line.ink]
    return sum(map(is_math, ink)) / len(ink) if ink else 0.0


def bold_share(lines: Sequence[Line]) -> float:
    ink = [ch for line in lines for ch in line.ink]
    return sum(ch.bold for ch in ink) / len(ink) if ink else 0.0


def block_text(block: TextBlock) -> str:
    return " ".join(line.text.strip() for line in block.lines)


def margin_label(block: TextBlock, page_height: float, body: float, outermost: bool = False) -> str | None:
    """header / footer / page_number for a block in the top or bottom band, else None."""
    if len(block.lines) > 2 or block_size(block) > 1.25 * body:
        return None
    _, y0, _, y1 = block.bbox
    text = block_text(block)
    number = is_page_number(text)
    near_top, near_bottom = y1 <= NUMBER_BAND * page_height, y0 >= (1 - NUMBER_BAND) * page_height
    if outermost and number and (near_top or near_bottom):
        return "page_number"
    one_row = max(line.bbox[3] for line in block.lines) - min(line.bbox[3] for line in block.lines) < 1.5
    if (outermost and one_row and _RUNNING_HEAD.search(text) and bold_share(block.lines) < 0.5
            and (near_top or near_bottom)):
        return "header" if near_top else "footer"
    top, bottom = y1 <= MARGIN_BAND * page_height, y0 >= (1 - MARGIN_BAND) * page_height
    if not (top or bottom):
        return None
    if number:
        return "page_number"
    return "header" if top else "footer"


def label_of(block: TextBlock, page_height: float, body: float, outermost: bool = False) -> str:
    """The label of a text block (rules 1-6 of the module docstring); `outermost`: no text block
    lies above it, or none below it."""
    if margin := margin_label(block, page_height, body, outermost):
        return margin
    text = block_text(block)
    if is_caption(text):
        return "image_caption"
    share = math_share(block)
    if share >= 0.5 or (share >= 1 / 3 and len(block.lines) <= 2):
        return "formula"
    if starts_item(block.lines[0].text):
        return "list"
    words = len(text.split())
    if len(block.lines) <= 4 and words <= 30 and block_size(block) >= TITLE_SCALE * body:
        return "title"
    if len(block.lines) <= 2 and words <= 15 and bold_share(block.lines) >= 0.8 and not text.endswith("."):
        return "title"
    return "text"
