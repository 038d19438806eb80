"""The delta rule's state pass, chunk to chunk: one sequential program per (batch, head, block
of value columns), with H_k the state chunk k starts with and dH_{k+1} the gradient at its end:

    forward    U_k = Uv_k - W_k H_k,            H_{k+1} = Γ_C ⊙ H_k + K̂_kᵀ U_k
    backward   dU_k = Pᵀ dO_k + K̂_k dH_{k+1},   dH_k = Q̃_kᵀ dO_k + Γ_C ⊙ dH_{k+1} - W_kᵀ dU_k

(K̂ = b ⊙ exp((L_C - L) A), the keys decayed to the chunk's end). Every operation acts on the
state from the key side, so its D columns evolve independently: a program may own a slice.

**Groups of chunks, for few long sequences** (few programs, each with a long walk): both
passes are affine in the state, so a group of chunks maps its start state to its end state
by one matrix and one offset, H_end = Φ_g H_start + Ψ_g. Three launches replace the walk:
every group's [Φ_g | Ψ_g] at once (``group_fwd_kernel`` / ``group_bwd_kernel``: the walk of
[Φ | Ψ] from [I | 0]), each group's start state in turn (``group_scan_kernel``), then every
group's own walk at once, from there.
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import gate_sums, load_rows

__all__ = ["state_fwd_kernel", "state_bwd_kernel", "group_fwd_kernel", "group_bwd_kernel",
           "group_scan_kernel"]


@triton.jit
def chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S: tl.constexpr, H: tl.constexpr,
                BT: tl.constexpr):
    """A chunk's gate sums from its start, l [BT], and over it, l_C (b_lend), and its keys decayed
    to its end, K̂ [BT, BS]."""
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = gate_sums(b_g, o_i, BT)
    b_k = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    return b_l, b_lend, b_k * tl.exp((b_lend - b_l)[:, None] * b_A[None, :])


@triton.jit
def state_fwd_kernel(b, g, A, w, uv, h0, hs, u, ht, T, NG, GROUP,
                     H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                     BD: tl.constexpr, ND: tl.constexpr, BT: tl.constexpr,
                     USE_H0: tl.constexpr, STORE_HT: tl.constexpr, PRECISION: tl.constexpr):
    """Columns [i_d·BD, (i_d+1)·BD) of one (b, h), over its chunks in order: each chunk's
    start state into hs, U into u (Uv read from uv), the final state into ht. With NG groups
    of GROUP chunks, a program walks one group from h0[(b·H + h)·NG + group]."""
    i_bg, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    i_bh, i_grp = i_bg // NG, i_bg % NG
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + i_bg.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
    row0 = i_b.to(tl.int64) * T * H + i_h
    for i_c in range(i_grp * GROUP, tl.minimum(i_grp * GROUP + GROUP, NC)):
        o_t = i_c * BT + o_i
        m_t = o_t < T
        tl.store(hs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_sd, b_h, mask=m_h)
        b_w = load_rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_u = load_rows(uv, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD] Uv
        b_u -= dot(b_w, b_h, PRECISION)  # [BT, BD] U
        tl.store(u + (row0 + o_t[:, None] * H) * D + o_d[None, :], b_u,
                 mask=m_t[:, None] & m_d[None, :])
        _, b_lend, b_kh = chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT)
        b_h = b_h * tl.exp(b_lend * b_A)[:, None] + dot(tl.trans(b_kh), b_u, PRECISION)
    if STORE_HT:
        tl.store(ht + i_bh.to(tl.int64) * S * D + o_sd, b_h, mask=m_h)


@triton.jit
def state_bwd_kernel(b, c, g, A, w, do, du, dht, dhs, dh0, T, NG, GROUP,
                     H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                     BD: tl.constexpr, ND: tl.constexpr, BT: tl.constexpr,
                     USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr, PRECISION: tl.constexpr):
    """Columns [i_d·BD, (i_d+1)·BD) of one (b, h), right to left: the gradient at each chunk's
    end into dhs, dU in place of its in-chunk part Pᵀ dO in du, d initial_state into dh0.
    With NG groups, a program walks one group from dht[(b·H + h)·NG + group]."""
    i_bg, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    i_bh, i_grp = i_bg // NG, i_bg % NG
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    c0 = i_grp * GROUP
    c1 = tl.minimum(c0 + GROUP, NC)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_dh = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_DHT:
        b_dh += tl.load(dht + i_bg.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
    row0 = i_b.to(tl.int64) * T * H + i_h
    for k in range(0, c1 - c0):
        i_c = c1 - 1 - k
        o_t = i_c * BT + o_i
        m_t = o_t < T
        tl.store(dhs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_sd, b_dh, mask=m_h)
        b_l, b_lend, b_kh = chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT)
        p_du = du + (row0 + o_t[:, None] * H) * D + o_d[None, :]  # [BT, BD]
        m_tD = m_t[:, None] & m_d[None, :]
        b_du = tl.load(p_du, mask=m_tD, other=0.0) + dot(b_kh, b_dh, PRECISION)  # dU
        tl.store(p_du, b_du, mask=m_tD)
        b_qt = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H) * tl.exp(b_l[:, None] * b_A[None, :])
        b_do = load_rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_w = load_rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_dh = b_dh * tl.exp(b_lend * b_A)[:, None]
        b_dh += dot(tl.trans(b_qt), b_do, PRECISION)  # [BS, BD]
        b_dh -= dot(tl.trans(b_w), b_du, PRECISION)
    if STORE_DH0:
        tl.store(dh0 + i_bh.to(tl.int64) * S * D + o_sd, b_dh, mask=m_h)


@triton.jit
def augmented_columns(i_a, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                      BD: tl.constexpr):
    """Block i_a of BD columns of the augmented state [Φ | Ψ] (S + D columns; a block may
    hold both): which are Φ's [BD] (is_m), their indices within Φ or within Ψ, their mask, and
    the block's start [BS, BD], identity columns for Φ and zero for Ψ."""
    o_a = i_a * BD + tl.arange(0, BD)  # [BD] columns of [Φ | Ψ]
    is_m = o_a < S
    o_c = tl.where(is_m, o_a, o_a - S)
    o_s = tl.arange(0, BS)
    eye = (o_s[:, None] == o_c[None, :]) & (o_s[:, None] < S) & is_m[None, :]
    return is_m, o_c, o_a < S + D, tl.where(eye, 1.0, 0.0)


@triton.jit
def group_fwd_kernel(b, g, A, w, uv, tg, T, NG, GROUP,
                     H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                     BD: tl.constexpr, NA: tl.constexpr, BT: tl.constexpr,
                     PRECISION: tl.constexpr):
    """One (b, h, group, block of [Φ | Ψ]'s columns): the group's map of the state,
    H_end = Φ_g H_start + Ψ_g, walked from [I | 0] over its chunks, into tg."""
    i_bg, i_a = tl.program_id(0) // NA, tl.program_id(0) % NA
    i_bh, i_grp = i_bg // NG, i_bg % NG
    i_b, i_h = i_bh // H, i_bh % H
    is_m, o_c, m_c, b_x = augmented_columns(i_a, S, D, BS, BD)  # b_x [BS, BD]
    o_i, o_s = tl.arange(0, BT), tl.arange(0, BS)
    m_s = o_s < S
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    row0 = i_b.to(tl.int64) * T * H + i_h
    for i_c in range(i_grp * GROUP, tl.minimum(i_grp * GROUP + GROUP, tl.cdiv(T, BT))):
        o_t = i_c * BT + o_i
        m_t = o_t < T
        b_w = load_rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_u = load_rows(uv, row0, o_t, m_t, o_c, m_c & (is_m == 0), D, H)  # [BT, BD] Uv; 0 for Φ
        b_u -= dot(b_w, b_x, PRECISION)
        _, b_lend, b_kh = chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT)
        b_x = b_x * tl.exp(b_lend * b_A)[:, None] + dot(tl.trans(b_kh), b_u, PRECISION)
    col = tl.where(is_m, 0, S) + o_c
    p = tg + i_bg.to(tl.int64) * S * (S + D) + o_s[:, None] * (S + D) + col[None, :]
    tl.store(p, b_x, mask=m_s[:, None] & m_c[None, :])


@triton.jit
def group_bwd_kernel(b, c, g, A, w, do, du, tg, T, NG, GROUP,
                     H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                     BD: tl.constexpr, NA: tl.constexpr, BT: tl.constexpr,
                     PRECISION: tl.constexpr):
    """The same for the gradients, right to left over the group: dH_start = N_g dH_end + E_g
    (dO and Pᵀ dO enter E's columns only)."""
    i_bg, i_a = tl.program_id(0) // NA, tl.program_id(0) % NA
    i_bh, i_grp = i_bg // NG, i_bg % NG
    i_b, i_h = i_bh // H, i_bh % H
    is_m, o_c, m_c, b_x = augmented_columns(i_a, S, D, BS, BD)  # b_x [BS, BD]
    m_v = m_c & (is_m == 0)
    o_i, o_s = tl.arange(0, BT), tl.arange(0, BS)
    m_s = o_s < S
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    row0 = i_b.to(tl.int64) * T * H + i_h
    c0 = i_grp * GROUP
    c1 = tl.minimum(c0 + GROUP, tl.cdiv(T, BT))
    for k in range(0, c1 - c0):
        o_t = (c1 - 1 - k) * BT + o_i
        m_t = o_t < T
        b_l, b_lend, b_kh = chunk_gates(b, g, b_A, row0, o_t, m_t, o_i, o_s, m_s, S, H, BT)
        b_du = load_rows(du, row0, o_t, m_t, o_c, m_v, D, H) + dot(b_kh, b_x, PRECISION)
        b_qt = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H) * tl.exp(b_l[:, None] * b_A[None, :])
        b_do = load_rows(do, row0, o_t, m_t, o_c, m_v, D, H)  # [BT, BD], or 0 for N
        b_w = load_rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_x = b_x * tl.exp(b_lend * b_A)[:, None]
        b_x += dot(tl.trans(b_qt), b_do, PRECISION)  # [BS, BD]
        b_x -= dot(tl.trans(b_w), b_du, PRECISION)
    col = tl.where(is_m, 0, S) + o_c
    p = tg + i_bg.to(tl.int64) * S * (S + D) + o_s[:, None] * (S + D) + col[None, :]
    tl.store(p, b_x, mask=m_s[:, None] & m_c[None, :])


@triton.jit
def group_scan_kernel(tg, first, hg, last, NG,
                      S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr, BD: tl.constexpr,
                      ND: tl.constexpr, REVERSE: tl.constexpr, USE_FIRST: tl.constexpr,
                      STORE_LAST: tl.constexpr, PRECISION: tl.constexpr):
    """Columns [i_d·BD, (i_d+1)·BD) of one (b, h), group by group (right to left if REVERSE,
    for the gradients): the state each group starts from into hg, X ← Φ_g X + Ψ_g, from
    ``first`` (the initial state, or the final state's gradient) to ``last``."""
    i_bh, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    o_s, o_d = tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_FIRST:
        b_h += tl.load(first + i_bh.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
    for k in range(0, NG):
        i_grp = NG - 1 - k if REVERSE else k
        tl.store(hg + (i_bh.to(tl.int64) * NG + i_grp) * S * D + o_sd, b_h, mask=m_h)
        p = tg + (i_bh.to(tl.int64) * NG + i_grp) * S * (S + D) + o_s[:, None] * (S + D)
        b_m = tl.load(p + o_s[None, :], mask=m_s[:, None] & m_s[None, :], other=0.0)
        b_b = tl.load(p + S + o_d[None, :], mask=m_h, other=0.0)
        b_h = dot(b_m, b_h, PRECISION) + b_b
    if STORE_LAST:
        tl.store(last + i_bh.to(tl.int64) * S * D + o_sd, b_h, mask=m_h)
