"""The chunk-level passes of the chunked Triton gla kernel: the state each chunk
starts with (forward) and the state gradient at each chunk's end (backward).

    forward    H_{k+1} = exp(L_end A) ⊙ H_k + ΔH_k,   ΔH_k = Σ_s (b_s ⊙ exp((L_end - L_s) A)) ⊗ v_s
    backward   dH_k = exp(L_end A) ⊙ dH_{k+1} + Σ_t (c_t ⊙ exp(L_t A)) ⊗ do_t

with L the gate summed from the chunk start. The forward runs in two kernels: one program
per chunk computes every ΔH_k at once, then a light sequential scan per (batch, head,
block of the state) only multiplies and adds S x D states. The backward
is one sequential kernel, right to left. The (n, d) entries of a state evolve
independently, so a sequential program may own a (BS, BD) block of it.
``hymo_mini.ops.gla.chunk_triton`` launches these and does the in-chunk work; its docstring
has the derivation.
"""

from __future__ import annotations

import triton
import triton.language as tl

__all__ = []  # kernels only, launched by hymo_mini.ops.gla.chunk_triton

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2(e))


@triton.jit
def _dot(a, b, PRECISION: tl.constexpr):
    """a @ b, accumulated in fp32: ``tl.dot`` with input_precision PRECISION ("tf32",
    "tf32x3", "ieee"), or for PRECISION "bf16" of a and b rounded to bf16 (the tensor
    cores' 16-bit rate; an option for 16-bit inputs, CONFIGS["half_products"]), or for
    "bf16x6" six products of their bf16 pieces (``_dot_bf16x6``; fp32-grade, an option
    for fp32 inputs, CONFIGS["fp32_products"]). Under the interpreter "bf16" and "bf16x6"
    arrive as "bf16_rounded" and "bf16x6_rounded": the same roundings multiplied in fp32
    (Triton 3.9's interpreter returns garbage from a dot of bf16 blocks)."""
    if PRECISION == "bf16":
        return tl.dot(a.to(tl.bfloat16), b.to(tl.bfloat16))
    elif PRECISION == "bf16_rounded":
        return tl.dot(_bf16_round(a), _bf16_round(b), input_precision="ieee")
    elif PRECISION == "bf16x6":
        return _dot_bf16x6(a, b, False)
    elif PRECISION == "bf16x6_rounded":
        return _dot_bf16x6(a, b, True)
    else:
        return tl.dot(a, b, input_precision=PRECISION)


@triton.jit
def _bf16_piece(x, ROUNDED: tl.constexpr):
    """The bf16 rounding of fp32 x, as bf16 (or, if ROUNDED, kept in fp32), and what it
    leaves, x minus it (exact in fp32)."""
    if ROUNDED:
        p = _bf16_round(x)
        return p, x - p
    else:
        p = x.to(tl.bfloat16)
        return p, x - p.to(tl.float32)


@triton.jit
def _dot_bf16x6(a, b, ROUNDED: tl.constexpr):
    """a @ b from three bf16 pieces of each, a = a1 + a2 + a3 (a2 the rounding of a - a1, a3
    of what is left; 24 bits together): the six products a_i b_j with i + j <= 4, smallest
    first, accumulated in fp32. Each left-out product is at most 2^-27 of |a||b|, below
    fp32's own rounding. ROUNDED: the pieces stay fp32 and multiply as "ieee" (for the
    interpreter)."""
    a1, ra = _bf16_piece(a, ROUNDED)
    a2, ra = _bf16_piece(ra, ROUNDED)
    a3, _ = _bf16_piece(ra, ROUNDED)
    b1, rb = _bf16_piece(b, ROUNDED)
    b2, rb = _bf16_piece(rb, ROUNDED)
    b3, _ = _bf16_piece(rb, ROUNDED)
    if ROUNDED:
        acc = tl.dot(a3, b1, input_precision="ieee")
        acc = tl.dot(a1, b3, acc, input_precision="ieee")
        acc = tl.dot(a2, b2, acc, input_precision="ieee")
        acc = tl.dot(a2, b1, acc, input_precision="ieee")
        acc = tl.dot(a1, b2, acc, input_precision="ieee")
        return tl.dot(a1, b1, acc, input_precision="ieee")
    else:
        acc = tl.dot(a3, b1)
        acc = tl.dot(a1, b3, acc)
        acc = tl.dot(a2, b2, acc)
        acc = tl.dot(a2, b1, acc)
        acc = tl.dot(a1, b2, acc)
        return tl.dot(a1, b1, acc)


@triton.jit
def _bf16_round(x):
    """fp32 x rounded to the nearest bf16 (ties to even), kept in fp32, by its bits: the
    interpreter's own conversion to bf16 truncates, whatever rounding it is asked for."""
    bits = x.to(tl.uint32, bitcast=True)
    bits = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    return bits.to(tl.float32, bitcast=True)

# --------------------------------------------------------------------------------------
# Kernels. Layouts: v, do (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S);
# states (B·H, NC, S, D) fp32. Step t of (i_b, i_h) is row (i_b·T + t)·H + i_h.
# --------------------------------------------------------------------------------------
@triton.jit
def _rows(p, row0, o_t, m_t, o_x, m_x, W: tl.constexpr, H: tl.constexpr):
    """Load rows t of a (B, T, H, W) tensor as fp32: [len(o_t), len(o_x)]."""
    ptrs = p + (row0 + o_t[:, None] * H) * W + o_x[None, :]
    return tl.load(ptrs, mask=m_t[:, None] & m_x[None, :], other=0.0).to(tl.float32)


@triton.jit
def _chunk_delta(b, v, g, b_A2, row0, o_t, m_t, o_s, m_s, o_d, m_d, S: tl.constexpr,
                 D: tl.constexpr, H: tl.constexpr, PRECISION: tl.constexpr):
    """What the steps o_t (one chunk, or a piece of one) of one (b, h) add to the state on
    their own, ΔH = Σ_s (b_s ⊙ exp((L_end - L_s) A)) ⊗ v_s [BS, BD], and their gate sum
    L_end. b_A2 = A log2(e), the rates in base 2. Padding steps (m_t false) load g = 0 (no
    decay) and b = 0 (no write)."""
    b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BC]
    b_L = tl.cumsum(b_g, axis=0)  # [BC] gate summed from the chunk start
    b_Lend = tl.sum(b_g, axis=0)  # over the whole chunk
    b_b = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BC, BS]
    b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BC, BD]
    b_b = b_b * tl.exp2((b_Lend - b_L)[:, None] * b_A2[None, :])  # decayed to the chunk end
    b_dh = _dot(tl.trans(b_b), b_v, PRECISION)  # [BS, BD]
    return b_dh, b_Lend


@triton.jit
def _chunk_delta_kernel(b, v, g, A, hs, decay, T,
                        H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                        BS: tl.constexpr, BD: tl.constexpr, PRECISION: tl.constexpr):
    """What one chunk of one (b, h) adds to the state, on its own: ΔH_k = Σ_s (b_s ⊙
    exp((L_end - L_s) A)) ⊗ v_s into hs[k], and its decay exp(L_end A) into decay[k]."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BC)
    o_c, o_s, o_d = tl.arange(0, BC), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    b_A2 = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32) * LOG2E  # [BS]
    row0 = i_b.to(tl.int64) * T * H + i_h
    o_t = i_c * BC + o_c
    b_dh, b_Lend = _chunk_delta(b, v, g, b_A2, row0, o_t, o_t < T, o_s, m_s, o_d, m_d, S, D, H,
                                PRECISION)
    i_k = i_bh.to(tl.int64) * NC + i_c
    tl.store(hs + i_k * S * D + o_s[:, None] * D + o_d[None, :], b_dh,
             mask=m_s[:, None] & m_d[None, :])
    tl.store(decay + i_k * S + o_s, tl.exp2(b_Lend * b_A2), mask=m_s)


@triton.jit
def _state_scan_kernel(hs, decay, h0, ht, T,
                       H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                       BS: tl.constexpr, BD: tl.constexpr, NS: tl.constexpr, ND: tl.constexpr,
                       USE_H0: tl.constexpr, STORE_HT: tl.constexpr,
                       NUM_STAGES: tl.constexpr):
    """A (BS, BD) block of the state of one (b, h): H_{k+1} = decay_k ⊙ H_k + ΔH_k, in
    place: hs[k] holds ΔH_k on entry and H_k, the state chunk k starts with, on exit."""
    i_bh, i_sd = tl.program_id(0) // (NS * ND), tl.program_id(0) % (NS * ND)
    i_s, i_d = i_sd // ND, i_sd % ND
    NC = tl.cdiv(T, BC)
    o_s, o_d = i_s * BS + tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_state = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + i_bh.to(tl.int64) * S * D + o_state, mask=m_h, other=0.0)
    p_hs = hs + i_bh.to(tl.int64) * NC * S * D + o_state
    p_decay = decay + i_bh.to(tl.int64) * NC * S + o_s
    for i_c in tl.range(0, NC, num_stages=NUM_STAGES):
        b_dh = tl.load(p_hs + i_c * S * D, mask=m_h, other=0.0)  # [BS, BD] ΔH_k
        b_e = tl.load(p_decay + i_c * S, mask=m_s, other=0.0)  # [BS]
        tl.store(p_hs + i_c * S * D, b_h, mask=m_h)
        b_h = b_h * b_e[:, None] + b_dh
    if STORE_HT:
        tl.store(ht + i_bh.to(tl.int64) * S * D + o_state, b_h, mask=m_h)


@triton.jit
def _state_bwd_kernel(c, g, A, do, dht, dhs, dh0, T,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                      BS: tl.constexpr, BD: tl.constexpr, NS: tl.constexpr, ND: tl.constexpr,
                      USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr,
                      NUM_STAGES: tl.constexpr, PRECISION: tl.constexpr):
    """A (BS, BD) block of the state gradient of one (b, h), right to left: stores the
    gradient at each chunk's end, and at the start (d initial_state)."""
    i_bh, i_sd = tl.program_id(0) // (NS * ND), tl.program_id(0) % (NS * ND)
    i_s, i_d = i_sd // ND, i_sd % ND  # which (BS, BD) block of the state
    i_b, i_h = i_bh // H, i_bh % H
    NC = tl.cdiv(T, BC)
    o_c, o_s, o_d = tl.arange(0, BC), i_s * BS + tl.arange(0, BS), i_d * BD + tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_state = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_dh = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_DHT:
        b_dh += tl.load(dht + i_bh.to(tl.int64) * S * D + o_state, mask=m_h, other=0.0)
    row0 = i_b.to(tl.int64) * T * H + i_h
    p_dhs = dhs + i_bh.to(tl.int64) * NC * S * D + o_state
    for k in tl.range(0, NC, num_stages=NUM_STAGES):
        i_c = NC - 1 - k
        tl.store(p_dhs + i_c * S * D, b_dh, mask=m_h)  # gradient at the end of chunk i_c
        o_t = i_c * BC + o_c
        m_t = o_t < T
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BC]
        b_L = tl.cumsum(b_g, axis=0)  # [BC]
        b_Lend = tl.sum(tl.where(o_c == BC - 1, b_L, 0.0), axis=0)
        b_c = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BC, BS]
        b_do = _rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BC, BD]
        b_c = b_c * tl.exp(b_L[:, None] * b_A[None, :])  # decayed from the chunk start
        b_dh = b_dh * tl.exp(b_Lend * b_A)[:, None]
        b_dh += _dot(tl.trans(b_c), b_do, PRECISION)  # [BS, BD]
    if STORE_DH0:
        tl.store(dh0 + i_bh.to(tl.int64) * S * D + o_state, b_dh, mask=m_h)
