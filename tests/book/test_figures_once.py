"""One figure per idea: no chapter shows an image another chapter already shows."""

from __future__ import annotations

import hashlib
from collections import defaultdict

import nbformat
from hymo_book.curriculum import BOOK, CHAPTERS


def test_no_image_is_shown_by_two_chapters():
    seen: dict[str, set[str]] = defaultdict(set)
    for stem in CHAPTERS:
        path = BOOK / f"{stem}.ipynb"
        if not path.exists():
            continue
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                png = output.get("data", {}).get("image/png")
                if png:
                    seen[hashlib.sha256("".join(png).encode()).hexdigest()].add(stem)
    shared = sorted(sorted(stems) for stems in seen.values() if len(stems) > 1)
    assert not shared, f"the same image in several chapters: {shared}"
