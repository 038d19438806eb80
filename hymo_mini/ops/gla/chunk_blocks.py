"""The in-chunk kernels of the chunked Triton gla kernel: the output pass (forward) and
the gradient pass (backward), each a program per (chunk, batch, head) that walks the
chunk's 16-step blocks with the state (or its gradient) on chip.

``hymo_mini.ops.gla.chunk_triton`` launches them; its docstring derives both, including
the levels that keep every decay factor in [0, 1] (``_level``, ``_intra`` here), and the
one product that serves a block whose decay stays in range (``_pairs``).
"""

from __future__ import annotations

import triton
import triton.language as tl

from hymo_mini.choices import one_of
from hymo_mini.ops.chunks import ONE_PRODUCT_SPAN
from hymo_mini.ops.gla.chunk_states import LOG2E, _dot, _rows

__all__ = []  # kernels only, launched by hymo_mini.ops.gla.chunk_triton

# --------------------------------------------------------------------------------------
# Kernels. Layouts: v, do (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S);
# states (B·H, NC, S, D) fp32. Step t of (i_b, i_h) is row (i_b·T + t)·H + i_h.
# --------------------------------------------------------------------------------------
@triton.jit
def _gate_sums(b_g, o_i, BT: tl.constexpr):
    """Gate summed from the block start, l [BT], and over the whole block, l_end."""
    b_l = tl.cumsum(b_g, axis=0)  # [BT]
    return b_l, tl.sum(tl.where(o_i == BT - 1, b_l, 0.0), axis=0)


@triton.jit
def _level(b_l, o_i, k: tl.constexpr):
    """Level k of a block's pairs s < t: those whose step indices first differ in bit k,
    i.e. s in the lower and t in the upper half of one 2^(k+1)-step sub-block. Every pair
    s < t of the block is on exactly one of the levels 0 .. log2(BT) - 1.

    The decay of a pair splits at r, the first step of the upper half: exp((l_t - l_s) A) =
    exp((l_t - l_r) A) · exp((l_r - l_s) A), both exponents ≥ 0 times A < 0, both factors
    in [0, 1]. Each step is a t on this level (bit k set) or an s (bit k clear), never both,
    so one gap per row serves: gap_t = l_t - l_r for the t rows, l_r - l_s for the s rows.
    Returns gap [BT] (≥ 0) and the level's pair mask [BT, BT]."""
    hi = o_i >> k  # [BT] which half-sub-block
    is_t = (hi & 1) == 1  # [BT] upper half: this row is a t of the level
    o_r = tl.where(is_t, hi, hi + 1) << k  # [BT] first step of the upper half (< BT)
    b_lr = tl.sum(tl.where(o_i[None, :] == o_r[:, None], b_l[None, :], 0.0), axis=1)  # [BT]
    b_gap = tl.where(is_t, b_l - b_lr, b_lr - b_l)  # [BT] ≥ 0
    m_k = (hi[:, None] == hi[None, :] + 1) & is_t[:, None]  # [BT, BT] pairs of level k
    return b_gap, m_k


@triton.jit
def _intra(b_c, b_b, b_M, b_l, b_A2, o_i, LOG2_BT: tl.constexpr, GRAD: tl.constexpr,
           PRECISION: tl.constexpr):
    """The block's decay-weighted attention W_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n), s ≤ t,
    level by level (see _level): W = diag(c · b) + Σ_k mask_k ⊙ (c ⊙ X_k)(b ⊙ X_k)^T with
    X_k = exp(gap_k A) = exp2(gap_k A2) ≤ 1 (b_A2 = A log2(e), the rates in base 2: exp2
    is one instruction), four tl.dot calls and 4·BT·BS exponentials, where the direct
    [BT, BT, BS] tensor of decays takes BT·BT·BS and no tensor cores. Nothing overflows:
    every factor is at most one, and one that underflows to zero belongs to a pair whose
    true weight is below 1e-38 too. If GRAD, also the in-block parts (pairs s < t) of
    Σ_s M_ts b_s E_ts and Σ_t M_ts c_t E_ts [BT, BS] for the caller's strictly causal M.
    Returns W [BT, BT] and the two [BT, BS] sums (zeros unless GRAD)."""
    b_W = tl.where(o_i[:, None] == o_i[None, :], tl.sum(b_c * b_b, axis=1)[:, None], 0.0)
    b_dc = tl.zeros_like(b_c)
    b_db = tl.zeros_like(b_b)
    for k in tl.static_range(LOG2_BT):
        b_gap, m_k = _level(b_l, o_i, k)
        b_X = tl.exp2(b_gap[:, None] * b_A2[None, :])  # [BT, BS] in [0, 1]
        b_cX, b_bX = b_c * b_X, b_b * b_X
        b_W += tl.where(m_k, _dot(b_cX, tl.trans(b_bX), PRECISION), 0.0)
        if GRAD:
            b_Mk = tl.where(m_k, b_M, 0.0)  # [BT, BT]
            b_dc += b_X * _dot(b_Mk, b_bX, PRECISION)  # [BT, BS]
            b_db += b_X * _dot(tl.trans(b_Mk), b_cX, PRECISION)
    return b_W, b_dc, b_db


# A block's pairs are one product when every exp2(±l_t δ_n) of it lies in [2^-SPAN, 2^SPAN],
# δ_n = A2_n - max(A2) the rates' excess over the head's slowest (why this span:
# hymo_mini.ops.chunks, ONE_PRODUCT_SPAN; one_product_chunks applies the rule of _chunk_fits
# in PyTorch).
SPAN = tl.constexpr(ONE_PRODUCT_SPAN)


@triton.jit
def _rates(A, i_h, o_s, m_s, S: tl.constexpr):
    """Head i_h's rates in base 2, A2 = A log2(e) [BS]. The lanes past S (when BS > S) take
    the head's slowest rate, so that the tile's largest and smallest are the head's own
    (``_spread``, ``_pairs``); every product those lanes enter has a zero on their side (b,
    c and the state are zero past S), so their decay changes nothing."""
    b_A2 = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32) * LOG2E
    return tl.where(m_s, b_A2, tl.max(tl.where(m_s, b_A2, float("-inf")), axis=0))


@triton.jit
def _spread(b_A2):
    """How far the head's rates spread, max(A2) - min(A2) ≥ 0 (base 2): what the one
    product's factors are raised by (``_pairs``; 0 when the head has one rate)."""
    return tl.max(b_A2, axis=0) - tl.min(b_A2, axis=0)


@triton.jit
def _chunk_fits(g, row0, i_c, T, spread2, H: tl.constexpr, BC: tl.constexpr,
                BT: tl.constexpr):
    """1 if every BT-step block of the BC-step chunk i_c fits the one product (``_pairs``):
    the gate summed from each block's start, times the spread of the rates spread2
    (``_spread``), stays within SPAN; else 0. The gates as one [BC / BT, BT] tile where
    BC / BT is a power of two (tl.arange needs one; every default setting), else one block
    at a time."""
    NBLK: tl.constexpr = BC // BT
    o_i = tl.arange(0, BT)
    if (NBLK & (NBLK - 1)) == 0:
        o_t = i_c * BC + tl.arange(0, NBLK)[:, None] * BT + o_i[None, :]
        b_g = tl.load(g + row0 + o_t * H, mask=o_t < T, other=0.0).to(tl.float32)
        b_l = tl.cumsum(b_g, axis=1)  # [BC / BT, BT] each block's sums from its start
        largest = tl.max(tl.max(tl.abs(b_l), axis=1), axis=0)
    else:
        largest = 0.0
        for j in tl.static_range(NBLK):
            o_t = i_c * BC + j * BT + o_i
            b_g = tl.load(g + row0 + o_t * H, mask=o_t < T, other=0.0).to(tl.float32)  # [BT]
            largest = tl.maximum(largest, tl.max(tl.abs(tl.cumsum(b_g, axis=0)), axis=0))
    return (largest * spread2 <= SPAN).to(tl.int32)


@triton.jit
def _claims(p_mark, g, row0, i_c, T, spread2, H: tl.constexpr, BC: tl.constexpr,
            BT: tl.constexpr, PAIRS: tl.constexpr):
    """Whether this launch computes the BC-step chunk i_c, when the pairs are split over two
    launches of one kernel: with PAIRS = "product" the chunks that fit (``_chunk_fits``),
    marking the others at p_mark (1) for the second launch; with "rest" the marked ones.
    (The caller returns at once when it is not its chunk: one branch around the whole
    program, not one between the two forms of the pairs.)"""
    if PAIRS == "product":
        fits = _chunk_fits(g, row0, i_c, T, spread2, H, BC, BT)
        tl.store(p_mark, 1 - fits)
        mine = fits
    else:
        mine = tl.load(p_mark)
    return mine


@triton.jit
def _pairs(b_x, b_y, b_l, b_lend, b_A2, o_i, LOG2_BT: tl.constexpr, PRODUCT: tl.constexpr,
           PRECISION: tl.constexpr):
    """The block's pair weights W_ts = Σ_n x_tn y_sn exp2((l_t - l_s) A2_n) for s ≤ t
    [BT, BT], y carried to the block's end, y ⊙ exp2((l_end - l) A2) [BT, BS], and x
    carried from the block's start, x ⊙ exp2(l A2) [BT, BS] (for the caller's reads of
    the state the block starts with).

    With PRODUCT, the caller has checked (``_chunk_fits``) that every l_t δ_n of the block
    is within ±SPAN, δ_n = A2_n - a ≤ 0 each rate's excess over the head's slowest, a =
    max A2. The decay of a pair splits into a part every key shares and the excess:

        exp2((l_t - l_s) A2_n) = exp2((l_t - l_s) a) · exp2(l_t δ_n) · exp2(-l_s δ_n),

    so W = exp2((l_t - l_s) a) ⊙ (x ⊙ exp2(l δ)) (y ⊙ exp2(-l δ))ᵀ, masked to s ≤ t: one
    product and one [BT, BT] tile of shared decays in [0, 1]. No factor leaves [2^-SPAN,
    2^SPAN] and every kept term is the pair's own decay, so it is as exact as the levels'.
    A head whose keys share one rate (δ = 0) fits however strong its decay. Otherwise the
    levels of ``_intra``, whose factors stay in [0, 1] whatever the decay. The choice is
    made per launch, never by a branch in here: compiled for an H200 by Triton 3.6, a
    branch between the two forms gave wrong outputs (see AUTO_PAIRS at the end of this
    file)."""
    if PRODUCT:
        a = tl.max(b_A2, axis=0)  # the slowest rate, ≤ 0
        b_d = b_A2 - a  # [BS] ≤ 0, the excess decay of each key
        b_xD = b_x * tl.exp2(b_l[:, None] * b_d[None, :])  # [BT, BS] x times [2^-SPAN, 1]
        b_yD = b_y * tl.exp2(-b_l[:, None] * b_d[None, :])  # [BT, BS] y times [1, 2^SPAN]
        m_ts = o_i[:, None] >= o_i[None, :]  # [BT, BT] s ≤ t
        b_gap = tl.where(m_ts, b_l[:, None] - b_l[None, :], 0.0)  # [BT, BT] ≥ 0
        b_W = _dot(b_xD, tl.trans(b_yD), PRECISION)  # [BT, BT]
        b_W = tl.where(m_ts, b_W * tl.exp2(b_gap * a), 0.0)
        b_yH = (b_yD * tl.exp2(b_lend * b_d)[None, :]
                * tl.exp2((b_lend - b_l) * a)[:, None])  # [BT, BS]
        b_xE = b_xD * tl.exp2(b_l * a)[:, None]  # [BT, BS]
    else:
        b_W, b_yH = _pairs_by_levels(b_x, b_y, b_l, b_lend, b_A2, o_i, LOG2_BT, PRECISION)
        b_xE = b_x * tl.exp2(b_l[:, None] * b_A2[None, :])  # [BT, BS]
    return b_W, b_yH, b_xE


@triton.jit
def _carried(b_x, b_l, b_A2, PRODUCT: tl.constexpr):
    """x carried from the block's start, x ⊙ exp2(l A2) [BT, BS], by the same operations
    as ``_pairs`` with the same PRODUCT (through the shared rate or not), for a caller that
    forms it again without the pairs and must get the same bits."""
    if PRODUCT:
        a = tl.max(b_A2, axis=0)
        b_xD = b_x * tl.exp2(b_l[:, None] * (b_A2 - a)[None, :])
        return b_xD * tl.exp2(b_l * a)[:, None]
    return b_x * tl.exp2(b_l[:, None] * b_A2[None, :])


@triton.jit
def _pairs_by_levels(b_x, b_y, b_l, b_lend, b_A2, o_i, LOG2_BT: tl.constexpr,
                     PRECISION: tl.constexpr):
    """``_pairs`` by the levels of ``_intra``, for any decay."""
    b_W, _, _ = _intra(b_x, b_y, b_x, b_l, b_A2, o_i, LOG2_BT, False, PRECISION)
    return b_W, b_y * tl.exp2((b_lend - b_l)[:, None] * b_A2[None, :])


@triton.jit
def _output_block(v, b, c, g, o, hb, b_h, b_A2, row0, i_bh, i_c, i_t, T,
                  H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                  BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                  STORE_HB: tl.constexpr, STORE_O: tl.constexpr, PAIRS: tl.constexpr,
                  PRECISION: tl.constexpr):
    """Block i_t of chunk i_c: its outputs (if STORE_O) from b_h [BS, BD], the state it
    starts with (stored if STORE_HB), and the state it hands to the next block. PAIRS:
    "product" forms the pairs by one product (the caller has checked that the block fits),
    "levels" or "rest" by the levels."""
    NB = tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    i_blk = i_c * (BC // BT) + i_t
    if STORE_HB:
        m_hb = (o_s[:, None] < S) & (o_d[None, :] < D) & ((o_s[:, None] * 0 + i_blk) < NB)
        tl.store(hb + (i_bh.to(tl.int64) * NB + i_blk) * S * D + o_s[:, None] * D
                 + o_d[None, :], b_h, mask=m_hb)
    o_t = i_blk * BT + o_i
    m_t = o_t < T
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = _gate_sums(b_g, o_i, BT)
    b_b = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    if STORE_O:
        # read the state the block starts with, then the block itself
        b_c = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_W, b_bH, b_cH = _pairs(b_c, b_b, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                 PAIRS == "product", PRECISION)
        b_o = _dot(b_cH, b_h, PRECISION)  # [BT, BD]
        b_o += _dot(b_W, b_v, PRECISION)  # [BT, BD]
        p_o = o + (row0 + o_t[:, None] * H) * D + o_d[None, :]
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_t[:, None] & m_d[None, :])
    else:
        b_bH = b_b * tl.exp2((b_lend - b_l)[:, None] * b_A2[None, :])  # [BT, BS]
    # hand the state to the next block (a block past the end leaves it as it is: g = b = 0)
    b_h = b_h * tl.exp2(b_lend * b_A2)[:, None]
    return b_h + _dot(tl.trans(b_bH), b_v, PRECISION)  # [BS, BD]


@triton.jit
def _output_fwd_kernel(v, b, c, g, A, hs, o, hb, marks, T,
                       H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                       BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                       LOG2_BT: tl.constexpr, STORE_HB: tl.constexpr, STORE_O: tl.constexpr,
                       UNROLL: tl.constexpr, PAIRS: tl.constexpr, PRECISION: tl.constexpr):
    """o for one chunk of one (b, h): its BT-step blocks in order, the state on chip.
    If STORE_HB, also the state each block starts with. Without STORE_O only those states
    (the backward's recomputation: no c, no outputs). UNROLL walks all BC / BT blocks as
    straight-line code (blocks past the sequence's end are masked), so that the compiler
    may start a later block's loads while an earlier block computes. PAIRS: "levels"
    takes every chunk by the levels; "product" only the chunks whose blocks all fit the
    one product, marking the others in marks (B·H·NC int32); "rest" only the marked ones,
    by the levels (``_claims``)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BC)
    o_s, o_d = tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A2 = _rates(A, i_h, o_s, m_s, S)  # [BS]
    row0 = i_b.to(tl.int64) * T * H + i_h
    if PAIRS != "levels":
        if _claims(marks + i_bh * NC + i_c, g, row0, i_c, T, _spread(b_A2), H, BC, BT,
                   PAIRS) == 0:
            return
    b_h = tl.load(hs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_sd, mask=m_h,
                  other=0.0)  # [BS, BD] fp32, the state the chunk starts with
    if UNROLL:
        for i_t in tl.static_range(BC // BT):
            b_h = _output_block(v, b, c, g, o, hb, b_h, b_A2, row0, i_bh, i_c, i_t, T, H,
                                S, D, BC, BS, BD, BT, LOG2_BT, STORE_HB, STORE_O, PAIRS,
                                PRECISION)
    else:
        for i_t in range(0, tl.cdiv(tl.minimum(BC, T - i_c * BC), BT)):
            b_h = _output_block(v, b, c, g, o, hb, b_h, b_A2, row0, i_bh, i_c, i_t, T, H,
                                S, D, BC, BS, BD, BT, LOG2_BT, STORE_HB, STORE_O, PAIRS,
                                PRECISION)


@triton.jit
def _chunk_bwd_kernel(v, b, c, g, A, do, hb, dhs, dv, db, dc, dg, dA, T,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                      BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                      LOG2_BT: tl.constexpr, PRECISION: tl.constexpr):
    """dv, db, dc, dg and Σ g dlog for one chunk of one (b, h): its blocks right to left.
    Each input is read where it is first needed and each gradient stored as soon as it is
    final, so that few [BT, BS] tiles are alive at once (registers, not spills)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC, NB = tl.cdiv(T, BC), tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_dh = tl.load(dhs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_sd, mask=m_h,
                   other=0.0)  # [BS, BD] the gradient at the chunk's end
    row0 = i_b.to(tl.int64) * T * H + i_h
    b_dA = tl.zeros([BS], dtype=tl.float32)
    NT = tl.cdiv(tl.minimum(BC, T - i_c * BC), BT)
    for k in range(0, NT):
        i_t = NT - 1 - k
        o_t = i_c * BC + i_t * BT + o_i
        m_t = o_t < T
        o_row = row0 + o_t[:, None] * H  # [BT, 1]
        m_tS, m_tD = m_t[:, None] & m_s[None, :], m_t[:, None] & m_d[None, :]
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = _gate_sums(b_g, o_i, BT)
        # the pairs: M_ts = do_t · v_s, then the in-block attention and its gradients
        b_do = _rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_M = _dot(b_do, tl.trans(b_v), PRECISION)  # [BT, BT] do_t·v_s
        b_Mdiag = tl.sum(tl.where(o_i[:, None] == o_i[None, :], b_M, 0.0), axis=1)  # [BT]
        b_M = tl.where(o_i[:, None] > o_i[None, :], b_M, 0.0)  # pairs s < t
        b_c = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_b = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_W, b_dci, b_dbi = _intra(b_c, b_b, b_M, b_l, b_A * LOG2E, o_i, LOG2_BT, True,
                                   PRECISION)
        # dv: the pairs, then the writes carried to the block end
        b_dv = _dot(tl.trans(b_W), b_do, PRECISION)  # [BT, BD]
        b_eb = tl.exp((b_lend - b_l)[:, None] * b_A[None, :])  # [BT, BS] s -> block end
        b_dv += _dot(b_b * b_eb, b_dh, PRECISION)
        tl.store(dv + o_row * D + o_d[None, :], b_dv.to(dv.dtype.element_ty), mask=m_tD)
        # db, and the part of dlog the writes and the in-block pairs give (see the module
        # docstring: the sums are arranged so that no two large terms cancel)
        b_dbh = b_eb * _dot(b_v, tl.trans(b_dh), PRECISION)  # [BT, BS]
        b_x = b_b * (b_dbh + b_dbi) - b_c * b_dci  # [BT, BS]
        b_db = b_dbh + b_dbi + b_Mdiag[:, None] * b_c  # + the t = s terms
        tl.store(db + o_row * S + o_s[None, :], b_db.to(db.dtype.element_ty), mask=m_tS)
        b_dlog = tl.cumsum(b_x, axis=0) - b_x  # [BT, BS]
        # dc through H, the state at the block start (stored by the forward or recomputed)
        p_hb = hb + (i_bh.to(tl.int64) * NB + i_c * (BC // BT) + i_t) * S * D
        b_h = tl.load(p_hb + o_sd, mask=m_h, other=0.0)  # [BS, BD]
        b_ec = tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS] block start -> t
        b_dch = b_ec * _dot(b_do, tl.trans(b_h), PRECISION)  # [BT, BS]
        b_eT = tl.exp(b_lend * b_A)  # [BS] the whole block
        b_dlog += (b_eT * tl.sum(b_h * b_dh, axis=1))[None, :]  # the carry
        b_dc = b_dch + b_dci + b_Mdiag[:, None] * b_b
        tl.store(dc + o_row * S + o_s[None, :], b_dc.to(dc.dtype.element_ty), mask=m_tS)
        b_dlog += tl.cumsum(b_c * b_dch, axis=0, reverse=True)  # later reads of H
        b_dA += tl.sum(b_dlog * b_g[:, None], axis=0)  # [BS]
        b_dg = tl.sum(b_dlog * b_A[None, :], axis=1)  # [BT]
        tl.store(dg + row0 + o_t * H, b_dg.to(dg.dtype.element_ty), mask=m_t)
        # the gradient at the block start = at the end of the block before
        b_dh = b_dh * b_eT[:, None]
        b_dh += _dot(tl.trans(b_c * b_ec), b_do, PRECISION)  # [BS, BD]
    tl.store(dA + (i_bh.to(tl.int64) * NC + i_c) * S + o_s, b_dA, mask=m_s)


# AUTO_PAIRS. Compiled for an H200 (Triton 3.6, 2026-12-03), one kernel that chose per block
# between the one product and the levels, by a branch on a condition every lane shared, gave
# wrong outputs in some kernels and shapes and not in others (bf16 and fp32 alike), while the
# interpreter, the levels alone and the product alone agreed with the loop
# (benchmarks/pairs_blocks_h200_2026-12-03.txt, benchmarks/pairs_variants_h200_2026-12-03.txt).
# So "auto" splits the choice over two launches of one kernel (``_claims``): a launch with
# only the product, which returns at once from a chunk that does not fit and marks it, and a
# launch with only the levels, which returns at once from every chunk not marked.


def check_pairs(pairs, choices) -> None:
    """The "pairs" setting: one of ``choices``."""
    one_of(pairs, "CONFIGS['pairs']", choices)


def launches(pairs: str) -> tuple[str, ...]:
    """The kernels' PAIRS per launch for the "pairs" setting: "auto" is two launches, the
    chunks that fit the one product by it, then the others by the levels (``_claims``)."""
    return ("product", "rest") if pairs == "auto" else (pairs,)
