"""The levels of the chunked Triton kernel (chapter 10, rung 3).

``hymo_mini.ops.gla.chunk_triton`` computes a block's decay-weighted weights
P_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n), s ≤ t, level by level: :func:`pair_level` and
:func:`level_map` sort a block's pairs s < t by the highest bit in which s and t differ,
:func:`level_weights` computes the weights that way (every factor at most one),
:func:`one_factor_weights` the one-product shortcut that overflows at strong decay,
:func:`fits_one_product` the kernel's test of whether a block may take it after all, and
:func:`level_map_figure` draws the levels. Checked by ``tests/book/test_book_chunk_levels.py``
against :func:`hymo_book.kernels.arithmetic.decay_matrix`, the direct form.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from einops import einsum
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.patches import Patch, Rectangle

__all__ = ["pair_level", "level_map", "level_weights", "one_factor_weights", "fits_one_product",
           "level_map_figure"]


def _check_block(block, name: str = "block") -> None:
    if not isinstance(block, int) or block < 2 or block & (block - 1):
        raise ValueError(f"{name} must be a power of two >= 2, got {block!r}")


def pair_level(t: int, s: int) -> tuple[int, int]:
    """Level k and split step r of the pair s < t (steps counted from the block start).

    k is the highest bit in which t and s differ: both lie in one sub-block of 2^(k+1)
    steps, s in its lower half and t in its upper half. r is the first step of that upper
    half (t with its bits below k cleared), so s < r ≤ t and the decay splits there:
    exp((l_t - l_s) A) = exp((l_t - l_r) A) · exp((l_r - l_s) A), each factor ≤ 1."""
    if not (isinstance(t, int) and isinstance(s, int) and 0 <= s < t):
        raise ValueError(f"need integer steps 0 <= s < t, got t={t!r}, s={s!r}")
    k = (t ^ s).bit_length() - 1
    return k, (t >> k) << k


def level_map(block: int = 16) -> torch.Tensor:
    """(block, block) int64, row t and column s: the level of each pair s < t
    (:func:`pair_level`), -1 on and above the diagonal. Level k holds block·2^(k-1) pairs:
    block / 2^(k+1) squares of 2^k x 2^k just below the diagonal."""
    _check_block(block)
    step = torch.arange(block)
    differ = step[:, None] ^ step[None, :]  # (t, s) bits in which t and s differ
    level = torch.zeros_like(differ)
    for k in range(1, block.bit_length() - 1):
        level += (differ >> k) > 0  # counts the bits above the lowest: floor(log2)
    return level.masked_fill(step[:, None] <= step[None, :], -1)


def _check_block_inputs(b, c, g, A) -> None:
    if b.ndim != 2 or c.shape != b.shape or g.shape != b.shape[:1] or A.shape != b.shape[1:]:
        raise ValueError("expected b, c (T, S), g (T,), A (S,); got "
                         f"{tuple(b.shape)}, {tuple(c.shape)}, {tuple(g.shape)}, {tuple(A.shape)}")
    _check_block(len(g), "T (the block length)")


def level_weights(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor,
                  A: torch.Tensor) -> torch.Tensor:
    """The weights P_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n), s ≤ t, of one block, the way
    ``hymo_mini.ops.gla.chunk_triton`` computes them: the diagonal Σ_n c_tn b_tn, plus per
    level k one masked product

        P += [level = k] ⊙ (c ⊙ Z_k)(b ⊙ Z_k)^T,   Z_k = exp(gap_k A) ≤ 1 (T, S)

    where gap_k of a step is its distance in gate sum to its split point r on level k:
    l_t - l_r for a step in an upper half (a t of the level), l_r - l_s for one in a lower
    half (an s). A step is one or the other on each level, so one (T, S) tensor of
    factors serves rows and columns. b, c (T, S); g (T,) in (0, 1) with l = cumsum(g) the
    gate summed from the block start; A (S,) < 0; T a power of two. Returns P (T, T),
    equal to :func:`decay_matrix` up to rounding."""
    _check_block_inputs(b, c, g, A)
    T = len(g)
    l = g.cumsum(0)  # (t,) gate summed from the block start
    step = torch.arange(T)
    levels = level_map(T)  # (t, s)
    P = torch.diag(einsum(c, b, "t n, t n -> t"))  # (t, s) the pairs s = t: no decay
    for k in range(T.bit_length() - 1):
        is_t = ((step >> k) & 1) == 1  # (t,) in an upper half on this level
        r = ((step >> k) | 1) << k  # (t,) first step of the upper half
        gap = torch.where(is_t, l - l[r], l[r] - l)  # (t,) ≥ 0
        Z = torch.exp(einsum(gap, A, "t, n -> t n"))  # (t, n) in (0, 1]
        P = P + (levels == k) * einsum(c * Z, b * Z, "t n, s n -> t s")  # (t, s)
    return P


def one_factor_weights(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor,
                       A: torch.Tensor) -> torch.Tensor:
    """The same P from one factor per step, (c ⊙ e^{lA})(b ⊙ e^{-lA})^T below the diagonal:
    a single matrix product, but e^{-lA} grows with l and overflows to inf once l·|A_n|
    passes the dtype's limit (~88 in float32, ~709 in float64), and 0 · inf = nan."""
    _check_block_inputs(b, c, g, A)
    l = g.cumsum(0)  # (t,)
    lA = einsum(l, A, "t, n -> t n")  # (t, n) ≤ 0
    P = einsum(c * torch.exp(lA), b * torch.exp(-lA), "t n, s n -> t s")  # (t, s)
    causal = torch.ones(len(g), len(g), dtype=torch.bool).tril()
    return torch.where(causal, P, torch.zeros_like(P))


def shared_rate_weights(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor,
                        A: torch.Tensor) -> torch.Tensor:
    """The same P by one product after the decay every key shares is taken out: with a =
    max_n A_n (the slowest rate) and δ = A - a ≤ 0, P_ts = e^{(l_t - l_s) a} ·
    Σ_n (c_tn e^{l_t δ_n}) (b_sn e^{-l_s δ_n}) for s ≤ t. The shared factor is one number
    per pair in [0, 1]; only the excess δ passes through the one-factor split, so a head
    whose keys share one rate (δ = 0) never overflows, however strong its decay."""
    _check_block_inputs(b, c, g, A)
    l = g.cumsum(0)  # (t,)
    a = A.max()  # the slowest rate, ≤ 0
    lD = einsum(l, A - a, "t, n -> t n")  # (t, n) ≤ 0
    causal = torch.ones(len(g), len(g), dtype=torch.bool).tril()  # (t, s), s <= t
    gap = torch.where(causal, l[:, None] - l[None, :], torch.zeros((), dtype=l.dtype))
    P = einsum(c * torch.exp(lD), b * torch.exp(-lD), "t n, s n -> t s") * torch.exp(gap * a)
    return torch.where(causal, P, torch.zeros_like(P))


def fits_one_product(g: torch.Tensor, A: torch.Tensor, span: float = 64.0) -> bool:
    """Whether the kernel forms a block's weights by one product (``pairs`` in
    ``hymo_mini.ops.utils.pairs``): every exponent l_t δ_n of the block's excess decay
    (δ = A - max A, :func:`shared_rate_weights`), written in base 2, within ±span, so that
    the factors 2^{±l_t δ_n log2 e} stay far inside float32's range: max |l| · (max A -
    min A) · log2 e ≤ span. g (T,) the block's gates, l = cumsum(g) (|l| rather than l: a
    gate may be negative); A (S,) the rates."""
    if g.ndim != 1 or A.ndim != 1:
        raise ValueError(f"expected g (T,) and A (S,), got {tuple(g.shape)} and {tuple(A.shape)}")
    if not span > 0:
        raise ValueError(f"span must be positive, got {span!r}")
    A = A.double()
    largest = g.double().cumsum(0).abs().max() * (A.max() - A.min()) * math.log2(math.e)
    return bool(largest <= span)


_LEVEL_COLORS = ["#4c72b0", "#55a868", "#c44e52", "#8172b2", "#ccb974", "#64b5cd"]


def level_map_figure(block: int = 16, t: int = 13, s: int = 2) -> Figure:
    """Every pair (t, s) of one block coloured by its level (:func:`level_map`), the
    diagonal grey, the upper triangle blank; the example pair (t, s) starred, the square
    of its level outlined, and the two pairs its decay splits into, (t, r) and (r, s),
    circled: exp((l_t - l_s) A) = exp((l_t - l_r) A) · exp((l_r - l_s) A)."""
    _check_block(block)
    if block > 2 ** len(_LEVEL_COLORS):
        raise ValueError(f"block must be at most {2 ** len(_LEVEL_COLORS)}, got {block}")
    if not (isinstance(t, int) and isinstance(s, int) and 0 <= s < t < block):
        raise ValueError(f"t and s must satisfy 0 <= s < t < block = {block}, got t={t!r}, s={s!r}")
    n_levels = block.bit_length() - 1
    levels = level_map(block).numpy()
    image = np.where(np.eye(block, dtype=bool), n_levels, levels)  # the diagonal: its own colour
    shown = np.ma.masked_where(image < 0, image)
    fig = Figure(figsize=(6.6, 6.4), layout="constrained")
    ax = fig.subplots()
    cmap = ListedColormap(_LEVEL_COLORS[:n_levels] + ["#bbbbbb"])
    ax.imshow(shown, cmap=cmap, vmin=-0.5, vmax=n_levels + 0.5,
              extent=(-0.5, block - 0.5, block - 0.5, -0.5))
    k, r = pair_level(t, s)
    size = 1 << k  # the level-k square holding (t, s): rows r .. r+size-1, columns r-size .. r-1
    ax.add_patch(Rectangle((r - size - 0.5, r - 0.5), size, size, fill=False, edgecolor="k",
                           lw=2.5))
    ax.plot([s], [t], marker="*", ms=16, color="k", ls="none")
    ax.plot([r, s], [t, r], marker="o", ms=11, mfc="none", mec="k", mew=2, ls="none")
    ax.plot([s, r], [t, t], color="k", lw=1, ls=":")  # same row t: the factor (t, r)
    ax.plot([s, s], [t, r], color="k", lw=1, ls=":")  # same column s: the factor (r, s)
    label = dict(fontsize=8, fontweight="bold", va="center",
                 bbox=dict(boxstyle="round,pad=0.15", fc="white", ec="none", alpha=0.8))
    ax.text(min(r + 0.5, block * 0.7), min(t + 0.05 * block, block - 1.2),
            r"$(t, r)$: $e^{(l_t - l_r)A}$", **label)
    ax.text(min(s + 0.5, block * 0.7), max(r - 0.05 * block, 0.5),
            r"$(r, s)$: $e^{(l_r - l_s)A}$", **label)
    ticks = range(0, block, 1 if block <= 16 else 2)
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.tick_params(labelsize=8)
    ax.set_xlabel("s: step that wrote (from the block start)")
    ax.set_ylabel("t: step that reads")
    counts = np.bincount(levels[levels >= 0], minlength=n_levels)
    handles = [Patch(color=_LEVEL_COLORS[j], label=f"level {j}: {2**j}x{2**j} squares, "
                     f"{counts[j]} pairs") for j in range(n_levels)]
    handles.append(Patch(color="#bbbbbb", label="s = t: no decay"))
    ax.legend(handles=handles, fontsize=8, loc="upper right")
    ax.set_title(f"The pairs s < t of a {block}-step block by level ({n_levels} levels, "
                 f"{int(counts.sum())} pairs)\n★ (t, s) = ({t}, {s}): level {k}, split at r = {r}: "
                 r"$e^{(l_t - l_s)A} = e^{(l_t - l_r)A} \cdot e^{(l_r - l_s)A}$", fontsize=9)
    return fig
