"""The rules every figure of figures/ keeps (STYLE.md): series told apart in grey-scale too
(markers or line styles, hatches), and whole-number ticks on axes that count things."""

from __future__ import annotations

import re

import pytest
from figure_checks import assert_integer_ticks, assert_series_distinct
from hymo_book.plots.figures import collect_figures

COUNTING = re.compile(r"\b(layer|step|head|position|index|iteration|pairs|expert|depth)s?\b",
                      re.I)
FIGURES = collect_figures()


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_series_are_distinct_without_colour(name):
    assert_series_distinct(FIGURES[name]())


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_counting_axes_have_whole_ticks(name):
    fig = FIGURES[name]()
    for ax in fig.axes:
        for axis, label in ((ax.xaxis, ax.get_xlabel()), (ax.yaxis, ax.get_ylabel())):
            if COUNTING.search(label) and axis.get_scale() == "linear":
                assert_integer_ticks(axis)
