"""The hybrid on real text (chapter 19): layouts of one small model, trained alike on English.

``benchmarks/hybrid_text.py`` trains each layer layout of the ``hymo_small`` preset, and a
Llama of about its stored parameter count, for the same steps on the same bytes, several
seeds each, and records each run's validation bits per byte and its held-out loss at every
position of the sequence. A second, shorter run measures each layout's training speed with
the GPU to itself. :func:`load_text_runs` and :func:`load_speeds` read the two;
:func:`layout_summary` gathers the seeds of each layout (:func:`training_bytes`: how
much text they trained on); :func:`text_table` and
:func:`text_figure` show them; :func:`chance_all_below` is the exact chance that one
layout's runs all land below another's when the layout makes no difference;
:func:`context_gain` says how much a layout's loss falls from the start of the sequence to
its end.
"""

from __future__ import annotations

import math
import re
import statistics

from matplotlib.figure import Figure

from hymo_book.results import CaptionedTable, load_result, run_caption
from hymo_book.style import running_mean, style
from hymo_mini.analysis.tables import TextTable

TEXT_FILE = "hybrid_text_h100_2026-12-06.json"
SPEED_FILE = "hybrid_text_throughput_h100_2026-12-06.json"
WINDOW = 64  # positions averaged at each end of the sequence by context_gain

__all__ = ["TEXT_FILE", "SPEED_FILE", "WINDOW", "load_text_runs", "load_speeds",
           "layout_summary", "training_bytes", "chance_all_below", "context_gain", "text_table",
           "text_figure"]


def load_text_runs(name: str = TEXT_FILE) -> dict:
    """A committed ``benchmarks/hybrid_text.py`` report (settings, runs)."""
    return load_result(name, need=("settings", "runs"))


def load_speeds(name: str = SPEED_FILE) -> dict[str, float]:
    """Training tokens per second of each layout, from a speed-only report: each layout's
    last run in the file (its first run warmed the kernels up)."""
    report = load_result(name, need=("settings", "runs"))
    return {run["layout"]: run["tokens_per_s"] for run in report["runs"]}


def layout_summary(report: dict) -> dict[str, dict]:
    """Per layout, in the report's order: the seeds' bits per byte (``bpb``), their mean,
    min and max, the parameters (stored, and active per token where the model routes), the
    layer string and the mean loss by position over the seeds."""
    out = {}
    for name in report["settings"]["layouts"]:
        runs = sorted((r for r in report["runs"] if r["layout"] == name), key=lambda r: r["seed"])
        if not runs:
            continue
        bpb = [r["val_bits_per_byte"] for r in runs]
        curves = [r["val_loss_by_position"] for r in runs]
        out[name] = {"bpb": bpb, "mean": statistics.fmean(bpb), "min": min(bpb),
                     "max": max(bpb), "seeds": [r["seed"] for r in runs],
                     "params_stored": runs[0]["params_stored"],
                     "params_active": runs[0].get("params_active", runs[0]["params_stored"]),
                     "layers": runs[0].get("layer_types") or f"{runs[0]['layers']} layers",
                     "by_position": [statistics.fmean(p) for p in zip(*curves, strict=True)]}
    return out


def training_bytes(report: dict) -> int:
    """The size of the training split, as the report's corpus line states it."""
    found = re.search(r"([\d,]+) training bytes", report["corpus"])
    if found is None:
        raise ValueError(f"the report's corpus line names no training bytes: {report['corpus']!r}")
    return int(found.group(1).replace(",", ""))


def chance_all_below(a: list[float], b: list[float]) -> float | None:
    """If every value of ``a`` is below every value of ``b``: the chance of that ordering
    when all the runs come from one distribution (1 over the ways to pick which len(a) of
    the pooled runs are ``a``'s); otherwise None."""
    if max(a) >= min(b):
        return None
    return 1 / math.comb(len(a) + len(b), len(a))


def context_gain(by_position: list[float], window: int = WINDOW) -> float:
    """Mean loss of the first ``window`` positions minus that of the last ``window``, in
    bits per byte: how much reading the context helps (0 for a model that ignores it)."""
    early = statistics.fmean(by_position[:window])
    late = statistics.fmean(by_position[-window:])
    return (early - late) / math.log(2)


def text_table(report: dict, speeds: dict[str, float], flops: dict[str, float]) -> TextTable:
    """One row per layout: layers, parameters, bits per byte (mean and the seeds' range),
    the context gain, forward FLOPs per byte (``flops``, by layout; missing: a dash) and
    the training speed."""
    rows = []
    for name, s in layout_summary(report).items():
        per_byte = flops.get(name)
        rows.append((style("text", name).label, s["layers"], f"{s['params_stored'] / 1e6:.1f} M",
                     f"{s['params_active'] / 1e6:.1f} M", f"{s['mean']:.3f}",
                     f"{s['min']:.3f}–{s['max']:.3f}", f"{context_gain(s['by_position']):.2f}",
                     "—" if per_byte is None else f"{per_byte / 1e6:.1f} M",
                     f"{speeds[name] / 1e3:.0f}k"))
    header = ("layout", "layers", "stored", "active", "bits/byte", "seeds' range",
              "context gain", "fwd FLOPs/byte", "bytes/s")
    table = TextTable(header, rows, align="ll" + "r" * 7)
    records = [dict(zip(header, row, strict=True)) for row in rows]
    return CaptionedTable(table, run_caption(report, width=96), records)


def text_figure(report: dict) -> Figure:
    """Left: each seed's validation bits per byte (dots) and the mean (bar) per layout.
    Right: the held-out loss at each position of the sequence, mean over the seeds."""
    summary = layout_summary(report)
    fig = Figure(figsize=(10, 4.3), layout="constrained")
    ax_b, ax_p = fig.subplots(1, 2, width_ratios=(1, 1.3))
    for i, (name, s) in enumerate(summary.items()):
        look = style("text", name)
        ax_b.bar(i, s["mean"], width=0.6, alpha=0.35, **look.bar())
        ax_b.plot([i] * len(s["bpb"]), s["bpb"], look.marker, color="black", ms=5)
        bits = [x / math.log(2) for x in s["by_position"]]
        positions = range(1, len(bits) + 1)
        ax_p.plot(positions, running_mean(bits, 8), color=look.color, linestyle=look.linestyle,
                  marker=look.marker, markevery=0.1, label=look.label)
    names = list(summary)
    ax_b.set_xticks(range(len(names)), [style("text", n).label for n in names], rotation=30,
                    ha="right")
    low = min(min(s["bpb"]) for s in summary.values())
    high = max(max(s["bpb"]) for s in summary.values())
    ax_b.set_ylim(low - 0.1, high + 0.05)
    ax_b.set_ylabel("validation bits per byte (lower is better)")
    ax_b.set_title("each seed (dots) and their mean (bar)")
    ax_p.set_xscale("log")
    ax_p.set_xlabel(f"position in the {report['settings']['seq_len']}-byte window (log scale)")
    ax_p.set_ylabel("held-out bits per byte (mean of 8 positions)")
    ax_p.set_title("loss by position, mean of the seeds")
    ax_p.set_ylim(top=min(3.0, ax_p.get_ylim()[1]))
    ax_p.legend(fontsize=8)
    fig.suptitle(run_caption(report, width=110).replace("$", r"\$"), fontsize=7)  # not math
    return fig
