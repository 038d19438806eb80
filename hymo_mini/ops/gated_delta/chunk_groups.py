"""The chunk-to-chunk passes of the chunked gated delta kernel, split over groups of chunks,
for few long sequences.

The sequential passes of ``chunk_states`` run one program per (batch, head, block of value
columns), each walking every chunk of its sequence in order. With one long sequence that
is few programs (at most 2·H for D = 32), each with a long walk. Both passes are affine in
the state, chunk by chunk:

    forward    H_{k+1} = A_k H_k + K̂_kᵀ Uv_k,                 A_k = diag(Γ_C) - K̂_kᵀ W_k
    backward   dH_k = Ã_k dH_{k+1} + Q̃_kᵀ dO_k - W_kᵀ Pᵀ dO_k,   Ã_k = diag(Γ_C) - W_kᵀ K̂_k

(A_k, Ã_k (S, S); Γ_C scales row n of the state by its decay over the chunk). So a group
of G chunks maps its start state to its end state by one matrix and one offset,

    H_end = M_g H_start + B_g,        M_g = A_{last} ... A_{first},  B_g = the end state from 0,

and the same right to left for the gradients. Three passes replace the one walk:

    1. every group at once (``_group_fwd_kernel`` / ``_group_bwd_kernel``): walk the group
       with the augmented state [M | B], started at [I | 0]. Each column of the state
       evolves on its own, so a program owns a block of [M | B]'s S + D columns (values
       enter B's columns only: Uv = 0 for M's), as wide as CONFIGS["group"]["split"] says;
       the result goes to ``tg`` (B·H, NG, S, S + D).
    2. one short walk over the groups per (b, h, columns) (``_group_scan_*``): each group's
       start state (or end gradient) into ``hg``, H ← M_g H + B_g; the final state (or
       d initial_state) at the end.
    3. every group at once again: ``chunk_states``' walk over the group, from its start
       state, storing what the one walk stored (the chunk-start states and U, or the
       chunk-end gradients and dU).

About three times the arithmetic of the one walk, spread over NG times as many programs.
``chunk_triton`` uses it when a launch would have fewer programs than
``CONFIGS["group"]["below"]``.
"""

from __future__ import annotations

import triton
import triton.language as tl

from hymo_mini.ops.gated_delta.chunk_states import _carry, _chunk_gates
from hymo_mini.ops.gla.chunk_states import _dot, _rows

__all__ = []  # kernels only, launched by hymo_mini.ops.gated_delta.chunk_triton


@triton.jit
def _columns(i_a, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr, BD: tl.constexpr):
    """Block i_a of the augmented state [M | B]'s S + D columns, BD of them: (which are
    columns of M, [BD], their indices within M or within B, their mask, the start block
    [BS, BD]: identity columns for M, zero for B). A block may hold columns of both."""
    o_a = i_a * BD + tl.arange(0, BD)  # [BD] columns of [M | B]
    is_m = o_a < S
    o_c = tl.where(is_m, o_a, o_a - S)
    m_c = o_a < S + D
    o_s = tl.arange(0, BS)
    eye = (o_s[:, None] == o_c[None, :]) & (o_s[:, None] < S) & is_m[None, :]
    return is_m, o_c, m_c, tl.where(eye, 1.0, 0.0)


@triton.jit
def _group_program(T, NG, GROUP, H: tl.constexpr, S: tl.constexpr, D: tl.constexpr,
                   BS: tl.constexpr, BD: tl.constexpr, NA: tl.constexpr, BT: tl.constexpr):
    """This program's (b·H + h)·NG + group, b, h, chunk range [c0, c1) and column block
    (``_columns``; NA blocks cover [M | B])."""
    i_bg, i_a = tl.program_id(0) // NA, tl.program_id(0) % NA
    i_bh, i_grp = i_bg // NG, i_bg % NG
    c0 = i_grp * GROUP
    c1 = tl.minimum(c0 + GROUP, tl.cdiv(T, BT))
    is_m, o_c, m_c, b_x = _columns(i_a, S, D, BS, BD)  # b_x [BS, BD]
    return i_bg, i_bh // H, i_bh % H, c0, c1, is_m, o_c, m_c, b_x


@triton.jit
def _store_summary(tg, i_bg, b_x, is_m, o_c, m_c, S: tl.constexpr, D: tl.constexpr,
                   BS: tl.constexpr):
    o_s = tl.arange(0, BS)
    col = tl.where(is_m, 0, S) + o_c
    p = tg + i_bg.to(tl.int64) * S * (S + D) + o_s[:, None] * (S + D) + col[None, :]
    tl.store(p, b_x, mask=(o_s[:, None] < S) & m_c[None, :])


@triton.jit
def _group_fwd_kernel(b, g, A, w, uv, tg, T, NG, GROUP,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                      BD: tl.constexpr, NA: tl.constexpr, BT: tl.constexpr,
                      PRECISION: tl.constexpr):
    """One (b, h, group, block of [M | B]'s columns): the group's transition M_g and
    offset B_g, walked from [I | 0] over its chunks."""
    i_bg, i_b, i_h, c0, c1, is_m, o_c, m_c, b_x = _group_program(T, NG, GROUP, H, S, D, BS,
                                                                  BD, NA, BT)
    m_v = m_c & (is_m == 0)  # values enter B's columns only
    o_i, o_s = tl.arange(0, BT), tl.arange(0, BS)
    m_s = o_s < S
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    row0 = i_b.to(tl.int64) * T * H + i_h
    for i_c in range(c0, c1):
        o_t = i_c * BT + o_i
        m_t = o_t < T
        b_w = _rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_u = _rows(uv, row0, o_t, m_t, o_c, m_v, D, H)  # [BT, BD] Uv, or 0 for M
        b_u -= _dot(b_w, b_x, PRECISION)
        b_x = _carry(b, g, b_A, b_x, b_u, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT, PRECISION)
    _store_summary(tg, i_bg, b_x, is_m, o_c, m_c, S, D, BS)


@triton.jit
def _group_bwd_kernel(b, c, g, A, w, do, du, tg, T, NG, GROUP,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                      BD: tl.constexpr, NA: tl.constexpr, BT: tl.constexpr,
                      PRECISION: tl.constexpr):
    """The same for the gradients, right to left over the group: N_g and E_g with
    dH_start = N_g dH_end + E_g (dO and Pᵀ dO enter E's columns only)."""
    i_bg, i_b, i_h, c0, c1, is_m, o_c, m_c, b_x = _group_program(T, NG, GROUP, H, S, D, BS,
                                                                  BD, NA, BT)
    m_v = m_c & (is_m == 0)
    o_i, o_s = tl.arange(0, BT), tl.arange(0, BS)
    m_s = o_s < S
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    row0 = i_b.to(tl.int64) * T * H + i_h
    for k in range(0, c1 - c0):
        i_c = c1 - 1 - k
        o_t = i_c * BT + o_i
        m_t = o_t < T
        b_l, b_lend, b_kh = _chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT)
        b_du = _rows(du, row0, o_t, m_t, o_c, m_v, D, H)  # [BT, BD] Pᵀ dO, or 0 for N
        b_du += _dot(b_kh, b_x, PRECISION)
        b_q = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_qt = b_q * tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS] Q̃
        b_do = _rows(do, row0, o_t, m_t, o_c, m_v, D, H)  # [BT, BD], or 0 for N
        b_w = _rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_x = b_x * tl.exp(b_lend * b_A)[:, None]
        b_x += _dot(tl.trans(b_qt), b_do, PRECISION)  # [BS, BD]
        b_x -= _dot(tl.trans(b_w), b_du, PRECISION)
    _store_summary(tg, i_bg, b_x, is_m, o_c, m_c, S, D, BS)


@triton.jit
def _summary(tg, i_bh, i_grp, NG, o_d, m_d, S: tl.constexpr, D: tl.constexpr,
             BS: tl.constexpr):
    """Group i_grp's (M [BS, BS], offset's columns o_d [BS, BD]) from tg."""
    o_s = tl.arange(0, BS)
    m_s = o_s < S
    p = tg + (i_bh.to(tl.int64) * NG + i_grp) * S * (S + D) + o_s[:, None] * (S + D)
    b_m = tl.load(p + o_s[None, :], mask=m_s[:, None] & m_s[None, :], other=0.0)
    b_b = tl.load(p + S + o_d[None, :], mask=m_s[:, None] & m_d[None, :], other=0.0)
    return b_m, b_b


@triton.jit
def _slice(p, i_bh, i_d, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
           BD: tl.constexpr, LOAD: tl.constexpr):
    """Column block i_d of (b, h)'s (S, D) state: its columns and their mask, the offsets
    and mask of the [BS, BD] slice, and its start value, p's slice (LOAD) or zero."""
    o_s, o_d = tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_d = o_d < D
    m_h = (o_s < S)[:, None] & m_d[None, :]
    o_h = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if LOAD:
        b_h += tl.load(p + i_bh.to(tl.int64) * S * D + o_h, mask=m_h, other=0.0)
    return o_d, m_d, o_h, m_h, b_h


@triton.jit
def _group_scan_fwd_kernel(tg, h0, hg, ht, NG,
                           S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                           BD: tl.constexpr, ND: tl.constexpr, USE_H0: tl.constexpr,
                           STORE_HT: tl.constexpr, PRECISION: tl.constexpr):
    """Columns [i_d·BD, (i_d+1)·BD) of one (b, h): each group's start state (hg), group by
    group, and the final state (ht)."""
    i_bh, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    o_d, m_d, o_h, m_h, b_h = _slice(h0, i_bh, i_d, S, D, BS, BD, USE_H0)
    for i_grp in range(0, NG):
        tl.store(hg + (i_bh.to(tl.int64) * NG + i_grp) * S * D + o_h, b_h, mask=m_h)
        b_m, b_b = _summary(tg, i_bh, i_grp, NG, o_d, m_d, S, D, BS)
        b_h = _dot(b_m, b_h, PRECISION) + b_b
    if STORE_HT:
        tl.store(ht + i_bh.to(tl.int64) * S * D + o_h, b_h, mask=m_h)


@triton.jit
def _group_scan_bwd_kernel(tg, dht, dhg, dh0, NG,
                           S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                           BD: tl.constexpr, ND: tl.constexpr, USE_DHT: tl.constexpr,
                           STORE_DH0: tl.constexpr, PRECISION: tl.constexpr):
    """The same right to left: the gradient at each group's end (dhg), and d initial_state."""
    i_bh, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    o_d, m_d, o_h, m_h, b_dh = _slice(dht, i_bh, i_d, S, D, BS, BD, USE_DHT)
    for k in range(0, NG):
        i_grp = NG - 1 - k
        tl.store(dhg + (i_bh.to(tl.int64) * NG + i_grp) * S * D + o_h, b_dh, mask=m_h)
        b_m, b_b = _summary(tg, i_bh, i_grp, NG, o_d, m_d, S, D, BS)
        b_dh = _dot(b_m, b_dh, PRECISION) + b_b
    if STORE_DH0:
        tl.store(dh0 + i_bh.to(tl.int64) * S * D + o_h, b_dh, mask=m_h)
