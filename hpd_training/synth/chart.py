"""Figures for `image` blocks: bar, line, scatter and pie charts and box diagrams.

Each figure is drawn inside its rectangle (strokes and labels included) with `Poly` shapes and
short text `Run`s; the caller treats the whole drawing as one image block without content.
"""

from __future__ import annotations

import math
import random

from hpd_training.synth import text
from hpd_training.synth.drawing import Color, Poly, Rect, Run, rect_poly
from hpd_training.synth.fonts import Family

# Saturated enough that every fill counts as ink (min channel well below the ink threshold).
PALETTE: tuple[Color, ...] = (
    (0.12, 0.47, 0.71), (1.0, 0.5, 0.05), (0.17, 0.63, 0.17), (0.84, 0.15, 0.16),
    (0.58, 0.4, 0.74), (0.55, 0.34, 0.29), (0.89, 0.47, 0.76), (0.5, 0.5, 0.5),
    (0.74, 0.74, 0.13), (0.09, 0.75, 0.81), (0.2, 0.2, 0.55), (0.3, 0.3, 0.3))
AXIS: Color = (0.1, 0.1, 0.1)
GRID: Color = (0.85, 0.85, 0.85)
INSET = 2.0  # px kept free inside the rectangle so strokes stay inside it

Drawing = tuple[list[Poly], list[Run]]


def chart(rng: random.Random, rect: Rect, family: Family, size: float) -> Drawing:
    kind = rng.choice((_bars, _bars, _lines, _scatter, _pie, _diagram))
    x0, y0, x1, y1 = rect
    return kind(rng, (x0 + INSET, y0 + INSET, x1 - INSET, y1 - INSET), family, max(9.0, 0.7 * size))


def _label(rng: random.Random) -> str:
    return rng.choice(text.corpus().vocabulary)[:8].capitalize()


def _axes(rng: random.Random, r: Rect, family: Family, size: float) -> tuple[Rect, Drawing]:
    """Axes with tick labels along the left and bottom; returns the plot area inside them."""
    face = family.regular
    x0, y0, x1, y1 = r
    step = rng.choice((1, 2, 5, 10, 20, 50, 100, 250, 1000))
    ticks = [str(step * i) for i in range(rng.randint(3, 6))]
    left = x0 + max(face.width(t, size) for t in ticks) + 4
    bottom = y1 - size * (face.ascent + face.descent) - 3
    plot = (left, y0 + size * face.ascent, x1, bottom)
    polys = [Poly(((left, y0), (left, bottom), (x1, bottom)), AXIS, width=1.0)]
    runs = []
    for i, t in enumerate(ticks):
        y = bottom - i * (bottom - plot[1]) / (len(ticks) - 1)
        runs.append(Run(left - 3 - face.width(t, size), y + 0.35 * size, t, face, size, AXIS))
        if i and rng.random() < 0.5:
            polys.insert(0, Poly(((left, y), (x1, y)), GRID, width=0.5))
    return plot, (polys, runs)


def _bars(rng: random.Random, r: Rect, family: Family, size: float) -> Drawing:
    (px0, py0, px1, py1), (polys, runs) = _axes(rng, r, family, size)
    n, series = rng.randint(3, 9), rng.choice((1, 1, 2, 3))
    colors = rng.sample(PALETTE, series)
    slot = (px1 - px0) / n
    bar = slot * rng.uniform(0.5, 0.8) / series
    for i in range(n):
        for s in range(series):
            bx = px0 + i * slot + (slot - bar * series) / 2 + s * bar
            top = py1 - (py1 - py0) * rng.uniform(0.1, 1.0)
            polys.append(rect_poly((bx, top, bx + bar, py1), None, colors[s]))
    return polys, runs


def _lines(rng: random.Random, r: Rect, family: Family, size: float) -> Drawing:
    (px0, py0, px1, py1), (polys, runs) = _axes(rng, r, family, size)
    n = rng.randint(5, 16)
    for color in rng.sample(PALETTE, rng.randint(1, 3)):
        v, points = rng.random(), []
        for i in range(n):
            v = min(1.0, max(0.0, v + rng.uniform(-0.25, 0.25)))
            points.append((px0 + 4 + i * (px1 - px0 - 8) / (n - 1), py1 - 2 - v * (py1 - py0 - 4)))
        polys.append(Poly(tuple(points), color, width=rng.uniform(1.2, 2.5)))
    return polys, runs


def _scatter(rng: random.Random, r: Rect, family: Family, size: float) -> Drawing:
    (px0, py0, px1, py1), (polys, runs) = _axes(rng, r, family, size)
    color, radius = rng.choice(PALETTE), rng.uniform(1.5, 3.0)
    for _ in range(rng.randint(15, 60)):
        cx = rng.uniform(px0 + radius + 2, px1 - radius - 1)
        cy = rng.uniform(py0 + radius + 1, py1 - radius - 2)
        polys.append(_polygon(cx, cy, radius, 8, None, color))
    return polys, runs


def _pie(rng: random.Random, r: Rect, family: Family, size: float) -> Drawing:
    x0, y0, x1, y1 = r
    face = family.regular
    n = rng.randint(2, 6)
    colors = rng.sample(PALETTE, n)
    labels = [_label(rng) for _ in range(n)]
    legend_w = size * 1.5 + max(face.width(t, size) for t in labels)
    if x1 - x0 - legend_w < y1 - y0 or n * size * 1.4 > y1 - y0:
        labels, legend_w = [], 0.0  # no room for a legend
    radius = min((x1 - x0 - legend_w) * 0.45, (y1 - y0) / 2 - 1)
    cx, cy = x0 + radius + 1, (y0 + y1) / 2
    weights = [rng.uniform(0.2, 1.0) for _ in range(n)]
    angle, polys, runs = -math.pi / 2, [], []
    for weight, color in zip(weights, colors):
        sweep = 2 * math.pi * weight / sum(weights)
        steps = max(2, int(sweep * 12))
        arc = [(cx + radius * math.cos(angle + sweep * k / steps),
                cy + radius * math.sin(angle + sweep * k / steps)) for k in range(steps + 1)]
        polys.append(Poly(((cx, cy), *arc), (1.0, 1.0, 1.0), color, width=1.0, closed=True))
        angle += sweep
    lx, line_h = x1 - legend_w, size * 1.4
    ly = cy - n * line_h / 2
    for i, (label, color) in enumerate(zip(labels, colors)):
        top = ly + i * line_h
        polys.append(rect_poly((lx, top, lx + size, top + size), None, color))
        runs.append(Run(lx + size * 1.5, top + size * 0.85, label, face, size, AXIS))
    return polys, runs


def _diagram(rng: random.Random, r: Rect, family: Family, size: float) -> Drawing:
    """Boxes with labels in a row or a column, joined by arrows."""
    x0, y0, x1, y1 = r
    face = family.regular
    n = rng.randint(2, 5)
    fill = rng.choice(PALETTE)
    labels = [_label(rng) for _ in range(n)]
    across = rng.random() < 0.6
    span = (x1 - x0) if across else (y1 - y0)
    box = span / (n * 1.6 - 0.6)
    polys, runs = [], []
    for i, label in enumerate(labels):
        start = i * box * 1.6
        b = ((x0 + start, y0, x0 + start + box, y1) if across
             else (x0, y0 + start, x1, y0 + start + box))
        polys.append(rect_poly(b, AXIS, _tint(fill), width=1.0))
        w = face.width(label, size)
        if w < b[2] - b[0] - 4 and size < b[3] - b[1] - 4:
            runs.append(Run((b[0] + b[2] - w) / 2, (b[1] + b[3]) / 2 + 0.35 * size, label, face, size, AXIS))
        if i:
            polys.extend(_arrow(b, box * 0.6, across))
    return polys, runs


def _arrow(b: Rect, gap: float, across: bool) -> list[Poly]:
    """An arrow across the gap before box `b`."""
    if across:
        y = (b[1] + b[3]) / 2
        tip, tail = (b[0] - 1, y), (b[0] - gap + 1, y)
        head = ((tip[0] - 5, y - 3), tip, (tip[0] - 5, y + 3))
    else:
        x = (b[0] + b[2]) / 2
        tip, tail = (x, b[1] - 1), (x, b[1] - gap + 1)
        head = ((x - 3, tip[1] - 5), tip, (x + 3, tip[1] - 5))
    return [Poly((tail, tip), AXIS, width=1.0), Poly(head, AXIS, AXIS, closed=True)]


def _polygon(cx: float, cy: float, radius: float, n: int, stroke: Color | None, fill: Color) -> Poly:
    points = tuple((cx + radius * math.cos(2 * math.pi * k / n), cy + radius * math.sin(2 * math.pi * k / n))
                   for k in range(n))
    return Poly(points, stroke, fill, closed=True)


def _tint(c: Color) -> Color:
    return tuple(0.45 + 0.55 * v for v in c)  # lighter, min channel stays <= 0.7
