"""The delta rule's in-chunk outputs, every chunk at once, from the state H_0 it starts with
and its pseudo-values U (both stored by the state pass):

    O = Q̃ H_0 + P U,    Q̃ = c ⊙ exp(L A),    P_ts = Σ_n c_tn b_sn exp((L_t - L_s) A_n), s ≤ t
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.pairs import pairs, takes_chunk
from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import gate_sums, load_rows, rates

__all__ = ["chunk_output_kernel"]


@triton.jit
def chunk_output_kernel(b, c, g, A, hs, u, o, left, T,
                        H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BS: tl.constexpr,
                        BD: tl.constexpr, BT: tl.constexpr, LOG2_BT: tl.constexpr,
                        PRODUCT: tl.constexpr, PRECISION: tl.constexpr):
    """O [BT, BD] of chunk i_c of one (b, h). PRODUCT: the launch that forms P by one product
    (``utils.pairs.takes_chunk``)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BT + o_i
    m_t = o_t < T
    b_A2 = rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    if takes_chunk(left + i_bh * NC + i_c, g, row0, i_c, T, b_A2, H, BT, BT, PRODUCT) == 0:
        return
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
    b_l, b_lend = gate_sums(b_g, o_i, BT)
    b_q = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_k = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
    b_u = load_rows(u, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
    p_h = hs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_s[:, None] * D + o_d[None, :]
    b_h = tl.load(p_h, mask=m_s[:, None] & m_d[None, :], other=0.0)  # [BS, BD] H_0
    b_P, _, b_Qt = pairs(b_q, b_k, b_l, b_lend, b_A2, o_i, LOG2_BT, PRODUCT, PRECISION)
    b_o = dot(b_Qt, b_h, PRECISION) + dot(b_P, b_u, PRECISION)  # [BT, BD]
    p_o = o + (row0 + o_t[:, None] * H) * D + o_d[None, :]
    tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_t[:, None] & m_d[None, :])
