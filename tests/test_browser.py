"""The book tested the way a person uses it: in JupyterLab and as a website, in Chromium.

1. JupyterLab on 127.0.0.1: open a chapter with a widget, run all cells, move a slider,
   and check the figure changes.
2. The built site: open chapter pages and check every image has loaded.

Screenshots are saved under ``test-artifacts/`` (git-ignored). The tests skip, saying
why, when Playwright or Chromium is missing; CI installs both.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from browser import CHROMIUM, CHROMIUM_ARGS, browser_missing_reason, jupyter_lab

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(browser_missing_reason() is not None, reason=str(browser_missing_reason())),
]


def widget_chapter() -> Path:
    """The first chapter whose code uses ipywidgets' interact."""
    from hymo_mini.book import chapters

    for path in chapters(REPO / "book"):
        if "interact(" in path.read_text():
            return path
    pytest.skip("no chapter with an interact widget yet")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield chromium
        chromium.close()


def _figure_sources(page) -> list[str]:
    return page.eval_on_selector_all(".widget-interact img, .jupyter-widgets-output-area img",
                                     "els => els.map(e => e.src)")


def test_widget_slider_changes_figure(browser, tmp_path):
    chapter = widget_chapter()
    # serve a copy: JupyterLab autosaves what it runs, and the committed chapter must not change
    served = tmp_path / "served"
    served.mkdir()
    shutil.copy(chapter, served / chapter.name)
    with jupyter_lab(served, tmp_path / "lab") as (base, token):
        page = browser.new_page(viewport={"width": 1400, "height": 1000})
        page.goto(f"{base}/lab/tree/{chapter.name}?token={token}")
        page.wait_for_function("window.jupyterapp && window.jupyterapp.shell", timeout=60_000)
        page.wait_for_selector(".jp-Notebook .jp-Cell", timeout=60_000)
        # a notebook without kernel metadata asks which kernel to start: accept the default
        accept = page.locator(".jp-Dialog .jp-mod-accept")
        if accept.count():
            accept.first.click()
        # wait for the kernel, then run every cell
        page.wait_for_function(
            "() => { const w = window.jupyterapp.shell.currentWidget;"
            " return w && w.sessionContext && w.sessionContext.session &&"
            " w.sessionContext.session.kernel &&"
            " w.sessionContext.session.kernel.connectionStatus === 'connected'; }",
            timeout=60_000)
        page.evaluate("window.jupyterapp.commands.execute('notebook:run-all-cells')")
        slider = page.locator(".widget-interact .widget-slider .noUi-handle").first
        slider.wait_for(timeout=120_000)
        page.wait_for_function(
            "() => document.querySelectorAll('.widget-interact img').length > 0",
            timeout=120_000)
        slider.scroll_into_view_if_needed()
        before = _figure_sources(page)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab_before.png"))
        slider.focus()
        for _ in range(3):
            page.keyboard.press("ArrowRight")
        page.wait_for_function(
            "before => { const now = Array.from(document.querySelectorAll("
            "'.widget-interact img, .jupyter-widgets-output-area img')).map(e => e.src);"
            " return now.length > 0 && now.join() !== before.join(); }",
            arg=before, timeout=60_000)
        page.screenshot(path=str(ARTIFACTS / "jupyterlab_after.png"))
        assert _figure_sources(page) != before
        page.close()


def test_site_pages_load_their_figures(browser, tmp_path):
    from hymo_mini.book import build_site, chapters

    html = build_site(tmp_path / "site")
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    checked = 0
    for chapter in chapters(REPO / "book"):
        page.goto((html / f"{chapter.stem}.html").as_uri())
        page.wait_for_load_state("load")
        images = page.eval_on_selector_all(
            "article img", "els => els.map(e => [e.src, e.complete && e.naturalWidth > 0])")
        broken = [src for src, ok in images if not ok]
        assert not broken, f"{chapter.stem}: images that did not load: {broken}"
        checked += len(images)
        page.screenshot(path=str(ARTIFACTS / f"site_{chapter.stem}.png"))
    page.close()
    assert checked > 0, "no chapter page shows a figure"
