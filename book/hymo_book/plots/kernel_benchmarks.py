"""Figures of the GDN kernel benchmark (chapter 21, the kernel report; section 6 of the design
document).

The numbers are read from the reports ``benchmarks/gdn.py`` wrote on the GPU machine
(``book/results/gdn_*.json``, through :mod:`hymo_book.kernels.gdn_runs`); nothing here
measures. Every figure names the GPU, the date and the command of the run it draws, and
every backend keeps its :mod:`hymo_book.style` (colour and hatch, or marker and line).
"""

from __future__ import annotations

from matplotlib.figure import Figure
from matplotlib.ticker import ScalarFormatter

from hymo_book.kernels.arithmetic import document_launches, launches_per_step
from hymo_book.kernels.gdn_runs import latest_report, latest_run, load_reports
from hymo_book.results import run_caption
from hymo_book.style import BACKENDS, DOCUMENT_BAR, Style, backend_style

__all__ = ["benchmark_figure", "sweep_figure", "speedup_figure", "FIGURES"]

# the launches the package's loop really makes, at the document's 10 µs each
COUNTED_BAR = Style("the loop's own launches", "#dddddd", "", "-", "oo")
_METRICS = [("fwd_ms", "forward (ms)"), ("fwdbwd_ms", "forward + backward (ms)"),
            ("peak_mib", "peak memory of fwd + bwd (MiB)")]


def benchmark_figure(report: dict | None = None) -> Figure:
    """Forward, forward+backward (ms, log scale) and peak memory (MiB) of every backend,
    one group of bars per shape and dtype; ``report``: the latest run with shapes."""
    report = latest_report("shapes") if report is None else report
    if not report.get("shapes"):
        raise ValueError("the report has no 'shapes' section (a sweep-only run?): nothing to draw")
    groups = list(report["shapes"])
    names = [b for b in BACKENDS if any(b in e["results"] for e in report["shapes"].values())]
    fig = Figure(figsize=(15, 5.2), layout="constrained")
    axes = fig.subplots(1, 3)
    width = 0.8 / max(len(names), 1)
    for ax, (key, title) in zip(axes, _METRICS, strict=True):
        for i, name in enumerate(names):
            ys = [report["shapes"][grp]["results"].get(name, {}).get(key) for grp in groups]
            xs = [j + (i - (len(names) - 1) / 2) * width for j in range(len(groups))]
            pts = [(x, y) for x, y in zip(xs, ys, strict=True) if y]
            if pts:
                style = backend_style(name)
                bars = ax.bar([p[0] for p in pts], [p[1] for p in pts], width,
                              label=style.label, **style.bar())
                if key != "peak_mib":
                    ax.bar_label(bars, fmt="%.3g", fontsize=8, rotation=90, padding=2)
        ax.set_xticks(range(len(groups)))
        ax.set_xticklabels([g.replace("_H40", "").replace("_", "\n") for g in groups],
                           fontsize=8)  # B, T and dtype on three lines
        ax.set_title(title, fontsize=10)
        if key != "peak_mib":
            ax.set_yscale("log")
            ax.set_ylim(top=ax.get_ylim()[1] * 4)  # room for the bar labels
            ax.set_ylabel("milliseconds (log)")
        else:
            ax.set_ylabel("MiB above the inputs")
        ax.grid(axis="y", alpha=0.3)
    handles = {h.get_label(): h for ax in axes for h in ax.get_legend_handles_labels()[0]}
    fig.legend(handles.values(), handles.keys(), loc="outside lower center",
               ncols=min(len(handles), 4), fontsize=8, frameon=False)  # below: covers nothing
    fig.suptitle("GDN recurrence, S = D = 32: " + run_caption(report, width=150), fontsize=8)
    return fig


def sweep_figure(report: dict | None = None) -> Figure:
    """Time against sequence length T (log-log): forward on the left, forward + backward on
    the right, one line per backend in its own colour, marker and line style, so that no
    two lines look alike in either panel, in colour or in grey. ``report``: the latest run
    with a T sweep."""
    report = latest_report("sweep_T") if report is None else report
    sweep = report["sweep_T"]
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, (key, title) in zip(axes, (("fwd_ms", "forward"),
                                       ("fwdbwd_ms", "forward + backward")), strict=True):
        for name in [n for n in BACKENDS if n in sweep["results"]]:
            # a cut-off run has fewer values than T: draw the finished lengths only
            pts = [(T, y) for T, y in zip(sweep["T"], sweep["results"][name][key], strict=False)
                   if y]
            if pts:
                style = backend_style(name)
                ax.plot(*zip(*pts, strict=True), ms=5, label=style.label, **style.line())
        ax.set_xscale("log", base=2)
        ax.xaxis.set_major_formatter(ScalarFormatter())  # 1024, 2048, ... rather than 2^k
        ax.tick_params(axis="x", labelrotation=45, labelsize=8)
        ax.set_yscale("log")
        ax.set_xlabel("sequence length T (tokens)")
        ax.set_title(title, fontsize=10)
        ax.grid(alpha=0.3, which="both")
        ax.legend(fontsize=8, loc="upper left")
    axes[0].set_ylabel("milliseconds (log)")
    fig.suptitle(f"B={sweep['B']}, H={sweep['H']}, S=D=32, {sweep['dtype']}; "
                 + run_caption(report, width=140), fontsize=8)
    return fig


def _bar_rows(report: dict, key: str) -> list[tuple]:
    """(label, forward ms, forward+backward ms, style, speed-up shown?) of the speed-up
    figure's bars: the document's predictions, every backend measured, a device copy."""
    entry = report["shapes"][key]
    found = entry["results"]
    doc = document_launches(entry["B"], entry["T"], entry["H"])
    counted = entry["T"] * sum(launches_per_step().values())  # the loop's own launches
    rows = [(f"document: {doc['loop_launches']:,} launches x 10 µs", doc["loop_s"] * 1e3, None,
             DOCUMENT_BAR, False),
            (f"the loop's own count: {counted:,} launches x 10 µs", counted * 10e-3, None,
             COUNTED_BAR, False)]
    rows += [(backend_style(n).label, found[n].get("fwd_ms"), found[n].get("fwdbwd_ms"),
              backend_style(n), n != "naive") for n in BACKENDS if n in found]
    rows.append((f"document: {doc['kernel_launches']} launches x 10 µs", doc["kernel_ms"], None,
                 DOCUMENT_BAR, False))
    copy_gbps = report["environment"].get("copy_GBps")
    if copy_gbps and entry.get("bytes_min_fwd"):
        rows.append(("device copy of the forward's bytes",
                     entry["bytes_min_fwd"] / copy_gbps / 1e6, None, None, False))
    return rows


def speedup_figure(reports: list[dict] | None = None,
                   key: str = "B4_T4096_H40_float32") -> Figure:
    """Forward and forward + backward time (ms, log scale) of every backend measured at one
    shape in the latest run that has it (:func:`latest_run`; one run, so that every ratio
    compares times taken together), beside section 6.1's predicted 13.1 s loop and 1.6 ms
    kernel (dotted), the loop's own launches at the same 10 µs (dashed; counted by
    :func:`hymo_book.kernels.arithmetic.launches_per_step`) and the time a device copy of the
    forward's minimum bytes takes. Each bar is labelled with its time and its speed-up over
    that run's naive loop."""
    report = latest_run(load_reports() if reports is None else reports, key)
    entry = report["shapes"][key]
    rows = _bar_rows(report, key)
    naive = entry["results"].get("naive", {})
    fig = Figure(figsize=(11, 4.8), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, column, metric, title in ((axes[0], 1, "fwd_ms", "forward"),
                                      (axes[1], 2, "fwdbwd_ms", "forward + backward")):
        for y, row in enumerate(rows):
            ms, style, show_speedup = row[column], row[3], row[4]
            if not ms:
                continue
            ax.barh(y, ms, **(style.bar() if style else {"color": "#bbbbbb"}))
            ref = naive.get(metric)
            speedup = f"  ({ref / ms:,.0f}x)" if ref and show_speedup else ""
            text = f"{ms:,.0f}" if ms >= 100 else f"{ms:.3g}"
            ax.text(ms * 1.15, y, f"{text} ms{speedup}", va="center", fontsize=8)
        ax.set_xscale("log")
        ax.set_xlim(right=max(r[column] or 0 for r in rows) * 60)
        ax.set_xlabel("milliseconds (log)")
        ax.set_title(f"{title}; (Nx): speed-up over the naive loop", fontsize=9)
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(range(len(rows)))
    axes[0].set_yticklabels([r[0] for r in rows], fontsize=8)
    axes[0].invert_yaxis()
    fig.suptitle(f"GDN recurrence, B = {entry['B']}, T = {entry['T']:,}, H = {entry['H']}, "
                 f"S = {entry['S']}, D = {entry['D']}, {entry['dtype']}; white, dotted: the "
                 f"document's launch arithmetic\n" + run_caption(report), fontsize=8)
    return fig


FIGURES = {"gdn_benchmark.png": benchmark_figure, "gdn_benchmark_sweep.png": sweep_figure}
