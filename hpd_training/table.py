"""Ruled tables of a text layer: where they are (`candidates`) and their cells (`grid`).

TeX tables are mostly booktabs: horizontal rules only, which pymupdf's `find_tables` does not
see as a grid (and it costs ~0.5-1 s a page). Here a candidate is the region between >= 2
horizontal rules of one width (+-3 pt) lying 10 pt to 60 % of the page height apart; its rows
are the text lines' baselines (+-2 pt) and its columns the x-intervals that the words of all
rows cover (overlapping intervals joined). A region is a table when it has >= 2 rows and >= 2
columns, at least half the rows fill >= 2 cells, and cells hold <= 5 words (median): a page's two
columns of prose between a header rule and a footer rule are not one.
"""

from __future__ import annotations

from dataclasses import dataclass

from hpd_training.textlayer import Char, Line

Box = tuple[float, float, float, float]


@dataclass(frozen=True)
class Table:
    bbox: Box
    cells: tuple[tuple[tuple[Char, ...], ...], ...]  # rows of cells of characters (words spaced)


def rules(drawings: list[dict]) -> list[Box]:
    """Horizontal rules drawn: lines, and rectangles under 1.5 pt high, over 20 pt wide."""
    out = []
    for d in drawings:
        for item in d["items"]:
            if item[0] == "l" and abs(item[1].y - item[2].y) < 0.5 and abs(item[1].x - item[2].x) > 20:
                a, b = sorted((item[1].x, item[2].x))
                out.append((a, item[1].y, b, item[1].y))
            elif item[0] == "re" and item[1].height < 1.5 and item[1].width > 20:
                r = item[1]
                out.append((r.x0, r.y0, r.x1, r.y1))
    return out


def candidates(found: list[Box], page_height: float) -> list[Box]:
    groups: list[list[Box]] = []
    for rule in sorted(found, key=lambda r: (r[0], r[2], r[1])):
        group = next((g for g in groups if abs(g[0][0] - rule[0]) <= 3 and abs(g[0][2] - rule[2]) <= 3), None)
        if group is None:
            groups.append([rule])
        else:
            group.append(rule)
    out = []
    for g in groups:
        x0, x1 = min(r[0] for r in g), max(r[2] for r in g)
        y0, y1 = min(r[1] for r in g), max(r[3] for r in g)
        if len(g) >= 2 and 10 <= y1 - y0 <= 0.6 * page_height:
            out.append((x0 - 2, y0 - 1, x1 + 2, y1 + 1))
    return out


def _words(line: Line) -> list[tuple[Char, ...]]:
    words, current = [], []
    for ch in line.chars:
        if ch.c.isspace():
            if current:
                words.append(tuple(current))
            current = []
        else:
            current.append(ch)
    return words + ([tuple(current)] if current else [])


def _span(word: tuple[Char, ...]) -> tuple[float, float]:
    """The word's extent, its end characters' centres widened by 0.3 em."""
    return (word[0].x - 0.3 * word[0].size, word[-1].x + 0.3 * word[-1].size)


def grid(region: Box, lines: list[Line]) -> Table | None:
    """The table of the lines centred in `region`, or None when they do not form one."""
    inside = [line for line in lines if region[0] <= (line.bbox[0] + line.bbox[2]) / 2 <= region[2]
              and region[1] <= (line.bbox[1] + line.bbox[3]) / 2 <= region[3]]
    rows: list[list[tuple[Char, ...]]] = []
    last_y = None
    for line in sorted(inside, key=lambda line: (line.bbox[3], line.bbox[0])):
        if last_y is None or line.bbox[3] - last_y > 2:
            rows.append([])
        last_y = line.bbox[3]
        rows[-1] += _words(line)
    words = [w for row in rows for w in row]
    if not words:
        return None
    columns = _columns([_span(w) for w in words], 0.6 * sorted(w[0].size for w in words)[len(words) // 2])
    if len(rows) < 2 or len(columns) < 2:
        return None
    cells = [[[] for _ in columns] for _ in rows]
    for r, row in enumerate(rows):
        for word in sorted(row, key=lambda w: w[0].x):
            mid = (word[0].x + word[-1].x) / 2
            c = min(range(len(columns)), key=lambda i: max(columns[i][0] - mid, mid - columns[i][1], 0))
            cells[r][c].append(word)
    filled = sum(sum(bool(c) for c in row) >= 2 for row in cells)
    counts = sorted(len(c) for row in cells for c in row if c)
    if filled < len(rows) / 2 or counts[len(counts) // 2] > 5:
        return None
    space = Char(" ", 0.0, 0.0, 0.0, False, False)
    text = tuple(tuple(tuple(ch for i, w in enumerate(c) for ch in ((space,) if i else ()) + w) for c in row)
                 for row in cells)
    return Table(region, text)


def _columns(spans: list[tuple[float, float]], gap: float) -> list[tuple[float, float]]:
    """Word extents joined where they overlap or lie under `gap` apart (a word space)."""
    merged: list[list[float]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1] + gap:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    return [(a, b) for a, b in merged]
