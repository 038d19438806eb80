"""The learning path: the chapters on disk are the reading order, and no chapter uses a term,
a tool's name or a symbol of the notation before the chapter that teaches it
(hymo_book.curriculum.TERMS and SYMBOLS); the notation page prints SYMBOLS."""

from __future__ import annotations

import nbformat
import pytest
from hymo_book.curriculum import (
    BOOK,
    CHAPTERS,
    NOTATION_PAGE,
    SYMBOLS,
    TERMS,
    chapter_index,
    notation_table,
    retired_used,
    symbols_used,
    terms_used,
)


def prose_of(stem: str) -> str:
    cells = nbformat.read(BOOK / f"{stem}.ipynb", as_version=4).cells
    return "\n".join(c.source for c in cells if c.cell_type == "markdown")


def test_the_files_are_the_reading_order():
    on_disk = sorted(p.stem for p in BOOK.glob("[0-9][0-9]_*.ipynb"))
    assert on_disk == sorted(CHAPTERS), "every chapter file is in PARTS and every entry exists"
    assert [int(s[:2]) for s in CHAPTERS] == list(range(len(CHAPTERS))), "numbered in order"


def test_every_term_and_symbol_is_taught_by_a_chapter_of_the_book():
    for term, (stem, _) in TERMS.items():
        assert stem in CHAPTERS, (term, stem)
    for symbol, (stem, shape, meaning, _) in SYMBOLS.items():
        assert stem in CHAPTERS and shape and meaning, (symbol, stem)


def test_the_notation_page_prints_every_symbol():
    page = NOTATION_PAGE.read_text()
    assert notation_table() in page, (
        "book/notation.md's table differs from hymo_book.curriculum.SYMBOLS: paste "
        "notation_table() into the page")


@pytest.mark.parametrize("text, expected", [
    (r"$M_{ts} = \beta_t\, b_t \cdot b_s$", {"M", r"\beta_t"}),
    (r"$W_1 x$ and $W^{UK} c_s$ are weights, $W$ alone is the WY form's", {"W"}),
    (r"$\tilde K = K \odot \Gamma$, $U = U_v - W H_0$",
     {r"\tilde Q, \tilde K", r"\Gamma_t", "U, u_t", "U_v", "W", "H_t"}),
    (r"the block size $B_T$ and the transpose $X^T$ are not $T$", {"T"}),
    (r"`$M$` in code, and M outside a formula, are not uses", set()),
])
def test_the_symbol_scanner(text, expected):
    assert symbols_used(text) == expected


def test_the_retired_spellings_are_found_in_formulas_only():
    found = retired_used(r"$W_{ts}$ and $U^v_k$, but `W_ts` in code and W_ts in words are not")
    assert [f.split(" -> ")[0] for f in found] == ["W_ts", "U^v"]
    assert retired_used(r"$P_{ts}$, $U_v$, $l_C$, $\tilde K$, $\Phi_g$") == []


def early_uses(stem: str) -> list[str]:
    text = prose_of(stem)
    used = {t: TERMS[t][0] for t in terms_used(text)}
    used |= {f"${s}$": SYMBOLS[s][0] for s in symbols_used(text)}
    return sorted(f"{name} ({taught})" for name, taught in used.items()
                  if chapter_index(taught) > chapter_index(stem))


@pytest.mark.parametrize("stem", CHAPTERS)
def test_no_term_before_its_chapter(stem):
    if not (BOOK / f"{stem}.ipynb").exists():
        pytest.skip(f"{stem} is not written yet")
    early = early_uses(stem)
    assert not early, f"{stem} uses {early} before the chapters that teach them (in brackets)"


@pytest.mark.parametrize("stem", CHAPTERS)
def test_no_symbol_in_its_retired_meaning(stem):
    if not (BOOK / f"{stem}.ipynb").exists():
        pytest.skip(f"{stem} is not written yet")
    cells = nbformat.read(BOOK / f"{stem}.ipynb", as_version=4).cells
    old = [f"cell {i}: {', '.join(found)}" for i, c in enumerate(cells)
           if c.cell_type == "markdown" and (found := retired_used(c.source))]
    assert not old, f"{stem} writes symbols the notation page gives another meaning: {old}"
