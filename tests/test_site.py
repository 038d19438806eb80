"""The book as a static website: built offline from the committed notebooks.

Checks what a reader of the site relies on: a page for every chapter, the table of
contents in reading order, every image a page shows present on disk, every link between
pages pointing at a page that exists, and every script, stylesheet and image a page loads
served by the site itself (MathJax and the widget embedder included). The landing page
points at nothing a clone lacks and shows the README's set-up. (The browser tests open the
same site in Chromium with the network blocked; these need no browser.)
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest
from hymo_book.curriculum import PAGES_AFTER
from hymo_book.site.build import build_site, chapters, write_toc
from hymo_book.site.offline import (
    HTML_MANAGER_VERSION,
    MATHJAX_DIR,
    MATHJAX_ENTRY,
    VENDORED_WIDGETS,
    WIDGETS_DIR,
    WIDGETS_ENTRY,
)

REPO = Path(__file__).resolve().parent.parent
BOOK = REPO / "book"


class _Refs(HTMLParser):
    """What one page shows and loads: images, links, scripts and stylesheets."""

    def __init__(self):
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []
        self.loads: list[str] = []  # scripts, stylesheets, images, frames: fetched on load

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])
        if tag in ("img", "script", "iframe") and attrs.get("src"):
            self.loads.append(attrs["src"])
        if tag == "link" and attrs.get("href") and "stylesheet" in (attrs.get("rel") or ""):
            self.loads.append(attrs["href"])


def _refs(page: Path) -> _Refs:
    parser = _Refs()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser


def _local(target: str) -> str | None:
    """The file part of a same-site reference, or None for external / anchor-only ones."""
    url = urlparse(target)
    if url.scheme or url.netloc or not url.path:
        return None
    return unquote(url.path)


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    # with nothing on PATH: the builder must find Jupyter Book through this interpreter,
    # as it must in a virtual environment that was never activated
    empty = tmp_path_factory.mktemp("empty_path")
    saved = os.environ["PATH"]
    os.environ["PATH"] = str(empty)
    try:
        return build_site(tmp_path_factory.mktemp("site"))
    finally:
        os.environ["PATH"] = saved


def test_toc_lists_every_chapter_in_reading_order(tmp_path):
    names = [p.stem for p in chapters(BOOK)]
    assert names == sorted(names) and names[0].startswith("00_")
    toc = write_toc(BOOK, tmp_path / "_toc.yml").read_text()
    listed = re.findall(r"- file: (\S+)", toc)
    assert [f for f in listed if f not in PAGES_AFTER] == names
    assert listed.index("notation") == listed.index(PAGES_AFTER["notation"]) + 1
    assert "root: README" in toc


def test_every_chapter_has_a_page(site):
    for chapter in chapters(BOOK):
        assert (site / f"{chapter.stem}.html").is_file(), f"no page for {chapter.name}"
    assert (site / "index.html").is_file()


def test_every_image_is_on_disk(site):
    shown = 0
    for chapter in chapters(BOOK):
        page = site / f"{chapter.stem}.html"
        for src in _refs(page).images:
            path = _local(src)
            if path is None:
                assert src.startswith("data:"), f"{page.name} loads an image from outside: {src}"
                continue
            assert (page.parent / path).resolve().is_file(), f"{page.name}: missing image {src}"
            shown += 1
    assert shown >= len(chapters(BOOK)), "chapters should show their figures"


def test_links_between_pages_resolve(site):
    for page in sorted(site.glob("*.html")):
        for href in _refs(page).links:
            path = _local(href)
            if path is None or not path.endswith(".html"):
                continue
            assert (page.parent / path).resolve().is_file(), f"{page.name}: broken link {href}"


def test_pages_load_only_files_of_the_site(site):
    for page in sorted(site.glob("*.html")):
        for src in _refs(page).loads:
            if src.startswith("data:"):
                continue
            path = _local(src)
            assert path is not None, f"{page.name} loads {src} from outside the site"
            assert (page.parent / path).resolve().is_file(), f"{page.name}: missing {src}"


def test_math_and_widgets_are_served_by_the_site(site):
    mathjax = f"_static/{MATHJAX_DIR}/{MATHJAX_ENTRY}"
    widgets = f"_static/{WIDGETS_DIR}/{WIDGETS_ENTRY}"
    with_math = with_widgets = 0
    for chapter in chapters(BOOK):
        html = (site / f"{chapter.stem}.html").read_text(encoding="utf-8")
        if 'class="math' in html:
            with_math += 1
            assert mathjax in html, f"{chapter.stem} has math but does not load {mathjax}"
        if "application/vnd.jupyter.widget-view+json" in html:
            with_widgets += 1
            assert widgets in html, f"{chapter.stem} has widgets but does not load {widgets}"
    assert with_math and with_widgets, "the book should have pages with math and with widgets"
    # MathJax draws with its own web fonts, fetched from beside its script
    assert list((site / "_static" / MATHJAX_DIR / "output/chtml/fonts/woff-v2").glob("*.woff"))


# what a page shows as text: code, scripts, styles and MathJax's formulas taken out
_NOT_TEXT = [re.compile(p, re.S) for p in (
    r"<script\b.*?</script>", r"<style\b.*?</style>", r"<pre\b.*?</pre>", r"<code\b.*?</code>",
    r'<span class="math\b[^"]*">.*?</span>', r'<div class="math\b[^"]*">.*?</div>',
    r"<[^>]+>")]
# a backslash command (\alpha, \text), a backslash before a bracket or _, or a dollar sign
_RAW_TEX = re.compile(r"\\[A-Za-z]+|\\[()\[\]{}_,;!]|\$")


def test_no_raw_tex_in_the_text_of_a_page(site):
    """Formulas reach MathJax as math, in markdown cells and in generated prose alike (a
    cell's Markdown output, read as MyST): no page shows a `$` or a TeX command as text.
    (The browser test checks the same on the drawn page.)"""
    for name in ["README"] + [chapter.stem for chapter in chapters(BOOK)]:
        text = (site / f"{name}.html").read_text(encoding="utf-8")
        for pattern in _NOT_TEXT:
            text = pattern.sub(" ", text)
        found = _RAW_TEX.search(text)
        around = "" if found is None else text[found.start() - 60:found.end() + 30]
        assert found is None, f"{name}: raw TeX in the text: ...{' '.join(around.split())}..."


def test_every_widget_view_says_its_figure_needs_a_kernel(site):
    from hymo_book.site.reading import WIDGET_NOTE_CLASS, WIDGET_VIEW

    noted = 0
    for chapter in chapters(BOOK):
        html = (site / f"{chapter.stem}.html").read_text(encoding="utf-8")
        views = html.count(f'<script type="{WIDGET_VIEW}">')
        notes = html.count(f'class="{WIDGET_NOTE_CLASS}"')
        assert notes == views, f"{chapter.stem}: {views} widget views, {notes} notes"
        noted += notes
    assert noted, "the book should have widget views"


def test_each_page_loads_each_script_once(site):
    # a second `const THEBE_JS_URL = ...` was a SyntaxError on every page
    for page in [site / "README.html"] + [site / f"{c.stem}.html" for c in chapters(BOOK)]:
        html = page.read_text(encoding="utf-8")
        scripts = re.findall(r"<script\b[^>]*>.*?</script>", html, flags=re.S)
        scripts = [s for s in scripts if "application/vnd.jupyter.widget" not in s]
        twice = sorted({s[:80] for s in scripts if scripts.count(s) > 1})
        assert not twice, f"{page.name} loads these scripts twice: {twice}"


def test_vendored_embedder_fits_the_installed_ipywidgets():
    # ipywidgets names the html-manager its widget state is written for, as a caret range
    from ipywidgets._version import __html_manager_version__ as wanted

    def version(text):
        return tuple(int(part) for part in text.split("."))

    assert wanted.startswith("^"), f"unexpected html-manager range {wanted!r}"
    low = version(wanted[1:])
    have = version(HTML_MANAGER_VERSION)
    assert have[0] == low[0] and have >= low, (
        f"the vendored html-manager {HTML_MANAGER_VERSION} does not satisfy ipywidgets' "
        f"{wanted}: update book/hymo_book/site/vendor/html-manager (its README says how)")
    assert HTML_MANAGER_VERSION in (VENDORED_WIDGETS / "README.md").read_text()


def test_sidebar_follows_reading_order(site):
    # index.html redirects to the landing page, README.html, whose sidebar lists the chapters
    html = (site / "README.html").read_text(encoding="utf-8")
    first_seen = list(dict.fromkeys(re.findall(r'href="(\d\d_[a-z0-9_]+)\.html"', html)))
    assert first_seen == [p.stem for p in chapters(BOOK)]


def _commands(markdown: str, section: str) -> list[str]:
    """The lines of the first bash block under the heading ``section``."""
    body = markdown.split(f"## {section}\n", 1)[1]
    block = re.search(r"```bash\n(.*?)```", body, flags=re.S).group(1)
    return [line.split("#")[0].strip() for line in block.splitlines() if line.strip()]


def test_landing_page_sets_up_as_the_readme_does():
    """The landing page sets up as README's quick start does; a reader need not run the
    tests first, so the test command may be left out."""
    quick_start = [c for c in _commands((REPO / "README.md").read_text(), "Quick start")
                   if "pytest" not in c]
    landing = _commands((BOOK / "README.md").read_text(), "How to read it")
    assert len(quick_start) == 2 and landing[:len(quick_start)] == quick_start


def test_landing_page_names_only_files_of_the_clone():
    # every `path/like/this` the landing page names must exist in the repository, but
    # for what a build writes (book/_build/...)
    text = (BOOK / "README.md").read_text()
    named = {m for m in re.findall(r"`([^`\s]+/[^`\s]*)`", text)
             if "://" not in m and "_build" not in m}
    assert named, "the landing page should name the files it talks about"
    for name in sorted(named):
        found = list(REPO.glob(name.rstrip("/"))) + list(BOOK.glob(name.rstrip("/")))
        assert found, f"book/README.md names {name!r}, which a clone does not have"


@pytest.mark.parametrize("where, command", [
    ("book", [sys.executable, "-m", "hymo_book.site", "--help"]),
    ("repo", [sys.executable, "book/hymo_book/site/build.py", "--help"]),
])
def test_builder_runs_as_documented(where, command):
    cwd = BOOK if where == "book" else REPO
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    result = subprocess.run(command, cwd=cwd, capture_output=True, text=True, env=env)
    assert result.returncode == 0, result.stderr
    assert "--out" in result.stdout
