"""Blocks -> Markdown, one render function per label (a table of them, `RENDERERS`).

Promises:
- Blocks render in order, separated by one blank line; blocks that render to nothing
  (empty content, dropped labels) leave no gap. No leading or trailing whitespace.
- title -> `## text` on one line. Every title is level 2: the grammar has a single
  title label (no document/section distinction), and pages are concatenated into one
  document, so a per-page `#` would give one top-level heading per page.
- text -> the paragraph as written (no escaping: the model writes Markdown-safe text).
- list -> one item per non-empty line; markers `- `, `* `, `+ `, `•`, `·`, `◦`... become
  `- `; numbered `3.` / `3)` become `3. `; lines without a marker become `- ` items.
- table -> the model's HTML (or whatever it wrote), unchanged.
- formula -> `$$\\n...\\n$$`, after removing one pair of `$$ $$`, `\\[ \\]`, `\\( \\)`, `$ $`.
- image, chart -> a visible placeholder `*[image]*` / `*[chart]*`.
- image_caption -> one italic line `*text*` (asterisks in the text escaped).
- header, footer, page_number, seal -> dropped (they stay in the JSON output).
- any other label -> a paragraph.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

from hpd_core.grammar import Block

# a bullet (unicode bullets may touch the text; "-", "*", "+" and "3." need a space or
# the line's end, so "-5 degrees", "*bold*" and "1.5 kg" are not markers)
_ITEM_MARKER = re.compile(r"(?:[•·◦‣▪●○■□►➢]\s*|[-*+](?:\s+|$)|(\d{1,9})[.)](?:\s+|$))")
_TITLE_HASHES = re.compile(r"#+\s+")
# (opening, closing) delimiters the model may put around a formula; "$$" before "$"
_MATH_DELIMITERS = (("$$", "$$"), ("\\[", "\\]"), ("\\(", "\\)"), ("$", "$"))


def _title(block: Block) -> str:
    text = " ".join(block.text.split())  # a heading is one line
    text = _TITLE_HASHES.sub("", text, count=1) if text.startswith("#") else text
    return f"## {text}" if text else ""


def _paragraph(block: Block) -> str:
    return block.text.strip()


def _list_item(line: str) -> str:
    marker = _ITEM_MARKER.match(line)
    if marker is None:
        return f"- {line}"
    item = line[marker.end():].strip()
    if not item:
        return ""
    return f"{marker.group(1)}. {item}" if marker.group(1) else f"- {item}"


def _list(block: Block) -> str:
    items = (_list_item(line.strip()) for line in block.text.splitlines() if line.strip())
    return "\n".join(item for item in items if item)


def _formula(block: Block) -> str:
    body = block.text.strip()
    for opening, closing in _MATH_DELIMITERS:
        if (body.startswith(opening) and body.endswith(closing)
                and len(body) >= len(opening) + len(closing)):
            body = body[len(opening):len(body) - len(closing)].strip()
            break
    return f"$$\n{body}\n$$" if body else ""


def _placeholder(block: Block) -> str:
    return f"*[{block.label}]*"


def _caption(block: Block) -> str:
    text = " ".join(block.text.split()).replace("*", r"\*")
    return f"*{text}*" if text else ""


def _dropped(block: Block) -> str:
    return ""


RENDERERS: dict[str, Callable[[Block], str]] = {
    "title": _title,
    "text": _paragraph,
    "list": _list,
    "table": _paragraph,  # HTML kept as is
    "formula": _formula,
    "image": _placeholder,
    "chart": _placeholder,
    "image_caption": _caption,
    "header": _dropped,
    "footer": _dropped,
    "page_number": _dropped,
    "seal": _dropped,
}


def render_block(block: Block) -> str:
    """One block's Markdown; "" when the block shows nothing."""
    return RENDERERS.get(block.label, _paragraph)(block)


def to_markdown(blocks: Sequence[Block]) -> str:
    """The page's Markdown: rendered blocks separated by blank lines."""
    return "\n\n".join(md for md in map(render_block, blocks) if md)
