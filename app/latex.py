"""Which dollars are math: the Markdown the app hands to Gradio's KaTeX renderer.

A single `$` opens inline math only by Pandoc's rule: the opening `$` is followed by a
non-space, the closing `$` (the next unescaped one, in the same paragraph) is preceded by a
non-space and not followed by a digit. So "$x^2$" is a formula and "costs $48,848.81 and
later $20,598.20" is two prices. Such pairs become `\\(…\\)`; every other single `$` becomes
`\\$`, which Markdown shows as a dollar sign. `$` is not among Gradio's delimiters (`LATEX`):
KaTeX would pair any two dollars, across paragraphs. Display math (`$$…$$`, `\\[…\\]`) and
`\\(…\\)` written by the model are kept as they are. Inline code spans are not special (the
engine's Markdown has none). The raw Markdown, the JSON and the downloads keep the engine's
text; only the rendered view uses `katex_markdown`.
"""

from __future__ import annotations

import re

LATEX = [{"left": "$$", "right": "$$", "display": True}, {"left": "\\[", "right": "\\]", "display": True},
         {"left": "\\(", "right": "\\)", "display": False}]
_BLANK_LINE = re.compile(r"\n[ \t]*\n")
_SPECIAL = re.compile(r"[\\$]")


def inline_math_end(text: str, start: int) -> int | None:
    """Index of the `$` closing the inline formula opened by the `$` at `start` (Pandoc's rule),
    or None when that `$` is a dollar sign."""
    i = start + 1
    if i >= len(text) or text[i].isspace():
        return None
    while i < len(text):
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == "$":
            closes = not text[i - 1].isspace() and not (i + 1 < len(text) and text[i + 1].isdigit())
            return i if closes else None
        if char == "\n" and _BLANK_LINE.match(text, i):
            return None  # a formula does not cross paragraphs
        i += 1
    return None


def katex_markdown(markdown: str) -> str:
    """`markdown` with Pandoc-rule inline formulas as `\\(…\\)` and every other single `$` as `\\$`."""
    out, i = [], 0
    while (special := _SPECIAL.search(markdown, i)) is not None:
        out.append(markdown[i:special.start()])
        i = special.start()
        if markdown[i] == "\\":                     # an escape: kept with the character it escapes
            out.append(markdown[i:i + 2])
            i += 2
        elif markdown.startswith("$$", i):           # display math, kept; an unclosed $$ is two dollars
            end = markdown.find("$$", i + 2)
            out.append(markdown[i:end + 2] if end >= 0 else "\\$\\$")
            i = end + 2 if end >= 0 else i + 2
        elif (end := inline_math_end(markdown, i)) is not None:
            out.append(f"\\({markdown[i + 1:end]}\\)")
            i = end + 1
        else:
            out.append("\\$")
            i += 1
    out.append(markdown[i:])
    return "".join(out)
