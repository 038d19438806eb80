"""The delta rule's in-chunk gradients. Before the state pass runs right to left, every chunk's
own part of dU, Pᵀ dO (``du_local_kernel``); after it, every gradient of one chunk from the
state it starts with, the gradient at its end, U, dU and the forward's Mk and (I + M)⁻¹
(``chunk_grad_kernel``; ``chunk_triton`` derives each line).
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.pairs import level, pairs, takes_chunk
from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import gate_sums, load_rows, rates

__all__ = ["pair_grads", "du_local_kernel", "chunk_grad_kernel"]


@triton.jit
def pair_grads(b_q, b_k, b_dP, b_dMk, b_l, b_A, o_i, LOG2_BT: tl.constexpr,
                PRECISION: tl.constexpr):
    """Gradients of the pairs s < t of P_ts = Σ_n c_tn b_sn E_tsn and Mk_ts = Σ_n b_tn b_sn
    E_tsn, given dP and dMk [BT, BT]: dc, db and their part of dlog [BT, BS]. Level by level
    (``utils.pairs.level``), E_ts = X_t X_s with X_t spanning steps (r, t] and X_s steps
    (s, r]: each row's sum (x_t ⊙ dx_t, y_s ⊙ dy_s) goes to the steps its own factor spans,
    one 0/1 matrix product a level, and no term is subtracted."""
    b_dq = tl.zeros_like(b_q)
    b_dk = tl.zeros_like(b_k)
    b_dlog = tl.zeros_like(b_q)
    i, j = o_i[:, None], o_i[None, :]
    for k in tl.static_range(LOG2_BT):
        b_gap, m_k = level(b_l, o_i, k)
        hi = o_i >> k  # [BT]
        is_t = (hi & 1) == 1  # [BT]
        o_r = tl.where(is_t, hi, hi + 1) << k  # [BT] each row's split point r
        b_X = tl.exp(b_gap[:, None] * b_A[None, :])  # [BT, BS] in [0, 1]
        b_qX, b_kX = b_q * b_X, b_k * b_X
        b_dPk = tl.where(m_k, b_dP, 0.0)  # [BT, BT]
        b_dMkk = tl.where(m_k, b_dMk, 0.0)  # [BT, BT]
        b_dqk = b_X * dot(b_dPk, b_kX, PRECISION)  # [BT, BS] P, t side
        b_dkk = b_X * (dot(tl.trans(b_dPk), b_qX, PRECISION)  # P, s side
                       + dot(b_dMkk, b_kX, PRECISION)  # Mk, t side
                       + dot(tl.trans(b_dMkk), b_kX, PRECISION))  # s side
        b_dq += b_dqk
        b_dk += b_dkk
        # step i gets row j's sum where j's factor spans i: (r_j, j] or (j, r_j]
        m_span = ((is_t[None, :] & (o_r[None, :] < i) & (i <= j))
                  | ((~is_t[None, :]) & (j < i) & (i <= o_r[None, :])))  # [BT, BT]
        b_z = b_q * b_dqk + b_k * b_dkk  # [BT, BS] ρ on t rows, κ on s rows
        b_dlog += dot(tl.where(m_span, 1.0, 0.0), b_z, PRECISION)
    return b_dq, b_dk, b_dlog


@triton.jit
def du_local_kernel(b, c, g, A, do, du, left, T,
                    H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                    BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                    PRODUCT: tl.constexpr, PRECISION: tl.constexpr):
    """The part of chunk i_c's dU that stays in the chunk, Pᵀ dO [BT, BD], into du (the state
    pass adds the rest). PRODUCT: the launch that forms P by one product
    (``utils.pairs.takes_chunk``)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BT + o_i
    m_t = o_t < T
    b_A2 = rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    p_left = left + i_bh * tl.cdiv(T, BT) + i_c
    if takes_chunk(p_left, g, row0, i_c, T, b_A2, H, BT, BT, PRODUCT) == 0:
        return
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = gate_sums(b_g, o_i, BT)
    b_q = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_k = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_do = load_rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_P, _, _ = pairs(b_q, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT, PRODUCT, PRECISION)
    tl.store(du + (row0 + o_t[:, None] * H) * D + o_d[None, :],
             dot(tl.trans(b_P), b_do, PRECISION), mask=m_t[:, None] & m_d[None, :])


@triton.jit
def chunk_grad_kernel(v, b, c, g, A, beta, hs, dhs, u, du, do, mk, ti, dv, db, dc, dg, dA,
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
    b_l, b_lend = gate_sums(b_g, o_i, BT)
    b_k = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_G = tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS] Γ: chunk start -> t
    # back through the solve (I + M) U = diag(β) R, R = V - K̃ H_0
    o_tt = (i_bh.to(tl.int64) * NC + i_c) * BT * BT + o_i[:, None] * BT + o_i[None, :]
    b_Ti = tl.load(ti + o_tt)  # [BT, BT] (I + M)⁻¹
    b_du = load_rows(du, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_dX = dot(tl.trans(b_Ti), b_du, PRECISION)  # [BT, BD] (I + M)⁻ᵀ dU
    b_h = tl.load(hs + o_h, mask=m_h, other=0.0)  # [BS, BD] H_0
    b_dKt = -b_beta[:, None] * dot(b_dX, tl.trans(b_h), PRECISION)
    b_R = load_rows(v, row0, o_t, m_t, o_d, m_d, D, H) - dot(b_k * b_G, b_h,
                                                           PRECISION)
    b_dbeta = tl.sum(b_dX * b_R, axis=1)  # [BT] (the erasures' part below)
    tl.store(dv + o_row * D + o_d[None, :], (b_beta[:, None] * b_dX).to(dv.dtype.element_ty),
             mask=m_tD)
    b_u = load_rows(u, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_dM = -dot(b_dX, tl.trans(b_u), PRECISION)  # [BT, BT]
    b_dM = tl.where(o_i[:, None] > o_i[None, :], b_dM, 0.0)  # pairs s < t
    b_dbeta += tl.sum(b_dM * tl.load(mk + o_tt), axis=1)
    tl.store(dbeta + row0 + o_t * H, b_dbeta.to(dbeta.dtype.element_ty), mask=m_t)
    b_dk = b_G * b_dKt  # [BT, BS]
    b_dlog = tl.cumsum(b_k * b_dk, axis=0, reverse=True)  # [BT, BS]
    # through H_C = Γ_C ⊙ H_0 + K̂ᵀ U
    b_dh = tl.load(dhs + o_h, mask=m_h, other=0.0)  # [BS, BD] dH_C
    b_dlog += (tl.exp(b_lend * b_A) * tl.sum(b_h * b_dh, axis=1))[None, :]
    b_Ge = tl.exp((b_lend - b_l)[:, None] * b_A[None, :])  # [BT, BS] s -> chunk end
    b_dKh = b_Ge * dot(b_u, tl.trans(b_dh), PRECISION)  # [BT, BS]
    b_dk += b_dKh
    b_y = b_k * b_dKh  # [BT, BS] the writes carried to the chunk end
    b_dlog += tl.cumsum(b_y, axis=0) - b_y  # exclusive prefix sum
    # through O = Q̃ H_0 + P U
    b_do = load_rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_q = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_dQt = b_G * dot(b_do, tl.trans(b_h), PRECISION)  # [BT, BS] Γ ⊙ dQ̃
    b_dlog += tl.cumsum(b_q * b_dQt, axis=0, reverse=True)
    b_dP = dot(b_do, tl.trans(b_u), PRECISION)  # [BT, BT]
    b_dPd = tl.sum(tl.where(o_i[:, None] == o_i[None, :], b_dP, 0.0), axis=1)  # [BT]
    b_dP = tl.where(o_i[:, None] > o_i[None, :], b_dP, 0.0)  # pairs s < t
    # the pairs s < t of P (c against b) and of Mk (b against b), level by level
    b_dq, b_dkP, b_dlogP = pair_grads(b_q, b_k, b_dP, b_beta[:, None] * b_dM, b_l, b_A,
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
