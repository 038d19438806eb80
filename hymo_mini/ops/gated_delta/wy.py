"""The WY form of each chunk's erasures: every chunk at once, from its own inputs only.

With L the gate summed from a chunk's start, Γ = exp(L A), K̃ = b ⊙ Γ and the strictly
lower-triangular M_ts = β_t Mk_ts, Mk_ts = Σ_n b_tn b_sn exp((L_t - L_s) A_n) for s < t
(``hymo_mini.ops.gated_delta.chunk`` derives it), one unit-lower-triangular system gives

    Uv = (I + M)⁻¹ diag(β) V        W = (I + M)⁻¹ diag(β) K̃        (BT, D), (BT, S)

so that the chunk's pseudo-values are U = Uv - W H_0 for the state H_0 it starts with.
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.pairs import pairs, takes_chunk
from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import gate_sums, load_rows, rates

__all__ = ["unit_lower_inverse", "wy_form", "wy_fwd_kernel"]


@triton.jit
def unit_lower_inverse(b_M, o_i, LOG2_BT: tl.constexpr, PRECISION: tl.constexpr):
    """(I + M)⁻¹ for a strictly lower-triangular M [BT, BT], by levels: a block of 2^(k+1)
    steps, [[I + M₁, 0], [M₂₁, I + M₂]], has the inverse [[(I + M₁)⁻¹, 0], [-(I + M₂)⁻¹ M₂₁
    (I + M₁)⁻¹, (I + M₂)⁻¹]]; so with inv (in b_T) the inverse on the blocks of 2^k steps,
    inv ← inv - inv M_k inv, M_k holding the blocks M₂₁ of level k. Blocks of one step are I;
    blocks of two are I - M_0, no product."""
    i, j = o_i[:, None], o_i[None, :]
    m_0 = ((i >> 1) == (j >> 1)) & ((i & 1) == 1) & ((j & 1) == 0)  # step 2r + 1 on 2r
    b_T = tl.where(i == j, 1.0, 0.0) - tl.where(m_0, b_M, 0.0)  # [BT, BT] inv, (I + M)⁻¹ so far
    for k in tl.static_range(1, LOG2_BT):
        m_k = ((i >> (k + 1)) == (j >> (k + 1))) & (((i >> k) & 1) == 1) & (((j >> k) & 1) == 0)
        b_TM = dot(b_T, tl.where(m_k, b_M, 0.0), PRECISION)  # [BT, BT]
        b_T -= dot(b_TM, b_T, PRECISION)
    return b_T


@triton.jit
def wy_form(b_k, b_v, b_beta, b_l, b_lend, b_A2, o_i, LOG2_BT: tl.constexpr,
            PRODUCT: tl.constexpr, PRECISION: tl.constexpr):
    """One chunk's Mk and (I + M)⁻¹ [BT, BT], W [BT, BS], Uv [BT, BD], and its keys decayed
    to its end, K̂ [BT, BS], from its keys b_k, values b_v, β and gate sums."""
    # the key pairs Σ_n b_tn b_sn E_tsn (s ≤ t), K̂, and K̃ = b ⊙ Γ
    b_KK, b_kh, b_Kt = pairs(b_k, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT, PRODUCT, PRECISION)
    b_Mk = tl.where(o_i[:, None] > o_i[None, :], b_KK, 0.0)  # [BT, BT] pairs s < t
    b_Ti = unit_lower_inverse(b_beta[:, None] * b_Mk, o_i, LOG2_BT, PRECISION)  # (I + M)⁻¹
    b_w = dot(b_Ti, b_Kt * b_beta[:, None], PRECISION)
    return b_Mk, b_Ti, b_w, dot(b_Ti, b_v * b_beta[:, None], PRECISION), b_kh


@triton.jit
def wy_fwd_kernel(v, b, g, A, beta, uv, w, mk, ti, left, T,
                  H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                  BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                  KEEP: tl.constexpr, PRODUCT: tl.constexpr, PRECISION: tl.constexpr):
    """Chunk i_c of one (b, h): Uv into uv, W into w, and if KEEP (a backward follows) Mk and
    (I + M)⁻¹ into mk, ti. PRODUCT: the launch that forms the key pairs by one product
    (``utils.pairs.takes_chunk``)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BT + o_i
    m_t = o_t < T  # padding steps: g = 0, β = 0, b = 0 (no decay, no write)
    b_A2 = rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    if takes_chunk(left + i_bh * NC + i_c, g, row0, i_c, T, b_A2, H, BT, BT, PRODUCT) == 0:
        return
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_beta = tl.load(beta + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = gate_sums(b_g, o_i, BT)
    b_k = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_v = load_rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    b_Mk, b_Ti, b_w, b_uv, _ = wy_form(b_k, b_v, b_beta, b_l, b_lend, b_A2, o_i, LOG2_BT,
                                       PRODUCT, PRECISION)
    if KEEP:
        o_tt = (i_bh.to(tl.int64) * NC + i_c) * BT * BT + o_i[:, None] * BT + o_i[None, :]
        tl.store(mk + o_tt, b_Mk)
        tl.store(ti + o_tt, b_Ti)
    o_row = row0 + o_t[:, None] * H  # [BT, 1]
    tl.store(w + o_row * S + o_s[None, :], b_w, mask=m_t[:, None] & m_s[None, :])
    tl.store(uv + o_row * D + o_d[None, :], b_uv, mask=m_t[:, None] & m_d[None, :])
