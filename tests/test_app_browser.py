"""The app in a real headless browser against a real Gradio server (tiny forking checkpoint).

Its screenshots go to a temporary folder. The README's come from the bundled model
(tests/test_app_bundled.py, through the `shots` fixture here: $HPD_SCREENSHOTS when set).
"""

import os
import re
import shutil
from pathlib import Path

import pymupdf
import pytest
from playwright.sync_api import expect, sync_playwright

from app.examples import FOLDER
from app.ui import build_demo
from hpd_core.grammar import Block
from tests.conftest import Scripted, serve

PNG = FOLDER / "synth-report.png"
PDF = FOLDER / "synth-two-pages.pdf"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
                 "--disable-sync", "--no-first-run"]


CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
CONDITION_MS = 120_000  # how long a test waits for what it expects (Playwright's default, 5 s, is a busy machine's hiccup)
expect.set_options(timeout=CONDITION_MS)


def chromium() -> str:
    """The first Chromium on PATH; the test fails with what to install when there is none."""
    for name in CHROMIUM_NAMES:
        if path := shutil.which(name):
            return path
    pytest.fail(f"the browser tests need Chromium on PATH (one of {', '.join(CHROMIUM_NAMES)}); install it, "
                "e.g. `apt-get install chromium`", pytrace=False)


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium(), args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def open_app(browser, url: str, height: int = 1300, timeout: float = CONDITION_MS):
    """A fresh browser context on the app at `url`, ready to use (a generator for fixtures)."""
    context = browser.new_context(viewport={"width": 1400, "height": height})
    page = context.new_page()
    page.set_default_timeout(timeout)
    page.goto(url)
    page.wait_for_selector("#parse")
    yield page
    context.close()


@pytest.fixture
def page(browser, app_server):
    yield from open_app(browser, app_server)


@pytest.fixture
def shots(tmp_path):
    folder = Path(os.environ.get("HPD_SCREENSHOTS", tmp_path))
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def upload(page, path):
    page.set_input_files("#document input[type=file]", str(path))
    expect(page.locator("#status")).to_contain_text(Path(path).name)


def set_value(page, selector, value):
    field = page.locator(selector)
    field.fill(str(value))
    field.press("Tab")  # blur: Gradio's change / release events fire


def set_checked(page, elem_id, checked):
    page.locator(f"#{elem_id} input[type=checkbox]").set_checked(checked)


def parse(page, timeout=2 * CONDITION_MS):
    """Click Parse and wait for this parse's final status (each parse has its own data-run)."""
    before = page.locator("#status .hpd-status").get_attribute("data-run")
    page.click("#parse")
    page.wait_for_function("(before) => { const s = document.querySelector('#status .hpd-status.done');"
                           " return s !== null && s.dataset.run !== before; }", arg=before, timeout=timeout)


def stop(page):
    """Click Stop without waiting for navigations the click might schedule: while a parse streams,
    a busy browser can take longer than any timeout to settle (seen once under load)."""
    page.click("#stop", no_wait_after=True)


def tab(page, name):
    page.get_by_role("tab", name=name, exact=True).click()


# records every distinct tree size and tokens/s tile value the browser renders
WATCH = """() => {
  window.hpdSeen = {rows: [], rates: []};
  const note = (list, value) => { if (value && list[list.length - 1] !== value) list.push(value); };
  new MutationObserver(() => {
    note(window.hpdSeen.rows, document.querySelectorAll('#tree tbody tr').length);
    const tile = document.querySelector('#stats .hpd-tile .v');
    note(window.hpdSeen.rates, tile && tile.textContent);
  }).observe(document.body, {childList: true, subtree: true, characterData: true});
}"""


def test_parse_an_image_live_tree_grows_rate_updates_markdown_renders(page, tmp_path):
    upload(page, PNG)
    expect(page.locator("#page-image img")).to_be_visible()
    set_value(page, "#max-new-tokens input", 240)
    page.evaluate(WATCH)
    page.click("#parse")
    page.wait_for_function("document.querySelectorAll('#tree tbody tr').length >= 12")
    page.screenshot(path=str(tmp_path / "parse-live.png"), full_page=True)
    expect(page.locator("#status .hpd-status.done")).to_be_visible()
    seen = page.evaluate("window.hpdSeen")
    # children appear live: a tree with some of its children is drawn before the whole one (the parse
    # takes a few 0.15-s UI frames, so how many partial trees are seen depends on the machine's speed)
    rows = seen["rows"]
    assert rows == sorted(rows) and rows[-1] > 20 and any(1 < n < rows[-1] for n in rows), seen
    assert len([r for r in seen["rates"] if r != "0"]) >= 2, seen  # tokens/s changes while it decodes
    markdown = page.locator("#markdown")
    expect(markdown.locator("p").first).to_be_visible()
    assert "nkpcft" in markdown.inner_text()
    expect(page.locator("#download-md")).to_be_visible()
    expect(page.locator("#download-json")).to_be_visible()


def test_pdf_page_selector_and_parse_of_the_second_page(page):
    upload(page, PDF)
    page_number = page.locator("#page input[type=number]")
    expect(page_number).to_be_visible()
    preview_before = page.locator("#page-image img").get_attribute("src")
    set_value(page, "#page input[type=number]", 2)
    expect(page.locator("#status")).to_contain_text("page 2")
    assert page.locator("#page-image img").get_attribute("src") != preview_before
    set_value(page, "#max-new-tokens input", 30)
    parse(page)
    expect(page.locator("#status")).to_contain_text("page 2 of synth-two-pages.pdf")


def rendered_markdown(page) -> str:
    """The Markdown panel's text once it shows a parse's blocks. A parse clears the panel when it
    starts, and the browser renders the Markdown a moment after the final status it comes with
    (a test read it empty once, on a busy machine), so wait for the first block's marker."""
    page.wait_for_selector("#markdown .hpd-mark", state="attached")
    return page.locator("#markdown").inner_text()


def markdown_after_parse(page) -> str:
    parse(page)
    return rendered_markdown(page)


def test_use_mtp_and_batch_children_give_identical_markdown(page):
    upload(page, PNG)
    set_value(page, "#max-new-tokens input", 40)
    outputs = {"MTP, serial": markdown_after_parse(page)}
    set_checked(page, "use-mtp", False)
    outputs["no MTP, serial"] = markdown_after_parse(page)
    set_checked(page, "batch-children", True)
    outputs["no MTP, batched"] = markdown_after_parse(page)
    set_checked(page, "use-mtp", True)
    outputs["MTP, batched"] = markdown_after_parse(page)
    assert len(set(outputs.values())) == 1, outputs
    assert outputs["MTP, serial"].count("nkpcft") >= 5


def test_compare_passes_the_exact_match_check_and_shows_a_speedup(page, tmp_path):
    upload(page, PNG)
    set_value(page, "#max-new-tokens input", 60)
    tab(page, "Compare")
    page.click("#compare")
    verdict = page.locator("#compare-summary [data-match]")
    expect(verdict).to_have_attribute("data-match", "exact")
    figures = page.locator("#compare-summary [data-speedup]")
    assert float(figures.get_attribute("data-speedup")) > 0           # wall clock: noisy on a shared CPU
    assert float(figures.get_attribute("data-forward-ratio")) >= 2.0  # MTP on: several times fewer forwards
    expect(page.locator("#compare-summary")).to_contain_text(re.compile(r"Speedup B over A: \d+\.\d\d×"))
    expect(page.locator("#stats-a .hpd-tile").first).to_be_visible()
    expect(page.locator("#timeline-b svg")).to_be_visible()
    page.screenshot(path=str(tmp_path / "compare.png"), full_page=True)
    page.get_by_label("children serial vs batched").check()
    page.click("#compare")
    expect(page.locator("#compare-status")).to_contain_text("Decoding")
    expect(verdict).to_have_attribute("data-match", "exact")


@pytest.fixture
def endless_page(browser, endless_server):
    yield from open_app(browser, endless_server)


def test_stop_cancels_a_long_parse_and_parsing_works_again(endless_page):
    page = endless_page
    upload(page, PNG)
    set_value(page, "#max-new-tokens input", 8000)
    set_checked(page, "use-mtp", False)
    page.click("#parse")
    expect(page.locator("#tree tbody tr").nth(3)).to_be_attached()
    stop(page)
    expect(page.locator("#status")).to_contain_text("Stopped")  # the engine's promptness: test_reliability_cancel
    set_value(page, "#max-new-tokens input", 30)
    set_checked(page, "use-mtp", True)
    parse(page)
    expect(page.locator("#status")).to_contain_text("Parsed page 1 of synth-report.png")


def test_corrupt_file_gives_a_clear_error(page, tmp_path):
    bad = tmp_path / "bad.pdf"
    bad.write_bytes(b"%PDF-1.7\n" + bytes(range(256)) * 8)
    page.set_input_files("#document input[type=file]", str(bad))
    expect(page.locator("#status .hpd-status.error")).to_contain_text("bad.pdf")
    page.click("#parse")
    expect(page.get_by_text(re.compile("'bad.pdf' is .*(PDF|damaged)")).first).to_be_visible()
    assert "Traceback" not in page.content()


def test_encrypted_pdf_asks_for_a_password_then_parses(page, tmp_path):
    locked = tmp_path / "locked.pdf"
    source = pymupdf.open(PDF)
    source.save(locked, encryption=pymupdf.PDF_ENCRYPT_AES_256, user_pw="secret", owner_pw="owner")
    page.set_input_files("#document input[type=file]", str(locked))
    expect(page.locator("#status .hpd-status.error")).to_contain_text("encrypted")
    password = page.locator("#password input")
    expect(password).to_be_visible()
    password.fill("secret")
    password.press("Enter")
    expect(page.locator("#status")).to_contain_text("locked.pdf: 2 pages")
    set_value(page, "#max-new-tokens input", 20)
    parse(page)


PRICES = "costs $48,848.81 and later $20,598.20"
INLINE = "where $x^2$ holds"


@pytest.fixture(scope="module")
def writing_server(app_engine):
    blocks = [Block("text", (100, 100, 900, 200), PRICES), Block("text", (100, 300, 900, 400), INLINE),
              Block("formula", (100, 500, 900, 600), "E = mc^2")]
    with serve(build_demo(Scripted(app_engine, blocks=blocks))) as url:
        yield url


@pytest.fixture
def writing_page(browser, writing_server):
    yield from open_app(browser, writing_server)


def test_prices_show_dollar_signs_and_a_pandoc_dollar_pair_one_inline_formula(writing_page):
    page = writing_page
    upload(page, PNG)
    set_value(page, "#max-new-tokens input", 10)
    parse(page)
    prices, inline = page.locator("#markdown p").nth(0), page.locator("#markdown p").nth(1)
    expect(inline.locator(".katex")).to_have_count(1)
    assert prices.inner_text() == PRICES and prices.locator(".katex").count() == 0
    assert inline.locator(".katex-display").count() == 0 and "where" in inline.inner_text()
    expect(page.locator("#markdown .katex-display")).to_have_count(1)  # the formula block stays display math
