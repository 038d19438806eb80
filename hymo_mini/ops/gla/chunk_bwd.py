"""The gla rule's in-chunk gradients: a program per (chunk, batch, head) walks the chunk's
blocks right to left, carrying dH, the gradient at the block's end, on chip, and forms dv,
db, dc, dg and dA (``chunk_triton`` derives each). The pair sums take the levels of
``utils.pairs`` whatever the decay.
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.pairs import pairs_by_levels
from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import LOG2E, gate_sums, load_rows

__all__ = ["chunk_grad_kernel"]


@triton.jit
def chunk_grad_kernel(v, b, c, g, A, do, hb, dhs, dv, db, dc, dg, dA, T,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                      BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                      LOG2_BT: tl.constexpr, PRECISION: tl.constexpr):
    """dv, db, dc, dg and Σ g dlog for one chunk of one (b, h): its blocks right to left.
    Each input is read where it is first needed and each gradient stored as soon as it is
    final, so that few [BT, BS] tiles are alive at once (registers, not spills)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC, NB = tl.cdiv(T, BC), tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_dh = tl.load(dhs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_sd, mask=m_h,
                   other=0.0)  # [BS, BD] the gradient at the chunk's end
    row0 = i_b.to(tl.int64) * T * H + i_h
    b_dA = tl.zeros([BS], dtype=tl.float32)
    NT = tl.cdiv(tl.minimum(BC, T - i_c * BC), BT)
    for k in range(0, NT):
        i_t = NT - 1 - k
        o_t = i_c * BC + i_t * BT + o_i
        m_t = o_t < T
        o_row = row0 + o_t[:, None] * H  # [BT, 1]
        m_tS, m_tD = m_t[:, None] & m_s[None, :], m_t[:, None] & m_d[None, :]
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = gate_sums(b_g, o_i, BT)
        # the pairs: dP_ts = do_t · v_s (in b_M), then the in-block attention and its gradients
        b_do = load_rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_v = load_rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_M = dot(b_do, tl.trans(b_v), PRECISION)  # [BT, BT] do_t·v_s
        b_Mdiag = tl.sum(tl.where(o_i[:, None] == o_i[None, :], b_M, 0.0), axis=1)  # [BT]
        b_M = tl.where(o_i[:, None] > o_i[None, :], b_M, 0.0)  # pairs s < t
        b_c = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_b = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_W, b_dci, b_dbi = pairs_by_levels(b_c, b_b, b_M, b_l, b_A * LOG2E, o_i, LOG2_BT,
                                            True, PRECISION)
        # dv: the pairs, then the writes carried to the block end
        b_dv = dot(tl.trans(b_W), b_do, PRECISION)  # [BT, BD]
        b_eb = tl.exp((b_lend - b_l)[:, None] * b_A[None, :])  # [BT, BS] s -> block end
        b_dv += dot(b_b * b_eb, b_dh, PRECISION)
        tl.store(dv + o_row * D + o_d[None, :], b_dv.to(dv.dtype.element_ty), mask=m_tD)
        # db, and the part of dlog the writes and the in-block pairs give (arranged so that
        # no two large terms cancel: chunk_triton's docstring)
        b_dbh = b_eb * dot(b_v, tl.trans(b_dh), PRECISION)  # [BT, BS]
        b_x = b_b * (b_dbh + b_dbi) - b_c * b_dci  # [BT, BS]
        b_db = b_dbh + b_dbi + b_Mdiag[:, None] * b_c  # + the t = s terms
        tl.store(db + o_row * S + o_s[None, :], b_db.to(db.dtype.element_ty), mask=m_tS)
        b_dlog = tl.cumsum(b_x, axis=0) - b_x  # [BT, BS]
        # dc through H, the state at the block's start (stored by the forward)
        p_hb = hb + (i_bh.to(tl.int64) * NB + i_c * (BC // BT) + i_t) * S * D
        b_h = tl.load(p_hb + o_sd, mask=m_h, other=0.0)  # [BS, BD]
        b_ec = tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS] block start -> t
        b_dch = b_ec * dot(b_do, tl.trans(b_h), PRECISION)  # [BT, BS]
        b_eT = tl.exp(b_lend * b_A)  # [BS] the whole block
        b_dlog += (b_eT * tl.sum(b_h * b_dh, axis=1))[None, :]  # the carry
        b_dc = b_dch + b_dci + b_Mdiag[:, None] * b_b
        tl.store(dc + o_row * S + o_s[None, :], b_dc.to(dc.dtype.element_ty), mask=m_tS)
        b_dlog += tl.cumsum(b_c * b_dch, axis=0, reverse=True)  # later reads of H
        b_dA += tl.sum(b_dlog * b_g[:, None], axis=0)  # [BS]
        b_dg = tl.sum(b_dlog * b_A[None, :], axis=1)  # [BT]
        tl.store(dg + row0 + o_t * H, b_dg.to(dg.dtype.element_ty), mask=m_t)
        # the gradient at the block start = at the end of the block before
        b_dh = b_dh * b_eT[:, None]
        b_dh += dot(tl.trans(b_c * b_ec), b_do, PRECISION)  # [BS, BD]
    tl.store(dA + (i_bh.to(tl.int64) * NC + i_c) * S + o_s, b_dA, mask=m_s)
