"""The MQAR experiment's results (chapter 16): figures and tables of a sweep.

A sweep is what :func:`hymo_mini.mqar.run_sweep` returns and ``benchmarks/mqar.py`` writes
to ``book/results/mqar_*.json``; these functions draw and tabulate one (or several, to see
how much a result moves between seeds and budgets). Every model keeps its
:data:`hymo_book.style.MQAR_VARIANTS` style: layout by marker and colour, GDN rule by line
style. :func:`state_capacity_figure` draws :func:`hymo_book.recall.state_recall`.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from hymo_book.recall import context_guess_accuracy, state_recall
from hymo_book.results import load_result, run_caption
from hymo_book.style import RECALL_RULES, style
from hymo_mini.tables import TextTable

__all__ = ["load_sweep", "mqar_figure", "mqar_table", "mqar_runs_table",
           "state_capacity_figure", "FIGURES"]


def load_sweep(name: str) -> dict:
    """A committed MQAR sweep, e.g. ``load_sweep("mqar_cpu.json")``."""
    return load_result(name, need=("settings", "variants"))


def _series(result: dict, name: str, fixed: str, value: int):
    """(x, accuracy) pairs of one variant with n_pairs (fixed='seq_len') or seq_len fixed."""
    rows = result["variants"][name]["accuracy"]
    if fixed == "seq_len":
        pts = sorted((n, a) for n, t, a in rows if t == value)
    else:
        pts = sorted((t, a) for n, t, a in rows if n == value)
    return [p[0] for p in pts], [p[1] for p in pts]


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
    s = result["settings"]
    fig = Figure(figsize=(10, 4.3))
    ax_n, ax_t = fig.subplots(1, 2, sharey=True)
    for name in names:
        look = style("mqar", name)
        v = result["variants"][name]
        steps = v.get("steps_done", s["steps"])
        short = f", {steps} steps" if steps < s["steps"] else ""
        label = f"{name}  [{v['layer_types']}, {v['parameters'] / 1e3:.0f}K{short}]"
        ax_n.plot(*_series(result, name, "seq_len", seq_len), **look.line(), label=label)
        ax_t.plot(*_series(result, name, "n_pairs", n_pairs), **look.line())
    ns = sorted({n for n, t, _ in rows if t == seq_len})
    ax_n.plot(ns, [context_guess_accuracy(n, s["n_values"]) for n in ns], ":", color="gray",
              label="guessing among the values in the context")
    ax_t.axhline(context_guess_accuracy(n_pairs, s["n_values"]), ls=":", color="gray")
    ax_n.set_xlabel("key-value pairs N")
    ax_n.set_title(f"sequence length T = {seq_len}")
    ax_t.set_xlabel("sequence length T (tokens)")
    ax_t.set_title(f"N = {n_pairs} pairs")
    ax_n.set_ylabel("recall accuracy (fraction of queries)")
    for ax in (ax_n, ax_t):
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # N and T are counts
        ax.set_ylim(-0.02, 1.02)
        ax.grid(alpha=0.3)
    ax_n.legend(fontsize=8, loc="lower left")
    fig.suptitle(title or f"MQAR after {s['steps']} steps (fewer where the legend says), "
                 f"{s['n_layers']} layers (A = MLA, G = GDN; K = parameters)", fontsize=10)
    if result.get("command"):
        fig.text(0.01, 0.005, run_caption(result).replace("\n", " —"), fontsize=8,
                 color="gray")
    fig.tight_layout(rect=(0, 0.04 if result.get("command") else 0, 1, 1))
    return fig


def mqar_table(result: dict) -> TextTable:
    """One row per model, one column per (N, T) scored: the accuracy."""
    names = list(result["variants"])
    cols = [(n, t) for n, t, _ in result["variants"][names[0]]["accuracy"]]
    rows = []
    for name in names:
        v = result["variants"][name]
        accs = {(n, t): a for n, t, a in v["accuracy"]}
        rows.append((name, f"{v['parameters'] / 1e3:.0f}K", *(f"{accs[c]:.2f}" for c in cols)))
    return TextTable(("model", "params", *(f"N{n}/T{t}" for n, t in cols)), rows)


def mqar_runs_table(runs: dict[str, dict], n_pairs: int, seq_len: int) -> TextTable:
    """One accuracy (at ``n_pairs`` pairs in ``seq_len`` tokens) per model and run: how
    much a result moves between seeds and budgets. Runs lacking a model show '-'."""
    names = list(dict.fromkeys(n for r in runs.values() for n in r["variants"]))
    rows = []
    for name in names:
        cells = []
        for r in runs.values():
            v = r["variants"].get(name)
            acc = None if v is None else next(
                (a for n, t, a in v["accuracy"] if n == n_pairs and t == seq_len), None)
            cells.append("-" if acc is None else f"{acc:.2f}")
        rows.append((name, *cells))
    return TextTable(("model", *runs), rows, title=f"accuracy at N = {n_pairs}, T = {seq_len}")


def state_capacity_figure(d_state: int = 16, d_value: int = 16, max_pairs: int = 64,
                          trials: int = 100) -> Figure:
    """Recall of N random pairs from one fixed-size state (gla, delta) and from attention
    over the stored pairs, against N (see :func:`hymo_book.recall.state_recall`)."""
    ns = sorted({n for n in (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 96, 128) if n <= max_pairs})
    fig = Figure(figsize=(7, 3.8))
    ax = fig.subplots()
    for rule, look in RECALL_RULES.items():
        acc = [state_recall(n, rule, d_state, d_value, trials) for n in ns]
        ax.plot(ns, acc, ms=4, label=look.label, **look.line())
    ax.axvline(d_state, color="gray", ls=":", lw=1)
    ax.text(d_state, 0.02, f" N = S = {d_state}", color="gray", fontsize=8)
    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(ScalarFormatter())  # 1, 2, 4, ... rather than 2^k
    ax.set_xlabel("pairs written N (random unit keys)")
    ax.set_ylabel("fraction read back correctly")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"one memory, no training: state {d_state} × {d_value} vs attention")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="lower left")
    fig.tight_layout()
    return fig


FIGURES = {
    "state_capacity.png": lambda: state_capacity_figure(),
    "mqar_recall_cpu.png": lambda: mqar_figure(load_sweep("mqar_cpu.json")),
    "mqar_recall_h200.png": lambda: mqar_figure(load_sweep("mqar_h200.json")),
}
