"""The app on the bundled model in a real headless browser: labelled blocks fork live, the page shows
their boxes, MTP on/off compare exactly. Takes the README's screenshots ($HPD_SCREENSHOTS=docs/images)."""

import pytest
from playwright.sync_api import expect

from app.examples import FOLDER
from app.ui import build_demo
from hpd_core import load_engine
from tests.conftest import serve
from tests.test_app_browser import browser, open_app, set_checked, shots, tab, upload  # noqa: F401 (fixtures)

DENSE = FOLDER / "synth-dense.png"


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
