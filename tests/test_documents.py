"""Document loading: formats, colour modes, limits, clear errors, and a fuzz test.

Fixtures are built on the fly with pymupdf and Pillow. The fuzz tests run
HPD_FUZZ_EXAMPLES examples each (default 300); for a longer run:
    HPD_FUZZ_EXAMPLES=20000 /work/venv/bin/python -m pytest -q tests/test_documents.py -k fuzz
and replay a failure with `--hypothesis-seed=N`.
"""

from __future__ import annotations

import io
import os
import struct
import zipfile
import zlib

import numpy as np
import pymupdf
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from PIL import Image, ImageFile, PngImagePlugin

from hpd_core.documents import (
    DocumentError, Limits, PasswordRequired, count_pages, detect_kind, display_name,
    iter_pages, load_pages, parse_page_ranges)

FUZZ = settings(max_examples=int(os.environ.get("HPD_FUZZ_EXAMPLES", 300)), deadline=None,
                suppress_health_check=[HealthCheck.too_slow])


# --- fixture builders ---------------------------------------------------------------

def make_pdf(pages: int = 2, width: float = 612, height: float = 792, **save) -> bytes:
    doc = pymupdf.open()
    for number in range(1, pages + 1):
        page = doc.new_page(width=width, height=height)
        page.insert_text((72, 72), f"Page {number}", fontsize=24)
    return doc.tobytes(**save)


def handwritten_pdf(page_count: int) -> bytes:
    """A PDF of `page_count` empty 200 x 200 pt pages, written directly (fast)."""
    kids = " ".join(f"{i + 3} 0 R" for i in range(page_count))
    objects = ["<</Type/Catalog/Pages 2 0 R>>",
               f"<</Type/Pages/Count {page_count}/Kids[{kids}]>>"]
    objects += ["<</Type/Page/Parent 2 0 R/MediaBox[0 0 200 200]>>"] * page_count
    out, offsets = bytearray(b"%PDF-1.7\n"), []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += f"{number} 0 obj{body}endobj\n".encode()
    xref = len(out)
    out += f"xref\n0 {len(objects) + 1}\n0000000000 65535 f \n".encode()
    out += b"".join(f"{offset:010d} 00000 n \n".encode() for offset in offsets)
    out += f"trailer<</Size {len(objects) + 1}/Root 1 0 R>>\nstartxref\n{xref}\n%%EOF".encode()
    return bytes(out)


def encode(image: Image.Image, fmt: str, **save) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, fmt, **save)
    return buffer.getvalue()


def png_header_only(width: int, height: int) -> bytes:
    """A PNG that claims width x height pixels; its pixel data is a few junk bytes."""
    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(
            ">I", zlib.crc32(kind + body))
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", ihdr) + chunk(b"IDAT", b"junk")
            + chunk(b"IEND", b""))


def zip_bytes() -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("word/document.xml", "<w:document/>")
    return buffer.getvalue()


GOOD_PDF = make_pdf(2)


def assert_good_load_still_works() -> None:
    pages = load_pages(GOOD_PDF)
    assert [p.number for p in pages] == [1, 2]
    assert pages[0].image.mode == "RGB"


# --- PDFs ---------------------------------------------------------------------------

def test_pdf_pages_render_at_requested_dpi():
    pages = load_pages(GOOD_PDF, dpi=90)
    assert [(p.number, p.image.size, p.dpi, p.warnings) for p in pages] == [
        (1, (765, 990), 90, ()), (2, (765, 990), 90, ())]
    # the text is drawn: the page is not blank
    assert np.asarray(pages[0].image).min() < 100


def test_selected_pages_render_in_the_given_order():
    pages = load_pages(make_pdf(5), pages=[4, 2], dpi=36)
    assert [p.number for p in pages] == [4, 2]
    assert pages[0].image.size == (306, 396)


def test_iter_pages_renders_lazily_one_page_at_a_time():
    pages = iter_pages(make_pdf(3), dpi=36)
    first = next(pages)
    assert first.number == 1
    assert [p.number for p in pages] == [2, 3]


def test_huge_pdf_page_renders_within_max_page_pixels_with_a_warning():
    limits = Limits()
    [page] = load_pages(make_pdf(1, 20_000, 20_000), dpi=90, limits=limits)
    width, height = page.image.size
    assert width * height <= limits.max_page_pixels
    assert width * height > 0.99 * limits.max_page_pixels  # not needlessly small
    assert page.dpi < 23
    assert page.dpi == pytest.approx(width / 20_000 * 72, rel=1e-3)
    assert "20,000 x 20,000 pt" in page.warnings[0]
    assert "max_page_pixels=40,000,000" in page.warnings[0]


def test_ten_thousand_page_pdf_counts_without_loading_a_page_and_renders_only_the_selected_one(monkeypatch):
    data = handwritten_pdf(10_000)
    loaded, load_page = [], pymupdf.Document.load_page
    monkeypatch.setattr(pymupdf.Document, "load_page", lambda doc, n=0: loaded.append(n) or load_page(doc, n))
    assert count_pages(data) == 10_000 and loaded == []
    [page] = load_pages(data, pages=[9_999], dpi=72)
    assert loaded == [9_998]
    assert (page.number, page.image.size) == (9_999, (200, 200))


def test_all_pages_of_a_long_pdf_are_refused_over_max_pages():
    with pytest.raises(DocumentError, match=r"10,000 pages requested.*max_pages=500"):
        iter_pages(handwritten_pdf(10_000))
    assert len(load_pages(handwritten_pdf(600), limits=Limits(max_pages=600))) == 600


def test_encrypted_pdf_needs_the_right_password():
    data = make_pdf(1, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="s3cret",
                    owner_pw="owner")
    with pytest.raises(PasswordRequired, match="encrypted; a password is required"):
        load_pages(data)
    with pytest.raises(PasswordRequired, match="wrong password"):
        count_pages(data, password="guess")
    assert count_pages(data, password="s3cret") == 1
    [page] = load_pages(data, password="s3cret")
    assert np.asarray(page.image).min() < 100
    assert_good_load_still_works()


# --- images -------------------------------------------------------------------------

def colour_pattern() -> Image.Image:
    rgb = np.zeros((20, 30, 3), np.uint8)
    rgb[:, :10] = (255, 0, 0)
    rgb[:, 10:20] = (0, 255, 0)
    rgb[:, 20:] = (0, 0, 255)
    return Image.fromarray(rgb)


@pytest.mark.parametrize("fmt, save", [
    ("PNG", {}), ("JPEG", {"quality": 95, "subsampling": 0}), ("WEBP", {"lossless": True}), ("TIFF", {}),
    ("BMP", {})])
def test_every_image_format_loads_as_one_rgb_page(fmt, save):
    data = encode(colour_pattern(), fmt, **save)
    assert detect_kind(data) == "image"
    [page] = load_pages(data)
    assert (page.number, page.dpi, page.image.mode, page.image.size) == (1, None, "RGB", (30, 20))
    assert np.abs(np.asarray(page.image, int) - np.asarray(colour_pattern(), int)).max() < 40


def test_exif_orientation_is_applied():
    exif = Image.Exif()
    exif[0x0112] = 6  # stored rotated: display rotated 90 degrees clockwise
    data = encode(colour_pattern(), "JPEG", exif=exif, quality=95)
    [page] = load_pages(data)
    assert page.image.size == (20, 30)
    top_row = np.asarray(page.image, int)[0, 5:15]  # the red columns are now on top
    assert (top_row[:, 0] > 200).all() and (top_row[:, 1:] < 60).all()


def rgb_of(image: Image.Image, fmt: str = "PNG", **save) -> np.ndarray:
    [page] = load_pages(encode(image, fmt, **save))
    assert page.image.mode == "RGB"
    return np.asarray(page.image)


def test_sixteen_bit_grayscale_is_scaled_not_clipped():
    values = np.array([[0, 257, 32896, 65535]], np.uint16)  # 0, 1, 128, 255 in 8 bit
    for fmt in ("PNG", "TIFF"):
        assert rgb_of(Image.fromarray(values), fmt)[0, :, 0].tolist() == [0, 1, 128, 255]


def test_wide_integer_and_float_modes_scale_sixteen_bit_data():
    wide = Image.fromarray(np.array([[0, 32896, 65535]], np.int32), mode="I")
    assert rgb_of(wide, "TIFF")[0, :, 1].tolist() == [0, 128, 255]
    eight_bit = Image.fromarray(np.array([[0, 128, 255]], np.float32), mode="F")
    assert rgb_of(eight_bit, "TIFF")[0, :, 2].tolist() == [0, 128, 255]


def test_alpha_is_composited_on_white():
    rgba = Image.new("RGBA", (4, 1), (0, 0, 0, 0))
    rgba.putpixel((1, 0), (0, 0, 0, 255))
    rgba.putpixel((2, 0), (255, 0, 0, 128))
    out = rgb_of(rgba)
    assert out[0, 0].tolist() == [255, 255, 255]
    assert out[0, 1].tolist() == [0, 0, 0]
    assert out[0, 2].tolist() == [255, 127, 127]
    la = Image.new("LA", (2, 1), (0, 0))
    assert rgb_of(la)[0, 0].tolist() == [255, 255, 255]


def test_palette_grayscale_bilevel_and_cmyk_convert_to_rgb():
    palette = colour_pattern().convert("P", palette=Image.Palette.ADAPTIVE, colors=4)
    assert rgb_of(palette)[0, 0].tolist() == [255, 0, 0]
    transparent = palette.copy()
    transparent.info["transparency"] = palette.getpixel((0, 0))
    assert rgb_of(transparent)[0, 0].tolist() == [255, 255, 255]
    assert rgb_of(Image.new("L", (2, 2), 77))[0, 0].tolist() == [77, 77, 77]
    assert rgb_of(Image.new("1", (2, 2), 1))[0, 0].tolist() == [255, 255, 255]
    cmyk = Image.new("CMYK", (2, 2), (0, 255, 255, 0))  # red
    assert np.abs(rgb_of(cmyk, "JPEG", quality=100)[0, 0].astype(int)
                  - [255, 0, 0]).max() < 10


def test_multiframe_tiff_frames_are_pages():
    frames = [Image.new("RGB", (8 + i, 8), (i * 60, 0, 0)) for i in range(3)]
    data = encode(frames[0], "TIFF", save_all=True, append_images=frames[1:])
    assert count_pages(data) == 3
    pages = load_pages(data, pages=[3, 1])
    assert [(p.number, p.image.size) for p in pages] == [(3, (10, 8)), (1, (8, 8))]
    assert pages[0].image.getpixel((0, 0)) == (120, 0, 0)


def test_an_animated_image_uses_its_first_frame_and_says_so():
    frames = [Image.new("RGB", (4, 4), colour) for colour in ((255, 0, 0), (0, 0, 255))]
    data = encode(frames[0], "WEBP", save_all=True, append_images=frames[1:], lossless=True)
    [page] = load_pages(data)
    assert page.image.getpixel((0, 0)) == (255, 0, 0)
    assert "2 frames; only the first is used" in page.warnings[0]


def test_kind_is_detected_by_content_not_name(tmp_path):
    disguised = tmp_path / "scan.pdf"
    disguised.write_bytes(encode(colour_pattern(), "PNG"))
    assert detect_kind(disguised) == "image"
    assert load_pages(disguised)[0].image.size == (30, 20)
    renamed = tmp_path / "doc.png"
    renamed.write_bytes(GOOD_PDF)
    assert detect_kind(renamed) == "pdf"
    assert count_pages(str(renamed)) == 2


def test_kind_is_detected_by_signature_even_with_pdf_text_inside():
    info = PngImagePlugin.PngInfo()
    info.add_text("Comment", "converted from %PDF-1.7")
    assert detect_kind(encode(colour_pattern(), "PNG", pnginfo=info)) == "image"
    assert detect_kind(b"junk before the header\n" + GOOD_PDF) == "pdf"


@pytest.mark.parametrize("name", ["caf\udce9 report.pdf", "résumé 中文 (1).pdf",
                                  "line\nbreak.pdf", "-dash.pdf", " .pdf"])
def test_odd_file_names_load_and_display_printably(tmp_path, name):
    path = os.path.join(tmp_path, name)
    with open(path, "wb") as f:
        f.write(GOOD_PDF)
    pages = load_pages(path, pages=[1])
    assert pages[0].source.encode("utf-8")  # printable: no lone surrogates
    assert display_name(path) == pages[0].source
    with pytest.raises(DocumentError, match="does not exist"):
        load_pages(path + "-missing")


# --- bad input: a clear message, then a good load still works -------------------------

def bad_sources(tmp_path):
    text = tmp_path / "notes.pdf"
    text.write_text("this is not a PDF\n")
    archive = tmp_path / "report.pdf"
    archive.write_bytes(zip_bytes())
    empty = tmp_path / "empty.pdf"
    empty.write_bytes(b"")
    big = tmp_path / "big.pdf"
    big.write_bytes(GOOD_PDF)
    return {
        "missing": (tmp_path / "nope.pdf", {}, ["'nope.pdf' does not exist"]),
        "directory": (tmp_path, {}, ["is a directory"]),
        "zero bytes": (empty, {}, ["'empty.pdf' is empty (0 bytes)"]),
        "zero bytes given": (b"", {}, ["is empty (0 bytes)"]),
        "over max_file_bytes": (big, {"limits": Limits(max_file_bytes=1000)},
                                [f"{len(GOOD_PDF):,} bytes", "max_file_bytes=1,000"]),
        "bytes over max_file_bytes": (GOOD_PDF, {"limits": Limits(max_file_bytes=1000)},
                                      ["max_file_bytes=1,000"]),
        "truncated pdf": (GOOD_PDF[:len(GOOD_PDF) // 3], {},
                          ["not a readable PDF (damaged or truncated)"]),
        "corrupt pdf": (b"%PDF-1.7\n" + os.urandom(2000), {}, ["not a readable PDF"]),
        "pdf with 0 pages": (handwritten_pdf(0), {}, ["PDF with 0 pages"]),
        "text named .pdf": (text, {}, ["'notes.pdf' is not a supported file type "
                                       "although its name says .pdf", "PNG, JPEG"]),
        "zip named .pdf": (archive, {}, ["'report.pdf' is not a supported file type"]),
        "gif": (encode(colour_pattern(), "GIF"), {}, ["not a supported file type"]),
        "truncated png": (encode(colour_pattern(), "PNG")[:60], {},
                          ["cannot be decoded"]),
        "page out of range": (GOOD_PDF, {"pages": [3]},
                              ["page 3 is out of range: the document has 2 pages"]),
        "page zero": (GOOD_PDF, {"pages": [0]}, ["page 0 is out of range"]),
        "page not an int": (GOOD_PDF, {"pages": ["1"]}, ["must be integers"]),
        "selection over max_pages": (GOOD_PDF, {"pages": [1, 2, 1],
                                                "limits": Limits(max_pages=2)},
                                     ["3 pages requested", "max_pages=2"]),
        "image over max_image_pixels": (encode(colour_pattern(), "PNG"),
                                        {"limits": Limits(max_image_pixels=100)},
                                        ["30 x 20 = 600 pixels", "max_image_pixels=100"]),
        "bad dpi": (GOOD_PDF, {"dpi": 0}, ["dpi must be a positive number"]),
    }


BAD_CASES = [
    "missing", "directory", "zero bytes", "zero bytes given", "over max_file_bytes",
    "bytes over max_file_bytes", "truncated pdf", "corrupt pdf", "pdf with 0 pages",
    "text named .pdf", "zip named .pdf", "gif", "truncated png", "page out of range",
    "page zero", "page not an int", "selection over max_pages",
    "image over max_image_pixels", "bad dpi"]


@pytest.mark.parametrize("case", BAD_CASES)
def test_bad_input_gives_a_specific_message_and_a_good_load_still_works(tmp_path, case):
    cases = bad_sources(tmp_path)
    assert sorted(cases) == sorted(BAD_CASES)
    source, kwargs, fragments = cases[case]
    with pytest.raises(DocumentError) as error:
        load_pages(source, **kwargs)
    for fragment in fragments:
        assert fragment in str(error.value)
    assert_good_load_still_works()


def test_a_decompression_bomb_is_refused_from_its_header():
    # 10,000 x 10,000 claimed, no pixel data: decoding would fail with another message.
    with pytest.warns(Image.DecompressionBombWarning):  # Pillow's own, at 89 Mpx
        with pytest.raises(DocumentError, match=r"10,000 x 10,000 = 100,000,000 pixels"
                                                r".*max_image_pixels=50,000,000"):
            load_pages(png_header_only(10_000, 10_000))
    with pytest.raises(DocumentError, match="too large to decode safely"):  # Pillow: 179 Mpx
        count_pages(png_header_only(60_000, 60_000))
    assert_good_load_still_works()


def test_a_cheap_but_huge_bilevel_image_is_refused_before_it_is_decoded(monkeypatch):
    data = encode(Image.new("1", (8_000, 8_000)), "PNG")  # 64 Mpx, a few kB
    decoded, load = [], ImageFile.ImageFile.load
    monkeypatch.setattr(ImageFile.ImageFile, "load", lambda image: decoded.append(image.size) or load(image))
    with pytest.raises(DocumentError, match="max_image_pixels"):
        load_pages(data)
    assert decoded == []


# --- page ranges --------------------------------------------------------------------

@pytest.mark.parametrize("spec, expected", [
    ("1-3,7", [1, 2, 3, 7]), ("", list(range(1, 11))), ("ALL", list(range(1, 11))),
    (" 9- ", [9, 10]), ("7, 1 - 2, 2", [1, 2, 7]), ("3\u20134,", [3, 4]), ("10", [10])])
def test_page_ranges_parse_to_sorted_unique_pages(spec, expected):
    assert parse_page_ranges(spec, 10) == expected


@pytest.mark.parametrize("spec, message", [
    ("1-3,x", "bad page range 'x' in '1-3,x'"), ("-3", "bad page range '-3'"),
    ("2.5", "bad page range '2.5'"), ("5-3", "'5-3' is reversed; write '3-5'"),
    ("0", "page 0 is out of range"), ("1-999999999", "page 999999999 is out of range"),
    ("11", "the document has 10 pages"), (",", "no pages in ','")])
def test_bad_page_ranges_give_a_specific_message(spec, message):
    with pytest.raises(DocumentError, match=message.replace("(", r"\(")):
        parse_page_ranges(spec, 10)


# --- fuzz: only DocumentError, ever -----------------------------------------------------

SMALL_PDF = make_pdf(1, 200, 100)
SMALL_PNG = encode(colour_pattern().convert("P", palette=Image.Palette.ADAPTIVE), "PNG")
MAGICS = [b"", b"%PDF-1.7\n", b"\x89PNG\r\n\x1a\n", b"\xff\xd8\xff", b"BM", b"II*\x00",
          b"MM\x00*", b"RIFF\x00\x00\x00\x00WEBP", b"PK\x03\x04"]


@st.composite
def mutations(draw, original: bytes) -> bytes:
    data = bytearray(original)
    for _ in range(draw(st.integers(1, 6))):
        if not data:
            break
        at = draw(st.integers(0, len(data) - 1))
        edit = draw(st.sampled_from(["set", "insert", "delete"]))
        if edit == "set":
            data[at] = draw(st.integers(0, 255))
        elif edit == "insert":
            data[at:at] = draw(st.binary(min_size=1, max_size=16))
        else:
            del data[at:at + draw(st.integers(1, 64))]
    if draw(st.booleans()):
        data = data[:draw(st.integers(0, len(data)))]
    return bytes(data)


def loads_or_refuses(data: bytes) -> None:
    try:
        pages = load_pages(data, dpi=36, limits=Limits(max_page_pixels=1_000_000))
    except DocumentError:
        return
    assert all(p.image.mode == "RGB" for p in pages)


@FUZZ
@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns on corrupt EXIF
@given(st.builds(bytes.__add__, st.sampled_from(MAGICS), st.binary(max_size=512)))
def test_fuzz_random_bytes_raise_only_document_error(data):
    loads_or_refuses(data)


@FUZZ
@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns on corrupt EXIF
@given(mutations(SMALL_PDF))
def test_fuzz_mutated_pdf_raises_only_document_error(data):
    loads_or_refuses(data)


@FUZZ
@pytest.mark.filterwarnings("ignore::UserWarning")  # Pillow warns on corrupt EXIF
@given(mutations(SMALL_PNG))
def test_fuzz_mutated_png_raises_only_document_error(data):
    loads_or_refuses(data)
