"""Chapter 15's committed training run (``book/results/train_cpu.json``) as a figure.

The plot is the library's (:func:`hymo_mini.viz.train_plots.loss_curve`); this module
feeds it the committed run of ``benchmarks/train_throughput.py``.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from hymo_book.results import load_result
from hymo_mini.viz.train_plots import loss_curve

__all__ = ["train_curve_figure", "FIGURES"]


def train_curve_figure(name: str = "train_cpu.json") -> Figure:
    """The loss curve of a committed training run."""
    r = load_result(name, need=("history",))
    return loss_curve(r["history"], title=f"hymo_mini on the standard library "
                      f"({r['steps']} steps, CPU)")


FIGURES = {"train_loss_curve.png": train_curve_figure}
