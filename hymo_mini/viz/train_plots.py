"""Figures for chapters 15 (training) and 16 (the hybrid experiment).

The registered figures read committed results in ``benchmarks/results/`` (produced by
``benchmarks/train_throughput.py`` and ``benchmarks/mqar.py``), so ``hymo-mini figures``
redraws them without training anything.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from matplotlib.figure import Figure

from hymo_mini.config import SchedulerConfig

__all__ = [
    "RESULTS",
    "load_result",
    "loss_curve",
    "lr_schedule",
    "mqar_figure",
    "mqar_table",
    "mqar_runs_table",
    "state_capacity_figure",
    "FIGURES",
]

RESULTS = Path(__file__).resolve().parents[2] / "benchmarks" / "results"


def load_result(name: str) -> dict:
    """A committed results file, e.g. ``load_result("mqar_cpu.json")``."""
    path = RESULTS / name
    if not path.is_file():
        raise FileNotFoundError(f"no results file {str(path)!r}; run the benchmark in "
                                "benchmarks/ that writes it")
    return json.loads(path.read_text())


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
                    color=f"C{i + 1}", label=f"{name} cross-entropy")
    if history.get("val_step"):
        ax.plot(history["val_step"], history["val_loss"], "o", color="k", ms=5,
                label="validation (main)")
    ax.axhline(math.log(256), color="gray", ls=":", lw=1)
    ax.text(steps[0] if steps else 0, math.log(256), " ln 256: uniform over bytes",
            va="bottom", fontsize=8, color="gray")
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("cross-entropy (nats per byte)")
    if log_y:
        ax.set_yscale("log")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def lr_schedule(max_steps: int = 300, warmup_frac: float = 0.01, stable_frac: float = 0.79,
                decay_frac: float = 0.20, min_lr_ratio: float = 0.1, lr: float = 3e-3) -> Figure:
    """The warmup-stable-decay learning rate that :func:`hymo_mini.train.train` uses."""
    from hymo_mini.train import wsd_multiplier

    fig = Figure(figsize=(7, 3))
    ax = fig.subplots()
    total = warmup_frac + stable_frac + decay_frac
    if abs(total - 1) > 1e-6:
        ax.text(0.5, 0.5, f"warmup + stable + decay = {total:.2f}, must be 1",
                ha="center", va="center", transform=ax.transAxes, color="red")
        return fig
    sched = SchedulerConfig(warmup_frac, stable_frac, decay_frac, min_lr_ratio)
    steps = list(range(max_steps))
    ax.plot(steps, [lr * wsd_multiplier(s, max_steps, sched) for s in steps], lw=2)
    ax.set_xlabel("optimizer step")
    ax.set_ylabel("learning rate")
    ax.set_title(f"warmup-stable-decay: {warmup_frac:.0%} / {stable_frac:.0%} / "
                 f"{decay_frac:.0%}, floor {min_lr_ratio:g} × lr")
    ax.grid(alpha=0.3)
    fig.tight_layout()
    return fig


def _series(result: dict, name: str, fixed: str, value: int):
    """(x, accuracy) pairs of one variant with n_pairs (fixed='seq_len') or seq_len fixed."""
    rows = result["variants"][name]["accuracy"]
    if fixed == "seq_len":
        pts = sorted((n, a) for n, t, a in rows if t == value)
    else:
        pts = sorted((t, a) for n, t, a in rows if n == value)
    return [p[0] for p in pts], [p[1] for p in pts]


_STYLE = {"MLA": ("C3", "-", "s"),
          "GDN (gla)": ("C0", "--", "o"), "GDN (delta)": ("C0", "-", "o"),
          "3:1 MLA first (gla)": ("C1", "--", "v"), "3:1 MLA first (delta)": ("C1", "-", "v"),
          "3:1 MLA last (gla)": ("C2", "--", "^"), "3:1 MLA last (delta)": ("C2", "-", "^")}


def mqar_figure(result: dict, seq_len: int | None = None, n_pairs: int | None = None,
                variants: list[str] | None = None, title: str | None = None) -> Figure:
    """Accuracy against the number of pairs (at ``seq_len``) and against the sequence length
    (at ``n_pairs``), one line per model; defaults: the T scored at the most N, and the N
    scored at the most T."""
    rows = next(iter(result["variants"].values()))["accuracy"]
    if seq_len is None:
        lengths = [t for _, t, _ in rows]
        seq_len = max(sorted(set(lengths)), key=lengths.count)
    if n_pairs is None:
        pairs = [n for n, _, _ in rows]
        n_pairs = max(sorted(set(pairs)), key=pairs.count)
    names = list(result["variants"]) if variants is None else variants
    fig = Figure(figsize=(10, 4))
    ax_n, ax_t = fig.subplots(1, 2, sharey=True)
    for name in names:
        color, style, marker = _STYLE.get(name, (None, "-", "o"))
        v = result["variants"][name]
        steps = v.get("steps_done", result["settings"]["steps"])
        short = f", {steps} steps" if steps < result["settings"]["steps"] else ""
        label = f"{name}  [{v['layer_types']}, {v['parameters'] / 1e3:.0f}K{short}]"
        ax_n.plot(*_series(result, name, "seq_len", seq_len), ls=style, marker=marker,
                  color=color, label=label)
        ax_t.plot(*_series(result, name, "n_pairs", n_pairs), ls=style, marker=marker,
                  color=color)
    from hymo_mini.mqar import context_guess_accuracy

    ns = sorted({n for n, t, _ in rows if t == seq_len})
    n_values = result["settings"]["n_values"]
    ax_n.plot(ns, [context_guess_accuracy(n, n_values) for n in ns], ":", color="gray",
              label="guessing among the values in the context")
    ax_t.axhline(context_guess_accuracy(n_pairs, n_values), ls=":", color="gray")
    ax_n.set_xlabel("key-value pairs N")
    ax_n.set_title(f"sequence length T = {seq_len}")
    ax_t.set_xlabel("sequence length T (tokens)")
    ax_t.set_title(f"N = {n_pairs} pairs")
    ax_n.set_ylabel("recall accuracy (fraction of queries)")
    for ax in (ax_n, ax_t):
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    ax_n.legend(fontsize=7, loc="lower left")
    s = result["settings"]
    fig.suptitle(title or f"MQAR after {s['steps']} steps (fewer where the legend says), "
                 f"{s['n_layers']} layers (A = MLA, G = GDN; K = parameters)", fontsize=10)
    fig.tight_layout()
    return fig


def mqar_table(result: dict) -> str:
    """A plain-text table: one row per model, one column per (N, T)."""
    names = list(result["variants"])
    cols = [(n, t) for n, t, _ in result["variants"][names[0]]["accuracy"]]
    width = max(len(n) for n in names) + 2
    head = " " * width + "params " + " ".join(f"N{n:>2}/T{t:<3}" for n, t in cols)
    lines = [head]
    for name in names:
        v = result["variants"][name]
        accs = {(n, t): a for n, t, a in v["accuracy"]}
        lines.append(f"{name:<{width}}{v['parameters'] / 1e3:5.0f}K "
                     + " ".join(f"{accs[c]:>8.2f}" for c in cols))
    return "\n".join(lines)


def mqar_runs_table(runs: dict[str, dict], n_pairs: int, seq_len: int) -> str:
    """One accuracy (at ``n_pairs`` pairs in ``seq_len`` tokens) per model and run: how
    much a result moves between seeds and budgets. Runs lacking a model show '-'."""
    names = list(dict.fromkeys(n for r in runs.values() for n in r["variants"]))
    width = max(len(n) for n in names) + 2
    cols = max(len(label) for label in runs) + 2
    lines = [f"accuracy at N = {n_pairs}, T = {seq_len}",
             " " * width + "".join(f"{label:>{cols}}" for label in runs)]
    for name in names:
        cells = []
        for r in runs.values():
            v = r["variants"].get(name)
            acc = None if v is None else next(
                (a for n, t, a in v["accuracy"] if n == n_pairs and t == seq_len), None)
            cells.append(f"{'-' if acc is None else f'{acc:.2f}':>{cols}}")
        lines.append(f"{name:<{width}}" + "".join(cells))
    return "\n".join(lines)


def state_capacity_figure(d_state: int = 16, d_value: int = 16, max_pairs: int = 64,
                          trials: int = 100) -> Figure:
    """Recall of N random pairs from one fixed-size state (gla, delta) and from attention
    over the stored pairs, against N (see :func:`hymo_mini.mqar.state_recall`)."""
    from hymo_mini.mqar import state_recall

    ns = sorted({n for n in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128) if n <= max_pairs})
    fig = Figure(figsize=(7, 3.8))
    ax = fig.subplots()
    styles = {"gla": ("C0", "--", "GDN state, documented rule (sum of k vᵀ)"),
              "delta": ("C0", "-", "GDN state, delta rule (one pass, β = 1)"),
              "attention": ("C3", "-", "attention over the stored pairs (MLA)")}
    for rule, (color, ls, label) in styles.items():
        acc = [state_recall(n, rule, d_state, d_value, trials) for n in ns]
        ax.plot(ns, acc, ls=ls, color=color, marker="o", ms=4, label=label)
    ax.axvline(d_state, color="gray", ls=":", lw=1)
    ax.text(d_state, 0.02, f" N = S = {d_state}", color="gray", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("pairs written N (random unit keys)")
    ax.set_ylabel("fraction read back correctly")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"one memory, no training: state {d_state} × {d_value} vs attention")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


def _train_curve_figure() -> Figure:
    r = load_result("train_cpu.json")
    return loss_curve(r["history"], title=f"hymo_mini on the standard library "
                      f"({r['steps']} steps, CPU)")


def _mqar_cpu_figure() -> Figure:
    return mqar_figure(load_result("mqar_cpu.json"))


def _mqar_h200_figure() -> Figure:
    return mqar_figure(load_result("mqar_h200.json"))


FIGURES = {
    "train_loss_curve.png": _train_curve_figure,
    "wsd_schedule.png": lambda: lr_schedule(),
    "state_capacity.png": lambda: state_capacity_figure(),
    "mqar_recall_cpu.png": _mqar_cpu_figure,
    "mqar_recall_h200.png": _mqar_h200_figure,
}
