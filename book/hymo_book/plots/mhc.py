"""Figures for the mHC chapter (book/16_mhc.ipynb).

Two small experiments live here beside their plots, so the book, the figure files and the
tests all run the same code:

* :func:`sinkhorn_error_curves`: row and column error of :func:`hymo_mini.mhc.sinkhorn_knopp`
  against the number of iterations, for random logits of several scales.
* :func:`composite_gains`: the gain of the product of per-layer residual maps through depth,
  for unconstrained hyper-connections (``I + sigma Z``) and for mHC (``Sinkhorn(logits)^T``).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from matplotlib.figure import Figure
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch
from matplotlib.ticker import MaxNLocator

from hymo_mini.mhc import COMB_INIT_LOGIT, sinkhorn_knopp, stochastic_errors

__all__ = [
    "sinkhorn_error_curves",
    "hc_residual_maps",
    "mhc_residual_maps",
    "composite_gains",
    "plot_widened_residual",
    "plot_sinkhorn_convergence",
    "plot_mixing_heatmaps",
    "plot_composite_gain",
    "FIGURES",
]


# --------------------------------------------------------------------------------------
# Experiments
# --------------------------------------------------------------------------------------
def sinkhorn_error_curves(scales=(0.5, 1, 2, 4, 8), max_iters: int = 40, n: int = 4,
                          count: int = 500, seed: int = 0):
    """Worst row and column error over ``count`` random (n, n) logit matrices N(0, s^2),
    for 1..max_iters iterations. Returns ``(iters, row, col)``: (k,), (len(scales), k) x 2."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(count, n, n, generator=gen)  # one draw, rescaled per scale
    iters = np.arange(1, max_iters + 1)
    row = np.zeros((len(scales), max_iters))
    col = np.zeros((len(scales), max_iters))
    for a, scale in enumerate(scales):
        for k in iters:
            r, c = stochastic_errors(sinkhorn_knopp(scale * z, int(k)))
            row[a, k - 1], col[a, k - 1] = r.max().item(), c.max().item()
    return iters, row, col


def hc_residual_maps(depth: int, n: int = 4, noise: float = 0.1, trials: int = 64,
                     seed: int = 0) -> torch.Tensor:
    """Unconstrained hyper-connection residual maps: identity plus N(0, noise^2) entries,
    (trials, depth, n, n), fp64. What HC starts from (H_res = I) plus what training adds."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(trials, depth, n, n, generator=gen, dtype=torch.float64)
    return torch.eye(n, dtype=torch.float64) + noise * z


def mhc_residual_maps(depth: int, n: int = 4, logit_scale: float = 4.0, trials: int = 64,
                      seed: int = 0, iters: int = 20) -> torch.Tensor:
    """mHC residual maps as applied to the streams, comb^T with comb = Sinkhorn(c I + s Z)
    (c = COMB_INIT_LOGIT, s = logit_scale), (trials, depth, n, n), fp64."""
    gen = torch.Generator().manual_seed(seed)
    z = torch.randn(trials, depth, n, n, generator=gen, dtype=torch.float64)
    logits = COMB_INIT_LOGIT * torch.eye(n, dtype=torch.float64) + logit_scale * z
    return sinkhorn_knopp(logits, iters).transpose(-1, -2)


def composite_gains(maps: torch.Tensor):
    """Gains of the products P_l = M_l ... M_1 for maps (trials, depth, n, n).

    forward gain  = max_j sum_i |P[j, i]|  (how much a stream can grow, infinity norm)
    backward gain = max_i sum_j |P[j, i]|  (how much a gradient can grow, 1-norm)
    Returns two (trials, depth) arrays.
    """
    trials, depth, n, _ = maps.shape
    product = torch.eye(n, dtype=maps.dtype).expand(trials, n, n)
    forward, backward = [], []
    for layer in range(depth):
        product = maps[:, layer] @ product  # (trials, n, n)
        forward.append(product.abs().sum(-1).amax(-1))
        backward.append(product.abs().sum(-2).amax(-1))
    return torch.stack(forward, 1).numpy(), torch.stack(backward, 1).numpy()


# --------------------------------------------------------------------------------------
# Plots
# --------------------------------------------------------------------------------------
# one (marker, line style) per series, so that the curves read in grey-scale too
_MARKERS = ["o", "s", "^", "v", "D", "P", "X", "*"]
_LINESTYLES = ["-", "--", "-.", ":"]


def plot_widened_residual(n: int = 4, comb_logit: float = COMB_INIT_LOGIT) -> Figure:
    """One mHC-wrapped sub-layer: n streams, pre collapses them, post spreads F's output
    back, comb = Sinkhorn(comb_logit * I) mixes them (line width = weight)."""
    comb = sinkhorn_knopp(comb_logit * torch.eye(n), 20).numpy()
    fig = Figure(figsize=(9.5, 4.8))
    ax = fig.subplots()
    ys = np.arange(n)[::-1] * 1.0  # stream 0 on top
    top = ys.max()
    for j, y in enumerate(ys):
        ax.plot([0.6, 3.2], [y, y], color="tab:blue", lw=2)
        ax.plot([6.8, 9.4], [y, y], color="tab:blue", lw=2)
        ax.add_patch(FancyArrowPatch((9.4, y), (9.9, y), arrowstyle="-|>", mutation_scale=12,
                                     color="tab:blue", lw=2))
        ax.text(0.5, y, f"$X_{j}$", ha="right", va="center", fontsize=11)
        # pre: every stream feeds x_in
        ax.plot([1.6, 3.0], [y, top + 1.6], color="tab:green", lw=1, alpha=0.8)
        # post: F's output goes to every stream
        ax.plot([6.4, 8.2], [top + 1.6, y + 0.05], color="tab:red", lw=1, alpha=0.8)
        ax.add_patch(Circle((8.2, y), 0.13, facecolor="white", edgecolor="black", zorder=3))
        ax.text(8.2, y, "+", ha="center", va="center", fontsize=9, zorder=4)
    for i, yi in enumerate(ys):  # comb^T: output stream j takes comb[i, j] of stream i
        for j, yj in enumerate(ys):
            ax.plot([3.4, 6.6], [yi, yj], color="tab:purple", lw=0.3 + 3.5 * comb[i, j],
                    alpha=0.85)
    ax.add_patch(FancyBboxPatch((3.3, -0.45), 3.4, top + 0.9, boxstyle="round,pad=0.05",
                                fill=False, ls="--", color="tab:purple"))
    ax.add_patch(FancyBboxPatch((4.2, top + 1.25), 1.6, 0.7, boxstyle="round,pad=0.05",
                                facecolor="#f3f3f3", edgecolor="black"))
    ax.text(5.0, top + 1.6, "sub-layer F", ha="center", va="center", fontsize=10)
    ax.plot([3.0, 4.15], [top + 1.6, top + 1.6], color="tab:green", lw=2)
    ax.plot([5.85, 6.4], [top + 1.6, top + 1.6], color="tab:red", lw=2)
    ax.text(2.2, top + 2.1, r"pre: $x_{in}=\sum_i \mathrm{pre}_i X_i$" + "\n(b, t, n) → (b, t, d)",
            ha="center", fontsize=9, color="tab:green")
    ax.text(7.6, top + 2.1, r"post: $\mathrm{post}_j\,F(x_{in})$" + "\n(b, t, n) × (b, t, d)",
            ha="center", fontsize=9, color="tab:red")
    ax.text(6.0, -0.95, r"comb$^T$: $X'_j=\sum_i \mathrm{comb}[i,j]\,X_i$, (b, t, n, n)"
            + f"   [Sinkhorn({comb_logit:g}·I): diag {comb[0, 0]:.3f}]",
            ha="center", fontsize=9, color="tab:purple")
    ax.text(-0.3, -0.95, f"streams X: (b, t, n={n}, d)", fontsize=9, color="tab:blue")
    ax.set_xlim(-0.4, 10.2)
    ax.set_ylim(-1.3, top + 3.0)
    ax.axis("off")
    ax.set_title("The widened residual: one mHC-wrapped sub-layer "
                 r"($X' = \mathrm{comb}^T X + \mathrm{post}\,F(\mathrm{pre}^T X)$)")
    return fig


def plot_sinkhorn_convergence(max_scale: float = 8.0, max_iters: int = 40, n: int = 4,
                              mark_iters: int = 20) -> Figure:
    """Worst row and column error against iterations, for logit scales up to max_scale."""
    scales = [s for s in (0.25, 0.5, 1, 2, 4, 8, 16, 32) if s <= max_scale] or [max_scale]
    iters, row, col = sinkhorn_error_curves(tuple(scales), max_iters, n)
    fig = Figure(figsize=(10, 4))
    ax_row, ax_col = fig.subplots(1, 2, sharey=True)
    every = max(max_iters // 8, 1)
    for a, scale in enumerate(scales):
        look = {"color": f"C{a}", "marker": _MARKERS[a % len(_MARKERS)], "ms": 4,
                "linestyle": _LINESTYLES[a % len(_LINESTYLES)], "markevery": every}
        ax_row.semilogy(iters, row[a], label=f"logit std {scale:g}", **look)
        ax_col.semilogy(iters, col[a], **look)
    for ax, what in ((ax_row, "rows (converge)"), (ax_col, "columns (normalised last)")):
        ax.axvline(mark_iters, color="gray", ls=":", lw=1)
        ax.axhline(1e-3, color="black", ls="--", lw=0.8)
        ax.set_xlabel("Sinkhorn iterations (row/column pairs)")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
        ax.set_title(f"{what}: max |sum − 1|")
        ax.grid(alpha=0.3, which="both")
    ax_row.set_ylabel(f"worst error over 500 random {n}×{n} matrices")
    ax_row.text(mark_iters + 0.5, 2.0, f"{mark_iters} (the document's)", fontsize=8,
                color="gray")
    ax_col.text(1.5, 1.4e-3, "the document's check: 1e-3", fontsize=8)
    ax_row.legend(fontsize=8, loc="lower left")
    ax_row.set_ylim(3e-7, 5)
    fig.suptitle(f"Sinkhorn-Knopp from a softmax (fp32, eps = 1e-6, n = {n})")
    fig.tight_layout()
    return fig


def plot_mixing_heatmaps(logit_scale: float = 4.0, iters: int = 20, n: int = 4,
                         seed: int = 0) -> Figure:
    """Random logits, the softmax start, Sinkhorn after `iters`, and two identity-biased
    starts (the document's I, and hymo_mini's init 4·I), each with row/column sums."""
    gen = torch.Generator().manual_seed(seed)
    logits = logit_scale * torch.randn(n, n, generator=gen)
    panels = [
        ("logits (std " + f"{logit_scale:g})", logits, "RdBu_r"),
        ("softmax (iteration 0)", torch.softmax(logits, -1), "viridis"),
        (f"Sinkhorn, {iters} iterations", sinkhorn_knopp(logits, iters), "viridis"),
        ("Sinkhorn(I): the document's\n'pure residual'", sinkhorn_knopp(torch.eye(n), 20),
         "viridis"),
        (f"Sinkhorn({COMB_INIT_LOGIT:g}·I): hymo_mini init",
         sinkhorn_knopp(COMB_INIT_LOGIT * torch.eye(n), 20), "viridis"),
    ]
    fig = Figure(figsize=(15, 3.9))
    axes = fig.subplots(1, len(panels))
    for ax, (title, m, cmap) in zip(axes, panels, strict=True):
        m = m.numpy()
        if cmap == "RdBu_r":
            lim = float(np.abs(m).max())
            ax.imshow(m, cmap=cmap, vmin=-lim, vmax=lim)
        else:
            ax.imshow(m, cmap=cmap, vmin=0, vmax=1)
        for i in range(n):
            for j in range(n):
                ax.text(j, i, f"{m[i, j]:.2f}", ha="center", va="center", fontsize=8,
                        color="white" if (cmap == "viridis" and m[i, j] < 0.6) else "black")
        ax.set_title(title, fontsize=9)
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlabel("j (output stream)", fontsize=8)
        if cmap != "RdBu_r":
            rows = ", ".join(f"{s:.3f}" for s in m.sum(1))
            cols = ", ".join(f"{s:.3f}" for s in m.sum(0))
            ax.text(0.5, -0.32, f"rows: {rows}\ncols: {cols}", transform=ax.transAxes,
                    ha="center", va="top", fontsize=8)
    axes[0].set_ylabel("i (input stream)", fontsize=8)
    fig.suptitle("Residual mixing matrices comb[i, j] (output stream j = Σ_i comb[i, j] X_i)")
    fig.subplots_adjust(bottom=0.28, top=0.8, wspace=0.35)
    return fig


def plot_composite_gain(depth: int = 64, noise: float = 0.1, n: int = 4,
                        logit_scale: float = 4.0, trials: int = 64, seed: int = 0) -> Figure:
    """Median forward and backward gain of the composite residual map through depth:
    unconstrained HC (I + noise·Z) against mHC (Sinkhorn, 20 iterations)."""
    hc_f, hc_b = composite_gains(hc_residual_maps(depth, n, noise, trials, seed))
    mhc_f, mhc_b = composite_gains(mhc_residual_maps(depth, n, logit_scale, trials, seed))
    layers = np.arange(1, depth + 1)
    fig = Figure(figsize=(9, 4.2))
    ax = fig.subplots()
    every = max(depth // 8, 1)
    hc = {"color": "tab:red", "marker": "o", "ms": 4, "markevery": every}
    mhc = {"color": "tab:blue", "marker": "s", "ms": 4, "markevery": every}
    ax.semilogy(layers, np.median(hc_f, 0), ls="-", label=f"HC, forward (noise {noise:g})", **hc)
    ax.semilogy(layers, np.median(hc_b, 0), ls="--", label="HC, backward", **hc)
    ax.fill_between(layers, np.quantile(hc_f, 0.1, 0), np.quantile(hc_f, 0.9, 0),
                    color="tab:red", alpha=0.12, lw=0)
    ax.semilogy(layers, np.median(mhc_f, 0), ls="-",
                label=f"mHC, forward (logit std {logit_scale:g})", **mhc)
    ax.semilogy(layers, np.median(mhc_b, 0), ls="--", label="mHC, backward", **mhc)
    ax.axhline(1.0, color="black", lw=0.6)
    ax.set_xlabel("depth L (number of residual maps composed)")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_ylabel("gain of the product (max abs row / column sum)")
    ax.set_title(f"Composite residual map through depth, n = {n}, median of {trials} draws "
                 "(band: HC 10–90%)")
    ax.grid(alpha=0.3, which="both")
    ax.legend(fontsize=8, loc="upper left")
    top = max(10.0, float(np.quantile(hc_f, 0.9, 0).max()) * 1.5)
    ax.set_ylim(0.5, top if math.isfinite(top) else 1e6)
    return fig


FIGURES = {
    "mhc_widened_residual.png": plot_widened_residual,
    "mhc_sinkhorn_convergence.png": plot_sinkhorn_convergence,
    "mhc_mixing_heatmaps.png": plot_mixing_heatmaps,
    "mhc_composite_gain.png": plot_composite_gain,
}
