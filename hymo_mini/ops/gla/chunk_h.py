"""The gla rule's state pass: the state each chunk starts with (forward) and the gradient of
the loss at each chunk's end (backward). With L the gate summed from a chunk's start and
L_C its sum over the chunk (``chunk_triton`` derives both):

    forward    H_{k+1} = exp(L_C A) ⊙ H_k + ΔH_k,    ΔH_k = Σ_s (b_s ⊙ exp((L_C - L_s) A)) ⊗ v_s
    backward   dH_k = exp(L_C A) ⊙ dH_{k+1} + Σ_t (c_t ⊙ exp(L_t A)) ⊗ do_t

The forward is two launches: every chunk's own write ΔH_k at once, then a light sequential
scan. The backward is one sequential pass, right to left. The (n, d) entries of a state
evolve independently, so a sequential program may own a [BS, BD] block of it.
"""

import triton
import triton.language as tl

from hymo_mini.ops.utils.precision import dot
from hymo_mini.ops.utils.tiles import LOG2E, load_rows

__all__ = ["chunk_writes_kernel", "state_scan_kernel", "state_grad_kernel"]


@triton.jit
def chunk_writes_kernel(b, v, g, A, hs, decay, T,
                        H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                        BS: tl.constexpr, BD: tl.constexpr, PRECISION: tl.constexpr):
    """What chunk i_c of one (b, h) writes into the state on its own, ΔH_k into hs[bh, k],
    and its decay over the chunk, exp(L_C A), into decay[bh, k]. Padding steps past T
    load g = 0 (no decay) and b = 0 (no write)."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    o_t, o_s, o_d = i_c * BC + tl.arange(0, BC), tl.arange(0, BS), tl.arange(0, BD)
    m_t, m_s, m_d = o_t < T, o_s < S, o_d < D
    row0 = i_b.to(tl.int64) * T * H + i_h
    b_A2 = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32) * LOG2E  # [BS]
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BC]
    # the gate summed after each step to the chunk's end, L_C - L_s, summed directly: a
    # difference of two long sums would carry their rounding into the last steps' decays
    b_gap = tl.cumsum(b_g, axis=0, reverse=True) - b_g  # [BC]
    b_b = load_rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BC, BS]
    b_v = load_rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BC, BD]
    b_b = b_b * tl.exp2(b_gap[:, None] * b_A2[None, :])  # decayed to the chunk's end
    i_k = i_bh.to(tl.int64) * tl.cdiv(T, BC) + i_c
    tl.store(hs + i_k * S * D + o_s[:, None] * D + o_d[None, :],
             dot(tl.trans(b_b), b_v, PRECISION), mask=m_s[:, None] & m_d[None, :])
    tl.store(decay + i_k * S + o_s, tl.exp2(tl.sum(b_g, axis=0) * b_A2), mask=m_s)


@triton.jit
def state_scan_kernel(hs, decay, h0, ht, T,
                      S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr, BS: tl.constexpr,
                      BD: tl.constexpr, NS: tl.constexpr, ND: tl.constexpr,
                      USE_H0: tl.constexpr, STORE_HT: tl.constexpr, NUM_STAGES: tl.constexpr):
    """A [BS, BD] block of one (b, h)'s state, chunk by chunk: H_{k+1} = decay_k ⊙ H_k + ΔH_k,
    in place (hs[k] holds ΔH_k on entry and H_k, the state chunk k starts with, on exit),
    and the final state into ht."""
    i_bh, i_sd = tl.program_id(0) // (NS * ND), tl.program_id(0) % (NS * ND)
    o_s = (i_sd // ND) * BS + tl.arange(0, BS)
    o_d = (i_sd % ND) * BD + tl.arange(0, BD)
    m_s = o_s < S
    m_h = m_s[:, None] & (o_d < D)[None, :]  # [BS, BD]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    NC = tl.cdiv(T, BC)
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + i_bh.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
    p_hs = hs + i_bh.to(tl.int64) * NC * S * D + o_sd
    p_decay = decay + i_bh.to(tl.int64) * NC * S + o_s
    for i_c in tl.range(0, NC, num_stages=NUM_STAGES):
        b_dh = tl.load(p_hs + i_c * S * D, mask=m_h, other=0.0)  # [BS, BD] ΔH_k
        b_e = tl.load(p_decay + i_c * S, mask=m_s, other=0.0)  # [BS]
        tl.store(p_hs + i_c * S * D, b_h, mask=m_h)
        b_h = b_h * b_e[:, None] + b_dh
    if STORE_HT:
        tl.store(ht + i_bh.to(tl.int64) * S * D + o_sd, b_h, mask=m_h)


@triton.jit
def state_grad_kernel(c, g, A, do, dht, dhs, dh0, T,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                      BS: tl.constexpr, BD: tl.constexpr, NS: tl.constexpr, ND: tl.constexpr,
                      USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr,
                      NUM_STAGES: tl.constexpr, PRECISION: tl.constexpr):
    """A [BS, BD] block of one (b, h)'s state gradient, right to left: the gradient at each
    chunk's end into dhs, and at the start (d initial_state) into dh0."""
    i_bh, i_sd = tl.program_id(0) // (NS * ND), tl.program_id(0) % (NS * ND)
    i_b, i_h = i_bh // H, i_bh % H
    o_c = tl.arange(0, BC)
    o_s = (i_sd // ND) * BS + tl.arange(0, BS)
    o_d = (i_sd % ND) * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    NC = tl.cdiv(T, BC)
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_dh = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_DHT:
        b_dh += tl.load(dht + i_bh.to(tl.int64) * S * D + o_sd, mask=m_h, other=0.0)
    row0 = i_b.to(tl.int64) * T * H + i_h
    p_dhs = dhs + i_bh.to(tl.int64) * NC * S * D + o_sd
    for k in tl.range(0, NC, num_stages=NUM_STAGES):
        i_c = NC - 1 - k
        tl.store(p_dhs + i_c * S * D, b_dh, mask=m_h)  # the gradient at chunk i_c's end
        o_t = i_c * BC + o_c
        m_t = o_t < T
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BC]
        b_L = tl.cumsum(b_g, axis=0)  # [BC]
        b_c = load_rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BC, BS]
        b_do = load_rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BC, BD]
        b_c = b_c * tl.exp(b_L[:, None] * b_A[None, :])  # decayed from the chunk's start
        b_dh = b_dh * tl.exp(tl.sum(b_g, axis=0) * b_A)[:, None]
        b_dh += dot(tl.trans(b_c), b_do, PRECISION)  # [BS, BD]
    if STORE_DH0:
        tl.store(dh0 + i_bh.to(tl.int64) * S * D + o_sd, b_dh, mask=m_h)
