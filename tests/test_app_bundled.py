"""The app on the bundled model in a real headless browser: labelled blocks fork live, the page shows
their boxes, MTP on/off compare exactly. Takes the README's screenshots ($HPD_SCREENSHOTS=docs/images)."""

import re

import pytest
from playwright.sync_api import expect

from app.examples import FOLDER
from app.ui import build_demo
from hpd_core import load_engine
from tests.conftest import serve
from tests.test_app_browser import (browser, open_app, parse, rendered_markdown, set_checked, set_value,  # noqa: F401
                                    shots, tab, upload)

DENSE = FOLDER / "synth-dense.png"
REPORT = FOLDER / "synth-report.png"


@pytest.fixture(scope="module")
def bundled_server():
    with serve(build_demo(load_engine(None))) as url:
        yield url


@pytest.fixture
def page(browser, bundled_server):  # noqa: F811
    yield from open_app(browser, bundled_server, height=1500, timeout=120_000)


def test_bundled_model_forks_labelled_blocks_live_and_compares_exactly(page, shots):  # noqa: F811
    upload(page, DENSE)
    set_checked(page, "batch-children", True)
    page.click("#parse")
    page.wait_for_function("document.querySelectorAll('#tree tbody tr').length >= 6")
    page.wait_for_timeout(1500)
    page.screenshot(path=str(shots / "parse-live.png"), full_page=True)
    expect(page.locator("#status .hpd-status.done")).to_be_visible(timeout=120_000)
    tree = page.locator("#tree").inner_text()
    assert "title" in tree or "text" in tree          # real labels from the layout branch
    assert page.locator("#tree tbody tr").count() >= 6
    tab(page, "Compare")
    page.click("#compare")
    expect(page.locator("#compare-summary [data-match='exact']")).to_be_visible(timeout=240_000)
    page.screenshot(path=str(shots / "compare.png"), full_page=True)


@pytest.fixture
def window(browser, bundled_server):  # noqa: F811
    """The app in a 1400 x 900 window."""
    yield from open_app(browser, bundled_server, height=900, timeout=120_000)


def test_page_and_markdown_side_by_side_and_a_selected_box_highlights_its_markdown_and_branch(window, shots):
    page = window
    upload(page, REPORT)
    set_value(page, "#max-new-tokens input", 60)
    parse(page, timeout=240_000)
    page.evaluate("window.scrollTo(0, 0)")
    image, markdown = page.locator("#page-image img").bounding_box(), page.locator("#markdown").bounding_box()
    page.screenshot(path=str(shots / "parse-done.png"))
    assert image["width"] >= 450 and markdown["width"] >= 450, (image, markdown)  # the page at 60% of its 768 px or more
    assert image["x"] + image["width"] <= markdown["x"] and abs(image["y"] - markdown["y"]) < 80  # side by side
    assert image["y"] + 300 <= 900 and markdown["y"] + 300 <= 900, (image, markdown)    # both in view
    boxes = page.locator("#page-image .hpd-box")
    assert boxes.count() >= 2
    name = next(c for c in boxes.first.get_attribute("class").split() if re.fullmatch(r"hpd-b\d+", c))
    boxes.first.click()
    expect(page.locator(f"#page-image .hpd-box.{name}.hpd-selected")).to_have_count(1)
    expect(page.locator(f"#markdown .hpd-mark.{name} + *")).to_have_class(re.compile("hpd-selected"))
    expect(page.locator(f"#branches .hpd-branch.{name}")).to_have_class(re.compile("hpd-selected"))
    expect(page.locator(f"#tree tr.{name}")).to_have_class(re.compile("hpd-selected"))
    page.locator("#markdown .hpd-mark + *").last.click()  # and back: a Markdown block selects its box
    last = page.locator("#markdown .hpd-mark").last.get_attribute("class").split()[-1]
    expect(page.locator(f"#page-image .hpd-box.{last}")).to_have_class(re.compile("hpd-selected"))
    page.screenshot(path=str(shots / "parse-selected.png"))


# ---- the preview that reads real documents ------------------------------------------------------------

@pytest.fixture(scope="module")
def docs_server():
    with serve(build_demo(load_engine("hpd-tiny-docs"))) as url:
        yield url


def test_hpd_tiny_docs_app_lists_its_real_examples_renders_at_150_dpi_and_reads_one(browser, docs_server, shots):  # noqa: F811
    for page in open_app(browser, docs_server, height=900, timeout=240_000):
        examples = page.locator("body").inner_text()
        assert "texlive-prtec.pdf" in examples and "synth-dense.png" not in examples  # its own examples only
        assert page.locator("#dpi input[type=number]").input_value() == "150"  # the model's render DPI
        assert "three words in four" in page.locator("#engine-info").inner_text()
        upload(page, FOLDER / "texlive-prtec.pdf")
        set_checked(page, "batch-children", True)
        parse(page, timeout=240_000)
        page.evaluate("window.scrollTo(0, 0)")
        markdown = rendered_markdown(page)
        assert "CONCLUSIONS" in markdown and "Diameter" in markdown, markdown[:400]  # a heading and the table, read
        assert page.locator("#page-image .hpd-box").count() >= 5
        page.locator("#page-image .hpd-box").first.click()
        page.screenshot(path=str(shots / "parse-real.png"))
