"""Figures of the whole architecture (book chapter 01) and of the stack (chapter 13).

Every function takes the values a widget would set and returns a ``Figure``; the numbers
come from :mod:`hymo_mini.config` and :mod:`hymo_mini.analysis.costs`. Series are told apart by
marker and line style as well as colour, so the figures read in grey-scale too.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from hymo_mini.analysis.costs import hybrid_layer_counts, stack_cost
from hymo_mini.config import ModelConfig, load_config, replace

__all__ = [
    "COLOURS",
    "layer_map_figure",
    "whole_stack_costs",
    "cost_curves_figure",
    "hybrid_share_figure",
    "softcap_figure",
    "softcap_gradient",
    "checkpoint_figure",
    "FIGURES",
]

COLOURS = {"MLA": "#d95f02", "GDN": "#1b9e77", "MHA": "#7570b3", "hybrid": "#e7298a",
           "document": "#c62828"}
_T_GRID = [2 ** k for k in range(7, 18)]  # 128 .. 131,072 tokens
_MARKERS = ("o", "s", "^", "D", "v", "P")
_STYLES = ("-", "--", "-.", ":")


def _production() -> ModelConfig:
    return load_config("hymo_750m").model


def _draw_layers(ax, types: tuple[str, ...], y: float, nope: tuple[int, ...] = ()) -> None:
    for i, kind in enumerate(types):  # box i is centred on x = i
        ax.add_patch(Rectangle((i - 0.45, y), 0.9, 0.8, facecolor=COLOURS[kind.upper()],
                               edgecolor="black", lw=0.6, hatch="//" if i in nope else None))
        ax.text(i, y + 0.4, kind.upper(), ha="center", va="center", fontsize=8,
                rotation=90, color="white", fontweight="bold")


def layer_map_figure(mla_every: int = 4, mla_position: str = "last", n_layers: int = 32,
                     nope_hybrid_gdn: bool = False, compare_position: str | None = None) -> Figure:
    """The layer layout ``ModelConfig`` derives: one box per layer, MLA (+MoE) or GDN,
    each box labelled with its kind. ``compare_position`` draws a second row with the MLA
    layer elsewhere in each group ("first" is the layout of the document's text, "last"
    that of its closing figure). Hatched boxes are GDN layers without RoPE."""
    rows = [mla_position] + ([] if compare_position is None else [compare_position])
    width = min(8.5, max(5.5, 0.22 * n_layers + 1.6))
    fig = Figure(figsize=(width, 1.6 + 0.8 * len(rows)))
    ax = fig.subplots()
    labels = []
    for r, position in enumerate(rows):
        m = replace(_production(), n_layers=n_layers, mla_every=mla_every, mla_position=position,
                    nope_hybrid_gdn=nope_hybrid_gdn)
        y = len(rows) - 1 - r
        _draw_layers(ax, m.layer_types, y, m.nope_gdn_positions)
        labels.append((y + 0.4, f"MLA {position}\n{len(m.mla_positions)} MLA + "
                                f"{len(m.gdn_positions)} GDN"))
    ax.set_xlim(-0.6, n_layers - 0.4)
    ax.set_ylim(-0.1, len(rows) - 0.1)
    ax.set_yticks([y for y, _ in labels], [text for _, text in labels], fontsize=8)
    step = 1 if n_layers <= 32 else 4
    ax.set_xticks(range(0, n_layers, step), [str(i) for i in range(0, n_layers, step)],
                  fontsize=8)
    ax.set_xlabel("layer index", fontsize=9)
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.tick_params(axis="y", length=0)
    handles = [Patch(facecolor=COLOURS["MLA"], edgecolor="black", label="MLA attention + MoE"),
               Patch(facecolor=COLOURS["GDN"], edgecolor="black", label="GDN (no feed-forward)")]
    if nope_hybrid_gdn:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//",
                             label="GDN without RoPE"))
    fig.legend(handles=handles, loc="lower center", ncol=len(handles) if width > 7 else 2,
               fontsize=8, frameon=False)
    fig.suptitle(f"Layer map: one MLA layer in every {mla_every} (mla_every={mla_every})"
                 if mla_every else "Layer map: all GDN (mla_every=0)", fontsize=10)
    legend_rows = 1 if width > 7 or len(handles) <= 2 else 2
    fig.tight_layout(rect=(0, 0.25 * legend_rows / fig.get_figheight(), 1, 1))
    return fig


def whole_stack_costs(config: ModelConfig, T: int, gdn_per_mla: int = 3) -> dict:
    """The three stacks the book compares, each a ``LayerCost`` of all its layers with
    their feed-forward (a MoE after every attention layer, none after a GDN layer): all
    full attention (MHA), all MLA, and the hybrid with ``gdn_per_mla`` GDN layers per MLA
    layer. Keys are the legend labels."""
    n = config.n_layers
    n_mla, n_gdn = hybrid_layer_counts(n, gdn_per_mla)
    return {
        f"{n} × (MHA + MoE)": stack_cost(config, T, 0, attention="mha", feed_forward=True),
        f"{n} × (MLA + MoE)": stack_cost(config, T, 0, feed_forward=True),
        f"{n_gdn} GDN + {n_mla} × (MLA + MoE)": stack_cost(config, T, gdn_per_mla,
                                                            feed_forward=True),
    }


def cost_curves_figure(gdn_per_mla: int = 3, T: int = 4096,
                       config: ModelConfig | None = None) -> Figure:
    """Forward compute per token and decode cache of a whole stack (every layer with its
    feed-forward) against sequence length, for all-MHA, all-MLA and the hybrid with
    ``gdn_per_mla`` GDN layers per MLA layer. The dotted line marks ``T``."""
    config = config or _production()
    ts = sorted(set(_T_GRID) | {T})
    series = {}
    for t in ts:
        for label, cost in whole_stack_costs(config, t, gdn_per_mla).items():
            series.setdefault(label, []).append(cost)
    colours = [COLOURS["MHA"], COLOURS["MLA"], COLOURS["hybrid"]]
    fig = Figure(figsize=(8.5, 3.8))
    ax_flops, ax_cache = fig.subplots(1, 2)
    for i, ((label, costs), colour) in enumerate(zip(series.items(), colours, strict=True)):
        style = dict(color=colour, lw=1.8, marker=_MARKERS[i], ms=4, ls=_STYLES[i], label=label)
        ax_flops.plot(ts, [c.flops_per_token / 1e9 for c in costs], **style)
        ax_cache.plot(ts, [c.cache_bytes / 2**20 for c in costs], **style)
    at = {label: costs[ts.index(T)] for label, costs in series.items()}
    mha, mla, hybrid = at.values()
    for ax in (ax_flops, ax_cache):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axvline(T, color="grey", ls=":", lw=1)
        ax.set_xlabel("sequence length T (tokens)", fontsize=9)
        ax.tick_params(labelsize=8)
        ax.grid(True, which="major", alpha=0.3)
    ax_flops.set_ylabel("forward GFLOP per token", fontsize=9)
    ax_flops.set_title(f"compute at T={T:,}: the hybrid costs\n{hybrid.flops / mla.flops:.0%} "
                       f"of all-MLA, {hybrid.flops / mha.flops:.0%} of all-MHA", fontsize=9)
    ax_cache.set_ylabel("decode cache per sequence (MiB)", fontsize=9)
    ax_cache.set_title(f"decode cache at T={T:,}: hybrid {hybrid.cache_bytes / 2**20:,.1f} "
                       f"MiB,\nall-MLA {mla.cache_bytes / 2**20:,.1f}, "
                       f"all-MHA {mha.cache_bytes / 2**20:,.0f} MiB", fontsize=9)
    ax_flops.legend(fontsize=8)
    fig.suptitle(f"A {config.n_layers}-layer stack, every layer with its feed-forward "
                 "(K/V bf16, GDN state fp32)", fontsize=10)
    fig.tight_layout()
    return fig


def hybrid_share_figure(ratios: tuple[int, ...] = (1, 3, 7),
                        config: ModelConfig | None = None, baseline: str = "mha",
                        document_claim: float = 0.40) -> Figure:
    """Compute of a hybrid stack as a fraction of an all-attention stack (``baseline``:
    "mha" or "mla"), whole stacks with their feed-forward, against T, for several GDN:MLA
    ratios, with the document's "~40% of the compute cost" line (for 3:1)."""
    if baseline not in ("mha", "mla"):
        raise ValueError(f"baseline must be 'mha' or 'mla', got {baseline!r}")
    config = config or _production()
    ts = _T_GRID
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    highest = 1.0
    for i, k in enumerate(ratios):
        n_mla, n_gdn = hybrid_layer_counts(config.n_layers, k)
        share = [stack_cost(config, T, k, feed_forward=True).flops
                 / stack_cost(config, T, 0, attention=baseline, feed_forward=True).flops
                 for T in ts]
        highest = max(highest, *share)
        line, = ax.plot(ts, share, marker=_MARKERS[i % len(_MARKERS)], ms=4,
                        ls=_STYLES[i % len(_STYLES)], lw=2.2 if k == 3 else 1.3,
                        label=f"{k}:1  ({n_gdn} GDN + {n_mla} MLA)")
        ax.axhline(n_mla / config.n_layers, ls=":", lw=0.8, color=line.get_color())
    ax.axhline(document_claim, color=COLOURS["document"], ls=(0, (6, 2)), lw=1.5,
               label=f"document: ~{document_claim:.0%} (3:1)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05 * highest)
    ax.set_xlabel("sequence length T (tokens)", fontsize=9)
    ax.set_ylabel(f"hybrid compute / all-{baseline.upper()} compute", fontsize=9)
    ax.set_title("The hybrid's saving depends on T (whole stacks; dotted: the long-T limit)",
                 fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def softcap_gradient(x, cap: float):
    """d/dx of cap·tanh(x/cap) = 1 - tanh²(x/cap) (numpy or float)."""
    return 1.0 - np.tanh(np.asarray(x, dtype=float) / cap) ** 2


def softcap_figure(cap: float = 15.0, x_max: float = 40.0,
                   document_points: dict[float, float] | None = None) -> Figure:
    """The soft-cap cap·tanh(x/cap) and its gradient; red crosses mark the document's
    gradient values (section 3.5: ~0.91 at 5, ~0.64 at 10) when ``cap`` is 15."""
    if cap <= 0:
        raise ValueError(f"cap must be positive (0 disables the cap in the model), got {cap}")
    document_points = {5.0: 0.91, 10.0: 0.64} if document_points is None else document_points
    x = np.linspace(-x_max, x_max, 801)
    fig = Figure(figsize=(10, 3.8))
    ax_value, ax_grad = fig.subplots(1, 2)
    ax_value.plot(x, x, color="grey", ls=":", lw=1, label="no cap")
    ax_value.plot(x, cap * np.tanh(x / cap), color=COLOURS["MLA"], lw=2,
                  label=f"{cap:g}·tanh(x/{cap:g})")
    ax_value.axhline(cap, color="grey", lw=0.6)
    ax_value.axhline(-cap, color="grey", lw=0.6)
    ax_value.set_ylim(-1.3 * max(cap, 1), 1.3 * max(cap, 1))
    ax_value.set_xlabel("logit before the cap")
    ax_value.set_ylabel("logit after the cap")
    ax_value.set_title("soft-capped logit", fontsize=10)
    ax_value.legend(fontsize=8)
    ax_grad.plot(x, softcap_gradient(x, cap), color=COLOURS["GDN"], lw=2,
                 label="1 - tanh²(x/cap)")
    for point in sorted(document_points):
        value = float(softcap_gradient(point, cap))
        ax_grad.plot([point], [value], "o", color="black", ms=4)
        ax_grad.annotate(f"{value:.3f} at {point:g}", (point, value), textcoords="offset points",
                         xytext=(6, 4), fontsize=8)
    if math.isclose(cap, 15.0) and document_points:
        ax_grad.plot(list(document_points), list(document_points.values()), "x",
                     color=COLOURS["document"], ms=8, mew=2, label="document's values")
    ax_grad.set_ylim(0, 1.05)
    ax_grad.set_xlabel("logit before the cap")
    ax_grad.set_ylabel("gradient through the cap")
    ax_grad.set_title(f"gradient: {float(softcap_gradient(cap, cap)):.2f} at x = cap, "
                      "never exactly 0", fontsize=10)
    ax_grad.legend(fontsize=8)
    for ax in (ax_value, ax_grad):
        ax.grid(True, alpha=0.3)
    fig.tight_layout()
    return fig


def checkpoint_figure(measurements: dict[str, dict[str, float]]) -> Figure:
    """Bars of a measured memory/compute trade: ``measurements[label]`` holds
    ``saved_mib`` (tensors kept for backward) and ``forward_calls`` (block forwards per
    training step, recomputation included)."""
    labels = list(measurements)
    if not labels:
        raise ValueError("measurements is empty: pass {label: {'saved_mib': .., "
                         "'forward_calls': ..}}")
    fig = Figure(figsize=(10, 3.6))
    ax_mem, ax_calls = fig.subplots(1, 2)
    y = np.arange(len(labels))
    mem = [measurements[k]["saved_mib"] for k in labels]
    calls = [measurements[k]["forward_calls"] for k in labels]
    ax_mem.barh(y, mem, color=COLOURS["GDN"])
    ax_calls.barh(y, calls, color=COLOURS["MLA"])
    for ax, values, fmt in ((ax_mem, mem, "{:.2f}"), (ax_calls, calls, "{:.0f}")):
        ax.set_yticks(y, labels, fontsize=8)
        ax.invert_yaxis()
        for yi, v in zip(y, values, strict=True):
            ax.text(v, yi, " " + fmt.format(v), va="center", fontsize=8)
        ax.set_xlim(0, max(values) * 1.25)
        ax.grid(True, axis="x", alpha=0.3)
    ax_mem.set_xlabel("tensors saved for backward (MiB)")
    ax_calls.set_xlabel("block forward calls per training step")
    ax_mem.set_title("memory", fontsize=10)
    ax_calls.set_title("compute (recomputation included)", fontsize=10)
    fig.tight_layout()
    return fig


FIGURES = {
    "layer_map.png": lambda: layer_map_figure(compare_position="first"),
    "cost_vs_T.png": lambda: cost_curves_figure(3, 4096),
    "hybrid_share.png": lambda: hybrid_share_figure(),
    "softcap.png": lambda: softcap_figure(15.0),
}
