"""The book as a static website: built offline from the committed notebooks.

Checks what a reader of the site relies on: a page for every chapter, the table of
contents in reading order, every image a page shows present on disk, and every link
between pages pointing at a page that exists. (The browser tests open the same site in
Chromium; this one needs no browser.)
"""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlparse

import pytest

from hymo_mini.book import build_site, chapters, write_toc

REPO = Path(__file__).resolve().parent.parent


class _Refs(HTMLParser):
    """Image sources and link targets of one page."""

    def __init__(self):
        super().__init__()
        self.images: list[str] = []
        self.links: list[str] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and attrs.get("src"):
            self.images.append(attrs["src"])
        if tag == "a" and attrs.get("href"):
            self.links.append(attrs["href"])


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
    return build_site(tmp_path_factory.mktemp("site"))


def test_toc_lists_every_chapter_in_reading_order(tmp_path):
    names = [p.stem for p in chapters(REPO / "book")]
    assert names == sorted(names) and names[0].startswith("00_")
    toc = write_toc(REPO / "book", tmp_path / "_toc.yml").read_text()
    assert re.findall(r"- file: (\S+)", toc) == names
    assert "root: README" in toc


def test_every_chapter_has_a_page(site):
    for chapter in chapters(REPO / "book"):
        assert (site / f"{chapter.stem}.html").is_file(), f"no page for {chapter.name}"
    assert (site / "index.html").is_file()


def test_every_image_is_on_disk(site):
    shown = 0
    for chapter in chapters(REPO / "book"):
        page = site / f"{chapter.stem}.html"
        for src in _refs(page).images:
            path = _local(src)
            if path is None:
                assert src.startswith("data:"), f"{page.name} loads an image from outside: {src}"
                continue
            assert (page.parent / path).resolve().is_file(), f"{page.name}: missing image {src}"
            shown += 1
    assert shown >= len(chapters(REPO / "book")), "chapters should show their figures"


def test_links_between_pages_resolve(site):
    for page in sorted(site.glob("*.html")):
        for href in _refs(page).links:
            path = _local(href)
            if path is None or not path.endswith(".html"):
                continue
            assert (page.parent / path).resolve().is_file(), f"{page.name}: broken link {href}"


def test_sidebar_follows_reading_order(site):
    # index.html redirects to the landing page, README.html, whose sidebar lists the chapters
    html = (site / "README.html").read_text(encoding="utf-8")
    first_seen = list(dict.fromkeys(re.findall(r'href="(\d\d_[a-z0-9_]+)\.html"', html)))
    assert first_seen == [p.stem for p in chapters(REPO / "book")]
