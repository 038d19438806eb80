"""The learning-rate schedule the trainer uses, drawn (book chapter 17).

:func:`lr_schedule_figure` draws warmup-stable-decay (:mod:`hymo_mini.optim.schedule`):
the learning rate at every step for the given fractions, through the same multiplier
:func:`hymo_mini.train.train` applies, so the figure cannot drift from the trainer.
"""

from __future__ import annotations

from collections.abc import Callable

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from hymo_mini.config import SchedulerConfig
from hymo_mini.optim.schedule import wsd_multiplier

__all__ = ["lr_schedule_figure", "FIGURES"]


def lr_schedule_figure(max_steps: int = 300, warmup_frac: float = 0.01,
                       stable_frac: float = 0.79, decay_frac: float = 0.20,
                       min_lr_ratio: float = 0.1, lr: float = 3e-3, *,
                       multiplier: Callable[[int, int, SchedulerConfig], float] = wsd_multiplier
                       ) -> Figure:
    """The learning rate ``lr * multiplier(step, max_steps, schedule)`` over the steps, for
    the warmup-stable-decay schedule with these fractions; the default multiplier is the
    one :func:`hymo_mini.train.train` uses."""
    if not callable(multiplier):
        raise TypeError(f"multiplier must be a function (step, max_steps, SchedulerConfig) -> "
                        f"float, e.g. hymo_mini.optim.schedule.wsd_multiplier; got {multiplier!r}")
    fig = Figure(figsize=(7, 3))
    ax = fig.subplots()
    total = warmup_frac + stable_frac + decay_frac
    if abs(total - 1) > 1e-6:
        ax.text(0.5, 0.5, f"warmup + stable + decay = {total:.2f}, must be 1",
                ha="center", va="center", transform=ax.transAxes, color="red")
        return fig
    sched = SchedulerConfig(warmup_frac, stable_frac, decay_frac, min_lr_ratio)
    steps = list(range(max_steps))
    ax.plot(steps, [lr * multiplier(s, max_steps, sched) for s in steps], lw=2)
    ax.set_xlabel("optimizer step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("learning rate")
    ax.set_title(f"warmup-stable-decay: {warmup_frac:.0%} / {stable_frac:.0%} / "
                 f"{decay_frac:.0%}, floor {min_lr_ratio:g} × lr")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


FIGURES = {"wsd_schedule.png": lambda: lr_schedule_figure()}
