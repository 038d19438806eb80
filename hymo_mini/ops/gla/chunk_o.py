"""The gla rule's in-chunk outputs: a program per (chunk, batch, head) walks the chunk's
blocks of BT steps from the state the chunk starts with, carrying the state on chip. For a
block with l the gate summed from its start (l_C over it) and H the state it starts with:

    o_t = (c_t ⊙ exp(l_t A))ᵀ H + Σ_{s≤t} P_ts v_s            the state read, the block's pairs
    H  ← exp(l_C A) ⊙ H + Σ_s (b_s ⊙ exp((l_C - l_s) A)) ⊗ v_s         handed to the next block

with the pair weights P_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n) of ``utils.pairs``.
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.pairs import pairs, takes_chunk
from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import gate_sums, load_rows, rates

__all__ = ["chunk_output_kernel"]


@triton.jit
def chunk_output_kernel(v, b, c, g, A, hs, o, hb, left, T,
                        H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                        BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                        LOG2_BT: tl.constexpr, STORE_HB: tl.constexpr, PRODUCT: tl.constexpr,
                        PRECISION: tl.constexpr):
    """o for chunk i_c of one (b, h), block by block from hs[bh, i_c], the state the chunk
    starts with; if STORE_HB, also the state each block starts with (for the backward).
    PRODUCT: the launch that forms the pairs by one product, else by the levels
    (``takes_chunk``; ``left`` marks the chunks the product launch left)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC, NB = tl.cdiv(T, BC), tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A2 = rates(A, i_h, o_s, m_s, S)  # [BS] the rates in base 2
    row0 = i_b.to(tl.int64) * T * H + i_h
    if takes_chunk(left + i_bh * NC + i_c, g, row0, i_c, T, b_A2, H, BC, BT, PRODUCT) == 0:
        return
    b_h = tl.load(hs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_sd, mask=m_h, other=0.0)
    for i_t in range(0, tl.cdiv(tl.minimum(BC, T - i_c * BC), BT)):
        i_blk = i_c * (BC // BT) + i_t
        if STORE_HB:
            tl.store(hb + (i_bh.to(tl.int64) * NB + i_blk) * S * D + o_sd, b_h, mask=m_h)
        o_t = i_blk * BT + o_i
        m_t = o_t < T
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = gate_sums(b_g, o_i, BT)
        b_b = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_c = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_v = load_rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        # P [BT, BT] (b_W), b carried to the block's end, c carried from its start [BT, BS]
        b_W, b_bE, b_cE = pairs(b_c, b_b, b_l, b_lend, b_A2, o_i, LOG2_BT, PRODUCT, PRECISION)
        b_o = dot(b_cE, b_h, PRECISION) + dot(b_W, b_v, PRECISION)  # [BT, BD]
        p_o = o + (row0 + o_t[:, None] * H) * D + o_d[None, :]
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_t[:, None] & m_d[None, :])
        b_h = b_h * tl.exp2(b_lend * b_A2)[:, None] + dot(tl.trans(b_bE), b_v, PRECISION)
