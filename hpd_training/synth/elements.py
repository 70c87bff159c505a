"""Blocks of a synthetic page: each builder draws one block into a slot and returns its content.

A builder gets the page's rng and style and a `Slot` (where the block may go) and returns an
`Element` (what to draw, the block's ground-truth content and the rectangle it reserved), or
None when nothing of it fits. Text is wrapped by us at spaces only, so the content of a text
block is its rendered words joined by single spaces; a block cut at the slot's bottom keeps
only the words it rendered.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, field

from hpd_training.synth import chart, formula, text
from hpd_training.synth.drawing import Color, Picture, Poly, Rect, Run, rect_poly
from hpd_training.synth.fonts import Face
from hpd_training.synth.style import Style

PAD = 2.0  # px between a block's content and the rectangle it reserves (keeps blocks apart)


@dataclass(frozen=True)
class Slot:
    """Room for one block: content from x to x + width, from y + PAD down to bottom - PAD."""
    x: float
    y: float
    width: float
    bottom: float

    def top(self) -> float:
        return self.y + PAD


@dataclass(frozen=True)
class TextLine:
    box: Rect  # pen start to advance end; the font's ASCII ink extent above/below the baseline
    text: str


@dataclass(frozen=True, eq=False)
class Element:
    label: str
    text: str   # ground-truth content (HPD grammar conventions)
    rect: Rect  # reserved rectangle: holds all of the block's ink; rectangles never overlap
    runs: tuple[Run, ...] = ()
    polys: tuple[Poly, ...] = ()
    pictures: tuple[Picture, ...] = ()
    lines: tuple[TextLine, ...] = ()


@dataclass(frozen=True, eq=False)
class Setting:
    """How lines of text are set."""
    face: Face
    size: float
    leading: float  # baseline-to-baseline, px
    color: Color
    align: str = "left"  # left | center | right | justify
    stretch: float = 3.0  # a justified line's widest word gap, in spaces (else it is set left)
    emphasis: dict[str, Face] = field(default_factory=dict)  # words set in another face (italic)

    def face_of(self, word: str) -> Face:
        return self.emphasis.get(word, self.face)

    def height(self, n_lines: int) -> float:
        return (self.face.ascent + self.face.descent) * self.size + (n_lines - 1) * self.leading


def wrap(words: list[str], face: Face, size: float, first: float, rest: float,
         hyphens: bool = False, emphasis: dict[str, Face] | None = None) -> list[list[str]]:
    """Greedy word wrap: the first line is `first` px wide, the others `rest` px.

    A word wider than a whole line is left out (so content == what is drawn). With `hyphens`,
    a word that does not fit at the end of a line is split where `hyphen_points` allow, if its
    first part and a "-" fit: "exam-" ends the line, "ple" starts the next. Words in
    `emphasis` are measured in their face.
    """
    space = face.width(" ", size)
    lines: list[list[str]] = []
    line: list[str] = []
    used = 0.0
    width = lambda wd: (emphasis.get(wd, face) if emphasis else face).width(wd, size)
    for word in words:
        w = width(word)
        limit = first if not lines else rest
        if line and used + space + w <= limit:
            line.append(word)
            used += space + w
            continue
        if line and hyphens and w <= rest:
            room = limit - used - space
            fits = [i for i in hyphen_points(word) if width(word[:i] + "-") <= room]
            if fits and not (emphasis and word in emphasis):
                line.append(word[:fits[-1]] + "-")
                word = word[fits[-1]:]
                w = width(word)
        if line:
            lines.append(line)
            limit = rest
        line, used = ([word], w) if w <= limit else ([], 0.0)
    if line:
        lines.append(line)
    return lines


_VOWELS = frozenset("aeiouy")


def hyphen_points(word: str) -> list[int]:
    """Where a plain word of 7+ letters may break (increasing): between two consonants or
    before a consonant followed by a vowel, keeping 3 letters and a vowel on each side. Not a
    dictionary's hyphenation, but it looks like one."""
    if len(word) < 7 or not word.isalpha() or not word[1:].islower():
        return []
    low = word.lower()
    vowel = [c in _VOWELS for c in low]
    return [i for i in range(3, len(word) - 2) if any(vowel[:i]) and any(vowel[i:i + 3])
            and ((not vowel[i - 1] and not vowel[i]) or (vowel[i - 1] and not vowel[i] and vowel[i + 1]))]


def joined(lines: list[list[str]], hyphens: bool) -> str:
    """The content of wrapped lines: words single-spaced; with `hyphens`, a line ending in a
    letter and "-" joins the next line without a space (hyphenation kept as printed, as in
    real pages' text layers: "exam-" + "ple" -> "exam-ple")."""
    texts = [" ".join(words) for words in lines]
    if not hyphens:
        return " ".join(texts)
    out = texts[0]
    for prev, line in zip(texts, texts[1:]):
        out += ("" if len(prev) > 1 and prev[-1] == "-" and prev[-2].isalpha() else " ") + line
    return out


def set_lines(lines: list[list[str]], s: Setting, x: float, y: float, width: float,
              first: float = 0.0, rest: float = 0.0) -> tuple[list[Run], list[TextLine]]:
    """Runs and line boxes for `lines` with the top of the first line's ink at y.

    `first` / `rest` offset the first / other lines from x (indent, hanging indent).
    """
    runs, boxes = [], []
    space = s.face.width(" ", s.size)
    for i, words in enumerate(lines):
        base = y + s.face.ascent * s.size + i * s.leading
        off = first if i == 0 else rest
        avail = width - off
        line = " ".join(words)
        mixed = any(word in s.emphasis for word in words)
        widths = [s.face_of(word).width(word, s.size) for word in words]
        w = sum(widths) + space * (len(words) - 1) if mixed else s.face.width(line, s.size)
        lx = x + off + {"center": (avail - w) / 2, "right": avail - w}.get(s.align, 0.0)
        gap = (avail - sum(widths)) / max(1, len(words) - 1)
        justify = s.align == "justify" and i < len(lines) - 1 and len(words) > 1 and gap <= s.stretch * space
        if justify or mixed:  # a run a word
            pen, step = lx, gap if justify else space
            for word, ww in zip(words, widths):
                runs.append(Run(pen, base, word, s.face_of(word), s.size, s.color))
                pen += ww + step
            w = avail if justify else w
        else:
            runs.append(Run(lx, base, line, s.face, s.size, s.color))
        boxes.append(TextLine((lx, base - s.face.ascent * s.size, lx + w, base + s.face.descent * s.size), line))
    return runs, boxes


def fitting(s: Setting, slot: Slot, n_lines: int) -> int:
    """How many of n_lines fit between the slot's top and bottom."""
    room = slot.bottom - PAD - slot.top() - (s.face.ascent + s.face.descent) * s.size + 1e-6  # float slack
    return 0 if room < 0 else min(n_lines, 1 + int(room // s.leading))


def _text_element(label: str, lines: list[list[str]], s: Setting, slot: Slot,
                  first: float = 0.0, rest: float = 0.0, hyphens: bool = False) -> Element | None:
    lines = lines[:fitting(s, slot, len(lines))]
    if not lines:
        return None
    runs, boxes = set_lines(lines, s, slot.x, slot.top(), slot.width, first, rest)
    bottom = slot.top() + s.height(len(lines)) + PAD
    content = joined(lines, hyphens)
    return Element(label, content, _reserve(slot, bottom), tuple(runs), lines=tuple(boxes))


def _reserve(slot: Slot, bottom: float) -> Rect:
    return (slot.x - PAD, slot.y, slot.x + slot.width + PAD, bottom)


def _real(rng: random.Random, style: Style) -> bool:
    return rng.random() < style.real_fraction


def paragraph(rng: random.Random, style: Style, slot: Slot) -> Element | None:
    words = text.words(rng, _real(rng, style), rng.randint(*style.paragraph_words), style.source)
    s = Setting(style.body.regular, style.size, style.leading, style.color, style.align,
                6.0 if style.document else 3.0, _emphasis(rng, style, words) if style.document else {})
    lines = wrap(words, s.face, s.size, slot.width - style.indent, slot.width, style.hyphens, s.emphasis)
    return _text_element("text", lines, s, slot, first=style.indent, hyphens=style.hyphens)


def _emphasis(rng: random.Random, style: Style, words: list[str]) -> dict[str, Face]:
    """Half of a document's paragraphs set 1-3 of their words (every occurrence) in italic, or
    bold, as terms and names are."""
    plain = sorted({w for w in words[1:] if w.isalpha() and len(w) > 3})
    if rng.random() < 0.5 or not plain:
        return {}
    face = style.body.italic if rng.random() < 0.75 else style.body.bold
    return {w: face for w in rng.sample(plain, min(len(plain), rng.randint(1, 3)))}


def title(rng: random.Random, style: Style, slot: Slot, document: bool) -> Element | None:
    """A document title (large, often centred) or a section title; at most two lines."""
    size = style.title_size if document else style.size * rng.uniform(1.05, 1.35)
    face = style.heading.bold if rng.random() < 0.8 else style.heading.regular
    words = text.phrase(rng, _real(rng, style), rng.randint(2, 12 if document else 7), style.source)
    if not document and rng.random() < 0.3:
        words.insert(0, rng.choice((f"{rng.randint(1, 9)}", f"{rng.randint(1, 9)}.{rng.randint(1, 9)}",
                                    f"{rng.choice('IVX')}.")))
    align = "center" if document and rng.random() < 0.6 else "left"
    s = Setting(face, size, size * rng.uniform(1.15, 1.3), style.accent, align)
    return _text_element("title", wrap(words, face, size, slot.width, slot.width)[:2], s, slot)


DOCUMENT_MARKERS = ("•", "•", "–", "-", "1.", "1.", "(a)", "a)")


def bullet_list(rng: random.Random, style: Style, slot: Slot) -> Element | None:
    """Items starting with "- " or "1. " (documents: also "• ", "– ", "(a) ", "a) ");
    content = the items joined by newlines."""
    real, numbered = _real(rng, style), rng.random() < 0.5
    kind = rng.choice(DOCUMENT_MARKERS) if style.document else "1." if numbered else "-"
    s = Setting(style.body.regular, style.size, style.leading, style.color)
    indent = rng.choice((0.0, 0.0, style.size, 2 * style.size))
    item_gap = style.leading * rng.uniform(0.0, 0.4)
    runs, boxes, items = [], [], []
    y = slot.top()
    for k in range(rng.randint(2, 6)):
        marker = {"1.": f"{k + 1}.", "(a)": f"({'abcdef'[k]})", "a)": f"{'abcdef'[k]})"}.get(kind, kind)
        hang = s.face.width(marker + " ", s.size)
        words = [marker] + text.words(rng, real, rng.randint(2, 25), style.source)
        lines = wrap(words, s.face, s.size, slot.width - indent, slot.width - indent - hang)
        lines = lines[:fitting(s, Slot(slot.x, y - PAD, slot.width, slot.bottom), len(lines))]
        if not lines:
            break
        r, b = set_lines(lines, s, slot.x + indent, y, slot.width - indent, 0.0, hang)
        runs += r
        boxes += b
        items.append(" ".join(" ".join(words) for words in lines))
        y += len(lines) * s.leading + item_gap
    if not items:
        return None
    bottom = max(box.box[3] for box in boxes) + PAD
    return Element("list", "\n".join(items), _reserve(slot, bottom), tuple(runs), lines=tuple(boxes))


def caption(rng: random.Random, style: Style, slot: Slot, number: int) -> Element | None:
    prefix = rng.choice((f"Figure {number}:", f"Figure {number}.", f"Fig. {number}:", f"Fig. {number}."))
    words = prefix.split() + text.words(rng, _real(rng, style), rng.randint(4, 22), style.source)
    size = style.size * rng.uniform(0.85, 0.95)
    face = style.body.italic if rng.random() < 0.3 else style.body.regular
    s = Setting(face, size, size * 1.2, style.color, "center" if rng.random() < 0.5 else "left")
    return _text_element("image_caption", wrap(words, face, size, slot.width, slot.width), s, slot)


def margin_line(rng: random.Random, style: Style, slot: Slot, label: str, align: str) -> Element | None:
    """One line of header, footer or page number text (cut to the slot's width)."""
    real = _real(rng, style)
    words = {"header": _header_words, "footer": _footer_words, "page_number": _number_words}[label](
        rng, real, style.source)
    face = style.body.italic if label != "page_number" and rng.random() < 0.3 else style.body.regular
    s = Setting(face, style.small_size, style.small_size * 1.2, style.muted, align)
    return _text_element(label, wrap(words, face, s.size, slot.width, slot.width)[:1], s, slot)


def margin_height(style: Style) -> float:
    """Height of a margin_line's reserved rectangle (for faces of style.body, upright or italic)."""
    faces = (style.body.regular, style.body.italic)
    return max(f.ascent + f.descent for f in faces) * style.small_size + 2 * PAD


def _header_words(rng: random.Random, real: bool, source: str) -> list[str]:
    words = text.phrase(rng, real, rng.randint(2, 7), source)
    if rng.random() < 0.3:
        words += text.date(rng).split()
    elif real and rng.random() < 0.2:
        words = text.name(rng, source).split() + ["et", "al."]
    return words


def _footer_words(rng: random.Random, real: bool, source: str) -> list[str]:
    if real and rng.random() < 0.3:
        return ["Copyright", str(rng.randint(1990, 2030))] + text.name(rng, source).split()
    return text.phrase(rng, real, rng.randint(3, 10), source)


def _number_words(rng: random.Random, real: bool, source: str) -> list[str]:
    n = rng.randint(1, 400)
    return rng.choice(([str(n)], [str(n)], ["Page", str(n)], [f"{n}/{n + rng.randint(0, 40)}"]))


def set_block(style: Style, slot: Slot, lines: list[list[str]], align: str = "left", face: Face | None = None,
              label: str = "text") -> Element | None:
    """Given lines (an address, a date, a closing), each wrapped to the slot's width, in the body's
    size and leading; their content is their words single-spaced."""
    face = face or style.body.regular
    s = Setting(face, style.size, style.leading, style.color, align)
    return _text_element(label, [part for line in lines for part in wrap(line, face, s.size, slot.width, slot.width)],
                         s, slot)


def table(rng: random.Random, style: Style, slot: Slot) -> Element | None:
    """A ruled table; content = <table><tr><td>..</td></tr></table> without whitespace."""
    rows, cols = (14, 7) if style.document else (6, 5)
    cells = _cells(rng, _real(rng, style), rng.randint(2, rows), rng.randint(2, cols), style.source)
    size = style.size * rng.uniform(0.8, 1.0)
    faces = [style.body.bold if rng.random() < 0.6 else style.body.regular] + [style.body.regular] * (len(cells) - 1)
    pad = size * rng.uniform(0.4, 0.9)
    fitted = _fit_columns(cells, faces, size, pad, slot.width, style.min_size)
    if fitted is None:
        return None
    cells, widths, size = fitted
    row_h = size * rng.uniform(1.4, 2.0)
    rows = min(len(cells), int((slot.bottom - slot.top() - PAD - 2) // row_h))  # 2: rule overhang
    if rows < 2:
        return None
    cells, faces = cells[:rows], faces[:rows]
    if rng.random() < 0.4:
        widths = [w + (slot.width - sum(widths)) / len(widths) for w in widths]
    x0 = slot.x + (slot.width - sum(widths)) / 2 if rng.random() < 0.5 else slot.x
    y0 = slot.top() + 1
    xs = [x0 + sum(widths[:c]) for c in range(len(widths) + 1)]
    ys = [y0 + r * row_h for r in range(rows + 1)]
    polys = _rules(rng, xs, ys, style.color)
    align = rng.choice(("left", "center"))
    runs = []
    for r, (face, row) in enumerate(zip(faces, cells)):
        base = ys[r] + (row_h + (face.ascent - face.descent) * size) / 2
        for c, cell in enumerate(row):
            w = face.width(cell, size)
            x = xs[c] + pad if align == "left" else (xs[c] + xs[c + 1] - w) / 2
            if cell:
                runs.append(Run(x, base, cell, face, size, style.color))
    html = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in cells)
    return Element("table", f"<table>{html}</table>", _reserve(slot, ys[-1] + 1 + PAD), tuple(runs), tuple(polys))


def _fit_columns(cells: list[list[str]], faces: list[Face], size: float, pad: float, width: float,
                 min_size: float) -> tuple[list[list[str]], list[float], float] | None:
    """Drops last columns (down to 2), then shrinks the type (down to min_size) until the table fits.

    Returns (cells, column widths, font size), or None if it never fits.
    """
    while True:
        widths = [max(f.width(row[c], size) for f, row in zip(faces, cells)) + 2 * pad
                  for c in range(len(cells[0]))]
        if sum(widths) <= width:
            return cells, widths, size
        if len(widths) > 2:
            cells = [row[:-1] for row in cells]
        elif size > min_size:
            size *= 0.9
        else:
            return None


def _rules(rng: random.Random, xs: list[float], ys: list[float], color: Color) -> list[Poly]:
    """Grid, booktabs (top, under the header, bottom) or one rule under every row."""
    kind = rng.choice(("grid", "booktabs", "rows"))
    h = lambda y, w=0.8: Poly(((xs[0], y), (xs[-1], y)), color, width=w)
    if kind == "booktabs":
        return [h(ys[0], 1.5), h(ys[1]), h(ys[-1], 1.5)]
    polys = [h(y) for y in ys]
    if kind == "grid":
        polys += [Poly(((x, ys[0]), (x, ys[-1])), color, width=0.8) for x in xs]
    return polys


def _cells(rng: random.Random, real: bool, n_rows: int, n_cols: int, source: str) -> list[list[str]]:
    """Short single-line cell texts: a header row, then rows (real: a label column and numbers)."""
    cell = lambda: " ".join(text.phrase(rng, real, rng.randint(1, 2), source))
    header = [cell() for _ in range(n_cols)]
    if not real:
        body = [[" ".join(text.random_words(rng, rng.randint(1, 2), source)) for _ in range(n_cols)]
                for _ in range(n_rows - 1)]
        return [header] + body
    if rng.random() < 0.2:
        header[0] = ""
    kinds = [rng.randrange(4) for _ in range(n_cols)]
    column = lambda k: (text.number(rng) if k == 0 else text.date(rng) if k == 1
                        else f"{rng.uniform(0, 100):.{rng.randint(0, 2)}f}" if k == 2 else str(rng.randint(0, 999)))
    rows = [[text.name(rng, source) if rng.random() < 0.3 else cell()] + [column(k) for k in kinds[1:]]
            for _ in range(n_rows - 1)]
    return [header] + rows


def formula_block(rng: random.Random, style: Style, slot: Slot, pool: int) -> Element | None:
    """A display formula from the pool, centred or indented; content = its bare LaTeX."""
    index, z = rng.randrange(pool), style.zoom  # the raster is in image px: z px a point
    size = round(style.size * z * rng.uniform(1.0, 1.3))
    ink = formula.raster(index, size)
    if ink.shape[1] > slot.width * z:
        size = math.floor(size * slot.width * z / ink.shape[1])
        if size < 10:
            return None
        ink = formula.raster(index, size)
    h, w = ink.shape[0] / z, ink.shape[1] / z  # pt
    top = math.ceil(slot.top() * z) / z        # on the pixel grid, so the raster lands 1:1
    if w > slot.width or top + h + PAD > slot.bottom:
        return None
    free = slot.width - w
    x = round((slot.x + (free / 2 if rng.random() < 0.7 else min(free, 2 * style.size))) * z) / z
    return Element("formula", formula.latex(index), _reserve(slot, top + h + PAD),
                   pictures=(Picture(x, top, ink, 1 / z),))


def image(rng: random.Random, style: Style, slot: Slot, reserve: float) -> Element | None:
    """A chart or diagram, leaving `reserve` px free below it (for a caption)."""
    w = slot.width * rng.uniform(0.5, 1.0)
    h = min(w * rng.uniform(0.45, 0.8), slot.bottom - PAD - reserve - slot.top())
    if h < 60 or h < 0.3 * w:
        return None
    x = slot.x + ((slot.width - w) / 2 if rng.random() < 0.7 else 0.0)
    polys, runs = chart.chart(rng, (x, slot.top(), x + w, slot.top() + h), style.body, style.size)
    return Element("image", "", _reserve(slot, slot.top() + h + PAD), tuple(runs), tuple(polys))


HEADINGS = ("Introduction", "Background", "Related Work", "Overview", "Motivation", "Method",
            "Methods", "Approach", "Design", "Implementation", "Experiments", "Evaluation",
            "Results", "Discussion", "Limitations", "Conclusion", "Conclusions", "Future Work",
            "Acknowledgements", "References", "Appendix", "Summary", "Installation", "Usage",
            "Configuration", "Examples", "Options", "Description", "Requirements", "Scope",
            "Definitions", "Procedure", "Data", "Analysis", "Notes", "Terms and Conditions")


def heading(rng: random.Random, style: Style, slot: Slot, number: str,
            words: list[str] | None = None) -> Element | None:
    """A section heading of a document: "3.2 Results" (or `words`), bold, body size or a little
    larger."""
    if words is not None:
        words = list(words)
    elif rng.random() < 0.45:
        words = rng.choice(HEADINGS).split()
    else:
        words = text.phrase(rng, _real(rng, style), rng.randint(1, 6), style.source)
    if number:
        words.insert(0, number)
    size = style.size * rng.choice((1.0, 1.1, 1.2, 1.4))
    face = style.heading.bold if rng.random() < 0.85 else style.heading.italic
    s = Setting(face, size, size * 1.2, style.accent)
    return _text_element("title", wrap(words, face, size, slot.width, slot.width)[:2], s, slot)


def table_caption(rng: random.Random, style: Style, slot: Slot, number: int) -> Element | None:
    """"Table 2: ..." (set above its table)."""
    prefix = rng.choice((f"Table {number}:", f"Table {number}.", f"TABLE {number}"))
    words = prefix.split() + text.words(rng, _real(rng, style), rng.randint(3, 18), style.source)
    size = style.size * rng.uniform(0.85, 1.0)
    s = Setting(style.body.regular, size, size * 1.2, style.color, "center" if rng.random() < 0.5 else "left")
    return _text_element("image_caption", wrap(words, s.face, size, slot.width, slot.width), s, slot)


def footnote(rng: random.Random, style: Style, slot: Slot, number: int) -> Element | None:
    """A footnote: its number, then a sentence or two in small type."""
    words = [str(number)] + text.words(rng, _real(rng, style), rng.randint(6, 45), style.source)
    size = max(6.5, style.size * rng.uniform(0.75, 0.85))
    s = Setting(style.body.regular, size, size * 1.2, style.color, style.align)
    lines = wrap(words, s.face, size, slot.width, slot.width, style.hyphens)
    return _text_element("text", lines, s, slot, hyphens=style.hyphens)


def byline(rng: random.Random, style: Style, slot: Slot) -> Element | None:
    """Authors under a document title, centred: names, then an affiliation or an e-mail address."""
    names = [text.name(rng, style.source) for _ in range(rng.randint(1, 5))]
    words = (", ".join(names[:-1]) + " and " + names[-1] if len(names) > 1 else names[0]).split()
    if rng.random() < 0.6:
        words += text.phrase(rng, _real(rng, style), rng.randint(2, 6), style.source)
    if style.source == "general" and rng.random() < 0.4:
        words.append(text.email(rng))
    size = style.size * rng.uniform(1.0, 1.2)
    s = Setting(style.body.regular, size, size * 1.25, style.color, "center")
    return _text_element("text", wrap(words, s.face, size, slot.width, slot.width)[:3], s, slot)


def code_block(rng: random.Random, style: Style, slot: Slot) -> Element | None:
    """A few lines of commands or code in the monospaced face, indented, sometimes on a light
    grey panel (paper-light: not ink); a text block whose content is its lines single-spaced."""
    size = style.size * rng.uniform(0.85, 0.95)
    s = Setting(style.mono.regular, size, size * rng.uniform(1.15, 1.3), style.color)
    inset = rng.choice((0.0, style.size, 2 * style.size))
    lines = [ln for ln in (_code_line(rng, style.source) for _ in range(rng.randint(2, 8)))
             if s.face.width(" ".join(ln), size) <= slot.width - inset - 2 * PAD]
    panel = Slot(slot.x + inset, slot.y, slot.width - inset, slot.bottom)
    element = _text_element("text", lines, s, Slot(panel.x + PAD, panel.y + PAD, panel.width - 2 * PAD,
                                                   panel.bottom - PAD))
    if element is None or rng.random() < 0.5:
        return element
    x0, y0, x1, y1 = element.rect
    grey = (0.95, 0.95, 0.95)
    box = rect_poly((panel.x, panel.y + PAD / 2, panel.x + panel.width, y1 + PAD / 2), None, grey)
    return Element(element.label, element.text, (x0 - PAD, slot.y, x1 + PAD, y1 + PAD), element.runs,
                   (box,), lines=element.lines)


def _code_line(rng: random.Random, source: str) -> list[str]:
    """One line of a shell session, a configuration file or a program."""
    vocab = text.corpus(source).vocabulary
    word = lambda: rng.choice(vocab)[:10].lower()
    kind = rng.randrange(5)
    if kind == 0:
        return ["$", word(), f"--{word()}", f"{word()}.{rng.choice(('txt', 'conf', 'c', 'py', 'tex'))}"]
    if kind == 1:
        return [f"{word()}_{word()}", "=", rng.choice((str(rng.randint(0, 4096)), f'"{word()}"', "true"))]
    if kind == 2:
        return [f"{word()}({word()},", f"{rng.randint(0, 99)});"]
    if kind == 3:
        return [f"#include <{word()}.h>"]
    return [rng.choice(("if", "for", "while", "return")), f"({word()}", rng.choice(("<", "==", "!=")),
            f"{rng.randint(0, 9)})"]
