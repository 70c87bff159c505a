"""One colour per block label, shared by the boxes, the branch tree and the timeline."""

from __future__ import annotations

import zlib

LABEL_COLOURS = {
    "layout": "#334155",   # the layout (parent) branch
    "title": "#dc2626",
    "text": "#2563eb",
    "list": "#0891b2",
    "table": "#16a34a",
    "formula": "#9333ea",
    "image": "#ea580c",
    "chart": "#d97706",
    "image_caption": "#db2777",
    "header": "#64748b",
    "footer": "#78716c",
    "page_number": "#a16207",
    "seal": "#be123c",
}
# labels the model invents (or none at all) get a stable colour from this list
SPARE_COLOURS = ("#0d9488", "#4f46e5", "#c026d3", "#65a30d", "#0284c7", "#e11d48", "#7c3aed", "#ca8a04")


def colour(label: str | None) -> str:
    """A hex colour for `label`; the same label always gets the same colour."""
    if label in LABEL_COLOURS:
        return LABEL_COLOURS[label]
    return SPARE_COLOURS[zlib.crc32((label or "").encode()) % len(SPARE_COLOURS)]

