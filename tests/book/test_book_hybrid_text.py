"""The reader of the real-text comparison (chapter 19): the committed runs, the summaries the
chapter prints, the exact chance of an ordering and the figure."""

from __future__ import annotations

import math

import pytest
from figure_checks import assert_series_distinct
from hymo_book.plots import hybrid_text


@pytest.fixture(scope="module")
def report():
    return hybrid_text.load_text_runs()


def test_every_layout_has_three_seeds_and_a_speed(report):
    summary = hybrid_text.layout_summary(report)
    assert list(summary) == report["settings"]["layouts"]
    assert all(s["seeds"] == [0, 1, 2] for s in summary.values())
    assert set(hybrid_text.load_speeds()) == set(summary)
    assert all(s["min"] <= s["mean"] <= s["max"] for s in summary.values())


def test_the_training_split_is_read_from_the_corpus_line(report):
    assert hybrid_text.training_bytes(report) == 10_147_501
    with pytest.raises(ValueError, match="names no training bytes"):
        hybrid_text.training_bytes({"corpus": "somewhere"})


@pytest.mark.parametrize("a, b, expected", [
    ([1.0, 2.0, 3.0], [4.0, 5.0, 6.0], 1 / 20),  # one way in twenty to split six runs 3 + 3
    ([1.0], [2.0, 3.0], 1 / 3),
    ([1.0, 5.0], [4.0, 6.0], None),  # interleaved: no claim
    ([4.0], [4.0], None),  # a tie is not "below"
])
def test_chance_all_below(a, b, expected):
    found = hybrid_text.chance_all_below(a, b)
    assert found == expected if expected is None else math.isclose(found, expected)


def test_context_gain_is_the_fall_in_bits():
    flat = [2.0] * 256
    assert hybrid_text.context_gain(flat) == 0
    falling = [math.log(2) * 3] * 64 + [0.0] * 128 + [math.log(2)] * 64
    assert math.isclose(hybrid_text.context_gain(falling), 2.0)


def test_table_and_figure(report):
    summary = hybrid_text.layout_summary(report)
    table = hybrid_text.text_table(report, hybrid_text.load_speeds(), {"mla": 3e7})
    text = str(table)
    assert all(f"{s['mean']:.3f}" in text for s in summary.values())
    assert "30.0 M" in text and "—" in text  # FLOPs given for one layout only
    fig = hybrid_text.text_figure(report)
    assert_series_distinct(fig)
    assert "$" not in fig.texts[0].get_text().replace(r"\$", "")  # no mathtext in the caption
