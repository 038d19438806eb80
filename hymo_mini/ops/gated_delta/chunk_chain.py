"""The delta rule's forward in one launch, for 16-bit inputs: stretches of chunks hand the
state on to each other, while their WY solves and outputs run in parallel.

The state after a stretch of chunks is an affine map of the state before it, H ↦ Φ H + Ψ
(Φ (S, S), Ψ (S, D); through one chunk Φ = diag(Γ_C) - K̂ᵀ W and Ψ = K̂ᵀ Uv). A program per
(stretch, batch, head) 1. solves its chunks' WY forms and composes the stretch's (Φ, Ψ)
without the state; 2. waits for the state its stretch starts with, handed on by the program
before it, and hands on Φ H + Ψ, the one product on the chain; 3. walks its chunks from that
state for U, O and each chunk's start state.

Waiting is safe only for a program that is running or done, and the GPU starts programs in
an order it does not promise: so a program takes its stretch from a ticket (an atomic counter,
stretch-major), and waits only for earlier tickets. A flag is raised with release semantics
once the state it announces is stored, read with acquire semantics, and the state read past
the SM's cache (``.cg``). The pairs take two launches: the first takes a stretch by one product
only if all its chunks fit and every stretch before it was taken (else it raises the flag to
2); the second takes the rest by the levels.
"""

import triton
import triton.language as tl

from hymo_mini.ops.gated_delta.wy import wy_form
from hymo_mini.ops.utils.pairs import chunk_fits, pairs
from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import gate_sums, load_rows, rates

__all__ = ["chain_fwd_kernel"]


@triton.jit
def wait_for_flag(p_flag, ANY: tl.constexpr):
    """Spin until the int32 flag at p_flag is raised, to any value if ANY, else to 1
    (acquire: what was stored before it was raised is visible after it); its value."""
    ready = tl.atomic_add(p_flag, 0, sem="acquire")
    if ANY:
        while ready == 0:
            ready = tl.atomic_add(p_flag, 0, sem="acquire")
    else:
        while ready != 1:
            ready = tl.atomic_add(p_flag, 0, sem="acquire")
    return ready


@triton.jit
def chain_fwd_kernel(v, b, c, g, A, beta, h0, hs, ht, u, w, mk, ti, o, flags, T, BH, T0,
                     H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                     BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                     NB: tl.constexpr, USE_H0: tl.constexpr, STORE_HT: tl.constexpr,
                     KEEP: tl.constexpr, PRODUCT: tl.constexpr, PRECISION: tl.constexpr):
    """One stretch of NB chunks of one (b, h), by ticket (flags[0] counts them; T0: those the
    first launch took). flags[1 + k·BH + bh] goes to 1 once stretch k has handed its end
    state on (to hs), or to 2 where the PRODUCT launch left it. Stores what the three steps
    store: hs, u (Uv, then U), w, and with KEEP mk and ti."""
    ticket = tl.atomic_add(flags, 1) - T0
    i_c, i_bh = ticket // BH, ticket % BH
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, NB * BT)  # stretches
    NK = tl.cdiv(T, BT)  # chunks
    k0 = i_c * NB  # the stretch's first chunk
    NJ = tl.minimum(NB, NK - k0)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A2 = rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    row0 = i_b.to(tl.int64) * T * H + i_h
    p_tt = (i_bh.to(tl.int64) * NK + k0) * BT * BT + o_i[:, None] * BT + o_i[None, :]
    p_flag = flags + 1 + i_c * BH + i_bh  # this stretch's flag
    if PRODUCT:  # every chunk of the stretch must fit the one product
        if chunk_fits(g, row0, i_c, T, b_A2, H, NB * BT, BT) == 0:
            tl.atomic_xchg(p_flag, 2, sem="release")  # the second launch takes it
            return
    else:
        if tl.load(p_flag) == 1:  # taken by the first launch
            return
    # 1. every chunk's WY form, and the stretch's map H -> Φ H + Ψ (b_M, b_B), chunk by chunk
    b_M = tl.where(o_s[:, None] == o_s[None, :], 1.0, 0.0)  # [BS, BS]
    b_B = tl.zeros([BS, BD], dtype=tl.float32)
    for j in range(0, NJ):
        o_t = (k0 + j) * BT + o_i
        m_t = o_t < T  # padding steps: g = 0, β = 0, b = 0 (no decay, no write)
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_beta = tl.load(beta + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = gate_sums(b_g, o_i, BT)
        b_k = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_v = load_rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_Mk, b_Ti, b_w, b_uv, b_kh = wy_form(b_k, b_v, b_beta, b_l, b_lend, b_A2, o_i,
                                              LOG2_BT, PRODUCT, PRECISION)
        if KEEP:
            tl.store(mk + p_tt + j * BT * BT, b_Mk)
            tl.store(ti + p_tt + j * BT * BT, b_Ti)
        o_row = row0 + o_t[:, None] * H  # [BT, 1]
        tl.store(w + o_row * S + o_s[None, :], b_w, mask=m_t[:, None] & m_s[None, :])
        tl.store(u + o_row * D + o_d[None, :], b_uv, mask=m_t[:, None] & m_d[None, :])
        b_G = tl.exp2(b_lend * b_A2)[:, None]  # [BS, 1] Γ_C
        b_M = b_M * b_G - dot(tl.trans(b_kh), dot(b_w, b_M, PRECISION), PRECISION)
        b_B = b_B * b_G + dot(tl.trans(b_kh), b_uv - dot(b_w, b_B, PRECISION), PRECISION)
    # 2. the state the stretch starts with, and the one it hands on
    p_hs = hs + (i_bh.to(tl.int64) * NK + k0) * S * D + o_sd  # [BS, BD] its first chunk's
    if i_c == 0:
        b_h = tl.zeros([BS, BD], dtype=tl.float32)
        if USE_H0:
            b_h += tl.load(h0 + i_bh.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
        tl.store(p_hs, b_h, mask=m_h)
    else:
        if wait_for_flag(p_flag - BH, PRODUCT) != 1:  # an earlier stretch was left: so is this
            tl.atomic_xchg(p_flag, 2, sem="release")
            return
        b_h = tl.load(p_hs, mask=m_h, other=0.0, cache_modifier=".cg")
    b_next = dot(b_M, b_h, PRECISION) + b_B  # [BS, BD]
    if i_c + 1 < NC:
        tl.store(p_hs + NB * S * D, b_next, mask=m_h)
        tl.debug_barrier()  # every lane's part of the state is stored before the flag
        tl.atomic_xchg(p_flag, 1, sem="release")
    else:
        if STORE_HT:
            tl.store(ht + i_bh.to(tl.int64) * S * D + o_sd, b_next, mask=m_h)
        tl.atomic_xchg(p_flag, 1)  # the last stretch: taken (a second launch skips it)
    tl.debug_barrier()  # step 1's W and Uv, stored by any lane, are read below by any
    # 3. the walk through the stretch from H: U, the outputs and the chunk-start states
    for j in range(0, NJ):
        o_t = (k0 + j) * BT + o_i
        m_t = o_t < T
        o_row = row0 + o_t[:, None] * H  # [BT, 1]
        m_tD = m_t[:, None] & m_d[None, :]
        tl.store(p_hs + j * S * D, b_h, mask=m_h & (j > 0))  # the first is stored above
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = gate_sums(b_g, o_i, BT)
        b_k = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_w = load_rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_u = load_rows(u, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD] Uv
        b_u -= dot(b_w, b_h, PRECISION)  # [BT, BD] U
        tl.store(u + o_row * D + o_d[None, :], b_u, mask=m_tD)
        b_q = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_P, b_kh, b_Qt = pairs(b_q, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT, PRODUCT,
                                PRECISION)  # the pairs P, K̂, Q̃
        b_o = dot(b_Qt, b_h, PRECISION) + dot(b_P, b_u, PRECISION)  # [BT, BD]
        tl.store(o + o_row * D + o_d[None, :], b_o.to(o.dtype.element_ty), mask=m_tD)
        b_h = b_h * tl.exp2(b_lend * b_A2)[:, None] + dot(tl.trans(b_kh), b_u, PRECISION)
