"""The loss curve of a training run, drawn and saved: ``hymo-mini train`` writes
``loss_curve.png`` beside its checkpoints.

:func:`loss_curve` draws a :func:`hymo_mini.train.train` history (the train loss per step,
its MTP parts and the validation points); :func:`save_figure` writes a figure so that the
same figure gives the same bytes on every run.
"""

from __future__ import annotations

import math
from pathlib import Path

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

__all__ = ["loss_curve", "save_figure"]

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


def save_figure(fig: Figure, path: Path) -> None:
    """Write ``fig`` to ``path`` (the format from its suffix) with no metadata, so that the
    same figure gives the same bytes on every run."""
    fig.savefig(path, dpi=110, bbox_inches="tight", metadata={"Software": None})
