"""What every figure of the book must satisfy, as helpers for the tests of tests/book/."""

from __future__ import annotations

from matplotlib.colors import to_hex
from matplotlib.figure import Figure


def line_looks(ax) -> list[tuple[str, str, str]]:
    """(colour, marker, line style) of every data line of ``ax`` that has a legend label."""
    return [(to_hex(line.get_color()), str(line.get_marker()), str(line.get_linestyle()))
            for line in ax.get_lines() if not line.get_label().startswith("_")]


def bar_looks(ax) -> list[tuple[str, str]]:
    """(face colour, hatch) of every labelled bar series of ``ax`` (error-bar containers,
    which hold lines and no patches, are not bars)."""
    return [(to_hex(c.patches[0].get_facecolor()), str(c.patches[0].get_hatch()))
            for c in ax.containers
            if getattr(c, "patches", None) and not c.get_label().startswith("_")]


def assert_series_distinct(fig: Figure) -> None:
    """In every axes, no two labelled series look alike, and none is told apart by colour
    alone: lines differ in (marker, line style), bars in hatch."""
    for ax in fig.axes:
        lines = line_looks(ax)
        assert len({look[1:] for look in lines}) == len(lines), lines
        bars = bar_looks(ax)
        assert len({hatch for _, hatch in bars}) == len(bars), bars


def assert_integer_ticks(axis) -> None:
    """The ticks shown on ``axis`` (within its limits) are whole numbers."""
    low, high = sorted(axis.get_view_interval())
    ticks = [t for t in axis.get_majorticklocs() if low <= t <= high]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
