"""The book tested the way a person uses it: in JupyterLab and as a website, in Chromium.

1. JupyterLab on 127.0.0.1: open a chapter with a widget, run all cells, move a slider,
   and check the figure changes.
2. The built site, every page opened in one browser with every request that would leave the
   machine blocked: the math is typeset, generated prose included (no `$`, backslash command
   or drawn backslash left in the text outside code), every saved widget view is drawn with
   a note that its figure moves only under a kernel and labels that are not cut, every image
   lies within the text column and a figure shrunk to fit opens at full size on a click,
   display formulas fit the column or scroll sideways, every figure's text shows at 8 pt or
   more where it is read, no page logs a console error, and no page tried to reach the
   network.

Screenshots are saved under ``test-artifacts/`` (git-ignored). The tests skip, saying
why, when Playwright or Chromium is missing; CI installs both.
"""

from __future__ import annotations

import base64
import shutil
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    block_the_network,
    browser_missing_reason,
    jupyter_lab,
    leaves_machine,
)
from hymo_book.site.build import build_site, chapters
from hymo_book.site.legibility import FIGURE_MIN_FONT_PT, MIN_SHOWN_PT, png_dpi, shown_points

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "test-artifacts"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(browser_missing_reason() is not None, reason=str(browser_missing_reason())),
]


def widget_chapter() -> Path:
    """The first chapter whose code uses ipywidgets' interact."""
    for path in chapters(REPO / "book"):
        if "interact(" in path.read_text():
            return path
    pytest.skip("no chapter with an interact widget yet")


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    ARTIFACTS.mkdir(exist_ok=True)
    with sync_playwright() as p:
        # scrollbars drawn, as a reader's browser draws them (Playwright hides them)
        chromium = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS,
                                     ignore_default_args=["--hide-scrollbars"])
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
    for helper in ("hymo_book", "results"):  # what the chapter imports and reads, beside it
        shutil.copytree(REPO / "book" / helper, served / helper,
                        ignore=shutil.ignore_patterns("__pycache__"))
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


# what a reader sees on one page, read once everything has been drawn
PAGE_REPORT = """() => {
  const article = document.querySelector('article.bd-article');
  const box = article.getBoundingClientRect();
  const inColumn = r => r.left >= box.left - 1 && r.right <= box.right + 1;
  // the text a reader reads: code is shown as written, so raw TeX there is no fault; typeset
  // formulas keep their TeX in MathJax's own elements, which are not text on the page
  const prose = document.body.cloneNode(true);
  prose.querySelectorAll('pre, code, .highlight, script, style, textarea, mjx-container, '
                         + '.hymo-figure-full').forEach(e => e.remove());
  const text = prose.textContent;
  // a backslash command (\\alpha), a backslash before a bracket (\\( \\[ \\{), or a dollar sign
  const tex = /\\\\[A-Za-z]+|\\\\[()\\[\\]{}_,;!]|\\$/g;
  const raw = text.match(tex) || [];
  const first = text.search(new RegExp(tex.source));
  const around = first < 0 ? '' : text.slice(Math.max(0, first - 50), first + 40)
                                      .replace(/\\s+/g, ' ');
  const maths = Array.from(article.querySelectorAll('.math'));
  const scrolls = el => { for (let p = el.parentElement; p && p !== article; p = p.parentElement) {
    const o = getComputedStyle(p).overflowX; if (o === 'auto' || o === 'scroll') return true; }
    return false; };
  const sticking = Array.from(article.querySelectorAll('*')).filter(el => {
    const r = el.getBoundingClientRect();
    return r.width > 0 && r.right > box.right + 1 && !scrolls(el); });
  const shown = Array.from(article.querySelectorAll('img'))
                     .filter(i => i.getBoundingClientRect().width > 0);
  const figures = Array.from(article.querySelectorAll('.cell_output img, .jupyter-widgets img'));
  // a display formula fits the column, or scrolls sideways in its own box
  const displays = Array.from(article.querySelectorAll('mjx-container[display="true"]'));
  const wide = displays.filter(m => m.scrollWidth > m.clientWidth + 1);
  const views = Array.from(article.querySelectorAll(
    'script[type="application/vnd.jupyter.widget-view+json"]'));
  return {
    raw: raw.slice(0, 5),
    around: around,
    maths: maths.length,
    untypeset: maths.filter(m => !m.querySelector('mjx-container')).length,
    tex_errors: article.querySelectorAll('mjx-merror').length,
    // a backslash MathJax draws as a character: TeX it did not read as a command, such as
    // the \\ of \\_ in \\text{start\\_pos} (\\backslash draws another character, U+2216)
    drawn_backslashes: article.querySelectorAll('mjx-c.mjx-c5C').length,
    views: views.length,
    drawn: article.querySelectorAll('.widget-subarea > .jupyter-widgets').length,
    notes: views.filter(v => v.parentElement.querySelector('.hymo-widget-note')).length,
    cut_labels: Array.from(article.querySelectorAll('.widget-label'))
                     .filter(l => l.scrollWidth > l.clientWidth + 1).map(l => l.textContent),
    broken: Array.from(article.querySelectorAll('img'))
                 .filter(i => !(i.complete && i.naturalWidth > 0)).map(i => i.src.slice(0, 80)),
    out_of_column: shown.filter(i => !inColumn(i.getBoundingClientRect()))
                        .map(i => [i.naturalWidth, Math.round(i.getBoundingClientRect().width)]),
    displays: displays.length,
    displays_cut: displays.filter(m => !inColumn(m.getBoundingClientRect()) ||
        (wide.includes(m) && !['auto', 'scroll'].includes(getComputedStyle(m).overflowX)))
      .length,
    sticking_out: sticking.slice(0, 5).map(e => e.tagName + '.' + e.className.slice(0, 40)),
    figures: figures.map(i => [i.src, i.naturalWidth, i.getBoundingClientRect().width,
                               i.classList.contains('hymo-shrunk')]),
  };
}"""


def _png_bytes(src: str) -> bytes:
    """The bytes of an image the page shows: a file of the site or a data: URI."""
    if src.startswith("data:"):
        return base64.b64decode(src.split(",", 1)[1])
    return Path(unquote(urlparse(src).path)).read_bytes()


def _figure_problems(figures) -> list[str]:
    """Figures whose smallest permitted text (FIGURE_MIN_FONT_PT) shows below MIN_SHOWN_PT
    where the reader reads it: in the column, or at its own size for a figure shrunk to fit
    the column (a click opens that one at full size), or shrunk with no way to open it."""
    problems = []
    for src, native, shown, opens_full in figures:
        name = "widget figure" if src.startswith("data:") else Path(urlparse(src).path).name
        if native > shown + 1 and not opens_full:
            problems.append(f"{name[:40]} ({native} px) is shrunk to {shown:.0f} px and "
                            "does not open at full size")
            continue
        dpi = png_dpi(_png_bytes(src))
        if dpi is None:
            problems.append(f"{name[:40]} declares no dpi: its text size is unknown")
            continue
        read_at = native if opens_full else shown
        points = shown_points(FIGURE_MIN_FONT_PT, dpi, native, read_at)
        if points < MIN_SHOWN_PT:
            problems.append(f"{name[:40]} ({native} px) read {read_at:.0f} px wide: "
                            f"{FIGURE_MIN_FONT_PT:g} pt text shows at {points:.1f} pt")
    return problems


def _full_size_problems(page) -> list[str]:
    """Click the page's first figure shrunk to fit the column: it must show at its own size,
    and Escape must close that view."""
    shrunk = page.locator(".bd-article img.hymo-shrunk").first
    if not shrunk.count():
        return []
    native = shrunk.evaluate("i => i.naturalWidth")
    shrunk.click()
    full = page.locator(".hymo-figure-full img")
    try:
        full.wait_for(timeout=5_000)
    except Exception:
        return ["a click on a shrunk figure does not open it at full size"]
    problems = []
    width = full.evaluate("i => i.getBoundingClientRect().width")
    if abs(width - native) > 1:
        problems.append(f"a shrunk figure ({native} px) opens {width:.0f} px wide")
    page.keyboard.press("Escape")
    if page.locator(".hymo-figure-full").count():
        problems.append("Escape does not close a figure opened at full size")
    return problems


def _open_offline(browser, page_file: Path):
    """Open one page of the site with the network blocked; wait until it is drawn.

    Returns the page, the URLs it tried to reach past this machine, the local files it
    failed to load (a file the site should serve and does not, e.g. a MathJax extension), and
    the errors its scripts logged or threw.
    """
    page = browser.new_page(viewport={"width": 1300, "height": 1000})
    left, missing, errors = block_the_network(page), [], []
    page.on("requestfailed", lambda r: None if leaves_machine(r.url) else missing.append(r.url))
    page.on("console", lambda m: errors.append(m.text[:160]) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)[:160]))
    page.goto(page_file.as_uri())
    page.wait_for_load_state("load")
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    views = page.locator('script[type="application/vnd.jupyter.widget-view+json"]').count()
    with_timeout = {"arg": views, "timeout": 30_000}
    try:
        page.wait_for_function(
            "n => document.querySelectorAll('.widget-subarea > .jupyter-widgets').length >= n",
            **with_timeout)
    except Exception:  # the report below says how many were drawn
        pass
    page.wait_for_function("() => Array.from(document.images).every(i => i.complete)",
                           timeout=30_000)
    # MathJax typesets widget labels once the views are drawn: wait for that too
    page.evaluate("() => window.MathJax && MathJax.startup && MathJax.startup.promise")
    return page, left, missing, errors


def _page_problems(seen: dict) -> list[str]:
    """What a reader of one page would trip over, from PAGE_REPORT's account of it."""
    found = [f"raw TeX in the text: {seen['raw']} in '...{seen['around']}...'"] \
        if seen["raw"] else []
    if seen["untypeset"] or seen["tex_errors"]:
        found.append(f"{seen['untypeset']} of {seen['maths']} formulas not typeset, "
                     f"{seen['tex_errors']} TeX errors")
    if seen["drawn_backslashes"]:
        found.append(f"formulas draw {seen['drawn_backslashes']} literal backslashes "
                     "(\\_ inside \\text{}? write \\mathrm{start\\_pos})")
    if seen["displays_cut"]:
        found.append(f"{seen['displays_cut']} of {seen['displays']} display formulas run past "
                     "the column without scrolling")
    if seen["drawn"] < seen["views"]:
        found.append(f"{seen['drawn']} of {seen['views']} widget views drawn")
    if seen["notes"] < seen["views"]:
        found.append(f"{seen['views'] - seen['notes']} of {seen['views']} widget views have "
                     "no note that the figure moves only under a kernel")
    found += [f"widget label cut: {label!r}" for label in seen["cut_labels"]]
    found += [f"image did not load: {src}" for src in seen["broken"]]
    found += [f"image ({native} px, shown {shown} px) outside the column"
              for native, shown in seen["out_of_column"]]
    found += [f"sticks out of the text column: {e}" for e in seen["sticking_out"]]
    return found + _figure_problems(seen["figures"])


def test_site_works_with_no_network(browser, tmp_path):
    html = build_site(tmp_path / "site")
    problems, totals = [], {"maths": 0, "drawn": 0, "figures": 0}
    # the landing page, then every chapter, one tab at a time in one browser
    for name in ["README"] + [chapter.stem for chapter in chapters(REPO / "book")]:
        page, left, missing, errors = _open_offline(browser, html / f"{name}.html")
        seen = page.evaluate(PAGE_REPORT)
        found = [f"tried to reach {url}" for url in left]
        found += [f"could not load {url.split('/_build/html/')[-1]}" for url in missing]
        found += _page_problems(seen) + _full_size_problems(page)
        found += [f"console error: {error}" for error in errors]
        problems += [f"{name}: {p}" for p in found]
        for key in totals:
            totals[key] += len(seen[key]) if key == "figures" else seen[key]
        widget = page.locator(".widget-subarea").first
        if widget.count():
            widget.scroll_into_view_if_needed()
        page.screenshot(path=str(ARTIFACTS / f"site_{name}.png"))
        page.close()
    assert not problems, "\n".join(problems)
    assert totals["maths"] > 0, "no page typeset any math"
    assert totals["drawn"] > 0, "no page drew a widget view"
    assert totals["figures"] > 0, "no page showed a figure"
