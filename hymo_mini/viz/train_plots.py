"""Plots of a training run: its loss curve and its learning-rate schedule.

:func:`loss_curve` draws a :func:`hymo_mini.train.train` history (``hymo-mini train``
writes it next to its checkpoints); :func:`lr_schedule` draws the warmup-stable-decay
schedule of :mod:`hymo_mini.optim.schedule`, the one the trainer uses. The trainer
imports this module, so this module imports the schedule, not the trainer.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from hymo_mini.config import SchedulerConfig
from hymo_mini.optim.schedule import wsd_multiplier

__all__ = ["loss_curve", "lr_schedule", "FIGURES"]

# the MTP parts of a loss curve: one line style each, so that they read in grey-scale too
_PART_STYLES = ["--", "-.", ":", (0, (5, 1, 1, 1))]


def _smooth(values: list[float], window: int) -> list[float]:
    out, total = [], 0.0
    for i, v in enumerate(values):
        total += v
        if i >= window:
            total -= values[i - window]
        out.append(total / min(i + 1, window))
    return out


def loss_curve(history: dict, title: str = "training loss", smooth: int = 10,
               show_parts: bool = True, log_y: bool = False) -> Figure:
    """Train loss per step (thin: raw, thick: running mean over ``smooth`` steps), the MTP
    parts, and validation loss points, from a :func:`hymo_mini.train.train` history."""
    fig = Figure(figsize=(7.5, 4))
    ax = fig.subplots()
    steps, loss = history["step"], history["loss"]
    ax.plot(steps, loss, color="C0", alpha=0.25, lw=0.8)
    ax.plot(steps, _smooth(loss, max(smooth, 1)), color="C0", lw=2,
            label="total = main + Σ w_d · MTP_d")
    if show_parts:
        for i, (name, values) in enumerate(sorted(history.get("parts", {}).items())):
            ax.plot(steps[: len(values)], _smooth(values, max(smooth, 1)), lw=1.2,
                    color=f"C{i + 1}", linestyle=_PART_STYLES[i % len(_PART_STYLES)],
                    label=f"{name} cross-entropy")
    if history.get("val_step"):
        ax.plot(history["val_step"], history["val_loss"], "o", color="k", ms=5,
                label="validation (main)")
    ax.axhline(math.log(256), color="gray", ls=":", lw=1)
    ax.text(steps[0] if steps else 0, math.log(256), " ln 256: uniform over bytes",
            va="bottom", fontsize=8, color="gray")
    ax.set_xlabel("optimizer step")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps are whole numbers
    ax.set_ylabel("cross-entropy (nats per byte)")
    if log_y:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def lr_schedule(max_steps: int = 300, warmup_frac: float = 0.01, stable_frac: float = 0.79,
                decay_frac: float = 0.20, min_lr_ratio: float = 0.1, lr: float = 3e-3, *,
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


FIGURES = {"wsd_schedule.png": lambda: lr_schedule()}
