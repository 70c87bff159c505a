"""The synthetic example documents in assets/examples/, and how they were made.

`python -m hpd_training.examples` regenerates them: PNG pages from `hpd_training.synth` and a
2-page PDF built from two more pages, its pages sized so that DPI gives the synth width.
"""

from __future__ import annotations

import io
from pathlib import Path

import pymupdf

from hpd_training.synth import SynthConfig, render_page
from hpd_training.synth.config import DENSE_LARGE_TYPE, LARGE_TYPE

FOLDER = Path(__file__).resolve().parent.parent / "assets" / "examples"
DPI = 90
# The bundled model reads type of the sizes it was trained on (20-28 px on a 768-px page: large
# print); configs without noise keep the PNGs small. (file name, seed, config)
_QUIET = dict(noise_prob=0.0, blur_prob=0.0, jpeg_prob=0.0)
_LARGE = SynthConfig(font_size_range=LARGE_TYPE, **_QUIET)
PAGES = (("synth-report.png", 11, _LARGE),
         ("synth-dense.png", 23, SynthConfig.dense(font_size_range=DENSE_LARGE_TYPE, **_QUIET)),
         ("synth-notes.png", 5, SynthConfig.lines(**_QUIET)))
PDF = ("synth-two-pages.pdf", (31, 47), _LARGE)


def write_examples(folder: Path = FOLDER) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for name, seed, config in PAGES:
        path = folder / name
        render_page(seed, config).image.save(path, optimize=True)
        written.append(path)
    name, seeds, config = PDF
    written.append(_write_pdf(folder / name, [render_page(s, config).image for s in seeds]))
    return written


def _write_pdf(path: Path, images) -> Path:
    doc = pymupdf.open()
    for image in images:
        width, height = (v * 72 / DPI for v in image.size)  # points: DPI dpi renders the image 1:1
        page = doc.new_page(width=width, height=height)
        png = io.BytesIO()  # 64 colours keep the PDF well under 300 KB
        image.quantize(64).save(png, format="PNG", optimize=True)
        page.insert_image(page.rect, stream=png.getvalue())
    doc.save(path, garbage=4, deflate=True)
    return path


if __name__ == "__main__":
    for p in write_examples():
        print(f"{p}  {p.stat().st_size / 1024:.0f} KB")
