"""The HPD output grammar: blocks <-> text.

The layout (parent) branch writes `<BLOCK>label [x1,y1,x2,y2]<FORK>` for each content
block and `<BLOCK>label [x1,y1,x2,y2]` for blocks without content (images). Each
`<FORK>` starts a child branch that writes the block's content. The assembled page
text replaces the i-th `<FORK>` by `<CHILD>` + the i-th child's text:

    <BLOCK>title [80,40,920,90]<CHILD>Annual report<BLOCK>image [80,100,500,400]...

Boxes are integers on a 0-1000 grid of the page width and height (docs/format.md §9).
`parse_blocks` never raises: malformed model output yields the blocks it can.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

BLOCK, FORK, CHILD = "<BLOCK>", "<FORK>", "<CHILD>"
GRID = 1000
# Labels whose blocks carry no content branch (docs/format.md §9: no <CHILD> for image).
NO_CONTENT_LABELS = frozenset({"image", "chart", "seal"})

BBox = tuple[int, int, int, int]


@dataclass(frozen=True)
class Block:
    label: str
    bbox: BBox | None  # 0-1000 grid; None when the model wrote no readable box
    text: str = ""

    def page_bbox(self, width: int, height: int) -> BBox | None:
        """The box in page pixels for a page of `width` x `height` pixels."""
        if self.bbox is None:
            return None
        x1, y1, x2, y2 = self.bbox
        return (round(x1 * width / GRID), round(y1 * height / GRID),
                round(x2 * width / GRID), round(y2 * height / GRID))


def iou(a: BBox | None, b: BBox | None) -> float:
    """Intersection over union of two boxes; 0 when either is missing or empty."""
    if a is None or b is None:
        return 0.0
    inter = intersection(a, b)
    union = area(a) + area(b) - inter
    return inter / union if union > 0 else 0.0


def intersection(a: BBox, b: BBox) -> int:
    """The area two boxes share."""
    return area((max(a[0], b[0]), max(a[1], b[1]), min(a[2], b[2]), min(a[3], b[3])))


def area(box: BBox) -> int:
    return max(box[2] - box[0], 0) * max(box[3] - box[1], 0)


def has_content(label: str) -> bool:
    return label not in NO_CONTENT_LABELS


_TAG = re.compile(r"<[^>]*>")  # table markup


def drawn_positions(text: str) -> list[int]:
    """Indices of the characters of a block's content that a page shows as glyphs: every
    non-space character outside the table markup (`<table><tr><td>...`, whose tags are not drawn)."""
    tags = {i for m in _TAG.finditer(text) for i in range(m.start(), m.end())}
    return [i for i, ch in enumerate(text) if not ch.isspace() and i not in tags]


def format_bbox(bbox: BBox) -> str:
    return "[" + ",".join(str(int(v)) for v in bbox) + "]"


def format_header(block: Block) -> str:
    """`<BLOCK>label [x1,y1,x2,y2]`: what the parent writes before `<FORK>`."""
    box = format_bbox(block.bbox) if block.bbox is not None else "[]"
    return f"{BLOCK}{block.label} {box}"


def format_parent(blocks: list[Block]) -> str:
    """The layout branch's text in the `fork` form."""
    return "".join(format_header(b) + (FORK if has_content(b.label) else "") for b in blocks)


def format_children(blocks: list[Block]) -> list[str]:
    """The content branches' texts in fork order (one per `<FORK>`)."""
    return [b.text for b in blocks if has_content(b.label)]


def format_assembled(blocks: list[Block]) -> str:
    """The assembled page text; also the target of the `plain` prompt."""
    return "".join(format_header(b) + (CHILD + b.text if has_content(b.label) else "")
                   for b in blocks)


# label, then an optional box: "[...]", or an unclosed "[1,2" cut off by a marker or the end
_HEADER = re.compile(r"<BLOCK>\s*([^\s\[<]*)\s*(?:\[([^\]<]*)\]|\[[-+\d\s,.]*(?=<|\Z))?")


def _parse_bbox(raw: str | None) -> BBox | None:
    if raw is None:
        return None
    parts = [p.strip() for p in raw.split(",")]
    if len(parts) != 4:
        return None
    try:
        values = [int(round(float(p))) for p in parts]
    except (ValueError, OverflowError):  # "x", "nan"; "inf", "1e999"
        return None
    x1, y1, x2, y2 = (min(max(v, 0), GRID) for v in values)
    if x2 < x1:
        x1, x2 = x2, x1
    if y2 < y1:
        y1, y2 = y2, y1
    return (x1, y1, x2, y2)


def parse_blocks(text: str) -> list[Block]:
    """Blocks of an assembled page text, in order. Never raises.

    Text before the first `<BLOCK>` becomes a `text` block without a box; a header
    without a label gets `text`. A missing, unclosed or unreadable box (not 4 finite
    numbers) gives `bbox=None`; numbers are rounded, clamped to 0-1000 and ordered so
    that x1 <= x2 and y1 <= y2. Stray `<FORK>`/`<CHILD>` markers in content are dropped (and
    any marker their removal forms), and content is stripped of surrounding whitespace.
    """
    blocks: list[Block] = []
    pieces = text.split(BLOCK)
    lead = _clean(pieces[0])
    if lead:
        blocks.append(Block("text", None, lead))
    for piece in pieces[1:]:
        match = _HEADER.match(BLOCK + piece)
        label = match.group(1) or "text"
        bbox = _parse_bbox(match.group(2))
        rest = (BLOCK + piece)[match.end():]
        blocks.append(Block(label, bbox, _clean(rest)))
    return blocks


_MARKER = re.compile("|".join(map(re.escape, (BLOCK, FORK, CHILD))))


def _clean(content: str) -> str:
    """Content without markers, also those that removing one forms ("<BLOCK<FORK>>" -> "<BLOCK>")."""
    while (cleaned := _MARKER.sub("", content)) != content:
        content = cleaned
    return content.strip()
