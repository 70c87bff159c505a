"""PageLayout: a born-digital PDF page as HPD blocks, from its text layer (`extract`).

Steps, each a short function below:
1. Reject what the rules cannot handle (`Rejected.reason`): a rotated page or > 10 % of the
   characters on rotated lines ("rotated"), fewer than 20 characters ("no_text"), raster images
   over >= 60 % of the page ("scanned"), > 2 % replacement or private-use characters
   ("bad_encoding"), more than MAX_BLOCKS blocks ("too_many_blocks").
2. Regions from the drawings: tables (`table`: text lines between horizontal rules in rows and
   columns) and images: raster images >= 5 % of the page's width and height (not shadows,
   rules, bullets), and clusters of drawings (filled plain or rounded rectangles left out:
   backgrounds, coloured boxes) >= 8 % of the page wide and 4 % high, <= 60 % of its area,
   whose text lines cover < 30 % of them, not inside a table. Text lines centred in a region
   belong to it: a table's become its cells' text, an image's are not content (figure labels).
3. The remaining MuPDF blocks regrouped into the paragraphs the page shows (`paragraphs`: MuPDF
   starts and ends blocks where nothing shows and joins paragraphs set at one leading), split
   before each line that starts a list item or changes from heading-size to body text and back,
   and consecutive list blocks joined; each labelled by `labels.label_of`.
4. Reading order: the content stream's (TeX writes columns in order), headers first, footers and
   page numbers last; a table at its first line's place, an image before the first block below
   its top that it overlaps horizontally.

Content: lines joined by a space, or by nothing after a line ending in a hyphen (hyphenation as
printed: `exam-` + `ple` -> `exam-ple`); list items one a line; tables as
`<table><tr><td>..</td></tr></table>` of their cells' text. Formulas keep the text layer's text,
but `trained` is False (it is not their LaTeX); so is any block holding U+FFFD or private-use
characters. Images have no content.
"""

from __future__ import annotations

import html
import re
from dataclasses import dataclass

import numpy as np
import pymupdf

from hpd_training import labels, table
from hpd_training.textlayer import Char, Line, TextBlock, read_blocks

MAX_BLOCKS = 80
MIN_CHARS = 20
Box = tuple[float, float, float, float]


class Rejected(Exception):
    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, eq=False)
class RealBlock:
    label: str
    bbox: Box                      # pt
    text: str
    glyphs: np.ndarray | None      # [n, 2] centres (pt) of the non-space chars spelling `text`, or None
    trained: bool                  # False: the content is not a training target
    words: tuple[tuple[str, float], ...] = ()  # (word, type size pt) of scored content, in order


@dataclass(frozen=True, eq=False)
class PageLayout:
    width: float                   # pt
    height: float
    blocks: list[RealBlock]        # reading order
    glyphs: np.ndarray             # [N, 3] float32: x, y (pt), code point of every drawn non-space char
    body_size: float               # pt
    columns: int                   # 1 or 2: most body lines lie in one half of the page


def extract(page: pymupdf.Page) -> PageLayout:
    """The page's blocks in reading order; raises Rejected."""
    if page.rotation % 360:
        raise Rejected("rotated")
    blocks = read_blocks(page)
    chars = [ch for b in blocks for line in b.lines for ch in line.ink]
    _check_text(blocks, chars)
    width, height = page.rect.width, page.rect.height
    drawings = page.get_drawings()
    tables = _tables(drawings, blocks, height)
    images = _images(page, drawings, blocks, [t.bbox for t in tables])
    body = labels.body_size([line for b in blocks for line in b.lines])
    flows = [b for b in (_strip_rotated(b) for b in blocks) if b is not None]
    out = _ordered(flows, tables, images, height, body)
    if len(out) > MAX_BLOCKS:
        raise Rejected("too_many_blocks")
    glyphs = np.array([(ch.x, ch.y, ord(ch.c)) for ch in chars], np.float32).reshape(-1, 3)
    return PageLayout(width, height, out, glyphs, body, _columns(flows, width, body))


def _check_text(blocks: list[TextBlock], chars: list[Char]) -> None:
    if len(chars) < MIN_CHARS:
        raise Rejected("no_text")
    rotated = sum(len(line.ink) for b in blocks for line in b.lines if not line.horizontal)
    if rotated > 0.1 * len(chars):
        raise Rejected("rotated")
    if sum(map(_bad, (ch.c for ch in chars))) > 0.02 * len(chars):
        raise Rejected("bad_encoding")


def _bad(c: str) -> bool:
    return c == "\ufffd" or "\ue000" <= c <= "\uf8ff" or (ord(c) < 32)


def _strip_rotated(block: TextBlock) -> TextBlock | None:
    lines = tuple(line for line in block.lines if line.horizontal)
    return TextBlock(lines, _union(line.bbox for line in lines)) if lines else None


def _union(boxes) -> Box:
    xs0, ys0, xs1, ys1 = zip(*boxes)
    return (min(xs0), min(ys0), max(xs1), max(ys1))


def _centre_in(box: Box, region: Box) -> bool:
    x, y = (box[0] + box[2]) / 2, (box[1] + box[3]) / 2
    return region[0] <= x <= region[2] and region[1] <= y <= region[3]


def _area(box: Box) -> float:
    return max(box[2] - box[0], 0) * max(box[3] - box[1], 0)


def _overlap(a: Box, b: Box) -> float:
    return _area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


# ---- regions ---------------------------------------------------------------------------

def _tables(drawings: list[dict], blocks: list[TextBlock], height: float) -> list[table.Table]:
    lines = [line for b in blocks for line in b.lines if line.horizontal]
    found = (table.grid(region, lines) for region in table.candidates(table.rules(drawings), height))
    return [t for t in found if t is not None]


def _images(page: pymupdf.Page, drawings: list[dict], blocks: list[TextBlock],
            tables: list[Box]) -> list[Box]:
    page_area = _area(tuple(page.rect))
    raster = [tuple(info["bbox"]) for info in page.get_image_info()]
    raster = [_clip(b, page.rect) for b in raster]
    raster = [b for b in raster if b[2] - b[0] >= 0.05 * page.rect.width and b[3] - b[1] >= 0.05 * page.rect.height]
    if sum(map(_area, raster)) >= 0.6 * page_area:
        raise Rejected("scanned")
    lines = [line.bbox for b in blocks for line in b.lines]
    vector = []
    art = [d for d in drawings if not _is_box(d)]
    for rect in (page.cluster_drawings(drawings=art) if art else []):
        box = _clip(tuple(rect), page.rect)
        if box[2] - box[0] < 0.08 * page.rect.width or box[3] - box[1] < 0.04 * page.rect.height:
            continue
        if _area(box) > 0.6 * page_area:  # a frame or background, not a figure
            continue
        if any(_overlap(box, t) > 0.5 * _area(box) for t in tables):
            continue
        covered = sum(_overlap(line, box) for line in lines)
        if covered < 0.3 * _area(box):
            vector.append(box)
    return _merge_boxes(raster + vector)


def _is_box(drawing: dict) -> bool:
    """A filled rectangle, plain or with rounded corners (<= 8 lines and curves), over 40 pt wide:
    a background, a coloured box behind text (beamer blocks, tcolorbox), a table's shading."""
    items = drawing["items"]
    if "f" not in drawing["type"] or drawing["rect"].width < 40:
        return False
    return (len(items) == 1 and items[0][0] in ("re", "qu")) or (
        len(items) <= 8 and all(item[0] in ("l", "c") for item in items))


def _clip(box: Box, rect: pymupdf.Rect) -> Box:
    return (max(box[0], rect.x0), max(box[1], rect.y0), min(box[2], rect.x1), min(box[3], rect.y1))


def _merge_boxes(boxes: list[Box]) -> list[Box]:
    """Overlapping boxes joined until none overlap."""
    boxes = list(boxes)
    merged = True
    while merged:
        merged = False
        for i in range(len(boxes)):
            for j in range(i + 1, len(boxes)):
                if _overlap(boxes[i], boxes[j]) > 0:
                    boxes[i] = _union([boxes[i], boxes.pop(j)])
                    merged = True
                    break
            if merged:
                break
    return boxes


# ---- blocks ----------------------------------------------------------------------------

def paragraphs(blocks: list[TextBlock]) -> list[TextBlock]:
    """MuPDF's blocks (in stream order) regrouped as the page shows them, line by line. A line of
    another MuPDF block joins one of the last OPEN_GROUPS groups when it continues it
    (`_continues`: MuPDF starts blocks where nothing shows, at a line of other type, say, and
    interleaves margin notes); a line of the same block stays with the line above unless that one
    ends a paragraph of prose or is a heading (`_ends`: MuPDF joins paragraphs at the same
    leading)."""
    groups: list[list[Line]] = []
    for block in blocks:
        for i, line in enumerate(block.lines):
            if i and not _ends(_rows(group), line):
                group.append(line)
                continue
            group = None if i else next((g for g in groups[-OPEN_GROUPS:][::-1] if _continues(g, line)), None)
            if group is None:
                group = [line]
                groups.append(group)
            else:
                group.append(line)
    return [TextBlock(tuple(g), _union(x.bbox for x in g)) for g in groups]


OPEN_GROUPS = 3


def _rows(group: list[Line]) -> list[list[Line]]:
    """The group's lines by row (MuPDF cuts a row at a change of font, sometimes)."""
    rows = [[group[0]]]
    for line in group[1:]:
        if _one_row(line, rows[-1][0]):
            rows[-1].append(line)
        else:
            rows.append([line])
    return rows


def _ends(rows: list[list[Line]], line: Line) -> bool:
    """The group's last row ends a paragraph before `line`, which MuPDF put in its block: in prose
    (two full rows in the group: the widest row alone is always full), `line` leaves the left
    edge of the rows after the first (an indented paragraph) or follows a row that is not full;
    `line` starts where the group's first row does, after rows indented under it (the next
    hanging item); or the row is a short bold heading over text that is not. `rows`: the group's
    (`_rows`)."""
    if _one_row(line, rows[-1][0]):
        return False
    size = _median_size(line)
    right = _right(rows, line)
    ends = [max(x.bbox[2] for x in row) for row in rows]
    prose = sum(_full(end, row[0], right, size) for end, row in zip(ends, rows[1:])) >= 2
    if prose and abs(line.bbox[0] - rows[1][0].bbox[0]) >= 0.5 * size:
        return True
    if len(rows) >= 2 and rows[1][0].bbox[0] - rows[0][0].bbox[0] >= 0.5 * size \
            and abs(line.bbox[0] - rows[0][0].bbox[0]) <= 1.5:
        return True  # back out of a hanging indent: the next item
    if _full(ends[-1], line, right, size):
        return False
    return prose or (labels.bold_share(rows[-1]) >= 0.8 and labels.bold_share([line]) < 0.5)


def _continues(group: list[Line], line: Line) -> bool:
    """`line` (the first of a MuPDF block) continues `group`: on its last row's row, or on the next
    row at the group's leading and type size, where no paragraph ends (`_ends`), flush with the
    group's left edge (the second row may start up to three type sizes left or right of the first:
    a paragraph's indented first line, a hanging item), and flush with the row above or after a
    full one (`_full`): what MuPDF joins within a block, across its blocks."""
    rows = _rows(group)
    last = rows[-1]
    if _one_row(line, last[0]):
        return line.bbox[0] >= last[-1].bbox[0]
    size = _median_size(line)
    pitch = _mid(line) - _mid(last[0])
    sizes = (max(ch.size for ch in line.ink), max(ch.size for x in last for ch in x.ink))  # the largest: type mixes
    if not 0 < pitch <= 1.6 * max(sizes) or abs(sizes[0] - sizes[1]) > 0.15 * max(sizes):
        return False
    if len(rows) >= 2:
        leading = min(_mid(b[0]) - _mid(a[0]) for a, b in zip(rows, rows[1:]))
        if pitch > 1.2 * leading + 0.5 or abs(line.bbox[0] - rows[1][0].bbox[0]) > 1.5:
            return False
    elif abs(line.bbox[0] - last[0].bbox[0]) > 3 * size:
        return False
    if _ends(rows, line):
        return False
    flush = abs(line.bbox[0] - last[0].bbox[0]) <= 1.5
    return flush or _full(max(x.bbox[2] for x in last), line, _right(rows, line), size)


def _one_row(line: Line, other: Line) -> bool:
    """`line` lies on `other`'s row (mid x-heights within 0.3 of its type size)."""
    return abs(_mid(line) - _mid(other)) < 0.3 * _median_size(line)


def _right(rows: list[list[Line]], line: Line) -> float:
    """The right edge of the rows and `line`: the column's, as far as they show it."""
    return max(x.bbox[2] for x in [*(x for row in rows for x in row), line])


def _full(end: float, line: Line, right: float, size: float) -> bool:
    """The row above, which ends at `end`, reaches within 4 type sizes of `right`, and the first
    word of `line` (with a space) would not have fitted after it."""
    ink = _strip(line.chars)
    stop = next((i for i, ch in enumerate(ink) if ch.c.isspace()), len(ink))
    word = ink[stop - 1].x - line.bbox[0] + 0.3 * size if stop else 0.0
    return end >= right - 4 * size and end + 0.25 * size + word > right - 0.5 * size


def _mid(line: Line) -> float:
    """The line's mid x-height (the median of its characters'), steadier than its box."""
    ys = sorted(ch.y for ch in line.ink)
    return ys[len(ys) // 2]


def _split(block: TextBlock, body: float) -> list[TextBlock]:
    """Before each line starting a list item after a non-item line (an item's marker stands
    left of the line above, or that line is an item or ends short: not a paragraph's
    `(Case` + `1) ...`), and where lines change between heading size (>= TITLE_SCALE x body) and
    body size."""
    groups: list[list[Line]] = [[block.lines[0]]]
    for prev, line in zip(block.lines, block.lines[1:]):
        big = [_median_size(x) >= labels.TITLE_SCALE * body for x in (prev, line)]
        item = labels.starts_item(line.text) and not _same_row(prev, line) and (
            line.bbox[0] < prev.bbox[0] - 2 or labels.starts_item(prev.text)
            or prev.bbox[2] < block.bbox[2] - 0.15 * (block.bbox[2] - block.bbox[0]))
        if big[0] != big[1] or (item and not labels.starts_item(groups[-1][0].text)):
            groups.append([line])
        else:
            groups[-1].append(line)
    return [TextBlock(tuple(g), _union(line.bbox for line in g)) for g in groups]


def _same_row(a: Line, b: Line) -> bool:
    return abs(a.bbox[3] - b.bbox[3]) < 1.0


def _median_size(line: Line) -> float:
    sizes = sorted(ch.size for ch in line.ink)
    return sizes[len(sizes) // 2]


def _join_lists(blocks: list[TextBlock], height: float, body: float) -> list[TextBlock]:
    """Consecutive list blocks (same left edge, gap under 2 body sizes; line boxes may overlap by one)
    become one."""
    out: list[TextBlock] = []
    for block in blocks:
        prev = out[-1] if out else None
        if (prev is not None and labels.label_of(prev, height, body) == "list"
                and labels.label_of(block, height, body) == "list"
                and abs(prev.bbox[0] - block.bbox[0]) < 2.0 and -body <= block.bbox[1] - prev.bbox[3] < 2 * body):
            out[-1] = TextBlock(prev.lines + block.lines, _union([prev.bbox, block.bbox]))
        else:
            out.append(block)
    return out


def _ordered(flows: list[TextBlock], tables: list, images: list[Box], height: float,
             body: float) -> list[RealBlock]:
    table_boxes = [t.bbox for t in tables]
    regions = table_boxes + images
    pieces: list[TextBlock | int] = []  # text blocks, and table indices at their first line's place
    placed: set[int] = set()
    for block in flows:
        kept = []
        for line in block.lines:
            hit = next((i for i, r in enumerate(regions) if _centre_in(line.bbox, r)), None)
            if hit is None:
                kept.append(line)
            elif hit < len(table_boxes) and hit not in placed:
                pieces.append(hit)
                placed.add(hit)
        if kept:
            pieces.append(TextBlock(tuple(kept), _union(line.bbox for line in kept)))
    pieces = _text_runs(pieces, height, body)
    texts = [p for p in pieces if isinstance(p, TextBlock)]
    outer = {id(min(texts, key=lambda b: b.bbox[1])), id(max(texts, key=lambda b: b.bbox[3]))} if texts else set()
    out = [_text_block(p, height, body, id(p) in outer) if isinstance(p, TextBlock)
           else _table_block(tables[p]) for p in pieces]
    out = _merge_formulas(out, body)
    for box in images:
        out.insert(_image_place(out, box), RealBlock("image", box, "", None, False))
    margins = {"header": 0, "footer": 2, "page_number": 2}
    return sorted(out, key=lambda b: margins.get(b.label, 1))  # stable: stream order within


def _merge_formulas(blocks: list[RealBlock], body: float) -> list[RealBlock]:
    """A display formula's pieces (MuPDF cuts it at every change of baseline) and its equation
    number `(3)` become one formula: consecutive formula blocks at most one body size apart
    vertically and three horizontally, and a number in the rows of a formula next to it."""
    out: list[RealBlock] = []
    for block in blocks:
        prev = out[-1] if out else None
        if prev is not None and (
                ({prev.label, block.label} == {"formula"} and _near(prev.bbox, block.bbox, body))
                or (prev.label == "formula" and _EQUATION_NUMBER.match(block.text) and _same_rows(prev.bbox, block.bbox))
                or (block.label == "formula" and _EQUATION_NUMBER.match(prev.text) and _same_rows(prev.bbox, block.bbox))):
            glyphs = np.concatenate([prev.glyphs, block.glyphs])
            out[-1] = RealBlock("formula", _union([prev.bbox, block.bbox]), f"{prev.text} {block.text}", glyphs, False)
        else:
            out.append(block)
    return out


_EQUATION_NUMBER = re.compile(r"^\(\d+(\.\d+)*[a-z]?\)$")


def _same_rows(a: Box, b: Box) -> bool:
    return min(a[3], b[3]) > max(a[1], b[1])


def _near(a: Box, b: Box, body: float) -> bool:
    dy = max(a[1], b[1]) - min(a[3], b[3])
    dx = max(a[0], b[0]) - min(a[2], b[2])
    return dy <= body and dx <= 3 * body


def _text_runs(pieces: list, height: float, body: float) -> list:
    """Each run of text blocks between tables cut into the paragraphs the page shows, then at list
    items and size changes (`_split`), and consecutive list blocks joined."""
    out: list = []
    run: list[TextBlock] = []
    for p in pieces + [None]:
        if isinstance(p, TextBlock):
            run.append(p)
            continue
        split = [piece for block in paragraphs(run) for piece in _split(block, body)]
        out += _join_lists(split, height, body)
        run = []
        if p is not None:
            out.append(p)
    return out


def _image_place(blocks: list[RealBlock], box: Box) -> int:
    for i, b in enumerate(blocks):
        if b.label in ("header",):
            continue
        overlaps = min(b.bbox[2], box[2]) > max(b.bbox[0], box[0])
        if b.bbox[1] >= box[1] and overlaps and b.label not in ("footer", "page_number"):
            return i
    return next((i for i, b in enumerate(blocks) if b.label in ("footer", "page_number")), len(blocks))


# ---- content ---------------------------------------------------------------------------

def _text_block(block: TextBlock, height: float, body: float, outermost: bool) -> RealBlock:
    label = labels.label_of(block, height, body, outermost)
    pairs = _joined(block.lines, items=label == "list")
    text = "".join(c for c, _ in pairs)
    ink = [ch for _, ch in pairs if ch is not None and not ch.c.isspace()]
    glyphs = np.array([(ch.x, ch.y) for ch in ink], np.float32).reshape(-1, 2)
    clean = not any(_bad(ch.c) for ch in ink)
    trained = clean and label != "formula"
    words = _words(pairs) if trained else ()
    return RealBlock(label, block.bbox, text, glyphs, trained, words)


def _joined(lines: tuple[Line, ...], items: bool) -> list[tuple[str, Char | None]]:
    """The block's characters with the separators between lines (None: not drawn)."""
    out: list[tuple[str, Char | None]] = []
    for line in lines:
        chars = _strip(line.chars)
        if out:
            if items and labels.starts_item(line.text):
                out.append(("\n", None))
            elif not (out[-1][0] == "-" and len(out) > 1 and out[-2][0].isalpha()):
                out.append((" ", None))
        out += [(ch.c, ch) for ch in chars]
    return out


def _strip(chars: tuple[Char, ...]) -> tuple[Char, ...]:
    start, end = 0, len(chars)
    while start < end and chars[start].c.isspace():
        start += 1
    while end > start and chars[end - 1].c.isspace():
        end -= 1
    return chars[start:end]


def _words(pairs: list[tuple[str, Char | None]]) -> tuple[tuple[str, float], ...]:
    words, current, size = [], "", 0.0
    for c, ch in pairs + [(" ", None)]:
        if c.isspace():
            if current:
                words.append((current, size))
            current = ""
        else:
            size = ch.size if not current and ch is not None else size
            current += c
    return tuple(words)


def _table_block(found: table.Table) -> RealBlock:
    """<table><tr><td>cell</td>..</tr>..</table> of the table's cells."""
    texts = [["".join(ch.c for ch in cell) for cell in row] for row in found.cells]
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c, quote=False)}</td>" for c in r) + "</tr>" for r in texts)
    ink = [ch for row in found.cells for cell in row for ch in cell if not ch.c.isspace()]
    escaped = any(html.escape(c, quote=False) != c for r in texts for c in r)
    glyphs = None if escaped else np.array([(ch.x, ch.y) for ch in ink], np.float32).reshape(-1, 2)
    clean = not any(_bad(ch.c) for ch in ink)
    words = tuple(w for row in found.cells for cell in row for w in _words([(ch.c, ch) for ch in cell]))
    return RealBlock("table", found.bbox, f"<table>{body}</table>", glyphs, clean, words if clean else ())


def _columns(flows: list[TextBlock], width: float, body: float) -> int:
    """2 when > 60 % of the body-size lines (>= 20 characters) lie within one half of the page and
    each half holds > 20 % of them."""
    halves = [0, 0, 0]  # left, right, across
    for b in flows:
        for line in b.lines:
            if abs(_median_size(line) - body) > 0.6 or len(line.ink) < 20:
                continue
            x0, _, x1, _ = line.bbox
            halves[0 if x1 <= 0.52 * width else 1 if x0 >= 0.48 * width else 2] += 1
    total = sum(halves)
    if total and halves[0] + halves[1] > 0.6 * total and min(halves[:2]) > 0.2 * total:
        return 2
    return 1
