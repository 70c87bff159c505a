"""The kind of a document (a PDF), by rules on its first page, tried in this order:

- poster: the first page's long side is >= 1,400 pt (A2 and up).
- slides: landscape (width > height) with a width <= 850 pt (beamer's 364 x 273 pt, 16:9
  frames, landscape letter/A4 presentations).
- letter: the file name has `letter`, `lettre`, `brief`, `lttr`, `invoice`, `memo`; or the first
  page opens a line with `Dear`, `Sehr geehrte`, `Madame`, `Monsieur`, or has `Yours sincerely`
  / `Yours faithfully` / `Best regards` / `Mit freundlichen Grüßen`.
- thesis: the file or package name has `thesis`, `these`, `dissertation`, `diss`; or the first
  page names a thesis or dissertation and a degree, a university or being submitted.
- paper-2col / paper-1col: `Abstract` (or `Zusammenfassung`, `Résumé`) on the first page of a
  PDF of <= 40 pages, `References` / `Bibliography` / `Literatur` on one of its last two pages,
  and `package` fewer than 3 times on the first page (a package's manual with an abstract is a
  manual); two columns when the first page or the second is (`columns`).
- manual: the rest (package documentation, the bulk of TeX Live's PDFs).
"""

from __future__ import annotations

import re
from pathlib import Path

import pymupdf

KINDS = ("paper-1col", "paper-2col", "manual", "letter", "thesis", "slides", "poster")
_LETTER_NAME = re.compile(r"letter|lettre|brief|lttr|invoice|memo", re.IGNORECASE)
_LETTER_TEXT = re.compile(r"^\s*(dear|sehr geehrte|madame|monsieur)\b|yours (sincerely|faithfully)|"
                          r"best regards|mit freundlichen gr", re.IGNORECASE | re.MULTILINE)
_THESIS_NAME = re.compile(r"thesis|these|dissertation|diss(?![a-z])", re.IGNORECASE)
_THESIS_TEXT = re.compile(r"thesis|dissertation", re.IGNORECASE)
_DEGREE_TEXT = re.compile(r"degree|university|universit|submitted|doctor|master|bachelor", re.IGNORECASE)
_ABSTRACT = re.compile(r"\b(abstract|zusammenfassung|résumé)\b", re.IGNORECASE)
_REFERENCES = re.compile(r"\b(references|bibliography|literatur|bibliographie|références)\b", re.IGNORECASE)
_PACKAGE = re.compile(r"\bpackage\b", re.IGNORECASE)


def columns(page: pymupdf.Page) -> int:
    """2 when >= 60 % of the page's text lines (>= 20 characters) lie within one half of the page,
    each half holding >= 20 % of them; else 1."""
    width = page.rect.width
    counts = [0, 0, 0]
    for block in page.get_text("dict", flags=0)["blocks"]:
        for line in block.get("lines", ()):
            if sum(len(s["text"].strip()) for s in line["spans"]) < 20:
                continue
            x0, _, x1, _ = line["bbox"]
            counts[0 if x1 <= 0.52 * width else 1 if x0 >= 0.48 * width else 2] += 1
    total = sum(counts)
    return 2 if total and counts[0] + counts[1] >= 0.6 * total and min(counts[:2]) >= 0.2 * total else 1


def kind_of(doc: pymupdf.Document, path: str, package: str) -> str:
    first = doc[0]
    width, height = first.rect.width, first.rect.height
    if max(width, height) >= 1400:
        return "poster"
    if width > height and width <= 850:
        return "slides"
    text = first.get_text()
    stem = Path(path).stem
    if _LETTER_NAME.search(stem) or _LETTER_TEXT.search(text):
        return "letter"
    if _THESIS_NAME.search(stem) or _THESIS_NAME.search(package) or (
            _THESIS_TEXT.search(text) and _DEGREE_TEXT.search(text)):
        return "thesis"
    if doc.page_count <= 40 and _ABSTRACT.search(text) and len(_PACKAGE.findall(text)) < 3 \
            and _REFERENCES.search(doc[-1].get_text() + doc[max(doc.page_count - 2, 0)].get_text()):
        two = any(columns(doc[i]) == 2 for i in range(min(2, doc.page_count)))
        return "paper-2col" if two else "paper-1col"
    return "manual"
