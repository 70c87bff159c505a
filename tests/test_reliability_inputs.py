"""Bad documents at every entry point: the Python API (documents.load_pages + Engine.parse),
hpd-parse (cli.main), the app (gradio_client against the real server) and hpd-serve (HTTP).

Each bad document gets a message that says what is wrong (and the limit, where one was hit),
and the same engine / app / server parses a good page afterwards, with the same text as before.
The fixture builders are test_documents.py's.
"""

from __future__ import annotations

import base64
import html
import io
import json
import os
from dataclasses import dataclass
from pathlib import Path

import httpx
import numpy as np
import pymupdf
import pytest
from gradio_client import Client, handle_file
from gradio_client.exceptions import AppError
from PIL import Image

from app.ui import ParsePanel, build_demo
from hpd_core import documents
from hpd_core.documents import DocumentError, Limits, count_pages, load_pages
from hpd_core.options import ParseOptions
from hpd_tools import cli
from hpd_tools.server import ServeConfig, create_app, parse_args, serving
from tests.conftest import app_options, handlers_of, serve
from tests.test_documents import (GOOD_PDF, colour_pattern, encode, handwritten_pdf, make_pdf, png_header_only,
                                  zip_bytes)

OPTIONS = ParseOptions(max_new_tokens=8)
PDF_REFUSED = ("the image_url holds a PDF; send one page image",)  # hpd-serve takes one page image per request


@dataclass(frozen=True)
class Bad:
    file: str
    data: bytes
    message: tuple[str, ...]   # in the message of the Python API, hpd-parse and the app
    server: tuple[str, ...]    # in hpd-serve's 400 message (images only; the name is 'document')
    password: str | None = None


LOCKED = make_pdf(1, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="s3cret", owner_pw="owner")
BAD = {
    "zero-byte file": Bad("empty.pdf", b"", ("'empty.pdf' is empty (0 bytes)",), ("is empty (0 bytes)",)),
    "truncated PDF": Bad("truncated.pdf", GOOD_PDF[:len(GOOD_PDF) // 3],
                         ("'truncated.pdf' is not a readable PDF (damaged or truncated)",), PDF_REFUSED),
    "corrupt PDF": Bad("corrupt.pdf", b"%PDF-1.7\n" + bytes(range(256)) * 8,
                       ("'corrupt.pdf' is not a readable PDF",), PDF_REFUSED),
    "encrypted PDF without password": Bad("locked.pdf", LOCKED, ("'locked.pdf' is encrypted; a password is required",),
                                          PDF_REFUSED),
    "encrypted PDF, wrong password": Bad("locked.pdf", LOCKED, ("wrong password for the encrypted PDF 'locked.pdf'",),
                                         PDF_REFUSED, password="guess"),
    "PDF with 0 pages": Bad("no-pages.pdf", handwritten_pdf(0), ("'no-pages.pdf' is a PDF with 0 pages",), PDF_REFUSED),
    "100-megapixel image": Bad("bomb.png", png_header_only(10_000, 10_000),
                               ("10,000 x 10,000 = 100,000,000 pixels", "max_image_pixels=50,000,000"),
                               ("100,000,000 pixels", "max_image_pixels=50,000,000")),
    "truncated PNG": Bad("cut.png", encode(colour_pattern(), "PNG")[:60], ("'cut.png' cannot be decoded",),
                         ("cannot be decoded",)),
    "ZIP disguised as .pdf": Bad("report.pdf", zip_bytes(),
                                 ("'report.pdf' is not a supported file type although its name says .pdf",
                                  "supported: PDF, PNG, JPEG, WebP, TIFF, BMP"), ("not a supported file type",)),
}


def sixteen_bit() -> Image.Image:
    return Image.fromarray((np.arange(40 * 30, dtype=np.uint16).reshape(30, 40) * 50))


ODD_IMAGES = {  # colour modes that convert to RGB on the way in
    "grayscale.png": lambda: encode(colour_pattern().convert("L"), "PNG"),
    "cmyk.jpg": lambda: encode(colour_pattern().convert("CMYK"), "JPEG", quality=95),
    "alpha.png": lambda: encode(colour_pattern().convert("RGBA"), "PNG"),
    "gray16.png": lambda: encode(sixteen_bit(), "PNG"),
    "gray16.tif": lambda: encode(sixteen_bit(), "TIFF"),
}


def write(folder: Path, name: str, data: bytes) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    return folder / name


def fragments_in(message: str, fragments) -> bool:
    return all(f in html.unescape(message) for f in fragments)


@pytest.fixture(scope="module")
def good(tmp_path_factory, app_engine):
    """A good page, and the engine's text for it before any bad input."""
    path = write(tmp_path_factory.mktemp("good"), "good.png", encode(colour_pattern(), "PNG"))
    page = load_pages(path)[0]
    return path, page, app_engine.parse(page, OPTIONS).text


# ---- Python API ---------------------------------------------------------------------------

@pytest.mark.parametrize("case", BAD)
def test_python_api_names_the_problem_and_the_engine_still_parses(case, tmp_path, app_engine, good):
    bad = BAD[case]
    with pytest.raises(DocumentError) as error:
        load_pages(write(tmp_path, bad.file, bad.data), password=bad.password)
    assert fragments_in(str(error.value), bad.message), str(error.value)
    assert app_engine.parse(good[1], OPTIONS).text == good[2]


@pytest.fixture
def rendered(monkeypatch) -> list[int]:
    """Numbers of the PDF pages rendered during the test, in order (this process: the API, the CLI
    and the app server the tests start): work that grows with the page count shows here, on a
    slow machine as on a fast one."""
    numbers, render = [], documents._Pdf.render
    monkeypatch.setattr(documents._Pdf, "render", lambda pdf, number, dpi: numbers.append(number) or render(
        pdf, number, dpi))
    return numbers


def test_python_api_ten_thousand_page_pdf_opens_without_rendering_and_all_pages_hit_the_page_limit(
        app_engine, rendered):
    data = handwritten_pdf(10_000)
    assert count_pages(data) == 10_000
    with pytest.raises(DocumentError, match=r"10,000 pages requested, over the limit of max_pages=500 per request"):
        load_pages(data)
    [page] = load_pages(data, pages=[10_000])
    assert rendered == [10_000]
    assert app_engine.parse(page, OPTIONS).stats.generated_tokens > 0


def test_python_api_huge_page_renders_within_the_pixel_limit_and_parses(app_engine):
    [page] = load_pages(make_pdf(1, 20_000, 20_000), limits=Limits(max_page_pixels=4_000_000))
    assert page.image.width * page.image.height <= 4_000_000
    assert "rendered at 7.2 DPI instead of 90 to stay within max_page_pixels=4,000,000" in page.warnings[0]
    assert app_engine.parse(page, OPTIONS).stats.generated_tokens > 0


@pytest.mark.parametrize("name", ODD_IMAGES)
def test_python_api_odd_colour_modes_load_as_rgb_and_parse(name, tmp_path, app_engine):
    [page] = load_pages(write(tmp_path, name, ODD_IMAGES[name]()))
    assert (page.image.mode, page.image.size) == ("RGB", (40, 30) if "16" in name else (30, 20))
    assert app_engine.parse(page, OPTIONS).stats.generated_tokens > 0


def test_python_api_non_utf8_file_name_loads_and_displays_printably(tmp_path, app_engine):
    path = Path(os.fsdecode(os.fsencode(tmp_path) + b"/scan\xff\xfe.png"))  # surrogate-escaped str
    path.write_bytes(encode(colour_pattern(), "PNG"))
    [page] = load_pages(path)
    assert page.source == "scan\\xff\\xfe.png"
    assert app_engine.parse(page, OPTIONS).stats.generated_tokens > 0


# ---- hpd-parse ----------------------------------------------------------------------------

def hpd_parse(model, *args) -> int:
    return cli.main([*map(str, args), "--model", str(model), "--max-new-tokens", "8"])


def failures(err: str) -> dict[str, str]:
    """file name -> its one-line failure message."""
    lines = [line.split(": ", 3) for line in err.splitlines() if line.startswith("hpd-parse: failed: ")]
    return {Path(parts[2]).name: parts[3] for parts in lines}


def test_cli_reports_each_bad_document_in_one_line_and_parses_the_good_ones(app_checkpoint, tmp_path, capsys):
    folder = tmp_path / "in"
    for case, bad in BAD.items():
        if bad.password is None:
            write(folder, bad.file, bad.data)
    write(folder, "good.png", encode(colour_pattern(), "PNG"))
    assert hpd_parse(app_checkpoint, folder, "-o", tmp_path / "out") == 1
    failed = failures(capsys.readouterr().err)
    expected = {bad.file: bad.message for bad in BAD.values() if bad.password is None}
    assert set(failed) == set(expected)
    for file, message in failed.items():
        assert fragments_in(message, expected[file]), message
    assert json.loads((tmp_path / "out" / "good" / "page-0001.json").read_text())["blocks"]


def test_cli_encrypted_pdf_needs_the_password(app_checkpoint, tmp_path, capsys):
    locked = write(tmp_path, "locked.pdf", LOCKED)
    out = tmp_path / "out"
    assert hpd_parse(app_checkpoint, locked, "-o", out) == 1
    assert "'locked.pdf' is encrypted; a password is required" in capsys.readouterr().err
    assert hpd_parse(app_checkpoint, locked, "-o", out, "--password", "guess") == 1
    assert "wrong password for the encrypted PDF 'locked.pdf'" in capsys.readouterr().err
    assert hpd_parse(app_checkpoint, locked, "-o", out, "--password", "s3cret") == 0
    assert (out / "locked" / "page-0001.json").is_file()


def test_cli_ten_thousand_page_pdf_is_refused_before_parsing_unless_pages_are_selected(app_checkpoint, tmp_path,
                                                                                        capsys, rendered):
    long = write(tmp_path, "long.pdf", handwritten_pdf(10_000))
    out = tmp_path / "out"
    assert hpd_parse(app_checkpoint, long, "-o", out) == 1
    err = capsys.readouterr().err
    assert ("'long.pdf': 10,000 pages selected, over the limit of max_pages=500 per document; select fewer "
            "(e.g. --pages 1-500) or raise --max-pages") in err
    assert "0 pages parsed" in err and not out.exists()
    assert hpd_parse(app_checkpoint, long, "-o", out, "--pages", "9999-") == 0
    assert rendered == [9_999, 10_000]
    assert sorted(p.name for p in (out / "long").iterdir()) == [
        "page-10000.json", "page-10000.md", "page-9999.json", "page-9999.md"]


def test_cli_huge_page_warns_on_stderr_and_in_the_page_json(app_checkpoint, tmp_path, capsys):
    huge = write(tmp_path, "huge.pdf", make_pdf(1, 20_000, 20_000))
    assert hpd_parse(app_checkpoint, huge, "-o", tmp_path / "out", "--max-page-pixels", "4000000") == 0
    warning = "rendered at 7.2 DPI instead of 90 to stay within max_page_pixels=4,000,000"
    assert warning in capsys.readouterr().err
    record = json.loads((tmp_path / "out" / "huge" / "page-0001.json").read_text())
    assert warning in record["warnings"][0]
    assert record["image_size"][0] * record["image_size"][1] <= 4_000_000


def test_cli_non_utf8_file_name_is_parsed_and_reported_printably(app_checkpoint, tmp_path, capsys):
    root = os.fsencode(tmp_path)
    good_name = os.fsdecode(root + b"/caf\xe9 \xff.png")  # latin-1 bytes: not UTF-8
    bad_name = os.fsdecode(root + b"/\xff\xfe.pdf")
    Path(good_name).write_bytes(encode(colour_pattern(), "PNG"))
    Path(bad_name).write_bytes(b"")
    out = tmp_path / "out"
    assert hpd_parse(app_checkpoint, good_name, bad_name, "-o", out) == 1
    # the bytes that are not UTF-8 are shown as \\xff escapes (quoted with repr, so doubled in the message)
    assert r"/\xff\xfe.pdf: '\\xff\\xfe.pdf' is empty (0 bytes)" in capsys.readouterr().err
    record = json.loads((out / "caf" / "page-0001.json").read_text(encoding="utf-8"))
    assert record["source"].endswith("caf\\xe9 \\xff.png")


def test_cli_odd_colour_modes_are_all_parsed(app_checkpoint, tmp_path):
    for name, make in ODD_IMAGES.items():
        write(tmp_path / "in", name, make())
    assert hpd_parse(app_checkpoint, tmp_path / "in", "-o", tmp_path / "out") == 0
    assert {p.name for p in (tmp_path / "out").glob("*.md")} == {
        "grayscale.md", "cmyk.md", "alpha.md", "gray16_png.md", "gray16_tif.md"}


def test_cli_limits_come_from_flags_then_environment(app_checkpoint, tmp_path, capsys, monkeypatch):
    three = write(tmp_path, "three.pdf", make_pdf(3, 200, 200))
    png = write(tmp_path, "small.png", encode(colour_pattern(), "PNG"))
    out = tmp_path / "out"
    assert hpd_parse(app_checkpoint, three, "-o", out, "--max-pages", "2") == 1
    assert "3 pages selected, over the limit of max_pages=2" in capsys.readouterr().err
    monkeypatch.setenv("HPD_MAX_IMAGE_PIXELS", "100")
    assert hpd_parse(app_checkpoint, png, "-o", out) == 1
    assert "30 x 20 = 600 pixels, over the limit of max_image_pixels=100" in capsys.readouterr().err
    assert hpd_parse(app_checkpoint, png, "-o", out, "--max-image-pixels", "600") == 0  # the flag wins
    assert hpd_parse(app_checkpoint, three, "-o", out, "--max-file-bytes", "1000") == 1
    assert "over the limit of max_file_bytes=1,000" in capsys.readouterr().err
    assert hpd_parse(app_checkpoint, three, "-o", out, "--max-pages", "0") == 2
    assert "max_pages must be a positive int" in capsys.readouterr().err
    monkeypatch.setenv("HPD_MAX_PAGES", "lots")
    assert hpd_parse(app_checkpoint, three, "-o", out) == 2
    assert "HPD_MAX_PAGES must be a positive int, got 'lots'" in capsys.readouterr().err


# ---- the app (gradio_client) --------------------------------------------------------------

@pytest.fixture(scope="module")
def client(app_server):
    return Client(app_server, verbose=False)


def app_parse(client, path, number=1, password="", new=8) -> dict:
    out = client.predict(handle_file(str(path)), number, 90, password, "", *app_options(max_new_tokens=new),
                         api_name="/parse")
    return dict(zip(ParsePanel._fields, out))


def app_open(client, path, password="", api_name="/open_document") -> tuple[dict, str]:
    """(password box update, status text) of opening `path`."""
    _, password_box, _, _, _, status = client.predict(handle_file(str(path)), 90, password, api_name=api_name)
    return password_box, html.unescape(status)


@pytest.mark.parametrize("case", BAD)
def test_app_names_the_problem_on_open_and_parse_and_still_parses(case, client, tmp_path, good):
    bad = BAD[case]
    path = write(tmp_path, bad.file, bad.data)
    _, status = app_open(client, path, bad.password or "", "/unlock" if bad.password else "/open_document")
    assert 'class="hpd-status error"' in status and fragments_in(status, bad.message), status
    with pytest.raises(AppError) as error:
        app_parse(client, path, password=bad.password or "")
    assert fragments_in(str(error.value), bad.message), str(error.value)
    assert app_parse(client, good[0])["json"]["text"] == good[2]


def test_app_encrypted_pdf_shows_the_password_box_and_parses_with_the_password(client, tmp_path):
    locked = write(tmp_path, "locked.pdf", LOCKED)
    box, status = app_open(client, locked)
    assert box["visible"] is True and "Enter it and press Enter" in status
    box, status = app_open(client, locked, "s3cret", "/unlock")
    assert "locked.pdf: 1 page. Press Parse." in status
    assert "Parsed page 1 of locked.pdf" in app_parse(client, locked, password="s3cret")["status"]


def test_app_ten_thousand_page_pdf_opens_with_one_page_rendered_and_its_last_page_parses(client, tmp_path,
                                                                                          rendered):
    long = write(tmp_path, "long.pdf", handwritten_pdf(10_000))
    _, status = app_open(client, long)
    assert "long.pdf: 10,000 pages. Press Parse." in status
    assert rendered == [1]  # the preview
    assert "Parsed page 10000 of long.pdf" in app_parse(client, long, number=10_000)["status"]


def test_app_huge_page_is_rendered_within_the_limit_and_says_so(client, tmp_path):
    huge = write(tmp_path, "huge.pdf", make_pdf(1, 20_000, 20_000))
    _, status = app_open(client, huge)
    note = "Note: page 1 is 20,000 x 20,000 pt; rendered at 22.7 DPI instead of 90 to stay within " \
           "max_page_pixels=40,000,000."
    assert note in status
    out = app_parse(client, huge)
    width, height = out["json"]["image_size"]
    assert note in html.unescape(out["status"]) and 0.99 * 40_000_000 < width * height <= 40_000_000


@pytest.mark.parametrize("name", ["résumé 中文 (1).png", "grayscale.png", "cmyk.jpg", "alpha.png", "gray16.tif"])
def test_app_odd_names_and_colour_modes_parse(name, client, tmp_path):
    data = ODD_IMAGES.get(name, lambda: encode(colour_pattern(), "PNG"))()
    out = app_parse(client, write(tmp_path, name, data))
    assert f"Parsed page 1 of {name}" in out["status"]


def test_app_non_utf8_path_gets_a_printable_status(app_engine, tmp_path):
    handlers = handlers_of(build_demo(app_engine))  # called directly: a browser cannot send such a name
    path = os.fsdecode(os.fsencode(tmp_path) + b"/scan\xff.png")
    Path(path).write_bytes(encode(colour_pattern(), "PNG"))
    status = handlers.open_document(path, 90, "")[handlers.parse_panel.status]
    assert "scan\\xff.png: 1 page" in status and status.encode("utf-8")


@pytest.fixture(scope="module")
def strict_app(app_engine):
    """The app with small limits, as `hpd-demo --max-image-pixels 1000 --max-file-bytes 100000` serves it."""
    limits = Limits(max_file_bytes=100_000, max_image_pixels=1000)
    with serve(build_demo(app_engine, limits), limits) as url:
        yield Client(url, verbose=False)


def test_app_limits_are_configurable(strict_app, tmp_path, monkeypatch):
    from app.__main__ import parse_args as app_args
    big = write(tmp_path, "big.png", encode(Image.new("RGB", (40, 40)), "PNG"))
    with pytest.raises(AppError, match=r"40 x 40 = 1,600 pixels, over the limit of max_image_pixels=1,000"):
        app_parse(strict_app, big)
    heavy = write(tmp_path, "heavy.pdf", GOOD_PDF + b"%" + b"x" * 100_000)
    with pytest.raises(ValueError, match="exceeds the maximum file size of 100000 bytes"):  # refused at upload
        app_parse(strict_app, heavy)
    assert "Parsed page 1" in app_parse(strict_app, write(tmp_path, "ok.png", encode(colour_pattern(), "PNG")))[
        "status"]
    monkeypatch.setenv("HPD_MAX_PAGES", "7")
    assert app_args(["--max-image-pixels", "1000"]).limits == Limits(max_pages=7, max_image_pixels=1000)


# ---- hpd-serve ----------------------------------------------------------------------------

def data_url(data: bytes) -> str:
    return "data:image/png;base64," + base64.b64encode(data).decode()


def chat(base: str, data: bytes) -> httpx.Response:
    return httpx.post(base + "/chat/completions", timeout=60, json={
        "model": "HPD-Parsing", "max_tokens": 8, "temperature": 0, "messages": [{"role": "user", "content": [
            {"type": "image_url", "image_url": {"url": data_url(data)}},
            {"type": "text", "text": "document parsing with fork."}]}]})


@pytest.fixture(scope="module")
def server(app_engine):
    with serving(create_app([app_engine])) as base:
        yield base


def good_bytes() -> bytes:
    return encode(colour_pattern(), "PNG")


@pytest.mark.parametrize("case", BAD)
def test_server_refuses_with_a_specific_400_and_keeps_serving(case, server, app_engine):
    bad = BAD[case]
    response = chat(server, bad.data)
    assert response.status_code == 400
    error = response.json()["error"]
    assert fragments_in(error["message"], bad.server) and error["type"] == "invalid_request_error", error
    expected = app_engine.parse(load_pages(good_bytes())[0], ParseOptions(batch_children=True, max_new_tokens=8))
    assert chat(server, good_bytes()).json()["choices"][0]["message"]["content"] == expected.text


@pytest.mark.parametrize("name", ODD_IMAGES)
def test_server_odd_colour_modes_give_the_text_of_the_loaded_page(name, server, app_engine):
    data = ODD_IMAGES[name]()
    expected = app_engine.parse(load_pages(data)[0], ParseOptions(batch_children=True, max_new_tokens=8))
    assert chat(server, data).json()["choices"][0]["message"]["content"] == expected.text


def test_server_image_limit_is_configurable(app_engine, monkeypatch):
    with serving(create_app([app_engine], ServeConfig(limits=Limits(max_image_pixels=100)))) as base:
        response = chat(base, good_bytes())
    assert response.status_code == 400
    assert "30 x 20 = 600 pixels, over the limit of max_image_pixels=100" in response.json()["error"]["message"]
    monkeypatch.setenv("HPD_MAX_IMAGE_PIXELS", "1234")
    assert parse_args([]).limits.max_image_pixels == 1234
    assert parse_args(["--max-image-pixels", "99"]).limits.max_image_pixels == 99


def test_server_animated_image_says_only_the_first_frame_is_used(server):
    frames = [Image.new("RGB", (8, 8), colour) for colour in ("red", "blue")]
    buffer = io.BytesIO()
    frames[0].save(buffer, "WEBP", save_all=True, append_images=frames[1:], lossless=True)
    reply = chat(server, buffer.getvalue()).json()
    assert any("has 2 frames; only the first is used" in w for w in reply["hpd_warnings"])
