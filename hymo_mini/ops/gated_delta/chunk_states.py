"""The chunk-to-chunk passes of the chunked Triton gated delta rule, one sequential program
per (batch, head, block of value columns):

    forward    U_k = Uv_k - W_k H_k,               H_{k+1} = Γ_C ⊙ H_k + K̂_kᵀ U_k
    backward   dU_k = Pᵀ dO_k + K̂_k dH_{k+1},      dH_k = Q̃_kᵀ dO_k + Γ_C ⊙ dH_{k+1} - W_kᵀ dU_k

(H_k the state chunk k starts with, dH_{k+1} the gradient at its end). Every operation
acts on the state from the key side, so its D columns evolve independently and a program
may own a (S, BD) slice. ``hymo_mini.ops.gated_delta.chunk_triton`` launches these and
derives them; the in-chunk kernels are in ``chunk_kernels``.
"""

from __future__ import annotations

import triton
import triton.language as tl

from hymo_mini.ops.gla.chunk_blocks import _gate_sums, _pairs, _rates
from hymo_mini.ops.gla.chunk_states import _dot, _rows

__all__ = []  # kernels only, launched by hymo_mini.ops.gated_delta.chunk_triton (_carry and
#              _chunk_gates are shared with chunk_groups)


@triton.jit
def _chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S: tl.constexpr, H: tl.constexpr,
                 BT: tl.constexpr):
    """A chunk's gate sums from its start, l [BT], and over it, l_end, and its K̂ [BT, BS]."""
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = _gate_sums(b_g, o_i, BT)
    b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    return b_l, b_lend, b_k * tl.exp((b_lend - b_l)[:, None] * b_A[None, :])


@triton.jit
def _carry(b, g, b_A, b_h, b_u, row0, o_t, m_t, o_i, o_s, m_s, S: tl.constexpr,
           H: tl.constexpr, BT: tl.constexpr, PRECISION: tl.constexpr):
    """The state at the chunk's end from the one at its start, b_h [BS, BD], and the
    chunk's U [BT, BD]: Γ_C ⊙ H + K̂ᵀ U."""
    _, b_lend, b_kh = _chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT)
    b_h = b_h * tl.exp(b_lend * b_A)[:, None]
    return b_h + _dot(tl.trans(b_kh), b_u, PRECISION)  # [BS, BD]


@triton.jit
def _state_fwd_kernel(b, g, A, w, uv, h0, hs, u, ht, c, o, marks, T, NG, GROUP,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                      BD: tl.constexpr, ND: tl.constexpr, BT: tl.constexpr,
                      USE_H0: tl.constexpr, STORE_HT: tl.constexpr, PRECISION: tl.constexpr,
                      OUT: tl.constexpr, PAIRS: tl.constexpr, OUT_PRECISION: tl.constexpr,
                      LOG2_BT: tl.constexpr):
    """Columns [i_d·BD, (i_d+1)·BD) of one (b, h): the state each chunk starts with (hs),
    the pseudo-values U (u) and the final state (ht), chunk by chunk. With NG groups of
    GROUP chunks (``chunk_groups``), one program per (b, h, group, columns) walks its group
    from h0[b, h, group], the group's start state.

    With OUT (a forward that keeps nothing for a backward) it stores neither hs nor U but
    forms each chunk's outputs O = Q̃ H_0 + P U itself, as ``_output_kernel`` would from
    them (its products in OUT_PRECISION, the walk's in PRECISION). PAIRS as there, per
    program: "product" walks where every chunk of its range fit the one product (``marks``,
    written by the WY kernel's product launch), "rest" the others by the levels."""
    i_bg, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    i_bh, i_grp = i_bg // NG, i_bg % NG
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    c0 = i_grp * GROUP
    c1 = tl.minimum(c0 + GROUP, NC)
    if OUT and PAIRS != "levels":  # one branch around the whole program, as _claims
        left = 0  # chunks of the range the WY kernel's product launch left to the levels
        for i_c in range(c0, c1):
            left += tl.load(marks + i_bh * NC + i_c)
        if PAIRS == "product":
            if left > 0:
                return
        elif left == 0:
            return
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_h = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + i_bg.to(tl.int64) * S * D + o_h, mask=m_h, other=0.0)
    row0 = i_b.to(tl.int64) * T * H + i_h
    b_A2 = _rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2, for the pairs (OUT)
    for i_c in range(c0, c1):
        o_t = i_c * BT + o_i
        m_t = o_t < T
        m_td = m_t[:, None] & m_d[None, :]  # [BT, BD]
        p_td = (row0 + o_t[:, None] * H) * D + o_d[None, :]  # [BT, BD] rows t, columns d
        b_w = _rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_u = _rows(uv, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD] Uv
        if OUT:  # what _output_kernel forms from hs and U, here from the walk's own
            b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
            b_l, b_lend = _gate_sums(b_g, o_i, BT)
            b_q = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
            b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
            b_P, b_kh, b_Qt = _pairs(b_q, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                     PAIRS == "product", OUT_PRECISION)  # P, K̂, Q̃
            b_o = _dot(b_Qt, b_h, OUT_PRECISION)  # [BT, BD] Q̃ H_0
            b_u -= _dot(b_w, b_h, PRECISION)  # [BT, BD] U
            b_o += _dot(b_P, b_u, OUT_PRECISION)
            tl.store(o + p_td, b_o.to(o.dtype.element_ty), mask=m_td)
            b_h = b_h * tl.exp2(b_lend * b_A2)[:, None]  # Γ_C ⊙ H + K̂ᵀ U
            b_h += _dot(tl.trans(b_kh), b_u, PRECISION)
        else:
            tl.store(hs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_h, b_h, mask=m_h)
            b_u -= _dot(b_w, b_h, PRECISION)  # [BT, BD] U
            tl.store(u + p_td, b_u, mask=m_td)
            b_h = _carry(b, g, b_A, b_h, b_u, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT,
                         PRECISION)
    if STORE_HT:
        tl.store(ht + i_bh.to(tl.int64) * S * D + o_h, b_h, mask=m_h)


@triton.jit
def _state_bwd_kernel(b, c, g, A, w, do, du, dht, dhs, dh0, T, NG, GROUP,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                      BD: tl.constexpr, ND: tl.constexpr, BT: tl.constexpr,
                      USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr,
                      PRECISION: tl.constexpr):
    """Columns [i_d·BD, (i_d+1)·BD) of one (b, h), right to left: the gradient at each
    chunk's end (dhs), dU in place of its in-chunk part Pᵀ dO (du), d initial_state. With
    NG groups, one program per group, from dht[b, h, group], the gradient at its end."""
    i_bg, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    i_bh, i_grp = i_bg // NG, i_bg % NG
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    c0 = i_grp * GROUP
    c1 = tl.minimum(c0 + GROUP, NC)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_h = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_dh = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_DHT:
        b_dh += tl.load(dht + i_bg.to(tl.int64) * S * D + o_h, mask=m_h, other=0.0)
    row0 = i_b.to(tl.int64) * T * H + i_h
    for k in range(0, c1 - c0):
        i_c = c1 - 1 - k
        tl.store(dhs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_h, b_dh, mask=m_h)
        o_t = i_c * BT + o_i
        m_t = o_t < T
        b_l, b_lend, b_kh = _chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT)
        p_du = du + (row0 + o_t[:, None] * H) * D + o_d[None, :]  # [BT, BD]
        m_tD = m_t[:, None] & m_d[None, :]
        b_du = tl.load(p_du, mask=m_tD, other=0.0)  # [BT, BD] Pᵀ dO
        b_du += _dot(b_kh, b_dh, PRECISION)  # [BT, BD] dU
        tl.store(p_du, b_du, mask=m_tD)
        b_q = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_qt = b_q * tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS] Q̃
        b_do = _rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_w = _rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_dh = b_dh * tl.exp(b_lend * b_A)[:, None]
        b_dh += _dot(tl.trans(b_qt), b_do, PRECISION)  # [BS, BD]
        b_dh -= _dot(tl.trans(b_w), b_du, PRECISION)
    if STORE_DH0:
        tl.store(dh0 + i_bh.to(tl.int64) * S * D + o_h, b_dh, mask=m_h)
