"""The chunked gated delta forward in one launch: each program hands the state at its
chunk's end to the program of the next chunk, as the gla forward of
``hymo_mini.ops.gla.chunk_chain`` does, while the chunks' WY solves and outputs run in
parallel.

The forward in passes (``chunk_triton``) solves every 16-step chunk's WY form at once,
then walks the chunks one after another, in a program per (batch, head, value columns),

    U_j = Uv_j - W_j H_j,    H_{j+1} = Γ_j ⊙ H_j + K̂_jᵀ U_j ,

and then forms the outputs at once. The walk is the long part: its steps depend on each
other, so a sequence of T steps is T/16 dependent products. The state after a stretch of
chunks is an affine map of the state before it, H ↦ M H + B with M (S, S) and B (S, D):
through one chunk M = diag(Γ) - K̂ᵀ W and B = K̂ᵀ Uv, and through several the maps
compose. A program per (stretch of NB chunks, batch, head) therefore

1. solves its chunks' WY forms (W, Uv, and Mk, (I + M)⁻¹ kept if a backward follows) and
   composes its stretch's map (M, B) from the identity, without the state;
2. waits for the state its stretch starts with, H, handed on by the program before it (or
   the initial state), and hands on M H + B: one (S, S)·(S, D) product on the chain;
3. walks its chunks from H: U_j = Uv_j - W_j H_j, the outputs O_j = Q̃_j H_j + P_j U_j,
   and the chunk-start states the backward reads.

Tickets, flags and their memory order are the gla kernel's, by the same helpers
(``_state_handed_on``, ``_hand_on``; its docstring says why every wait ends). Step 3
reads back the W and Uv that step 1 stored, after a barrier: different lanes may have
written them. The state at the end of a stretch is formed twice,
by its map (handed on) and by step 3's walk (not kept); the next stretch starts from the
handed-on one and stores it as its first chunk state, so every U is formed from the state
stored for its chunk.

With ``CONFIGS["pairs"] = "auto"`` the forward is two launches of this kernel. The first
forms every chunk's pairs by one product, and takes a stretch only if all its chunks fit and
every stretch before it in the sequence was taken too; any other stretch raises its flag to
2 and returns, so that the stretches after it return as well once they see the 2. The second
launch forms the pairs by the levels and takes exactly the stretches whose flag is not 1:
the first of them in a sequence starts from the state the first launch stored and flagged
1, the rest wait for the state handed on within the second launch. One sequence takes the
product up to its first stretch that does not fit, and the levels from there on.

Memory: what the forward in passes keeps (U, W, Mk, (I + M)⁻¹, the chunk-start states),
the counter and one flag per stretch (1 + B·H·⌈T/(NB·16)⌉ int32, zeroed every call).
"""

from __future__ import annotations

import triton
import triton.language as tl

from hymo_mini.ops.gated_delta.chunk_kernels import _erasures
from hymo_mini.ops.gla.chunk_blocks import (
    _carried,
    _chunk_fits,
    _gate_sums,
    _pairs,
    _rates,
    _spread,
)
from hymo_mini.ops.gla.chunk_chain import _hand_on, _state_handed_on
from hymo_mini.ops.gla.chunk_states import _dot, _rows

__all__ = []  # kernels only, launched by hymo_mini.ops.gated_delta.chunk_triton


@triton.jit
def _flag_before(flags, i_c, i_bh, BH):
    """The flag of the stretch before (1 for the first stretch), once it is raised to any
    value (acquire)."""
    ready = (i_c * 0 + 1).to(tl.int32)
    if i_c > 0:
        p_prev = flags + 1 + (i_c - 1) * BH + i_bh
        ready = tl.atomic_add(p_prev, 0, sem="acquire")
        while ready == 0:
            ready = tl.atomic_add(p_prev, 0, sem="acquire")
    return ready


@triton.jit
def _chain_fwd_kernel(v, b, c, g, A, beta, h0, hs, ht, u, w, mk, ti, o, flags, T, BH, T0,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                      BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                      NB: tl.constexpr, USE_H0: tl.constexpr, STORE_HT: tl.constexpr,
                      PRECISION: tl.constexpr, INVERSE: tl.constexpr, PAIRS: tl.constexpr,
                      KEEP: tl.constexpr, REDO: tl.constexpr):
    """One stretch of NB chunks of one (b, h), by ticket. flags[0] counts the tickets;
    flags[1 + k·BH + bh] is raised once the state stretch k + 1 starts with is stored, as
    hs[bh, (k + 1)·NB]. If KEEP (the backward will run), hs[bh, j] receives every chunk
    j's start state, u every chunk's U, and mk, ti every chunk's Mk and (I + M)⁻¹; without
    it only the states handed on are stored, and what step 3 reads of step 1 depends on
    REDO: "none", u and w keep Uv and W; "all", nothing is kept and step 3 solves each
    chunk again; "inverse", ti keeps each (I + M)⁻¹ and step 3 forms W and Uv from it.

    PAIRS = "product" (the first of two launches) takes a stretch by one product per chunk
    only if its chunks fit (``_chunk_fits``) and every stretch before it was taken here;
    otherwise it raises the stretch's flag to 2 (not handed on) and returns. The second
    launch, PAIRS = "rest" (T0: the first launch's programs, whose tickets are taken),
    returns at once from every stretch whose flag is 1 and takes the others by the levels;
    each waits for a flag of 1, which the first launch left or the stretch before raises."""
    ticket = tl.atomic_add(flags, 1) - T0  # the order this program started in
    i_c, i_bh = ticket // BH, ticket % BH
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, NB * BT)  # stretches
    NK = tl.cdiv(T, BT)  # chunks
    k0 = i_c * NB  # the stretch's first chunk
    NJ = tl.minimum(NB, NK - k0)  # its chunks
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    o_tt = o_i[:, None] * BT + o_i[None, :]  # [BT, BT]
    b_A2 = _rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    row0 = i_b.to(tl.int64) * T * H + i_h
    p_tt = (i_bh.to(tl.int64) * NK + k0) * BT * BT + o_tt  # [BT, BT] the first chunk's
    p_flag = flags + 1 + i_c * BH + i_bh  # this stretch's flag
    if PAIRS == "product":
        if _chunk_fits(g, row0, i_c, T, _spread(b_A2), H, NB * BT, BT) == 0:
            tl.atomic_xchg(p_flag, 2, sem="release")  # the second launch takes it
            return
    if PAIRS == "rest":
        if tl.load(p_flag) == 1:  # taken by the first launch
            return
    # 1. every chunk's WY form, and the stretch's map H -> M H + B composed chunk by chunk
    b_M = tl.where(o_s[:, None] == o_s[None, :], 1.0, 0.0)  # [BS, BS]
    b_B = tl.zeros([BS, BD], dtype=tl.float32)
    for j in range(0, NJ):
        o_t = (k0 + j) * BT + o_i
        m_t = o_t < T  # padding steps: g = 0, β = 0, b = 0 (no decay, no write)
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_beta = tl.load(beta + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = _gate_sums(b_g, o_i, BT)
        b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_KK, b_kh, b_Kt = _pairs(b_k, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                  PAIRS == "product", PRECISION)  # key pairs, K̂, K̃
        b_Mk, b_Ti = _erasures(b_KK, b_beta, o_i, BT, LOG2_BT, PRECISION, INVERSE)
        if KEEP:
            tl.store(mk + p_tt + j * BT * BT, b_Mk)
        if KEEP or REDO == "inverse":
            tl.store(ti + p_tt + j * BT * BT, b_Ti)
        b_w = _dot(b_Ti, b_Kt * b_beta[:, None], PRECISION)  # [BT, BS] W
        b_uv = _dot(b_Ti, b_v * b_beta[:, None], PRECISION)  # [BT, BD] Uv
        o_row = row0 + o_t[:, None] * H  # [BT, 1]
        if REDO == "none":
            tl.store(w + o_row * S + o_s[None, :], b_w, mask=m_t[:, None] & m_s[None, :])
            tl.store(u + o_row * D + o_d[None, :], b_uv, mask=m_t[:, None] & m_d[None, :])
        b_G = tl.exp2(b_lend * b_A2)[:, None]  # [BS, 1] Γ_C
        b_WM = _dot(b_w, b_M, PRECISION)  # [BT, BS]
        b_M = b_M * b_G - _dot(tl.trans(b_kh), b_WM, PRECISION)
        b_R = b_uv - _dot(b_w, b_B, PRECISION)  # [BT, BD]
        b_B = b_B * b_G + _dot(tl.trans(b_kh), b_R, PRECISION)
    # 2. the state the stretch starts with, and the one it hands on
    p_hs = hs + (i_bh.to(tl.int64) * NK + k0) * S * D + o_sd  # [BS, BD] its first chunk's
    if PAIRS == "product":
        if _flag_before(flags, i_c, i_bh, BH) != 1:  # an earlier stretch was not taken here
            tl.atomic_xchg(p_flag, 2, sem="release")
            return
    b_h = _state_handed_on(p_hs, h0, flags, i_c, i_bh, BH, o_sd, m_h, S, D, BS, BD, USE_H0)
    b_next = _dot(b_M, b_h, PRECISION) + b_B  # [BS, BD]
    if i_c + 1 < NC:
        _hand_on(p_hs + NB * S * D, b_next, m_h, flags, i_c, i_bh, BH)
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
        if KEEP:
            tl.store(p_hs + j * S * D, b_h, mask=m_h & (j > 0))  # the first is stored above
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = _gate_sums(b_g, o_i, BT)
        b_k = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        if REDO != "none":  # W and Uv formed again, as in step 1
            b_beta = tl.load(beta + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)
            if REDO == "inverse":  # from the (I + M)⁻¹ step 1 kept
                b_Ti = tl.load(ti + p_tt + j * BT * BT)  # [BT, BT]
                # K̃ rounded as step 1's _pairs rounded it (the same bits of W)
                b_Kt = _carried(b_k, b_l, b_A2, PAIRS == "product")  # [BT, BS]
            else:  # from the chunk's keys, solved again
                b_KK, b_kh, b_Kt = _pairs(b_k, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                          PAIRS == "product", PRECISION)
                b_Mk, b_Ti = _erasures(b_KK, b_beta, o_i, BT, LOG2_BT, PRECISION, INVERSE)
            b_w = _dot(b_Ti, b_Kt * b_beta[:, None], PRECISION)  # W
            b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
            b_u = _dot(b_Ti, b_v * b_beta[:, None], PRECISION)  # Uv
        else:
            b_w = _rows(w, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
            b_u = _rows(u, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD] Uv
        b_u -= _dot(b_w, b_h, PRECISION)  # [BT, BD] U
        if KEEP:
            tl.store(u + o_row * D + o_d[None, :], b_u, mask=m_tD)
        b_q = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_P, b_kh, b_Qt = _pairs(b_q, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                 PAIRS == "product", PRECISION)  # the pairs P, K̂, Q̃
        b_o = _dot(b_Qt, b_h, PRECISION)  # [BT, BD] Q̃ H
        b_o += _dot(b_P, b_u, PRECISION)
        tl.store(o + o_row * D + o_d[None, :], b_o.to(o.dtype.element_ty), mask=m_tD)
        b_h = b_h * tl.exp2(b_lend * b_A2)[:, None]
        b_h += _dot(tl.trans(b_kh), b_u, PRECISION)
