"""Chapter 15's committed training runs (``book/results/train_*.json``) as figures.

The plots are the library's (:mod:`hymo_mini.viz.train_plots`); this module feeds them
the committed run of ``benchmarks/train_throughput.py`` and the trainer's schedule.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from hymo_book.results import load_result
from hymo_mini.train import wsd_multiplier
from hymo_mini.viz.train_plots import loss_curve, lr_schedule

__all__ = ["train_curve_figure", "wsd_figure", "FIGURES"]


def train_curve_figure(name: str = "train_cpu.json") -> Figure:
    """The loss curve of a committed training run."""
    r = load_result(name, need=("history",))
    return loss_curve(r["history"], title=f"hymo_mini on the standard library "
                      f"({r['steps']} steps, CPU)")


def wsd_figure() -> Figure:
    """The warmup-stable-decay schedule of :func:`hymo_mini.train.train` at its defaults."""
    return lr_schedule(multiplier=wsd_multiplier)


FIGURES = {"train_loss_curve.png": train_curve_figure, "wsd_schedule.png": wsd_figure}
