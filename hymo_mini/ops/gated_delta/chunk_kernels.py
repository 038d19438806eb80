"""The in-chunk kernels of the chunked Triton gated delta rule: a program per (chunk,
batch, head), every chunk at once. ``hymo_mini.ops.gated_delta.chunk_triton`` launches
them and derives what they compute; the chunk-to-chunk passes are in ``chunk_states``.

The in-chunk pair weights Σ_n x_tn y_sn exp((L_t - L_s) A_n) come from ``_pairs`` of the
gla chunk kernel: the levels that keep every decay factor in [0, 1], or one product for a
chunk whose keys' decay, beyond the part they share, stays in range (a head whose keys share
one rate always fits); a chunk here is one of its blocks (BT = 16, 32 or 64 steps). With
PAIRS = "product" a kernel takes only the chunks that fit the one product and marks the
others, which a second launch with PAIRS = "rest" takes by the levels
(``chunk_blocks._claims``). The backward's pair gradients (``_pair_grads``) always take the
levels.
"""

from __future__ import annotations

import triton
import triton.language as tl

# shared with the gla chunk kernel
from hymo_mini.ops.gla.chunk_blocks import (
    _claims,
    _gate_sums,
    _level,
    _pairs,
    _rates,
    _spread,
)
from hymo_mini.ops.gla.chunk_states import _dot, _rows

__all__ = []  # kernels only, launched by hymo_mini.ops.gated_delta.chunk_triton

# --------------------------------------------------------------------------------------
# Layouts: v, do (B, T, H, D); b, c (B, T, H, S); g, beta (B, T, H); A (H, S); the fp32
# buffers w (B, T, H, S) and uv, u, du (B, T, H, D); states (B·H, NC, S, D) fp32.
# Step t of (i_b, i_h) is row (i_b·T + t)·H + i_h.
# --------------------------------------------------------------------------------------


@triton.jit
def _unit_lower_inverse(b_M, o_i, BT: tl.constexpr):
    """(I + M)⁻¹ for a strictly lower-triangular M [BT, BT], by forward substitution, one
    row at a time: row i of the inverse is e_i - Σ_{j<i} M_ij (row j), rows j < i done."""
    b_T = tl.where(o_i[:, None] == o_i[None, :], 1.0, 0.0)  # [BT, BT]
    for i in range(1, BT):
        b_mi = tl.sum(tl.where(o_i[:, None] == i, b_M, 0.0), axis=0)  # [BT] row i of M
        b_new = tl.sum(b_mi[:, None] * b_T, axis=0)  # [BT] Σ_j M_ij (row j)
        b_T = tl.where(o_i[:, None] == i, b_T - b_new[None, :], b_T)
    return b_T


@triton.jit
def _unit_lower_inverse_levels(b_M, o_i, LOG2_BT: tl.constexpr, PRECISION: tl.constexpr):
    """(I + M)⁻¹ for a strictly lower-triangular M [BT, BT] by merging diagonal blocks:
    with T the inverse on blocks of 2^k steps, a block of 2^(k+1) is [[A, 0], [C, B]] and
    its inverse [[A⁻¹, 0], [-B⁻¹ C A⁻¹, B⁻¹]], so T ← T - T M_k T, M_k holding the C
    blocks of level k. At level 0, T = I and the update is T = I - M_0, with no product;
    each later level takes two, and there is no sequential row loop."""
    i, j = o_i[:, None], o_i[None, :]
    m_0 = ((i >> 1) == (j >> 1)) & ((i & 1) == 1) & ((j & 1) == 0)  # step 2r+1 on 2r
    b_T = tl.where(i == j, 1.0, 0.0) - tl.where(m_0, b_M, 0.0)  # [BT, BT] blocks of two
    for k in tl.static_range(1, LOG2_BT):
        m_k = ((i >> (k + 1)) == (j >> (k + 1))) & (((i >> k) & 1) == 1) & (((j >> k) & 1) == 0)
        b_TM = _dot(b_T, tl.where(m_k, b_M, 0.0), PRECISION)  # [BT, BT]
        b_T -= _dot(b_TM, b_T, PRECISION)
    return b_T


@triton.jit
def _erasures(b_KK, b_beta, o_i, BT: tl.constexpr, LOG2_BT: tl.constexpr,
              PRECISION: tl.constexpr, INVERSE: tl.constexpr):
    """The chunk's erasure matrix from its key pairs b_KK (Σ_n k_tn k_sn E_tsn for s ≤ t,
    ``_pairs``): Mk, the pairs s < t [BT, BT], M = β Mk, and (I + M)⁻¹ [BT, BT]."""
    b_Mk = tl.where(o_i[:, None] > o_i[None, :], b_KK, 0.0)  # [BT, BT] pairs s < t
    if INVERSE == "levels":
        b_Ti = _unit_lower_inverse_levels(b_beta[:, None] * b_Mk, o_i, LOG2_BT, PRECISION)
    else:
        b_Ti = _unit_lower_inverse(b_beta[:, None] * b_Mk, o_i, BT)  # [BT, BT]
    return b_Mk, b_Ti


@triton.jit
def _pair_grads(b_q, b_k, b_dP, b_dMk, b_l, b_A, o_i, LOG2_BT: tl.constexpr,
                PRECISION: tl.constexpr):
    """Gradients of the pairs s < t of P_ts = Σ_n c_tn b_sn E_tsn and of
    Mk_ts = Σ_n b_tn b_sn E_tsn, given dP and dMk [BT, BT] (zero unless s < t):
    dc [BT, BS], db [BT, BS] (both of Mk's sides and P's column side) and their part of
    dlog [BT, BS].

    Level by level (``_level``): E_ts = X_t X_s split at r, X_t spanning steps (r, t] and
    X_s steps (s, r]. A pair's term z = x_t dW_ts y_s E_ts reaches dlog_i for every i in
    (s, t]: through X_t for i in (r, t], through X_s for i in (s, r]. Summed per row
    (ρ_t = x_t ⊙ dx_t on t rows, κ_s = y_s ⊙ dy_s on s rows), each row's sum goes to the
    steps its own factor spans: one 0/1 matrix product per level serves both matrices,
    and no term is ever subtracted."""
    b_dq = tl.zeros_like(b_q)
    b_dk = tl.zeros_like(b_k)
    b_dlog = tl.zeros_like(b_q)
    i, j = o_i[:, None], o_i[None, :]
    for k in tl.static_range(LOG2_BT):
        b_gap, m_k = _level(b_l, o_i, k)
        hi = o_i >> k  # [BT]
        is_t = (hi & 1) == 1  # [BT]
        o_r = tl.where(is_t, hi, hi + 1) << k  # [BT] each row's split point r
        b_X = tl.exp(b_gap[:, None] * b_A[None, :])  # [BT, BS] in [0, 1]
        b_qX, b_kX = b_q * b_X, b_k * b_X
        b_dPk = tl.where(m_k, b_dP, 0.0)  # [BT, BT]
        b_dMkk = tl.where(m_k, b_dMk, 0.0)  # [BT, BT]
        b_dqk = b_X * _dot(b_dPk, b_kX, PRECISION)  # [BT, BS] P, t side
        b_dkk = b_X * (_dot(tl.trans(b_dPk), b_qX, PRECISION)  # P, s side
                       + _dot(b_dMkk, b_kX, PRECISION)  # Mk, t side
                       + _dot(tl.trans(b_dMkk), b_kX, PRECISION))  # s side
        b_dq += b_dqk
        b_dk += b_dkk
        # step i gets row j's sum where j's factor spans i: (r_j, j] or (j, r_j]
        m_span = ((is_t[None, :] & (o_r[None, :] < i) & (i <= j))
                  | ((~is_t[None, :]) & (j < i) & (i <= o_r[None, :])))  # [BT, BT]
        b_z = b_q * b_dqk + b_k * b_dkk  # [BT, BS] ρ on t rows, κ on s rows
        b_dlog += _dot(tl.where(m_span, 1.0, 0.0), b_z, PRECISION)
    return b_dq, b_dk, b_dlog


@triton.jit
def _wy_fwd_kernel(v, b, g, A, beta, uv, w, mk, ti, marks, T,
                   H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                   BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                   PRECISION: tl.constexpr, INVERSE: tl.constexpr, PAIRS: tl.constexpr,
                   KEEP: tl.constexpr):
    """One chunk's WY quantities: Uv = (I + M)⁻¹ diag(β) V [BT, BD] and
    W = (I + M)⁻¹ diag(β) K̃ [BT, BS], K̃ = b ⊙ exp(L A); and, if KEEP, Mk and (I + M)⁻¹
    [BT, BT] for the backward. PAIRS: "levels", "product" or "rest" (the module docstring)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BT + o_i
    m_t = o_t < T  # padding steps: g = 0, β = 0, b = 0 (no decay, no write)
    b_A2 = _rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    if PAIRS != "levels":
        if _claims(marks + i_bh * tl.cdiv(T, BT) + i_c, g, row0, i_c, T,
                   _spread(b_A2), H, BT, BT, PAIRS) == 0:
            return
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_beta = tl.load(beta + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = _gate_sums(b_g, o_i, BT)
    b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_KK, _, b_Kt = _pairs(b_k, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT, PAIRS == "product",
                           PRECISION)  # [BT, BT], and K̃ [BT, BS]
    b_Mk, b_Ti = _erasures(b_KK, b_beta, o_i, BT, LOG2_BT, PRECISION, INVERSE)  # [BT, BT]
    if KEEP:
        o_tt = ((i_bh.to(tl.int64) * tl.cdiv(T, BT) + i_c) * BT * BT + o_i[:, None] * BT
                + o_i[None, :])
        tl.store(mk + o_tt, b_Mk)
        tl.store(ti + o_tt, b_Ti)
    b_w = _dot(b_Ti, b_Kt * b_beta[:, None], PRECISION)  # [BT, BS]
    b_uv = _dot(b_Ti, b_v * b_beta[:, None], PRECISION)  # [BT, BD]
    o_row = row0 + o_t[:, None] * H  # [BT, 1]
    tl.store(w + o_row * S + o_s[None, :], b_w, mask=m_t[:, None] & m_s[None, :])
    tl.store(uv + o_row * D + o_d[None, :], b_uv, mask=m_t[:, None] & m_d[None, :])


@triton.jit
def _output_kernel(b, c, g, A, hs, u, o, marks, T,
                   H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                   BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                   PRECISION: tl.constexpr, PAIRS: tl.constexpr):
    """One chunk's outputs O = Q̃ H_0 + P U [BT, BD], Q̃ = c ⊙ exp(L A). PAIRS: as in
    ``_wy_fwd_kernel``."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BT + o_i
    m_t = o_t < T
    b_A2 = _rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    if PAIRS != "levels":
        if _claims(marks + i_bh * tl.cdiv(T, BT) + i_c, g, row0, i_c, T,
                   _spread(b_A2), H, BT, BT, PAIRS) == 0:
            return
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = _gate_sums(b_g, o_i, BT)
    b_q = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_u = _rows(u, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    p_h = hs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_s[:, None] * D + o_d[None, :]
    b_h = tl.load(p_h, mask=m_s[:, None] & m_d[None, :], other=0.0)  # [BS, BD] H_0
    b_P, _, b_Qt = _pairs(b_q, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT, PAIRS == "product",
                          PRECISION)  # [BT, BT], and Q̃ [BT, BS]
    b_o = _dot(b_Qt, b_h, PRECISION)  # [BT, BD]
    b_o += _dot(b_P, b_u, PRECISION)
    p_o = o + (row0 + o_t[:, None] * H) * D + o_d[None, :]
    tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_t[:, None] & m_d[None, :])


@triton.jit
def _du_local_kernel(b, c, g, A, do, du, marks, T,
                     H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                     BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                     PRECISION: tl.constexpr, PAIRS: tl.constexpr):
    """The part of dU that stays in the chunk, Pᵀ dO [BT, BD]; chunk_states adds the rest.
    PAIRS: as in ``_wy_fwd_kernel``."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BT + o_i
    m_t = o_t < T
    b_A2 = _rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    if PAIRS != "levels":
        if _claims(marks + i_bh * tl.cdiv(T, BT) + i_c, g, row0, i_c, T,
                   _spread(b_A2), H, BT, BT, PAIRS) == 0:
            return
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = _gate_sums(b_g, o_i, BT)
    b_q = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_do = _rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_P, _, _ = _pairs(b_q, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT, PAIRS == "product",
                       PRECISION)  # [BT, BT]
    b_du = _dot(tl.trans(b_P), b_do, PRECISION)  # [BT, BD]
    tl.store(du + (row0 + o_t[:, None] * H) * D + o_d[None, :], b_du,
             mask=m_t[:, None] & m_d[None, :])


@triton.jit
def _chunk_bwd_kernel(v, b, c, g, A, beta, hs, dhs, u, du, do, mk, ti, dv, db, dc, dg, dA,
                      dbeta, T, H: tl.constexpr, S: tl.constexpr, D: tl.constexpr,
                      BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                      LOG2_BT: tl.constexpr, PRECISION: tl.constexpr):
    """Every gradient of one chunk from its start state H_0, the gradient at its end dH_C,
    U, dU, and the forward's Mk and (I + M)⁻¹ (chunk_triton's docstring derives each
    line). Written in the order that keeps the fewest tiles alive: each input is read just
    before its first use and each result stored once it is final."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BT + o_i
    m_t = o_t < T
    o_row = row0 + o_t[:, None] * H  # [BT, 1]
    m_tS, m_tD = m_t[:, None] & m_s[None, :], m_t[:, None] & m_d[None, :]
    o_h = (i_bh.to(tl.int64) * NC + i_c) * S * D + o_s[:, None] * D + o_d[None, :]
    m_h = m_s[:, None] & m_d[None, :]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_beta = tl.load(beta + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = _gate_sums(b_g, o_i, BT)
    b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_G = tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS] Γ: chunk start -> t
    # back through the solve (I + M) U = diag(β) R, R = V - K̃ H_0
    o_tt = (i_bh.to(tl.int64) * NC + i_c) * BT * BT + o_i[:, None] * BT + o_i[None, :]
    b_Ti = tl.load(ti + o_tt)  # [BT, BT] (I + M)⁻¹
    b_du = _rows(du, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_dX = _dot(tl.trans(b_Ti), b_du, PRECISION)  # [BT, BD] (I + M)⁻ᵀ dU
    b_h = tl.load(hs + o_h, mask=m_h, other=0.0)  # [BS, BD] H_0
    b_dKt = -b_beta[:, None] * _dot(b_dX, tl.trans(b_h), PRECISION)
    b_R = _rows(v, row0, o_t, m_t, o_d, m_d, D, H) - _dot(b_k * b_G, b_h,
                                                           PRECISION)
    b_dbeta = tl.sum(b_dX * b_R, axis=1)  # [BT] (the erasures' part below)
    tl.store(dv + o_row * D + o_d[None, :], (b_beta[:, None] * b_dX).to(dv.dtype.element_ty),
             mask=m_tD)
    b_u = _rows(u, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_dM = -_dot(b_dX, tl.trans(b_u), PRECISION)  # [BT, BT]
    b_dM = tl.where(o_i[:, None] > o_i[None, :], b_dM, 0.0)  # pairs s < t
    b_dbeta += tl.sum(b_dM * tl.load(mk + o_tt), axis=1)
    tl.store(dbeta + row0 + o_t * H, b_dbeta.to(dbeta.dtype.element_ty), mask=m_t)
    b_dk = b_G * b_dKt  # [BT, BS]
    b_dlog = tl.cumsum(b_k * b_dk, axis=0, reverse=True)  # [BT, BS]
    # through H_C = Γ_C ⊙ H_0 + K̂ᵀ U
    b_dh = tl.load(dhs + o_h, mask=m_h, other=0.0)  # [BS, BD] dH_C
    b_dlog += (tl.exp(b_lend * b_A) * tl.sum(b_h * b_dh, axis=1))[None, :]
    b_Ge = tl.exp((b_lend - b_l)[:, None] * b_A[None, :])  # [BT, BS] s -> chunk end
    b_dKh = b_Ge * _dot(b_u, tl.trans(b_dh), PRECISION)  # [BT, BS]
    b_dk += b_dKh
    b_y = b_k * b_dKh  # [BT, BS] the writes carried to the chunk end
    b_dlog += tl.cumsum(b_y, axis=0) - b_y  # exclusive prefix sum
    # through O = Q̃ H_0 + P U
    b_do = _rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_q = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_dQt = b_G * _dot(b_do, tl.trans(b_h), PRECISION)  # [BT, BS] Γ ⊙ dQ̃
    b_dlog += tl.cumsum(b_q * b_dQt, axis=0, reverse=True)
    b_dP = _dot(b_do, tl.trans(b_u), PRECISION)  # [BT, BT]
    b_dPd = tl.sum(tl.where(o_i[:, None] == o_i[None, :], b_dP, 0.0), axis=1)  # [BT]
    b_dP = tl.where(o_i[:, None] > o_i[None, :], b_dP, 0.0)  # pairs s < t
    # the pairs s < t of P (c against b) and of Mk (b against b), level by level
    b_dq, b_dkP, b_dlogP = _pair_grads(b_q, b_k, b_dP, b_beta[:, None] * b_dM, b_l, b_A,
                                       o_i, LOG2_BT, PRECISION)
    b_dq += b_dQt + b_dPd[:, None] * b_k  # [BT, BS]
    tl.store(dc + o_row * S + o_s[None, :], b_dq.to(dc.dtype.element_ty), mask=m_tS)
    b_dk += b_dkP + b_dPd[:, None] * b_q
    tl.store(db + o_row * S + o_s[None, :], b_dk.to(db.dtype.element_ty), mask=m_tS)
    # dlog_t: every decay factor that spans step t, each term carrying its own factor
    b_dlog = tl.where(m_t[:, None], b_dlog + b_dlogP, 0.0)
    tl.store(dg + row0 + o_t * H,
             tl.sum(b_dlog * b_A[None, :], axis=1).to(dg.dtype.element_ty), mask=m_t)
    tl.store(dA + (i_bh.to(tl.int64) * NC + i_c) * S + o_s,
             tl.sum(b_dlog * b_g[:, None], axis=0), mask=m_s)
