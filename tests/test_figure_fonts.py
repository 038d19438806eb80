"""Every figure the package draws keeps its text at or above the book's floor.

The other half of the browser test's figure check (see ``hymo_book.legibility``): the site
shows a figure at a size where text of ``FIGURE_MIN_FONT_PT`` reads at 8 pt or more; this
test makes sure no figure draws smaller text. It walks the registered figures
(``hymo_mini.figures.collect_figures``: every file of ``figures/``), drawn by the same
functions the chapters call.
"""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from hymo_book.legibility import FIGURE_MIN_FONT_PT, smallest_text_pt  # noqa: E402

from hymo_mini.figures import collect_figures  # noqa: E402

FIGURES = collect_figures()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_text_is_at_least_the_floor(name):
    fig = FIGURES[name]()
    try:
        smallest = smallest_text_pt(fig)
    finally:
        plt.close(fig)
    assert smallest is not None, f"{name} draws no text (no title, labels or ticks?)"
    assert smallest >= FIGURE_MIN_FONT_PT, (
        f"{name}: its smallest text is {smallest:g} pt; the book's figures use at least "
        f"{FIGURE_MIN_FONT_PT:g} pt (STYLE.md), so it shows below 8 pt on the site")
