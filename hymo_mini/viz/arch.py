"""Figures for chapters 01 (architecture, section 1) and 03 (the stack, section 3).

Every function takes the values a widget would set and returns a ``Figure``; the numbers
come from :mod:`hymo_mini.config` and :mod:`hymo_mini.costs`.
"""

from __future__ import annotations

import math

import numpy as np
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

from hymo_mini.config import ModelConfig, load_config, replace
from hymo_mini.costs import gdn_cost, hybrid_layer_counts, mha_cost, stack_cost

__all__ = [
    "COLOURS",
    "layer_map_figure",
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


def _production() -> ModelConfig:
    return load_config("hymo_750m").model


def _draw_layers(ax, types: tuple[str, ...], y: float, nope: tuple[int, ...] = ()) -> None:
    for i, kind in enumerate(types):
        ax.add_patch(Rectangle((i, y), 0.9, 0.8, facecolor=COLOURS[kind.upper()],
                               edgecolor="black", lw=0.6, hatch="//" if i in nope else None))
        ax.text(i + 0.45, y + 0.4, kind.upper(), ha="center", va="center", fontsize=8,
                rotation=90, color="white", fontweight="bold")


def layer_map_figure(mla_every: int = 4, mla_position: str = "last", n_layers: int = 32,
                     nope_hybrid_gdn: bool = False, compare_position: str | None = None) -> Figure:
    """The layer layout ``ModelConfig`` derives: one box per layer, MLA (+MoE) or GDN.
    ``compare_position`` draws a second row with the MLA layer elsewhere in each group
    ("first" is the layout of the document's text, "last" that of its closing figure).
    Hatched boxes are GDN layers without RoPE."""
    rows = [mla_position] + ([] if compare_position is None else [compare_position])
    fig = Figure(figsize=(max(6.0, 0.33 * n_layers + 2), 1.3 + 1.0 * len(rows)))
    ax = fig.subplots()
    labels = []
    for r, position in enumerate(rows):
        m = replace(_production(), n_layers=n_layers, mla_every=mla_every, mla_position=position,
                    nope_hybrid_gdn=nope_hybrid_gdn)
        y = len(rows) - 1 - r
        _draw_layers(ax, m.layer_types, y, m.nope_gdn_positions)
        labels.append((y + 0.4, f"MLA {position}\n{len(m.mla_positions)} MLA + "
                                f"{len(m.gdn_positions)} GDN"))
    ax.set_xlim(-0.2, n_layers)
    ax.set_ylim(-0.1, len(rows) - 0.1)
    ax.set_yticks([y for y, _ in labels], [text for _, text in labels], fontsize=8)
    step = 1 if n_layers <= 32 else 4
    ax.set_xticks([i + 0.45 for i in range(0, n_layers, step)], range(0, n_layers, step),
                  fontsize=8)
    ax.set_xlabel("layer index")
    ax.spines[["top", "right", "left"]].set_visible(False)
    ax.tick_params(axis="y", length=0)
    handles = [Patch(color=COLOURS["MLA"], label="MLA attention + MoE"),
               Patch(color=COLOURS["GDN"], label="GDN (no feed-forward)")]
    if nope_hybrid_gdn:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="//",
                             label="GDN without RoPE"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.45 / len(rows)),
              ncol=3, fontsize=8, frameon=False)
    fig.suptitle(f"Layer map: one MLA layer every {mla_every} layers "
                 f"(mla_every={mla_every})" if mla_every else "Layer map: all GDN (mla_every=0)",
                 fontsize=10)
    fig.tight_layout()
    return fig


def _stack_series(config: ModelConfig, gdn_per_mla: int, ts: list[int]):
    n = config.n_layers
    out = {
        f"{n} × MHA": [(n * mha_cost(config, T).flops, n * mha_cost(config, T).cache_bytes)
                       for T in ts],
        f"{n} × MLA": [(stack_cost(config, T, 0).flops, stack_cost(config, T, 0).cache_bytes)
                       for T in ts],
    }
    n_mla, n_gdn = hybrid_layer_counts(n, gdn_per_mla)
    out[f"{n_gdn} GDN + {n_mla} MLA"] = [(stack_cost(config, T, gdn_per_mla).flops,
                                          stack_cost(config, T, gdn_per_mla).cache_bytes)
                                         for T in ts]
    out[f"{n} × GDN"] = [(n * gdn_cost(config, T).flops, n * gdn_cost(config, T).cache_bytes)
                         for T in ts]
    return out


def cost_curves_figure(gdn_per_mla: int = 3, T: int = 4096,
                       config: ModelConfig | None = None) -> Figure:
    """Forward compute per token and decode cache of the token-mixing layers of a whole
    stack against sequence length: all full attention, all MLA, the hybrid with
    ``gdn_per_mla`` GDN layers per MLA layer, all GDN. The dotted line marks ``T``."""
    config = config or _production()
    ts = sorted(set(_T_GRID) | {T})
    series = _stack_series(config, gdn_per_mla, ts)
    colours = [COLOURS["MHA"], COLOURS["MLA"], COLOURS["hybrid"], COLOURS["GDN"]]
    fig = Figure(figsize=(11, 4.2))
    ax_flops, ax_cache = fig.subplots(1, 2)
    for (label, values), colour in zip(series.items(), colours, strict=True):
        flops = [f / t / 1e9 for (f, _), t in zip(values, ts, strict=True)]
        cache = [c / 2**20 for _, c in values]
        style = "-" if "+" not in label else "--"
        ax_flops.plot(ts, flops, style, color=colour, lw=2, label=label)
        ax_cache.plot(ts, cache, style, color=colour, lw=2, label=label)
    at = {label: values[ts.index(T)] for label, values in series.items()}
    hybrid = [k for k in at if "+" in k][0]
    full = [k for k in at if "MLA" in k and "+" not in k][0]
    share = at[hybrid][0] / at[full][0]
    for ax in (ax_flops, ax_cache):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.axvline(T, color="grey", ls=":", lw=1)
        ax.set_xlabel("sequence length T (tokens)")
        ax.grid(True, which="major", alpha=0.3)
    ax_flops.set_ylabel("forward GFLOPs per token")
    ax_flops.set_title(f"compute: at T={T:,} the hybrid costs {share:.0%} of all-MLA",
                       fontsize=10)
    ax_cache.set_ylabel("cache per sequence (MiB)")
    ax_cache.set_title(f"decode cache at T={T:,}: hybrid {at[hybrid][1] / 2**20:,.1f} MiB, "
                       f"all-MLA {at[full][1] / 2**20:,.1f} MiB", fontsize=10)
    ax_flops.legend(fontsize=8)
    fig.suptitle(f"Token-mixing layers of a {config.n_layers}-layer stack (MoE and embeddings "
                 "excluded; K/V and latents bf16, GDN state fp32)", fontsize=11)
    fig.tight_layout()
    return fig


def hybrid_share_figure(ratios: tuple[int, ...] = (1, 3, 7),
                        config: ModelConfig | None = None,
                        document_claim: float = 0.40) -> Figure:
    """Compute of a hybrid stack as a fraction of the all-MLA stack, against T, for
    several GDN:MLA ratios, with the document's "~40% of the compute cost" line."""
    config = config or _production()
    ts = _T_GRID
    fig = Figure(figsize=(7, 4))
    ax = fig.subplots()
    highest = 1.0
    for k in ratios:
        n_mla, n_gdn = hybrid_layer_counts(config.n_layers, k)
        share = [stack_cost(config, T, k).flops / stack_cost(config, T, 0).flops for T in ts]
        highest = max(highest, *share)
        ax.plot(ts, share, marker="o", ms=3, label=f"{k}:1  ({n_gdn} GDN + {n_mla} MLA)",
                lw=2.5 if k == 3 else 1.2)
        ax.axhline(n_mla / config.n_layers, ls=":", lw=0.8, color=ax.lines[-1].get_color())
    ax.axhline(document_claim, color=COLOURS["document"], ls="--", lw=1.5,
               label=f"document: ~{document_claim:.0%} (3:1)")
    ax.axhline(1.0, color="black", lw=0.8)
    ax.set_xscale("log", base=2)
    ax.set_ylim(0, 1.05 * highest)
    ax.set_xlabel("sequence length T (tokens)")
    ax.set_ylabel("hybrid compute / all-MLA compute")
    ax.set_title("The hybrid saving depends on T (dotted: the long-T limit, MLA share)",
                 fontsize=10)
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
