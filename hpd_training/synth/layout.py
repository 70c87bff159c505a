"""Page layout: margins, header and footer bands, one or two columns, the flow of blocks.

`compose_page(seed, config)` decides everything about a page (a pure function of the seed)
and returns the elements in reading order: header, the body (a full-width document title,
then one column, or the left column top to bottom and then the right one), footnotes, then
footer and page number. Units are points (= px of the classic presets at 72 dpi).
"""

from __future__ import annotations

import random
from dataclasses import dataclass, replace

from hpd_training.synth.drawing import Poly
from hpd_training.synth import elements as el, text
from hpd_training.synth.config import SynthConfig
from hpd_training.synth.elements import Element, Slot
from hpd_training.synth.style import Style, pick_style

# Where a block sits; "left"/"right" are the columns of a two-column page, "body" the single column.
REGIONS = ("top", "span", "body", "left", "right", "bottom")


@dataclass(frozen=True, eq=False)
class Layout:
    width: float  # pt
    height: float  # pt
    elements: tuple[Element, ...]  # reading order
    regions: tuple[str, ...]       # one of REGIONS per element
    two_columns: bool
    decorations: tuple[Poly, ...] = ()  # rules outside every element (no block, no content)
    zoom: float = 1.0                   # rendered px per pt (config.dpi / 72)


Placed = tuple[Element, str]  # an element and its region


@dataclass(frozen=True)
class _Frame:
    """The body's area: between x0 and x1, from top to bottom (px)."""
    x0: float
    x1: float
    top: float     # y where the body starts
    bottom: float  # y where the body ends


@dataclass
class _Numbers:
    """Running numbers of a document page's sections, tables and footnotes (mutable while the
    page is composed)."""
    section: int
    numbered: bool
    subsection: int = 0
    table: int = 1

    def heading(self, rng: random.Random) -> str:
        if rng.random() < 0.4 or self.subsection == 0 and rng.random() < 0.5:
            self.section, self.subsection = self.section + 1, 0
            return f"{self.section}" + ("." if rng.random() < 0.3 else "") if self.numbered else ""
        self.subsection += 1
        return f"{self.section}.{self.subsection}" if self.numbered else ""


def compose_page(seed: int, config: SynthConfig) -> Layout:
    rng = random.Random(seed)
    if config.page_sizes:
        width, height = rng.choice(config.page_sizes)
    else:
        width = config.width
        height = round(width * rng.uniform(*config.aspect_range))
    style = pick_style(rng, config)
    margin_x = width * rng.uniform(0.06, 0.12)
    frame = _Frame(margin_x, width - margin_x, height * rng.uniform(0.05, 0.09),
                   height * (1 - rng.uniform(0.05, 0.09)))
    top, bottom = _margins(rng, style, config, frame, height)
    gap = style.size * rng.uniform(0.8, 2.0)
    frame = replace(frame, top=max([frame.top] + [e.rect[3] + gap for e, _ in top]),
                    bottom=min([frame.bottom] + [e.rect[1] - gap for e, _ in bottom]))
    notes, rules = [], []
    if style.document:
        rules = _header_rule(rng, style, frame, top, gap)
    if config.typesetting == "document":
        notes, frame, note_rules = _footnotes(rng, style, frame)
        rules += note_rules
    if config.typesetting == "letter":
        body, two = _letter(rng, style, config, frame, height), False
    else:
        body, two = _body(rng, style, config, frame)
    head = [p for p in top + bottom if p[0].label == "header"]
    tail = sorted((p for p in top + bottom if p[0].label != "header"), key=lambda p: p[0].label)
    placed = head + body + notes + tail  # footer sorts before page_number
    return Layout(width, height, tuple(e for e, _ in placed), tuple(r for _, r in placed), two,
                  tuple(rules), config.dpi / 72)


def _header_rule(rng: random.Random, style: Style, frame: _Frame, top: list[Placed],
                 gap: float) -> list[Poly]:
    """Sometimes a thin rule between the running header and the body."""
    if not any(e.label == "header" for e, _ in top) or rng.random() < 0.6:
        return []
    y = max(e.rect[3] for e, _ in top) + gap / 2
    return [Poly(((frame.x0, y), (frame.x1, y)), style.muted, width=0.5)]


def _footnotes(rng: random.Random, style: Style, frame: _Frame) -> tuple[list[Placed], _Frame, list[Poly]]:
    """0-3 footnotes at the bottom of the body, under a short rule; the body ends above it."""
    count = rng.choice((0, 0, 0, 1, 1, 2, 3))
    first, width, built = rng.randint(1, 12), frame.x1 - frame.x0, []
    for k in reversed(range(count)):  # bottom-up: each note is set in the room above the next one
        bottom = built[-1].rect[1] if built else frame.bottom
        seed = rng.random()  # the same draws twice: measure the note, then set it at the bottom
        probe = el.footnote(random.Random(seed), style, Slot(frame.x0, frame.top, width, bottom), first + k)
        if probe is None:
            break
        top = bottom - (probe.rect[3] - probe.rect[1])
        built.append(el.footnote(random.Random(seed), style, Slot(frame.x0, top, width, bottom), first + k))
    if not built or built[-1].rect[1] < frame.top + 0.5 * (frame.bottom - frame.top):
        return [], frame, []
    gap = style.size * rng.uniform(0.6, 1.2)
    y = built[-1].rect[1] - gap / 2
    rule = Poly(((frame.x0, y), (frame.x0 + width * rng.uniform(0.2, 0.4), y)), style.color, width=0.5)
    notes = [(e, "bottom") for e in reversed(built)]
    return notes, replace(frame, bottom=y - gap / 2), [rule]


def _margins(rng: random.Random, style: Style, config: SynthConfig, frame: _Frame,
             height: int) -> tuple[list[Placed], list[Placed]]:
    """Header (and page number, a quarter of the time) on top; footer and page number below."""
    header, footer, number = (rng.random() < p for p in (
        config.header_prob, config.footer_prob, config.page_number_prob))
    number_on_top = rng.random() < 0.25
    top_labels = ["header"] * header + ["page_number"] * (number and number_on_top)
    bottom_labels = ["footer"] * footer + ["page_number"] * (number and not number_on_top)
    top_y = height * rng.uniform(0.015, 0.035)
    bottom_y = height * (1 - rng.uniform(0.015, 0.035)) - el.margin_height(style)
    return (_band(rng, style, frame, top_labels, top_y, "top"),
            _band(rng, style, frame, bottom_labels, bottom_y, "bottom"))


def _band(rng: random.Random, style: Style, frame: _Frame, labels: list[str], y: float,
          region: str) -> list[Placed]:
    """One line of margin text at y: one label anywhere, or two at the left and right."""
    w, bottom = frame.x1 - frame.x0, y + el.margin_height(style)
    if len(labels) == 1:
        slots = [(Slot(frame.x0, y, w, bottom), rng.choice(("left", "center", "right")))]
    else:
        slots = [(Slot(frame.x0, y, 0.65 * w, bottom), "left"),
                 (Slot(frame.x0 + 0.7 * w, y, 0.3 * w, bottom), "right")]
    built = [el.margin_line(rng, style, slot, label, align) for label, (slot, align) in zip(labels, slots)]
    return [(e, region) for e in built if e is not None]


def _body(rng: random.Random, style: Style, config: SynthConfig, frame: _Frame) -> tuple[list[Placed], bool]:
    """An optional full-width document title, then the blocks flowing down the column(s)."""
    placed: list[Placed] = []
    n_blocks = rng.randint(config.min_blocks, config.max_blocks)
    # drawn only where the range is open, so that other configs' pages stay what their seeds gave
    low, high = config.block_gap_scale
    spread = low if low == high else rng.uniform(low, high)
    y = frame.top
    if rng.random() < config.doc_title_prob:
        n_blocks -= 1
        doc_title = el.title(rng, style, Slot(frame.x0, y, frame.x1 - frame.x0, frame.bottom), document=True)
        if doc_title is not None:
            placed.append((doc_title, "span"))
            y = doc_title.rect[3] + spread * style.size * rng.uniform(0.8, 2.0)
            if style.document and rng.random() < 0.6:
                byline = el.byline(rng, style, Slot(frame.x0, y, frame.x1 - frame.x0, frame.bottom))
                if byline is not None:
                    placed.append((byline, "span"))
                    y = byline.rect[3] + style.size * rng.uniform(1.0, 2.5)
            if style.document and rng.random() < 0.4:
                abstract = _abstract(rng, style, replace(frame, top=y))
                placed += [(e, "span") for e in abstract]
                y = abstract[-1].rect[3] + style.size * rng.uniform(1.0, 2.5) if abstract else y
    wide = style.document and frame.x1 - frame.x0 > 560  # landscape: lines of 150+ characters
    two = rng.random() < (max(0.85, config.two_column_prob) if wide else config.two_column_prob)
    gutter = style.size * rng.uniform(1.2, 2.5)
    col_w = (frame.x1 - frame.x0 - gutter) / 2 if two else frame.x1 - frame.x0
    columns = [(frame.x0, "left"), (frame.x1 - col_w, "right")] if two else [(frame.x0, "body")]
    labels, weights = zip(*config.label_weights)
    column, y_col, figure = 0, y, rng.randint(1, 9)
    numbers = _Numbers(rng.randint(0, 6), rng.random() < 0.75, table=rng.randint(1, 6)) if style.document else None
    for label in rng.choices(labels, weights, k=max(0, n_blocks)):
        tag = numbers.heading(rng) if numbers and label == "title" else ""
        for _ in range(2):  # this column, then the next one
            x, region = columns[column]
            gap = 0.0 if y_col == y else spread * _gap(rng, style, label)
            new = _block(rng, style, config, Slot(x, y_col + gap, col_w, frame.bottom), label, figure,
                         numbers, tag)
            if new or column + 1 == len(columns):
                break
            column, y_col = column + 1, y
        if new:  # else nothing of it fits: try the next label
            placed += [(e, region) for e in new]
            figure += len(new) - 1 if new[0].label == "image" else 0
            y_col = new[-1].rect[3]
    return placed, two


def _letter(rng: random.Random, style: Style, config: SynthConfig, frame: _Frame, height: float) -> list[Placed]:
    """A letter, one block under another: sometimes a letterhead (a title), the sender's address,
    the date, the recipient's address, sometimes a subject line in bold (a title, as the real
    pages' rule has a short bold line), the salutation, `min_blocks`..`max_blocks` paragraphs, the
    closing and, below room for a signature, the sender's name, sometimes with a role; sometimes an
    enclosure or copy line. The sender's address, the date, the closing and the name are set at
    the left margin, from about the middle of the page (LaTeX's letter class) or, the address and
    date, flush right: one choice a page."""
    width, leading = frame.x1 - frame.x0, style.leading
    side = rng.choice(("left", "middle", "right"))
    middle = frame.x0 + width * rng.uniform(0.45, 0.6)
    placed: list[Placed] = []
    y = frame.top

    def put(element: Element | None, gap: float) -> None:
        nonlocal y
        if element is not None:
            placed.append((element, "body"))
            y = element.rect[3] + gap

    def block(lines: list[list[str]], where: str = "left", **how) -> Element | None:
        if where == "middle":
            return el.set_block(style, Slot(middle, y, frame.x1 - middle, frame.bottom), lines, **how)
        return el.set_block(style, Slot(frame.x0, y, width, frame.bottom), lines, where, **how)

    if rng.random() < 0.4:
        put(el.title(rng, style, Slot(frame.x0, y, width, frame.bottom), document=True), leading * rng.uniform(1, 2.5))
    if rng.random() < 0.75:
        put(block(text.address(rng, style.source, sender=True), side), leading * rng.uniform(1, 3))
    y = max(y, 0.1 * height)  # a line in the top 9% of a page is a running header by the real pages' rule
    put(block([text.date(rng).split()], side if rng.random() < 0.7 else "left"), leading * rng.uniform(1, 3))
    put(block(text.address(rng, style.source)), leading * rng.uniform(1, 3))
    if rng.random() < 0.4:
        subject = rng.choice(([], ["Re:"], ["Subject:"], ["Ref.:"])) + text.phrase(rng, False, rng.randint(2, 9),
                                                                                  style.source)
        put(block([subject], face=style.body.bold, label="title"), leading * rng.uniform(0.8, 2))
    put(block([text.salutation(rng, style.source)]), max(style.para_gap, 0.4 * leading))
    for _ in range(rng.randint(config.min_blocks, config.max_blocks)):
        paragraph = el.paragraph(rng, style, Slot(frame.x0, y, width, frame.bottom))
        if paragraph is None:  # the page is full
            break
        put(paragraph, style.para_gap)
    signer = "middle" if side == "middle" else "left"
    put(block([text.closing(rng)], signer), leading * rng.uniform(2.5, 4.5))
    role = [text.phrase(rng, False, rng.randint(1, 4), style.source)] if rng.random() < 0.5 else []
    put(block([text.name(rng, style.source).split()] + role, signer), leading * rng.uniform(1.5, 3))
    if rng.random() < 0.3:
        put(block([rng.choice((["Enclosure:"], ["Encl.:"], ["Enclosures:"], ["cc:"], ["Copy", "to:"])) +
                   text.phrase(rng, False, rng.randint(1, 5), style.source)]), 0.0)
    return placed


def _abstract(rng: random.Random, style: Style, frame: _Frame) -> list[Element]:
    """"Abstract" and a paragraph in smaller type across the page, inset from both margins;
    [] when the paragraph does not fit."""
    inset = (frame.x1 - frame.x0) * rng.uniform(0.0, 0.1)
    slot = Slot(frame.x0 + inset, frame.top, frame.x1 - frame.x0 - 2 * inset, frame.bottom)
    head = el.heading(rng, style, slot, "", ["Abstract"])
    small = replace(style, size=style.size * 0.9, leading=style.leading * 0.9, indent=0.0,
                    paragraph_words=(50, 160), real_fraction=1.0)
    below = replace(slot, y=head.rect[3] + style.size * rng.uniform(0.2, 0.6)) if head else slot
    body = el.paragraph(rng, small, below) if head else None
    return [head, body] if body else []


def _gap(rng: random.Random, style: Style, label: str) -> float:
    return style.para_gap if label in ("text", "list") else style.size * rng.uniform(0.6, 1.4)


def _block(rng: random.Random, style: Style, config: SynthConfig, slot: Slot, label: str,
           figure: int, numbers: _Numbers | None = None, tag: str = "") -> list[Element]:
    """The block for `label` in `slot` (an image may bring its caption, a document's table its
    caption above it); [] when it does not fit."""
    if numbers is not None and label == "title":
        new = el.heading(rng, style, slot, tag)
        return [] if new is None else [new]
    if numbers is not None and label == "table" and rng.random() < 0.75:
        cap = el.table_caption(rng, style, slot, numbers.table)
        if cap is None:
            return []
        below = Slot(slot.x, cap.rect[3] + style.size * rng.uniform(0.1, 0.4), slot.width, slot.bottom)
        table = el.table(rng, style, below)
        if table is None:
            return []
        numbers.table += 1
        return [cap, table]
    if label == "image":
        with_caption = rng.random() < config.caption_prob
        reserve = 2.6 * style.size + 2 * el.PAD if with_caption else 0.0
        img = el.image(rng, style, slot, reserve)
        if img is None:
            return []
        below = Slot(slot.x, img.rect[3] + style.size * rng.uniform(0.2, 0.6), slot.width, slot.bottom)
        cap = el.caption(rng, style, below, figure) if with_caption else None
        return [img] if cap is None else [img, cap]
    if style.mono is not None and label == "text" and rng.random() < 0.08:
        code = el.code_block(rng, style, slot)
        return [] if code is None else [code]
    build = {"text": el.paragraph, "list": el.bullet_list, "table": el.table,
             "title": lambda r, s, sl: el.title(r, s, sl, document=False),
             "formula": lambda r, s, sl: el.formula_block(r, s, sl, config.formula_pool)}[label]
    new = build(rng, style, slot)
    return [] if new is None else [new]
