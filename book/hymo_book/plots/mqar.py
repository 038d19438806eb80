"""The MQAR experiment's results (chapter 19): figures and tables of a sweep.

A sweep is what :func:`hymo_book.mqar.run_sweep` returns and ``benchmarks/mqar.py`` writes
to ``book/results/mqar_*.json``; these functions draw and tabulate one (or several, to see
how much a result moves between seeds and budgets). Every model keeps its
:data:`hymo_book.style.MQAR_VARIANTS` style: layout by marker and colour, GDN rule by line
style. :func:`state_capacity_figure` draws :func:`hymo_book.recall.state_recall`.

The settled run, ``benchmarks/mqar_seeds.py`` (every layout, several seeds, the same steps),
is read with :func:`load_seeds`; :func:`run_learned` is the verdict on one run,
:func:`seeds_learned` counts them per layout, :func:`seeds_table` and :func:`seeds_figure`
show the spread over the seeds.
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator, ScalarFormatter

from hymo_book.recall import context_guess_accuracy, state_recall
from hymo_book.results import load_result, run_caption
from hymo_book.style import RECALL_RULES, running_mean, style
from hymo_mini.analysis.tables import TextTable

SEEDS_FILE = "mqar_seeds_h200_2026-12-01.json"
LEARNED = 0.9  # a run has learned the task when every scored task reaches this accuracy

__all__ = ["load_sweep", "mqar_figure", "mqar_table", "mqar_runs_table",
           "state_capacity_figure", "SEEDS_FILE", "LEARNED", "load_seeds", "run_learned",
           "seeds_learned", "seeds_table", "seeds_figure", "FIGURES"]


def load_sweep(name: str) -> dict:
    """An MQAR sweep of ``benchmarks/mqar.py``, by its file name in the results folder."""
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


# ---- the settled run: every layout, several seeds ----------------------------------------
def load_seeds(name: str = SEEDS_FILE) -> dict:
    """A committed ``benchmarks/mqar_seeds.py`` report (settings, runs, summary)."""
    return load_result(name, need=("settings", "runs", "summary"))


def run_learned(run: dict, threshold: float = LEARNED) -> bool:
    """Whether one run reached ``threshold`` accuracy on every task it was scored on."""
    return min(a for _, _, a in run["accuracy"]) >= threshold


def seeds_learned(report: dict, threshold: float = LEARNED) -> dict[str, tuple[int, int]]:
    """Per variant, in the report's order: (runs that learned, runs finished)."""
    runs = [r for r in report["runs"] if "error" not in r]
    return {name: (sum(run_learned(r, threshold) for r in runs if r["variant"] == name),
                   sum(r["variant"] == name for r in runs))
            for name in report["settings"]["variants"] if any(r["variant"] == name for r in runs)}


def seeds_table(report: dict, threshold: float = LEARNED) -> TextTable:
    """One row per variant: layout, parameters, seeds that learned, and the worst and best
    seed's accuracy on the hardest task scored (the most pairs at the longest length)."""
    counts = seeds_learned(report, threshold)
    n, t = max((n, t) for n, t, *_ in next(iter(report["summary"].values()))["accuracy"])
    rows = []
    for name, (learned, total) in counts.items():
        mine = [r for r in report["runs"] if r["variant"] == name and "error" not in r]
        acc = next(a for a in report["summary"][name]["accuracy"] if a[:2] == [n, t])
        rows.append((name, mine[0]["layer_types"], f"{mine[0]['parameters'] / 1e3:.0f}K",
                     f"{learned} of {total}", f"{acc[3]:.2f}", f"{acc[4]:.2f}"))
    return TextTable(("model", "layers", "params", "learned", f"worst N{n}/T{t}",
                      f"best N{n}/T{t}"), rows,
                     title=f"learned: accuracy >= {threshold:g} on every task scored")


def _loss_steps(run: dict) -> list[int]:
    """The step (1-based) of each point of a run's loss curve (run_sweep keeps every
    ``steps_done // 100``-th loss)."""
    stride = max(run["steps_done"] // 100, 1)
    return [1 + i * stride for i in range(len(run["loss_curve"]))]


def _median_band(rows: list[list[float]]):
    """Per position: the median, the minimum and the maximum over the rows."""
    cols = list(zip(*rows, strict=True))
    return ([sorted(c)[len(c) // 2] for c in cols], [min(c) for c in cols],
            [max(c) for c in cols])


def seeds_figure(report: dict) -> Figure:
    """Training loss against step (left) and accuracy against the number of pairs at the
    most-scored length (right), one row per GDN rule; each layout's median seed as a line,
    the spread over the seeds (min to max) as a band or error bars. All-MLA has no GDN
    layer and is drawn in both rows."""
    s = report["settings"]
    runs = [r for r in report["runs"] if "error" not in r]
    lengths = [t for _, t, _ in runs[0]["accuracy"]]
    seq_len = max(sorted(set(lengths)), key=lengths.count)
    fig = Figure(figsize=(11, 7.4))
    axes = fig.subplots(2, 2, sharex="col", sharey="col")
    for row, rule in zip(axes, ("gla", "delta"), strict=True):
        names = [f"GDN ({rule})", "MLA", f"3:1 MLA first ({rule})", f"3:1 MLA last ({rule})"]
        for name in names:
            mine = sorted((r for r in runs if r["variant"] == name), key=lambda r: r["seed"])
            if not mine:
                continue
            look = style("mqar", name)
            label = f"{name} [{mine[0]['layer_types']}], {len(mine)} seeds"
            # a step's loss depends on which task it drew: a running mean of five points
            mid, low, high = _median_band([running_mean(r["loss_curve"], 5) for r in mine])
            steps = _loss_steps(mine[0])
            row[0].fill_between(steps, low, high, color=look.color, alpha=0.15, lw=0)
            row[0].plot(steps, mid, markevery=10, ms=5, **look.line(), label=label)
            pts = [sorted((n, a) for n, t, a in r["accuracy"] if t == seq_len) for r in mine]
            ns = [n for n, _ in pts[0]]
            mid, low, high = _median_band([[a for _, a in p] for p in pts])
            row[1].vlines(ns, low, high, color=look.color, lw=1.5, alpha=0.6)  # min to max
            row[1].plot(ns, mid, ms=5, **look.line())
        ns = sorted({n for n, t, _ in runs[0]["accuracy"] if t == seq_len})
        row[1].plot(ns, [context_guess_accuracy(n, s["n_keys"]) for n in ns], ":",
                    color="gray", label="guessing among the values in the context")
        row[0].set_ylabel(f"training loss ({rule} rule)")
        row[1].set_ylabel("recall accuracy")
        row[0].legend(fontsize=8, loc="lower left")
        row[1].legend(fontsize=8, loc="center right")
        for ax in row:
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # steps and pairs count
            ax.grid(alpha=0.3)
        row[1].set_ylim(-0.02, 1.05)
    axes[1][0].set_xlabel("training step")
    axes[1][1].set_xlabel(f"key-value pairs N (sequence length T = {seq_len})")
    axes[0][0].set_title("loss (mean of 5 points): median seed, band min to max")
    axes[0][1].set_title("held-out accuracy: median seed, bars from min to max")
    fig.suptitle(f"MQAR, {s['n_layers']} layers, {s['steps']} steps, seeds "
                 f"{', '.join(map(str, s['seeds']))} (G = GDN, A = MLA)", fontsize=10)
    fig.text(0.01, 0.005, run_caption(report, width=150), fontsize=8, color="gray")
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig


FIGURES = {"state_capacity.png": lambda: state_capacity_figure()}
