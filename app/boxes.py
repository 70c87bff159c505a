"""The page image with numbered, label-coloured layout boxes, as HTML the page's script can select.

Block i (1-based, reading order) is box "i" in its label's colour: a positioned element of
class `hpd-b{i}` over the image (app.selection highlights the block's box, tree row, branch
output and Markdown together). Boxes are placed in percent of the page, so they stay on it at
any displayed size; a block without a box keeps its number but shows nothing.
"""

from __future__ import annotations

import base64
import io
from collections.abc import Sequence

from PIL import Image

from app.palette import colour
from app.render import esc
from hpd_core.grammar import GRID, Block

MAX_SIDE = 1600   # the image is sent at most this many pixels on its long side
QUALITY = 85      # JPEG quality of the sent image


def image_uri(image: Image.Image) -> str:
    """`image` as a JPEG data URI, at most MAX_SIDE pixels on its long side."""
    shown = image.convert("RGB")
    if max(shown.size) > MAX_SIDE:
        shown.thumbnail((MAX_SIDE, MAX_SIDE))
    data = io.BytesIO()
    shown.save(data, format="JPEG", quality=QUALITY)
    return "data:image/jpeg;base64," + base64.b64encode(data.getvalue()).decode("ascii")


def box_html(number: int, block: Block) -> str:
    """Block `number`'s box, or "" when it has none."""
    if block.bbox is None:
        return ""
    x1, y1, x2, y2 = (100 * v / GRID for v in block.bbox)
    label = esc(block.label)
    return (f'<div class="hpd-box hpd-b{number}" title="{number}: {label}" style="left:{x1:.2f}%;top:{y1:.2f}%;'
            f'width:{x2 - x1:.2f}%;height:{y2 - y1:.2f}%;--c:{colour(block.label)}">'
            f'<span class="hpd-box-tag">{number}</span></div>')


def page_html(image: Image.Image | None, blocks: Sequence[Block] = (), uri: str | None = None) -> str:
    """The page (or `uri`, its `image_uri`, computed once per page by the caller) with its boxes."""
    if image is None and uri is None:
        return '<div class="hpd-page empty">The page appears here.</div>'
    boxes = "".join(box_html(n, b) for n, b in enumerate(blocks, start=1))
    return (f'<div class="hpd-page"><img src="{uri or image_uri(image)}" alt="page with {len(blocks)} '
            f'layout boxes">{boxes}</div>')
