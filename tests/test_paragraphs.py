"""Paragraphs as the page shows them (`pagelayout.paragraphs`), from MuPDF's blocks built here: lines
of fixed-advance characters (half the type size each), so a row is full exactly when the next
word would not have fitted in the column."""

from __future__ import annotations

from hpd_training.pagelayout import paragraphs
from hpd_training.textlayer import Char, Line, TextBlock

SIZE, LEFT, WIDTH = 10.0, 72.0, 400.0  # a column of 80 characters
ADVANCE = SIZE / 2
WORDS = "the order in which type was set left column first then the right one so that".split()


def row(text: str, y: float, x: float = LEFT, size: float = SIZE, bold: bool = False) -> Line:
    advance = size / 2
    chars = tuple(Char(c, x + (i + 0.5) * advance, y, size, bold, False) for i, c in enumerate(text))
    return Line(chars, (x, y - 0.7 * size, x + len(text) * advance, y + 0.3 * size), True)


def prose(rows: int, y: float, x: float = LEFT, last: int = 30, indent: float = 0.0) -> list[Line]:
    """`rows` rows of words wrapped at the column's width (each full: the next word would not fit),
    the last one `last` characters long; the first row indented by `indent`."""
    out, words = [], WORDS * 40
    for i in range(rows):
        start = x + indent * (i == 0)
        room = int((LEFT + WIDTH - start) / ADVANCE) if i < rows - 1 else last
        text = words.pop(0)
        while len(text) + 1 + len(words[0]) <= room:
            text += " " + words.pop(0)
        out.append(row(text[:room], y + 12 * i, start))
    return out


def block(*lines: Line) -> TextBlock:
    return TextBlock(lines, (min(x.bbox[0] for x in lines), min(x.bbox[1] for x in lines),
                             max(x.bbox[2] for x in lines), max(x.bbox[3] for x in lines)))


def shape(blocks: list[TextBlock]) -> list[int]:
    return [len(b.lines) for b in paragraphs(blocks)]


def test_a_paragraph_mupdf_cut_into_blocks_is_one_block():
    lines = prose(4, 100)
    assert shape([block(*lines[:2]), block(lines[2]), block(lines[3])]) == [4]


def test_a_block_after_a_short_row_or_at_another_size_or_leading_is_not_joined():
    lines = prose(3, 100, last=30)
    after_short = row("flush with the column, after a short row", 136)
    assert shape([block(*lines), block(after_short)]) == [3, 1]
    full = prose(2, 100, last=78)
    small = row("the same place in smaller type", 124, size=7)
    far = row("the same place after an empty line", 136)
    assert shape([block(*full), block(small)]) == [2, 1]
    assert shape([block(*full), block(far)]) == [2, 1]


def test_paragraphs_mupdf_joined_are_cut_where_a_short_row_ends_prose():
    first, second = prose(3, 100), prose(3, 136, indent=15)
    flush = prose(3, 172)
    assert shape([block(*first, *second, *flush)]) == [3, 3, 3]


def test_hanging_items_are_one_block_each_whatever_mupdf_joined():
    items = []
    for i in range(3):
        head = row(f"[{i + 1}] Author, A. and Author, B. A title of some length that fills a row. In Pro-",
                   100 + 36 * i)
        items += [head, row("ceedings of a meeting, pages 1-10, a city, a year.", 112 + 36 * i, LEFT + 15),
                  row("A second line under the hanging indent.", 124 + 36 * i, LEFT + 15)]
    # MuPDF's cut: each item's first row alone, its other rows with the next item's first row
    mupdf = [block(items[0]), block(items[1], items[2], items[3]), block(items[4], items[5], items[6]),
             block(items[7], items[8])]
    assert shape(mupdf) == [3, 3, 3]


def test_short_lines_mupdf_joined_stay_one_block():
    display = [row("123456789012345 = 12 x 9876543210321 + 493827", 100)] + [
        row(f"{'9' * (12 - i)} = {i} x {'4' * (8 - i)} + {i * 7}", 112 + 12 * i, LEFT + 5 * i) for i in range(6)]
    assert shape([block(*display)]) == [7]


def test_a_margin_note_inside_a_paragraph_does_not_cut_it():
    lines = prose(4, 100)
    note = row("Note", 112, x=20, size=7)
    assert shape([block(*lines[:2]), block(note), block(*lines[2:])]) == [4, 1]


def test_a_short_bold_heading_is_cut_from_the_text_mupdf_joined_to_it():
    heading = row("References", 88, bold=True)
    assert shape([block(heading, *prose(3, 100))]) == [1, 3]
