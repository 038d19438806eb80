"""The learning path: the chapters on disk are the reading order, and no chapter uses a term
before the chapter that teaches it (hymo_book.curriculum.TERMS)."""

from __future__ import annotations

import nbformat
import pytest
from hymo_book.curriculum import BOOK, CHAPTERS, TERMS, chapter_index, terms_used


def prose_of(stem: str) -> str:
    cells = nbformat.read(BOOK / f"{stem}.ipynb", as_version=4).cells
    return "\n".join(c.source for c in cells if c.cell_type == "markdown")


def test_the_files_are_the_reading_order():
    on_disk = sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.ipynb"))
    assert on_disk == sorted(CHAPTERS), "every chapter file is in PARTS and every entry exists"
    assert [int(s[:2]) for s in CHAPTERS] == list(range(len(CHAPTERS))), "numbered in order"


def test_every_term_is_taught_by_a_chapter_of_the_book():
    for term, (stem, _) in TERMS.items():
        assert stem in CHAPTERS, (term, stem)


@pytest.mark.parametrize("stem", CHAPTERS)
def test_no_term_before_its_chapter(stem):
    if not (BOOK / f"{stem}.ipynb").exists():
        pytest.skip(f"{stem} is not written yet")
    early = sorted(t for t in terms_used(prose_of(stem))
                   if chapter_index(TERMS[t][0]) > chapter_index(stem))
    assert not early, (f"{stem} uses {early} before the chapters that teach them "
                       f"({', '.join(TERMS[t][0] for t in early)})")
