"""Figures of the GDN kernel benchmark (section 6 of the design document).

The numbers are read from the JSON that ``benchmarks/gdn.py`` wrote on the GPU machine
(``benchmarks/results/gdn_*.json``, committed); nothing here measures. Every figure names
the GPU, the date and the command of the run it draws.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from matplotlib.figure import Figure

__all__ = ["RESULTS_DIR", "load_results", "benchmark_figure", "sweep_figure", "FIGURES"]

RESULTS_DIR = Path(__file__).resolve().parents[2] / "benchmarks" / "results"
# fixed colours so a backend looks the same in every panel and figure
COLORS = {"eager": "#7f7f7f", "chunk": "#9467bd", "triton": "#d62728", "triton_kernel": "#e377c2",
          "triton_chunk": "#ff7f0e", "triton_chunk_kernel": "#ffbb78",
          "fla_fused_recurrent": "#1f77b4", "fla_chunk": "#17becf"}
LABELS = {"eager": "eager loop", "chunk": "hymo chunk (torch)", "triton": "hymo Triton recurrent",
          "triton_kernel": "hymo Triton recurrent, no input checks",
          "triton_chunk": "hymo Triton chunk",
          "triton_chunk_kernel": "hymo Triton chunk, no input checks",
          "fla_fused_recurrent": "fla fused_recurrent_gla", "fla_chunk": "fla chunk_gla"}


def load_results(path: str | Path | None = None, need: str = "shapes") -> dict | None:
    """The benchmark report at ``path``, else the most recent run (by its recorded date) among
    ``gdn_*.json`` in RESULTS_DIR that has a ``need`` section; None if there is none."""
    if path is not None:
        return json.loads(Path(path).read_text())
    found = []
    for file in RESULTS_DIR.glob("gdn_*.json"):
        report = json.loads(file.read_text())
        if report.get(need):
            report.setdefault("environment", {})["file"] = file.name
            found.append(report)
    return max(found, key=lambda r: r["environment"].get("date", ""), default=None)


def _caption(report: dict, width: int = 110) -> str:
    """GPU, versions and date on one line, then the command, wrapped at ``width`` characters
    so that a long command does not run past the figure."""
    env = report.get("environment", {})
    command = textwrap.fill(env.get("command", ""), width, subsequent_indent="    ",
                            break_on_hyphens=False)
    return (f"{env.get('gpu', 'no GPU')}, torch {env.get('torch', '?')}, triton "
            f"{env.get('triton', '?')}, fla-core {env.get('fla_core', '-')}, {env.get('date', '')}"
            f"\n{command}")


def _missing(what: str) -> Figure:
    fig = Figure(figsize=(6, 2))
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, f"no {what} in benchmarks/results/gdn_*.json yet:\n"
            "run benchmarks/gdn.py on a GPU", ha="center", va="center")
    return fig


def benchmark_figure(report: dict | None = None) -> Figure:
    """Forward, forward+backward (ms, log scale) and peak memory (MiB) of every backend,
    one group of bars per shape and dtype."""
    report = report if report is not None else load_results(need="shapes")
    if not report or not report.get("shapes"):
        return _missing("shape results")
    groups = list(report["shapes"])
    backends = [b for b in LABELS if any(b in e["results"] for e in report["shapes"].values())]
    fig = Figure(figsize=(13, 4.6), layout="constrained")
    axes = fig.subplots(1, 3)
    metrics = [("fwd_ms", "forward (ms)"), ("fwdbwd_ms", "forward + backward (ms)"),
               ("peak_mib", "peak memory of fwd + bwd (MiB)")]
    width = 0.8 / max(len(backends), 1)
    for ax, (key, title) in zip(axes, metrics, strict=True):
        for i, name in enumerate(backends):
            ys = [report["shapes"][grp]["results"].get(name, {}).get(key) for grp in groups]
            xs = [j + (i - (len(backends) - 1) / 2) * width for j in range(len(groups))]
            pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y]
            if pts:
                bars = ax.bar([p[0] for p in pts], [p[1] for p in pts], width,
                              color=COLORS[name], label=LABELS[name])
                if key != "peak_mib":
                    ax.bar_label(bars, fmt="%.3g", fontsize=6, rotation=90, padding=2)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g.replace("_H40", "").replace("_", "\n", 1) for g in groups],
                           fontsize=7)
        ax.set_title(title, fontsize=10)
        if key != "peak_mib":
            ax.set_yscale("log")
            ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room for the bar labels
            ax.set_ylabel("milliseconds (log)")
        else:
            ax.set_ylabel("MiB above the inputs")
        ax.grid(axis="y", alpha=0.3)
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    fig.legend(handles.values(), handles.keys(), loc="outside lower center", ncols=len(handles),
               fontsize=7, frameon=False)  # below the panels: no bar or label is covered
    fig.suptitle("GDN recurrence, S = D = 32: " + _caption(report, width=150), fontsize=8)
    return fig


def sweep_figure(report: dict | None = None) -> Figure:
    """Time against sequence length T at B=1, H=40 (log-log): forward solid, forward +
    backward dashed."""
    report = report if report is not None else load_results(need="sweep_T")
    if not report or not report.get("sweep_T"):
        return _missing("T sweep")
    sweep = report["sweep_T"]
    fig = Figure(figsize=(9.5, 4.8), layout="constrained")
    ax = fig.subplots()
    for name, res in sweep["results"].items():
        for key, style in (("fwd_ms", "-"), ("fwdbwd_ms", "--")):
            # a cut-off run has fewer values than T: draw the finished lengths only
            pts = [(T, y) for T, y in zip(sweep["T"], res[key], strict=False) if y]
            if pts:
                which = "fwd" if key == "fwd_ms" else "fwd+bwd"
                ax.plot(*zip(*pts, strict=True), style, marker="o", ms=3, color=COLORS.get(name),
                        label=f"{LABELS.get(name, name)} ({which})")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel("milliseconds")
    ax.grid(alpha=0.3, which="both")
    # outside the axes, on the right: inside, every corner holds some line at some run
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0)
    ax.set_title(f"B={sweep['B']}, H={sweep['H']}, S=D=32, {sweep['dtype']}\n"
                 + _caption(report, width=100), fontsize=8)
    return fig


FIGURES = {"gdn_benchmark.png": benchmark_figure, "gdn_benchmark_sweep.png": sweep_figure}
