"""One source for every number in the book's prose: a number in a markdown cell is the
design document's (quoted), a section or chapter reference, a single digit, or allowed with
a reason (``hymo_book.prose.ALLOWED``); every other number is written by a code cell from a
computed value (``hymo_book.prose.prose``), so nbval re-checks it on every run."""

from __future__ import annotations

import nbformat
import pytest
from hymo_book.curriculum import BOOK, CHAPTERS
from hymo_book.prose import ALLOWED, Prose, fmt, prose, unchecked_numbers


@pytest.mark.parametrize("stem", CHAPTERS)
def test_no_unchecked_number_in_markdown(stem):
    path = BOOK / f"{stem}.ipynb"
    if not path.exists():
        pytest.skip(f"{path.name} is not written yet")
    problems = []
    for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
        if cell.cell_type == "markdown" and (found := unchecked_numbers(cell.source)):
            problems.append(f"cell {i}: {', '.join(found)}")
    assert not problems, (f"{path.name}: numbers typed into prose (compute them with "
                          f"hymo_book.prose.prose, or quote the document): {'; '.join(problems)}")


@pytest.mark.parametrize("text, expected", [
    ('The document says "768 slots" (section 8.3.2).', []),
    ("Chapter 11 counts 1,128,087,040 parameters.", ["1,128,087,040"]),
    ("A 2-D rotation at step 1 of chapters 4 and 5.", []),
    ("It is 3:1, and `dim = 896` in code.", []),
    ("the half-life is 1.4 steps", ["1.4"]),
    ("Yang et al. (2025), arXiv 2510.05491", []),
    ("g lies in (0, 1), and D starts at 1, then 12,345, grows", ["12,345"]),
])
def test_the_scanner(text, expected):
    assert unchecked_numbers(text) == expected


def test_generated_prose_shows_its_text_everywhere():
    p = prose(f"{fmt(1234567)} parameters, {fmt(0.000123)} error, {fmt(2.5)}")
    assert isinstance(p, Prose) and p._repr_markdown_() == repr(p)
    assert repr(p) == "1,234,567 parameters, 0.000123 error, 2.5"
    assert fmt(2.5e-6) == "2.5·10⁻⁶" and fmt(True) == "True"
    assert all(reason for reason in ALLOWED.values())
