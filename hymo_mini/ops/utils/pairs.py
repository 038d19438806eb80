"""The decay-weighted pair weights of a block of BT steps, the core of both chunk kernels:

    P_ts = Σ_n x_tn y_sn exp2((l_t - l_s) A2_n)     for s ≤ t        [BT, BT]

with l the gate summed from the block's start and A2 = A·log2(e) < 0 the rates in base 2
(the gla rule's c against b; the delta rule's b against b and c against b).

**The safe form, by levels.** Factoring the decay as exp2(l_t A2) · exp2(-l_s A2) would make
P one tl.dot, but exp2(-l_s A2) overflows fp32 once l_s·|A2| passes 128. Instead the pairs
s < t are split into levels k = 0 .. log2(BT) - 1 by the highest bit in which their step
indices differ: on level k, s lies in the lower and t in the upper half of one
2^(k+1)-step sub-block, whose upper half starts at step r, and the decay splits there,

    exp2((l_t - l_s) A2) = exp2((l_t - l_r) A2) · exp2((l_r - l_s) A2),   both in [0, 1].

A step is a t of the level or an s, never both, so one [BT, S] tile of factors Z_k serves
both sides: a level is one masked product, (x ⊙ Z_k)(y ⊙ Z_k)ᵀ, and nothing overflows.

**The fast form, one product.** Split each rate into the head's slowest, a = max A2, and
the excess, δ_n = A2_n - a ≤ 0. The shared part leaves the sum over n:

    P_ts = exp2((l_t - l_s) a) · Σ_n (x_tn exp2(l_t δ_n)) (y_sn exp2(-l_s δ_n)),

one product times a [BT, BT] tile of decays in [0, 1], safe while every |l_t δ_n| of the
block is within SPAN (base 2): a head whose keys share one rate always fits.

**Two launches.** A kernel that forms pairs runs twice: the first (PRODUCT) takes the chunks
that fit and marks the others, the second takes those by the levels (:func:`takes_chunk`),
never a branch between the forms inside one kernel (one compiler release miscompiled it).
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.chunks import ONE_PRODUCT_SPAN
from hymo_mini.ops.utils.precision import dot

__all__ = ["SPAN", "level", "pairs_by_levels", "pairs", "chunk_fits", "takes_chunk"]

SPAN = tl.constexpr(ONE_PRODUCT_SPAN)


@triton.jit
def level(b_l, o_i, k: tl.constexpr):
    """Level k of a block's pairs s < t: each row's gap to the split point r, l_t - l_r on
    the t rows and l_r - l_s on the s rows (both ≥ 0) [BT], and the level's pair mask
    [BT, BT]."""
    hi = o_i >> k  # [BT] which half-sub-block of 2^k steps
    is_t = (hi & 1) == 1  # [BT] an upper half: the row is a t of this level
    o_r = tl.where(is_t, hi, hi + 1) << k  # [BT] the first step of the upper half
    b_lr = tl.sum(tl.where(o_i[None, :] == o_r[:, None], b_l[None, :], 0.0), axis=1)  # [BT]
    b_gap = tl.where(is_t, b_l - b_lr, b_lr - b_l)  # [BT] ≥ 0
    m_k = (hi[:, None] == hi[None, :] + 1) & is_t[:, None]  # [BT, BT] pairs of level k
    return b_gap, m_k


@triton.jit
def pairs_by_levels(b_x, b_y, b_M, b_l, b_A2, o_i, LOG2_BT: tl.constexpr,
                    GRAD: tl.constexpr, PRECISION: tl.constexpr):
    """P [BT, BT] (b_W) by the levels, the diagonal Σ_n x_tn y_tn included. If GRAD, also the
    in-block parts of Σ_s M_ts y_s E_ts and Σ_t M_ts x_t E_ts [BT, BS] for a strictly causal
    M [BT, BT] (E_ts the pair's decay): a backward's gradients of x and y; else zeros."""
    b_W = tl.where(o_i[:, None] == o_i[None, :], tl.sum(b_x * b_y, axis=1)[:, None], 0.0)
    b_dx = tl.zeros_like(b_x)
    b_dy = tl.zeros_like(b_y)
    for k in tl.static_range(LOG2_BT):
        b_gap, m_k = level(b_l, o_i, k)
        b_X = tl.exp2(b_gap[:, None] * b_A2[None, :])  # [BT, BS] Z_k, in [0, 1]
        b_xX, b_yX = b_x * b_X, b_y * b_X
        b_W += tl.where(m_k, dot(b_xX, tl.trans(b_yX), PRECISION), 0.0)
        if GRAD:
            b_Mk = tl.where(m_k, b_M, 0.0)  # [BT, BT]
            b_dx += b_X * dot(b_Mk, b_yX, PRECISION)  # [BT, BS]
            b_dy += b_X * dot(tl.trans(b_Mk), b_xX, PRECISION)
    return b_W, b_dx, b_dy


@triton.jit
def pairs(b_x, b_y, b_l, b_lend, b_A2, o_i, LOG2_BT: tl.constexpr, PRODUCT: tl.constexpr,
          PRECISION: tl.constexpr):
    """P [BT, BT] (s ≤ t), y carried to the block's end, y ⊙ exp2((l_C - l) A2), and x
    carried from the block's start, x ⊙ exp2(l A2) [BT, BS]: by one product if PRODUCT
    (the caller has checked that the block fits), else by the levels."""
    if PRODUCT:
        a = tl.max(b_A2, axis=0)  # the slowest rate, ≤ 0
        b_d = b_A2 - a  # [BS] ≤ 0, each key's excess decay
        b_xD = b_x * tl.exp2(b_l[:, None] * b_d[None, :])  # [BT, BS] x times [2^-SPAN, 1]
        b_yD = b_y * tl.exp2(-b_l[:, None] * b_d[None, :])  # [BT, BS] y times [1, 2^SPAN]
        m_ts = o_i[:, None] >= o_i[None, :]  # [BT, BT] s ≤ t
        b_gap = tl.where(m_ts, b_l[:, None] - b_l[None, :], 0.0)  # [BT, BT] ≥ 0
        b_W = tl.where(m_ts, dot(b_xD, tl.trans(b_yD), PRECISION) * tl.exp2(b_gap * a), 0.0)
        b_yE = b_yD * tl.exp2(b_lend * b_d)[None, :] * tl.exp2((b_lend - b_l) * a)[:, None]
        b_xE = b_xD * tl.exp2(b_l * a)[:, None]
    else:
        b_W, _, _ = pairs_by_levels(b_x, b_y, b_x, b_l, b_A2, o_i, LOG2_BT, False, PRECISION)
        b_yE = b_y * tl.exp2((b_lend - b_l)[:, None] * b_A2[None, :])
        b_xE = b_x * tl.exp2(b_l[:, None] * b_A2[None, :])
    return b_W, b_yE, b_xE


@triton.jit
def chunk_fits(g, row0, i_c, T, b_A2, H: tl.constexpr, BC: tl.constexpr, BT: tl.constexpr):
    """1 if every block of BT steps of chunk i_c (BC steps) fits the one product, the gate
    summed from each block's start times the rates' spread (max A2 - min A2) within SPAN."""
    o_t = i_c * BC + tl.arange(0, BC // BT)[:, None] * BT + tl.arange(0, BT)[None, :]
    b_l = tl.cumsum(tl.load(g + row0 + o_t * H, mask=o_t < T, other=0.0).to(tl.float32), axis=1)
    largest = tl.max(tl.max(tl.abs(b_l), axis=1), axis=0)  # over [BC / BT, BT]
    return (largest * (tl.max(b_A2, axis=0) - tl.min(b_A2, axis=0)) <= SPAN).to(tl.int32)


@triton.jit
def takes_chunk(p_left, g, row0, i_c, T, b_A2, H: tl.constexpr, BC: tl.constexpr,
                BT: tl.constexpr, PRODUCT: tl.constexpr):
    """Whether this launch computes chunk i_c: the PRODUCT launch takes it if it fits
    (``chunk_fits``) and otherwise marks it left (1 at p_left); the other, the chunks left."""
    if PRODUCT:
        fits = chunk_fits(g, row0, i_c, T, b_A2, H, BC, BT)
        tl.store(p_left, 1 - fits)
        return fits
    else:
        return tl.load(p_left)
