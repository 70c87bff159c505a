"""Whole documents in the app, in a real headless browser against a real Gradio server (tiny forking
checkpoint): all pages of a PDF with a page navigator and hpd-parse's document Markdown as the
download; Stop during page 2 keeps page 1; bad page ranges get a clear message."""

from dataclasses import replace
from pathlib import Path

import pymupdf
import pytest
from playwright.sync_api import expect

from app.examples import FOLDER
from app.ui import build_demo
from hpd_tools import cli
from tests.conftest import serve
from tests.test_app_browser import browser, open_app, parse, set_checked, set_value, stop, upload  # noqa: F401

PAGES = [FOLDER / "synth-report.png", FOLDER / "synth-notes.png", FOLDER / "synth-dense.png"]
DPI = 90  # the app's and hpd-parse's default


def three_page_pdf(folder: Path) -> Path:
    """The example pages as a PDF whose pages render at DPI to the images' own size."""
    pdf = pymupdf.open()
    for image in PAGES:
        width, height = pymupdf.Pixmap(str(image)).irect[2:]
        page = pdf.new_page(width=width * 72 / DPI, height=height * 72 / DPI)
        page.insert_image(page.rect, filename=str(image))
    path = folder / "three-pages.pdf"
    pdf.save(path)
    return path


def cli_markdown(pdf: Path, out: Path, checkpoint, *flags: str) -> str:
    """hpd-parse's document Markdown of `pdf` with `flags`."""
    assert cli.main([str(pdf), "-o", str(out), "--model", str(checkpoint), *flags]) == cli.EXIT_OK
    return (out / f"{pdf.stem}.md").read_text(encoding="utf-8")


def downloaded(page, selector: str) -> str:
    with page.expect_download() as download:
        page.click(selector)
    return Path(download.value.path()).read_text(encoding="utf-8")


def set_pages(page, spec: str):
    set_value(page, "#pages textarea", spec)


@pytest.fixture
def page(browser, app_server):  # noqa: F811
    yield from open_app(browser, app_server)


def test_all_pages_of_a_pdf_parse_with_a_navigator_and_the_download_is_hpd_parse_s_markdown(page, tmp_path,
                                                                                            app_checkpoint):
    pdf = three_page_pdf(tmp_path)
    upload(page, pdf)
    set_pages(page, "all")
    set_value(page, "#max-new-tokens input", 30)
    set_checked(page, "batch-children", True)  # a mode that decodes the pages of a batch together
    parse(page)
    expect(page.locator("#status")).to_contain_text("Parsed 3 pages of three-pages.pdf")
    navigator = page.locator("#navigator")
    for number in (1, 2, 3):
        expect(navigator.get_by_label(f"page {number}", exact=True)).to_be_visible()
    expect(navigator.get_by_label("follow decoding")).to_have_count(0)
    navigator.get_by_label("page 2", exact=True).check()
    expect(page.locator("#status")).to_contain_text("Showing: Parsed page 2 of three-pages.pdf")
    expect(page.locator("#tree tbody tr").nth(1)).to_be_attached()
    got = downloaded(page, "#download-md")
    assert got == cli_markdown(pdf, tmp_path / "cli", app_checkpoint, "--batch-children", "--max-new-tokens", "30")
    assert got.count(cli.PAGE_SEPARATOR) == 2
    navigator.get_by_label("page 1", exact=True).check()  # the navigator's page is the CLI's page
    expect(page.locator("#status")).to_contain_text("Showing: Parsed page 1 of three-pages.pdf")
    first = (tmp_path / "cli" / "three-pages" / "page-0001.md").read_text(encoding="utf-8")
    assert got.startswith(first.strip() + cli.PAGE_SEPARATOR)


def test_a_bad_page_range_gets_a_clear_message_not_a_traceback(page, tmp_path):
    upload(page, three_page_pdf(tmp_path))
    for spec, message in (("5-2", "'5-2' is reversed; write '2-5'"), ("2-7", "page 7 is out of range"),
                          ("1,x", "bad page range 'x'")):
        set_pages(page, spec)
        page.click("#parse")
        expect(page.locator("#status .hpd-status.error")).to_contain_text(message)
    assert "Traceback" not in page.content()


class EndlessAfterFirstPage:
    """The tiny engine; the first page of a parse decodes with the options asked for, the later ones
    without loop detection or token limits to speak of: they decode until Stop, however fast the machine."""

    def __init__(self, engine):
        self.engine = engine

    @property
    def info(self):
        return self.engine.info

    def stream_batch(self, pages, options, cancel=None):
        endless = replace(options, loop_window=0, max_new_tokens=8000)
        for index, one in enumerate(pages):
            for event in self.engine.stream_batch([one], options if index == 0 else endless, cancel):
                yield replace(event, page=index)


@pytest.fixture(scope="module")
def stopping_server(app_engine):
    with serve(build_demo(EndlessAfterFirstPage(app_engine))) as url:
        yield url


@pytest.fixture
def stopping_page(browser, stopping_server):  # noqa: F811
    yield from open_app(browser, stopping_server)


def test_stop_during_page_2_keeps_page_1_shown_and_downloadable(stopping_page, tmp_path, app_checkpoint):
    page = stopping_page
    pdf = three_page_pdf(tmp_path)
    upload(page, pdf)
    set_pages(page, "1-3")
    set_value(page, "#max-new-tokens input", 30)
    page.click("#parse")
    navigator = page.locator("#navigator")
    expect(navigator.get_by_label("page 1", exact=True)).to_be_visible()  # page 1 finished, listed live
    expect(page.locator("#status")).to_contain_text("Decoding page 2 of three-pages.pdf")
    expect(page.locator("#tree tbody tr").nth(2)).to_be_attached()  # the live view follows page 2
    stop(page)
    expect(page.locator("#status")).to_contain_text("Stopped: 1 of 3 pages of three-pages.pdf finished (1)")
    expect(navigator.get_by_label("page 2 (stopped)")).to_be_visible()
    navigator.get_by_label("page 1", exact=True).check()
    expect(page.locator("#status")).to_contain_text("Showing: Parsed page 1 of three-pages.pdf")
    expect(page.locator("#markdown p").first).to_be_visible()
    got = downloaded(page, "#download-md")
    assert got == cli_markdown(pdf, tmp_path / "cli", app_checkpoint, "--pages", "1", "--max-new-tokens", "30")
