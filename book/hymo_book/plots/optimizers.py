"""Figures for the optimizer split (hymo_mini.optim) and its CPU comparison (chapter 17).

``optimizer_comparison`` reads ``book/results/optimizers_cpu.json`` (written by
``benchmarks/optimizers.py``), so ``python3 -m hymo_book.plots`` redraws it without
training.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.patches import Patch

from hymo_book.results import load_result, run_caption
from hymo_book.style import running_mean, style

__all__ = ["RESULT", "load_comparison", "optimizer_comparison", "split_figure", "FIGURES"]

RESULT = "optimizers_cpu.json"


def load_comparison(path=RESULT) -> dict:
    """The committed comparison (or the results file at ``path``)."""
    return load_result(path, need=("settings", "variants"))


def optimizer_comparison(result: dict | None = None, smooth: int = 20, show_train: bool = True,
                         zoom_frac: float = 0.4) -> Figure:
    """Validation loss (markers) and running-mean training loss (thin) against the step,
    one colour per optimizer; left the whole run, right its last ``zoom_frac``."""
    r = load_comparison() if result is None else result
    s = r["settings"]
    fig = Figure(figsize=(11, 4.4))
    ax_all, ax_end = fig.subplots(1, 2)
    start = int(s["steps"] * (1 - zoom_frac))
    low, high = float("inf"), -float("inf")
    for name, v in r["variants"].items():
        look = style("optimizer", name)
        color, label = look.color, look.label
        if v.get("muon_lr") is not None:
            label += f"  (muon_lr {v['muon_lr']:g}, lr {v['lr']:g})"
        else:
            label += f"  (lr {v['lr']:g})"
        for ax in (ax_all, ax_end):
            if show_train:
                ax.plot(v["train_step"], running_mean(v["train_main"], max(smooth, 1)), color=color,
                        linestyle=look.linestyle, lw=0.9, alpha=0.45)
            ax.plot(v["val_step"], v["val_loss"], ms=4, lw=1.6, **look.line(),
                    label=label if ax is ax_all else None)
        points = list(zip(v["val_step"], v["val_loss"], strict=True))
        if show_train:
            smoothed = running_mean(v["train_main"], max(smooth, 1))
            points += zip(v["train_step"], smoothed, strict=True)
        tail = [x for st, x in points if st >= start]
        low, high = min(low, *tail), max(high, *tail)
        ax_end.annotate(f"{v['val_loss'][-1]:.3f}", (v["val_step"][-1], v["val_loss"][-1]),
                        xytext=(4, 0), textcoords="offset points", color=color, fontsize=8,
                        va="center")
    ax_end.set_xlim(start, s["steps"] * 1.08)
    pad = 0.05 * (high - low) if high > low else 0.05
    ax_end.set_ylim(low - pad, high + pad)
    for ax in (ax_all, ax_end):
        ax.set_xlabel("optimizer step")
        ax.grid(alpha=0.3)
    ax_all.set_ylabel("next-byte cross-entropy (nats)")
    ax_all.set_title("whole run (dots: validation; thin: training, running mean)", fontsize=9)
    ax_end.set_title(f"last {zoom_frac:.0%} of the steps", fontsize=9)
    ax_all.legend(fontsize=8)
    fig.suptitle(f"{s['config']} on the standard library: {s['steps']} steps, batch "
                 f"{s['batch_size']} × {s['seq_len']} bytes, same init, batches and schedule",
                 fontsize=10)
    fig.text(0.01, 0.005, run_caption(r).replace("\n", " —"), fontsize=8, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return fig


def split_figure(table) -> Figure:
    """Parameters per kind of a :class:`hymo_mini.optim.SplitTable`, coloured and hatched by
    group."""
    looks = {"muon": ("C3", "//"), "adamw_decay": ("C0", ""), "adamw_no_decay": ("C9", "..")}
    rows = table.summary()  # (group, kind, decayed, tensors, params, why, names)
    fig = Figure(figsize=(8, 0.35 * len(rows) + 1.2))
    ax = fig.subplots()
    y = list(range(len(rows)))[::-1]
    for yi, r in zip(y, rows, strict=True):
        color, hatch = looks[r[0]]
        ax.barh(yi, r[4], color=color, hatch=hatch or None, edgecolor="black", linewidth=0.4)
    ax.set_yticks(y, [f"{r[1]} ({r[3]})" for r in rows], fontsize=8)
    for yi, r in zip(y, rows, strict=True):
        ax.text(r[4], yi, f" {r[4]:,}", va="center", fontsize=8)
    ax.set_xscale("log")
    ax.set_xlim(right=4 * max(r[4] for r in rows))  # room for the numbers
    ax.set_xlabel("parameters (log scale); in brackets: tensors")
    handles = [Patch(facecolor=c, hatch=h or None, edgecolor="black", label=g)
               for g, (c, h) in looks.items() if any(r[0] == g for r in rows)]
    ax.legend(handles=handles, fontsize=8, loc="lower right")
    ax.set_title(f"optimizer {table.optimizer!r}: which parameters each optimizer updates",
                 fontsize=10)
    fig.tight_layout()
    return fig


FIGURES = {"optimizers_cpu.png": lambda: optimizer_comparison()}
