"""The page image with numbered, label-coloured layout boxes."""

from __future__ import annotations

from collections.abc import Sequence

from PIL import Image, ImageDraw, ImageFont

from app.palette import colour, rgb
from hpd_core.grammar import Block

FILL_ALPHA = 40   # 0-255: how strongly a box's inside is tinted


def draw_boxes(image: Image.Image, blocks: Sequence[Block]) -> Image.Image:
    """A copy of `image` with block i (1-based, reading order) drawn as box "i" in its label's
    colour. Blocks without a box keep their number but draw nothing."""
    page = image.convert("RGBA")
    overlay = Image.new("RGBA", page.size, (0, 0, 0, 0))
    draw = ImageDraw.Draw(overlay)
    width = max(2, round(min(page.size) / 300))
    font = ImageFont.load_default(size=max(11, round(min(page.size) / 55)))
    for number, block in enumerate(blocks, start=1):
        box = block.page_bbox(*page.size)
        if box is None:
            continue
        x1, y1, x2, y2 = box
        red, green, blue = rgb(colour(block.label))
        draw.rectangle(box, fill=(red, green, blue, FILL_ALPHA), outline=(red, green, blue, 255), width=width)
        tag = str(number)
        left, top, right, bottom = draw.textbbox((0, 0), tag, font=font)
        tx, ty = x1, max(0, y1 - (bottom - top) - 2 * width)  # above the box, or at the page's top edge
        draw.rectangle((tx, ty, tx + right - left + 2 * width, ty + bottom - top + 2 * width),
                       fill=(red, green, blue, 255))
        draw.text((tx + width - left, ty + width - top), tag, font=font, fill=(255, 255, 255, 255))
    return Image.alpha_composite(page, overlay).convert("RGB")
