"""Drawing primitives of synthetic pages and how they go onto a pymupdf page.

Coordinates are PDF points, origin top-left (pixels of the classic presets, rendered at 72 dpi).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pymupdf
from pymupdf import mupdf

from hpd_training.synth.fonts import Face

Color = tuple[float, float, float]  # RGB in 0..1
Point = tuple[float, float]
Rect = tuple[float, float, float, float]  # x0, y0, x1, y1


@dataclass(frozen=True, eq=False)
class Run:
    """Text set from the pen position (x, y) on its baseline."""
    x: float
    y: float
    text: str
    face: Face
    size: float
    color: Color


@dataclass(frozen=True)
class Poly:
    """A polyline (closed: a polygon), stroked and/or filled."""
    points: tuple[Point, ...]
    stroke: Color | None
    fill: Color | None = None
    width: float = 1.0
    closed: bool = False


@dataclass(frozen=True, eq=False)
class Picture:
    """A grey raster with its top-left corner at (x, y), `scale` units a raster pixel (placed
    1:1 on the rendered page when x, y sit on its pixel grid and scale is 1 / zoom)."""
    x: float
    y: float
    ink: np.ndarray  # uint8 [H, W], 0 = paper, 255 = black
    scale: float = 1.0


def rect_poly(r: Rect, stroke: Color | None, fill: Color | None = None, width: float = 1.0) -> Poly:
    x0, y0, x1, y1 = r
    return Poly(((x0, y0), (x1, y0), (x1, y1), (x0, y1)), stroke, fill, width, closed=True)


def draw(page: pymupdf.Page, polys: list[Poly], pictures: list[Picture], runs: list[Run]) -> None:
    """Draws shapes, then pictures, then text (text stays on top of chart fills)."""
    if polys:
        doc = page.parent
        xref = doc.get_new_xref()
        doc.update_object(xref, "<<>>")
        doc.update_stream(xref, path_operators(polys, page.rect.height).encode(), compress=0)
        page.set_contents(xref)  # a new page has no contents yet; pictures and text add theirs
    for pic in pictures:
        h, w = pic.ink.shape
        pixmap = pymupdf.Pixmap(pymupdf.csGRAY, w, h, (255 - pic.ink).tobytes(), False)
        page.insert_image(pymupdf.Rect(pic.x, pic.y, pic.x + w * pic.scale, pic.y + h * pic.scale),
                          pixmap=pixmap)
    writers: dict[Color, pymupdf.TextWriter] = {}
    rect = page.rect
    for run in runs:
        if run.color not in writers:
            writers[run.color] = pymupdf.TextWriter(rect, color=run.color)
        append(writers[run.color], rect.height, run)
    for writer in writers.values():
        writer.write_text(page)


def path_operators(polys: list[Poly], page_height: float) -> str:
    """PDF content-stream operators drawing polys (what pymupdf.Shape writes, ~20x faster).

    PDF user space has y up, so y becomes page_height - y.
    """
    out = []
    for p in polys:
        out.append(f"q {p.width:.3f} w 0 J 0 j")
        if p.stroke is not None:
            out.append("{:.6f} {:.6f} {:.6f} RG".format(*p.stroke))
        if p.fill is not None:
            out.append("{:.6f} {:.6f} {:.6f} rg".format(*p.fill))
        (x, y), *rest = p.points
        out.append(f"{x:.5f} {page_height - y:.5f} m")
        out.extend(f"{x:.5f} {page_height - y:.5f} l" for x, y in rest)
        if p.closed:
            out.append("h")
        out.append(("B" if p.stroke is not None else "f") if p.fill is not None else "S")
        out.append("Q")
    return "\n".join(out)


def append(writer: pymupdf.TextWriter, page_height: float, run: Run) -> None:
    """== writer.append((run.x, run.y), run.text, font, fontsize), without the bookkeeping
    (text bbox, last point, Python matrices) that made it ~130 us a call."""
    trm = mupdf.fz_make_matrix(run.size, 0, 0, run.size, run.x, page_height - run.y)
    mupdf.fz_show_string(writer.this, run.face.font.this, trm, run.text, 0, 0, 0, mupdf.FZ_LANG_UNSET)
    if run.face.font.is_monospaced:
        writer.used_fonts.add(run.face.font)  # write_text repairs monospaced fonts' widths
