"""Figures for chapter 04 (rotary position embedding, section 7 of the design document).

Every function takes the values a widget would set and returns a ``Figure``; the numbers
come from :mod:`hymo_mini.rope`, so a plot can never drift from what the model computes.
"""

from __future__ import annotations

import math

import torch
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from hymo_mini.config import ModelConfig
from hymo_mini.rope import RotaryEmbedding, apply_rotary, rope_frequencies

__all__ = [
    "spectrum_table",
    "relative_scores",
    "rope_spectrum_figure",
    "rotation_2d_figure",
    "relative_score_figure",
    "partial_rope_figure",
    "FIGURES",
]

def spectrum_table(rope_dim: int = 32, base: float = 10_000.0) -> list[tuple[int, float, float]]:
    """One row per rotary pair k: ``(k, theta_k in rad/token, wavelength 2*pi/theta_k in
    tokens)``."""
    thetas = rope_frequencies(rope_dim, base).tolist()
    return [(k, th, 2 * math.pi / th) for k, th in enumerate(thetas)]


def rope_spectrum_figure(base: float = 10_000.0, rope_dim: int = 32,
                         max_seq_len: int = 4_096) -> Figure:
    """The wavelength 2*pi/theta_k of each rotary pair k (tokens for one full turn), on a
    log scale, against the context length ``max_seq_len``: the pairs above the line never
    complete a turn within the context."""
    rows = spectrum_table(rope_dim, base)
    ks = [r[0] for r in rows]
    waves = [r[2] for r in rows]
    fig = Figure(figsize=(6.4, 3.8))
    ax = fig.add_subplot()
    ax.plot(ks, waves, marker="o", ls="-", ms=4, label=f"rope_dim = {rope_dim}")
    ax.axhline(max_seq_len, color="grey", lw=1, ls=":", label=f"max_seq_len = {max_seq_len:,}")
    ax.set_yscale("log")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("rotary pair k (channels 2k, 2k + 1)")
    ax.set_ylabel("wavelength 2π/θ_k (tokens, log scale)")
    ax.set_title(f"θ_k = base^(-2k / rope_dim), base = {base:g}")
    ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    return fig


def rotation_2d_figure(pair: int = 0, position: int = 3, rope_dim: int = 32,
                       base: float = 10_000.0, x: tuple[float, float] = (1.0, 0.4)) -> Figure:
    """The pair ``(x[2k], x[2k+1])`` drawn at positions 0..position: each step turns it by
    theta_k, the length never changes."""
    if not 0 <= pair < rope_dim // 2:
        raise ValueError(f"pair must be in [0, {rope_dim // 2}), got {pair}")
    if position < 0:
        raise ValueError(f"position must be >= 0, got {position}")
    theta = float(rope_frequencies(rope_dim, base)[pair])
    angle = torch.arange(position + 1, dtype=torch.float64)[:, None] * theta  # (t, 1)
    vec = torch.tensor(x, dtype=torch.float32).expand(1, position + 1, 1, 2)  # (b, t, h, 2)
    rotated = apply_rotary(vec, angle.cos().float(), angle.sin().float())[0, :, 0]  # (t, 2)
    fig = Figure(figsize=(4.6, 4.6))
    ax = fig.add_subplot()
    radius = math.hypot(*x)
    angles = torch.linspace(0, 2 * math.pi, 200)
    ax.plot(radius * angles.cos(), radius * angles.sin(), color="lightgrey", lw=1)
    n = rotated.shape[0]
    for p in range(n):
        shade = 0.25 + 0.75 * (p / max(n - 1, 1))
        ax.annotate("", xy=(rotated[p, 0].item(), rotated[p, 1].item()), xytext=(0, 0),
                    arrowprops=dict(arrowstyle="->", color=(0.1, 0.3, shade), lw=1.5))
    if n <= 12:
        for p in range(n):
            ax.text(1.08 * rotated[p, 0].item(), 1.08 * rotated[p, 1].item(), f"p={p}",
                    fontsize=8, ha="center", va="center")
    lim = 1.3 * radius
    ax.set_xlim(-lim, lim)
    ax.set_ylim(-lim, lim)
    ax.set_aspect("equal")
    ax.axhline(0, color="grey", lw=0.5)
    ax.axvline(0, color="grey", lw=0.5)
    ax.set_xlabel(f"x[{2 * pair}]")
    ax.set_ylabel(f"x[{2 * pair + 1}]")
    ax.set_title(f"pair k={pair}: θ_k={theta:.4g} rad/token, positions 0..{position}\n"
                 f"length stays {radius:.3f}")
    fig.tight_layout()
    return fig


def relative_scores(rope_dim: int = 32, base: float = 10_000.0, max_distance: int = 512,
                    kind: str = "ones", seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """``<R(p) q, R(p + delta) k>`` for delta = 0..max_distance, with ``q = k``.

    kind="ones": q = k = all ones (the textbook curve, sum_k 2 cos(delta * theta_k));
    kind="random": q = k drawn from N(0, 1) with ``seed``. The query sits at position 0 and
    the key at delta; by the relative-position property any start gives the same curve.
    Returns ``(distances, scores / rope_dim)``.
    """
    if kind not in ("ones", "random"):
        raise ValueError(f"kind must be 'ones' or 'random', got {kind!r}")
    if max_distance < 1:
        raise ValueError(f"max_distance must be >= 1, got {max_distance}")
    if kind == "ones":
        q = torch.ones(rope_dim, dtype=torch.float64)
    else:
        q = torch.randn(rope_dim, generator=torch.Generator().manual_seed(seed),
                        dtype=torch.float64)
    thetas = rope_frequencies(rope_dim, base)  # (k,)
    distance = torch.arange(max_distance + 1, dtype=torch.float64)
    angle = distance[:, None] * thetas[None, :]  # (delta, k)
    even, odd = q[0::2], q[1::2]
    # <q_pair, R(angle) q_pair> = |q_pair|^2 cos(angle) for each pair
    scores = ((even ** 2 + odd ** 2)[None, :] * angle.cos()).sum(-1)
    return distance, scores / rope_dim


def relative_score_figure(rope_dim: int = 32, base: float = 10_000.0,
                          max_distance: int = 512, seed: int = 0) -> Figure:
    """How the dot product of a rotated query and key changes with their distance, for
    q = k = all ones (solid) and q = k random (dashed, drawn with ``seed``)."""
    fig = Figure(figsize=(7, 3.5))
    ax = fig.add_subplot()
    for kind, style in (("ones", "-"), ("random", "--")):
        distance, score = relative_scores(rope_dim, base, max_distance, kind, seed)
        ax.plot(distance.numpy(), score.numpy(), lw=1, ls=style, label=f"q = k, {kind}")
    ax.axhline(0, color="grey", lw=0.5)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("distance between key and query (tokens)")
    ax.set_ylabel("⟨R(p) q, R(p + Δ) q⟩ / rope_dim")
    ax.set_title(f"score against distance, rope_dim = {rope_dim}, base = {base:g}")
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    return fig


def partial_rope_figure(head_dim: int = 128, rope_dim: int = 32, n_positions: int = 64,
                        base: float = 10_000.0) -> Figure:
    """An all-ones head vector after partial RoPE, position by channel: only the first
    ``rope_dim`` channels change with position."""
    if rope_dim > head_dim:
        raise ValueError(f"rope_dim={rope_dim} cannot exceed head_dim={head_dim}")
    rope = RotaryEmbedding(rope_dim, n_positions, base)
    x = torch.ones(1, n_positions, 1, head_dim)
    y = rope(x)[0, :, 0, :]  # (t, head_dim)
    fig = Figure(figsize=(8, 3.2))
    ax = fig.add_subplot()
    image = ax.imshow(y.numpy(), aspect="auto", cmap="viridis", vmin=-1.5, vmax=1.5,
                      interpolation="nearest")  # viridis: its lightness orders the values
    ax.axvline(rope_dim - 0.5, color="white", lw=1.5, ls="--")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel(f"channel (rotated: 0..{rope_dim - 1}, untouched: {rope_dim}..{head_dim - 1})")
    ax.set_ylabel("position")
    ax.set_title(f"partial RoPE on an all-ones head: {rope_dim}/{head_dim} channels rotate")
    fig.colorbar(image, ax=ax, label="value")
    fig.tight_layout()
    return fig


def _production_spectrum() -> Figure:
    m = ModelConfig()
    return rope_spectrum_figure(m.rope_theta, m.qk_rope_head_dim, m.max_seq_len)


def _production_partial() -> Figure:
    m = ModelConfig()
    return partial_rope_figure(m.head_dim, m.qk_rope_head_dim)


FIGURES = {
    "rope_spectrum.png": _production_spectrum,
    "rope_rotation_2d.png": rotation_2d_figure,
    "rope_relative_score.png": relative_score_figure,
    "rope_partial.png": _production_partial,
}
