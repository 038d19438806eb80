"""Figures of the two building blocks every layer uses (book chapter 03): RMSNorm and the
SiLU gate of SwiGLU.

Every function takes the values a widget would set and returns a ``Figure``; the measured
points come from ``torch.nn.RMSNorm`` and ``torch.nn.functional.silu`` themselves. Series
differ in marker and line style as well as colour, so the figures read in grey-scale.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F
from matplotlib.figure import Figure

__all__ = ["rms_after_norm", "measured_rms_after_norm", "rms_norm_figure", "silu_figure"]

_COLOURS = ("#1b9e77", "#d95f02", "#7570b3", "#e7298a")
_MARKERS = ("o", "s", "^", "D")
_STYLES = ("-", "--", "-.", ":")


def rms_after_norm(rms_in, eps: float):
    """Root mean square of ``RMSNorm(x)`` (weight 1) for an input of root mean square
    ``rms_in``: rms / sqrt(rms² + eps), 1 unless rms is near sqrt(eps) or below."""
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    rms = np.asarray(rms_in, dtype=float)
    return rms / np.sqrt(rms ** 2 + eps)


def measured_rms_after_norm(rms_in: list[float], eps: float, dim: int = 64,
                            seed: int = 0) -> list[float]:
    """``nn.RMSNorm(dim, eps)`` (weight 1, float64) applied to a random vector scaled to each
    root mean square in ``rms_in``; the root mean square of each output."""
    if dim <= 0:
        raise ValueError(f"dim must be positive, got {dim}")
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(len(rms_in), dim, generator=gen, dtype=torch.float64)  # (n, dim)
    x = x / x.pow(2).mean(-1, keepdim=True).sqrt()  # each row: root mean square 1
    x = x * torch.tensor(rms_in, dtype=torch.float64)[:, None]  # row i: rms_in[i]
    norm = torch.nn.RMSNorm(dim, eps=eps, dtype=torch.float64)
    with torch.no_grad():
        y = norm(x)  # (n, dim)
    return y.pow(2).mean(-1).sqrt().tolist()


def rms_norm_figure(eps_values: tuple[float, ...] = (1e-6, 1e-2), dim: int = 64) -> Figure:
    """Output root mean square of RMSNorm against its input's, for each ``eps``: the formula
    as a line, ``nn.RMSNorm`` on random vectors as markers; dotted lines mark sqrt(eps),
    below which eps dominates and the output shrinks with the input."""
    if not eps_values:
        raise ValueError("eps_values is empty: pass at least one eps")
    grid = np.logspace(-5, 3, 200)
    points = [10.0 ** k for k in range(-5, 4)]
    fig = Figure(figsize=(6.5, 3.8))
    ax = fig.subplots()
    for i, eps in enumerate(eps_values):
        colour = _COLOURS[i % len(_COLOURS)]
        ax.plot(grid, rms_after_norm(grid, eps), color=colour, ls=_STYLES[i % len(_STYLES)],
                lw=1.8, label=f"formula, eps = {eps:g}")
        ax.plot(points, measured_rms_after_norm(points, eps, dim), ls="none", color=colour,
                marker=_MARKERS[i % len(_MARKERS)], ms=6, mfc="none", mew=1.5,
                label=f"nn.RMSNorm, eps = {eps:g}")
        ax.axvline(math.sqrt(eps), color=colour, ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_ylim(0, 1.1)
    ax.set_xlabel("root mean square of the input vector", fontsize=9)
    ax.set_ylabel("root mean square after RMSNorm", fontsize=9)
    ax.set_title("RMSNorm rescales every vector to root mean square 1,\n"
                 "except those smaller than sqrt(eps) (dotted)", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    return fig


def silu_figure(z_max: float = 5.0) -> Figure:
    """SiLU(z) = z·sigmoid(z), SwiGLU's gate, beside ReLU and the sigmoid factor; the dot
    marks SiLU's minimum (it is the one place SiLU's slope is 0)."""
    if z_max <= 0:
        raise ValueError(f"z_max must be positive, got {z_max}")
    z = torch.linspace(-z_max, z_max, 401, dtype=torch.float64)
    fig = Figure(figsize=(6.5, 3.8))
    ax = fig.subplots()
    ax.plot(z, F.silu(z), color=_COLOURS[0], lw=2, ls="-", label="SiLU(z) = z · sigmoid(z)")
    ax.plot(z, F.relu(z), color=_COLOURS[1], lw=1.5, ls="--", label="ReLU(z), for comparison")
    ax.plot(z, torch.sigmoid(z), color=_COLOURS[2], lw=1.5, ls="-.",
            label="sigmoid(z): the share of z let through")
    fine = torch.linspace(-3, 0, 30001, dtype=torch.float64)
    values = F.silu(fine)
    at = int(values.argmin())
    z_min, silu_min = fine[at].item(), values[at].item()
    ax.plot([z_min], [silu_min], ls="none", marker="o", color="black", ms=5,
            label=f"minimum {silu_min:.3f} at z = {z_min:.2f}")
    ax.axhline(0, color="grey", lw=0.6)
    ax.set_xlabel("pre-activation z", fontsize=9)
    ax.set_ylabel("value", fontsize=9)
    ax.set_title("SiLU: smooth, slightly negative for z < 0, close to z for large z", fontsize=9)
    ax.tick_params(labelsize=8)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig
