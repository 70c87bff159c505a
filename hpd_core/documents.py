"""Documents -> page images: PDFs (pymupdf) and images (Pillow), within limits.

Promises:
- `source` is a path (str or Path; str paths with surrogate escapes from non-UTF-8
  names work) or the file's bytes. The kind is decided by magic bytes, never by the name.
- Every failure on bad input is a `DocumentError` (or its `PasswordRequired`) whose
  message names the file, says what is wrong and, where a limit was hit, its name and
  value. Decoder exceptions never escape raw; they are chained as `__cause__`.
- Pages are numbered from 1. A PDF is opened lazily: counting the pages of a
  10,000-page file is cheap, and `iter_pages` renders only the selected pages, one at
  a time. A TIFF's frames are its pages; other images have one page.
- Page images are RGB. Images get their EXIF orientation applied; grayscale, palette,
  CMYK and 1-bit convert to RGB; alpha is composited on white; 16-bit data (I;16*) is
  scaled to 8 bits (value / 257), not clipped. For the wide modes I and F, values above
  255 are taken as 16-bit data and scaled the same way.

Limits (all configurable through `Limits`; `Limits.from_env()` reads HPD_MAX_FILE_BYTES,
HPD_MAX_PAGES, HPD_MAX_PAGE_PIXELS and HPD_MAX_IMAGE_PIXELS, and the entry points take
flags of the same names, e.g. --max-pages):
- max_file_bytes   = 100 MiB      size of the file.
- max_pages        = 500          pages per request (the selection), not pages in the file.
- max_page_pixels  = 40,000,000   rendered PDF page; a larger page is rendered at a lower
                                  DPI that fits, and the page's `warnings` say so.
- max_image_pixels = 50,000,000   image frame size, checked from the header before
                                  decoding (decompression-bomb guard).
"""

from __future__ import annotations

import io
import math
import os
import re
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
from PIL import Image, ImageOps

Source = str | os.PathLike | bytes | bytearray

IMAGE_FORMATS = ("PNG", "JPEG", "WEBP", "TIFF", "BMP")  # Pillow format names we accept
SUPPORTED = "PDF, PNG, JPEG, WebP, TIFF, BMP"
BYTES_NAME = "document"  # display name of a source given as bytes
DEFAULT_DPI = 90  # PDF render resolution of the app, hpd-parse and hpd-eval unless the checkpoint's
# config says (`render_dpi`: 150 for hpd-tiny-docs); what the bundled hpd-tiny reads
_PDF_HEADER_WINDOW = 1024  # "%PDF-" may follow junk bytes; MuPDF looks this far too


@dataclass(frozen=True)
class Limits:
    max_file_bytes: int = 100 * 2**20
    max_pages: int = 500
    max_page_pixels: int = 40_000_000
    max_image_pixels: int = 50_000_000

    def __post_init__(self) -> None:
        for name, value in vars(self).items():
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"Limits.{name} must be a positive int, got {value!r}")

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ) -> Limits:
        """The defaults, each overridden by its environment variable (HPD_ + the name in
        capitals, e.g. HPD_MAX_PAGES=50); a value that is not a positive int is a ValueError."""
        values = {}
        for name in (f.name for f in fields(cls)):
            variable = f"HPD_{name.upper()}"
            if (text := environ.get(variable)) is None:
                continue
            digits = text.strip().replace("_", "")
            value = int(digits) if digits.isascii() and digits.isdigit() else 0
            if value < 1:
                raise ValueError(f"{variable} must be a positive int, got {text!r}")
            values[name] = value
        return cls(**values)


@dataclass(frozen=True)
class Page:
    image: Image.Image  # RGB
    number: int  # 1-based page number in the document
    source: str  # file name, for display only
    dpi: float | None  # render DPI of a PDF page; None for images
    warnings: tuple[str, ...] = ()


class DocumentError(ValueError):
    """A document that cannot be read, or a request outside the limits."""


class PasswordRequired(DocumentError):
    """An encrypted PDF opened without its password, or with a wrong one."""


# --- reading and recognising -------------------------------------------------------

def display_name(source: Source) -> str:
    """The file name to show: printable even when the path is not valid UTF-8."""
    if isinstance(source, (bytes, bytearray)):
        return BYTES_NAME
    return os.fsencode(Path(source).name).decode("utf-8", "backslashreplace")


def _read(source: Source, limits: Limits) -> bytes:
    name = display_name(source)
    if isinstance(source, (bytes, bytearray)):
        data = bytes(source)
    else:
        data = _read_file(Path(source), name, limits)
    if not data:
        raise DocumentError(f"{name!r} is empty (0 bytes)")
    if len(data) > limits.max_file_bytes:
        raise DocumentError(f"{name!r} is {len(data):,} bytes, over the limit of "
                            f"max_file_bytes={limits.max_file_bytes:,}")
    return data


def _read_file(path: Path, name: str, limits: Limits) -> bytes:
    try:
        size = path.stat().st_size
        if path.is_dir():
            raise DocumentError(f"{name!r} is a directory, not a file")
        if size > limits.max_file_bytes:  # refuse before reading it into memory
            raise DocumentError(f"{name!r} is {size:,} bytes, over the limit of "
                                f"max_file_bytes={limits.max_file_bytes:,}")
        return path.read_bytes()
    except FileNotFoundError as exc:
        raise DocumentError(f"{name!r} does not exist") from exc
    except OSError as exc:
        raise DocumentError(f"cannot read {name!r}: {exc.strerror or exc}") from exc


def _kind(head: bytes, name: str) -> str:
    # image signatures sit at offset 0; test them first, as an image's metadata may
    # contain "%PDF-" within the window
    if (head.startswith((b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"BM",
                         b"II*\x00", b"MM\x00*", b"II+\x00", b"MM\x00+"))
            or (head[:4] == b"RIFF" and head[8:12] == b"WEBP")):
        return "image"
    if b"%PDF-" in head[:_PDF_HEADER_WINDOW]:
        return "pdf"
    if not head:
        raise DocumentError(f"{name!r} is empty (0 bytes)")
    claim = " although its name says .pdf" if name.lower().endswith(".pdf") else ""
    raise DocumentError(f"{name!r} is not a supported file type{claim}; "
                        f"supported: {SUPPORTED}")


def detect_kind(data_or_path: Source) -> str:
    """"pdf" or "image", from the first bytes; DocumentError for anything else."""
    name = display_name(data_or_path)
    if isinstance(data_or_path, (bytes, bytearray)):
        return _kind(bytes(data_or_path[:_PDF_HEADER_WINDOW]), name)
    try:
        with open(data_or_path, "rb") as f:
            return _kind(f.read(_PDF_HEADER_WINDOW), name)
    except FileNotFoundError as exc:
        raise DocumentError(f"{name!r} does not exist") from exc
    except OSError as exc:
        raise DocumentError(f"cannot read {name!r}: {exc.strerror or exc}") from exc


@contextmanager
def _decoding(name: str, what: str) -> Iterator[None]:
    """Turn a decoder's failure on file `name` into a DocumentError saying `what`.

    pymupdf and Pillow raise an open set of types on hostile input (RuntimeError,
    OSError, ValueError, SyntaxError, struct.error, ...), so this one boundary with the
    decoders catches Exception and chains it.
    """
    try:
        yield
    except DocumentError:
        raise
    except Image.DecompressionBombError as exc:
        raise DocumentError(f"{name!r} is too large to decode safely: {exc}") from exc
    except Exception as exc:
        raise DocumentError(f"{what}: {type(exc).__name__}: {exc}") from exc


# --- page selection ----------------------------------------------------------------

def parse_page_ranges(spec: str, page_count: int) -> list[int]:
    """Page numbers of a spec like "1-3,7" or "5-" (to the end), sorted and unique.

    "" or "all" selects every page. Raises DocumentError on a malformed spec, a
    reversed range, or a page outside 1..page_count.
    """
    if page_count < 1:
        raise DocumentError("the document has no pages")
    text = spec.strip().lower().replace("\u2013", "-")  # en dash, as pasted from documents
    if text in ("", "all"):
        return list(range(1, page_count + 1))
    selected: set[int] = set()
    for item in filter(None, (part.strip() for part in text.split(","))):
        first, last = _parse_range(item, spec, page_count)
        selected.update(range(first, last + 1))
    if not selected:
        raise DocumentError(f"no pages in {spec!r}; use numbers and ranges like '1-3,7'")
    return sorted(selected)


_RANGE = re.compile(r"(\d+)(?:\s*(-)\s*(\d*))?")  # "7", "1-3", "5-" (to the end)


def _parse_range(item: str, spec: str, page_count: int) -> tuple[int, int]:
    match = _RANGE.fullmatch(item)
    if match is None:
        raise DocumentError(f"bad page range {item!r} in {spec!r}; "
                            "use numbers and ranges like '1-3,7' or '5-'")
    low, dash, high = match.groups()
    first = int(low)
    last = first if not dash else int(high) if high else page_count
    if first > last:
        raise DocumentError(f"page range {item!r} is reversed; write '{last}-{first}'")
    for number in (first, last):
        _check_page_number(number, page_count)
    return first, last


def _check_page_number(number: int, page_count: int) -> None:
    if not 1 <= number <= page_count:
        raise DocumentError(f"page {number} is out of range: the document has "
                            f"{page_count} page{'s' * (page_count != 1)} (numbered from 1)")


def _select(pages: Sequence[int] | None, page_count: int, limits: Limits) -> list[int]:
    count = page_count if pages is None else len(pages)
    if count > limits.max_pages:
        raise DocumentError(f"{count:,} pages requested, over the limit of "
                            f"max_pages={limits.max_pages:,} per request; select fewer "
                            f"pages, e.g. '1-{min(limits.max_pages, page_count)}'")
    if pages is None:
        return list(range(1, page_count + 1))
    for number in pages:
        if isinstance(number, bool) or not isinstance(number, (int, np.integer)):
            raise DocumentError(f"page numbers must be integers, got {number!r}")
        _check_page_number(int(number), page_count)
    return [int(n) for n in pages]


# --- PDF -----------------------------------------------------------------------------

class _Pdf:
    """An open PDF; pages are loaded and rendered only when asked for."""

    def __init__(self, data: bytes, name: str, password: str | None, limits: Limits):
        import pymupdf  # imported here: image-only users (e.g. a GPU benchmark box) need not install it

        pymupdf.TOOLS.mupdf_display_errors(False)  # a damaged PDF: our DocumentError says it, not MuPDF's stderr

        self.name, self.limits = name, limits
        with _decoding(name, f"{name!r} is not a readable PDF (damaged or truncated)"):
            self.doc = pymupdf.open(stream=data, filetype="pdf")
        if self.doc.needs_pass:
            self._authenticate(password)
        with _decoding(name, f"{name!r} is a damaged PDF"):
            self.page_count = self.doc.page_count
        if self.page_count == 0:
            raise DocumentError(f"{name!r} is a PDF with 0 pages")

    def _authenticate(self, password: str | None) -> None:
        if password is None:
            raise PasswordRequired(f"{self.name!r} is encrypted; a password is required")
        if not self.doc.authenticate(password):
            raise PasswordRequired(f"wrong password for the encrypted PDF {self.name!r}")

    def render(self, number: int, dpi: float) -> Page:
        import pymupdf

        with _decoding(self.name, f"page {number} of {self.name!r} cannot be rendered"):
            page = self.doc.load_page(number - 1)
            width, height = page.rect.width, page.rect.height
            if not (width > 0 and height > 0 and math.isfinite(width * height)):
                raise DocumentError(f"page {number} of {self.name!r} has an empty or "
                                    f"invalid page box ({width} x {height} pt)")
            zoom = _fit_zoom(width, height, dpi / 72, self.limits.max_page_pixels)
            pix = page.get_pixmap(matrix=pymupdf.Matrix(zoom, zoom),
                                  colorspace=pymupdf.csRGB, alpha=False)
            image = Image.frombuffer("RGB", (pix.width, pix.height), pix.samples,
                                     "raw", "RGB", pix.stride, 1).copy()
        warnings = () if zoom * 72 == dpi else (
            f"page {number} is {width:,.0f} x {height:,.0f} pt; rendered at "
            f"{zoom * 72:.1f} DPI instead of {dpi:g} to stay within "
            f"max_page_pixels={self.limits.max_page_pixels:,}",)
        return Page(image, number, self.name, zoom * 72, warnings)

    def close(self) -> None:
        self.doc.close()


def _fit_zoom(width: float, height: float, zoom: float, max_pixels: int) -> float:
    """The largest zoom <= `zoom` whose pixmap (ceil(w*z) x ceil(h*z)) fits max_pixels."""
    def pixels(z: float) -> int:
        return math.ceil(width * z) * math.ceil(height * z)

    if pixels(zoom) <= max_pixels:
        return zoom
    zoom = math.sqrt(max_pixels / (width * height))
    while pixels(zoom) > max_pixels:  # ends: pixels -> 1 as zoom -> 0
        zoom *= 0.999
    return zoom


# --- images --------------------------------------------------------------------------

class _Raster:
    """An open image file; a TIFF's frames are pages, other formats have one page."""

    def __init__(self, data: bytes, name: str, limits: Limits):
        self.name, self.limits = name, limits
        with _decoding(name, f"{name!r} is not a readable image (damaged or truncated)"):
            self.image = Image.open(io.BytesIO(data), formats=IMAGE_FORMATS)
            self._check_size(1)
            frames = getattr(self.image, "n_frames", 1)
        self.page_count = frames if self.image.format == "TIFF" else 1
        self.warnings = () if frames == 1 or self.page_count > 1 else (
            f"{name!r} has {frames} frames; only the first is used",)

    def _check_size(self, number: int) -> None:
        width, height = self.image.size
        if width * height > self.limits.max_image_pixels:
            raise DocumentError(
                f"page {number} of {self.name!r} is {width:,} x {height:,} = "
                f"{width * height:,} pixels, over the limit of "
                f"max_image_pixels={self.limits.max_image_pixels:,}")
        if width * height == 0:
            raise DocumentError(f"page {number} of {self.name!r} has no pixels")

    def render(self, number: int, dpi: float) -> Page:
        with _decoding(self.name, f"page {number} of {self.name!r} cannot be decoded"):
            self.image.seek(number - 1)
            self._check_size(number)  # frames of a TIFF have their own sizes
            image = to_rgb(ImageOps.exif_transpose(self.image))
        return Page(image, number, self.name, None, self.warnings)

    def close(self) -> None:
        self.image.close()


def to_rgb(image: Image.Image) -> Image.Image:
    """`image` as 8-bit RGB: wide modes scaled, alpha composited on white."""
    if image.mode.startswith("I") or image.mode == "F":
        image = _to_8bit(image)
    if image.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in image.info:
        rgba = image.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return image.convert("RGB")


def _to_8bit(image: Image.Image) -> Image.Image:
    """Mode L from I;16*, I or F: 16-bit data is divided by 257 (65535 -> 255)."""
    values = np.nan_to_num(np.asarray(image, dtype=np.float64))  # [H, W]
    values = np.clip(values, 0, 65535)
    if image.mode.startswith("I;16") or values.max() > 255:
        values = values / 257
    return Image.fromarray(np.round(values).astype(np.uint8), mode="L")


# --- public API ----------------------------------------------------------------------

def _open(source: Source, password: str | None, limits: Limits) -> _Pdf | _Raster:
    data = _read(source, limits)
    name = display_name(source)
    if _kind(data[:_PDF_HEADER_WINDOW], name) == "pdf":
        return _Pdf(data, name, password, limits)
    return _Raster(data, name, limits)


def count_pages(source: Source, password: str | None = None,
                limits: Limits = Limits()) -> int:
    """Pages in the document (frames of a TIFF; 1 for other images)."""
    document = _open(source, password, limits)
    try:
        return document.page_count
    finally:
        document.close()


def iter_pages(source: Source, pages: Sequence[int] | None = None, dpi: float = DEFAULT_DPI,
               password: str | None = None, limits: Limits = Limits()) -> Iterator[Page]:
    """The selected pages (all when `pages` is None), rendered one at a time, in order.

    The document is opened and the selection checked before this returns, so bad input
    raises here, not at the first `next()`. PDF pages render at `dpi`; images ignore it.
    """
    if not (isinstance(dpi, (int, float)) and math.isfinite(dpi) and dpi > 0):
        raise DocumentError(f"dpi must be a positive number, got {dpi!r}")
    document = _open(source, password, limits)
    try:
        numbers = _select(pages, document.page_count, limits)
    except DocumentError:
        document.close()
        raise
    return _render(document, numbers, dpi)


def _render(document: _Pdf | _Raster, numbers: list[int], dpi: float) -> Iterator[Page]:
    try:
        for number in numbers:
            yield document.render(number, dpi)
    finally:
        document.close()


def load_pages(source: Source, pages: Sequence[int] | None = None, dpi: float = DEFAULT_DPI,
               password: str | None = None, limits: Limits = Limits()) -> list[Page]:
    """`iter_pages` as a list."""
    return list(iter_pages(source, pages, dpi, password, limits))


def as_image(page) -> Image.Image:
    """An 8-bit RGB image of a PIL image or a `documents.Page` (alpha on white, 16-bit scaled)."""
    image = getattr(page, "image", page)
    if not isinstance(image, Image.Image):
        raise TypeError(f"expected a PIL image or a Page, got {type(page).__name__}")
    if 0 in image.size:
        raise ValueError(f"the image is empty ({image.width}x{image.height} pixels)")
    return to_rgb(image)
