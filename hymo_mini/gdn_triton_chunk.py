"""The chunkwise-parallel Triton kernel for the GDN recurrence, forward and backward.

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t ,      o_t = c_t^T H_t

``hymo_mini.gdn_chunk`` derives the chunked form in einops; this module runs it on the
GPU's tensor cores. Two lengths are in play:

* **Chunks of BC = 64 steps** are where the state is written to memory: H_k, the state
  chunk k starts with (S·D fp32 per 64 steps). A parallel kernel computes what each chunk
  adds on its own, ΔH_k = Σ_s (b_s ⊙ exp((L_end - L_s) A)) ⊗ v_s, and a light sequential
  kernel per (batch, head) chains them, H_{k+1} = exp(L_end A) ⊙ H_k + ΔH_k
  (``hymo_mini.gdn_triton_states``).
* **Blocks of BT = 16 steps** are where the decay-weighted attention is computed. A
  program per (chunk, batch, head) loads H_k and walks its blocks, carrying the state on
  chip: o = (c ⊙ exp(l A)) H + W v, H ← exp(l_end A) ⊙ H + (b ⊙ exp((l_end - l) A))^T v,
  with l the gate summed from the block start.

The weights W_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n), s ≤ t, are where the structure of
the decay matters. Factored as (c_t exp(l_t A)) · (b_s exp(-l_s A)) they are one tl.dot,
but exp(-l_s A) overflows fp32 once l_s·|A_n| passes ~88, which at this model's decay
rates (head h forgets at rate h + 1; the benchmark's g averages 0.5) happens within a few
steps. Building every exp((l_t - l_s) A_n) directly, a [16, 16, S] tensor, is safe but
costs 16·S exponentials per step and no tensor cores. This kernel splits the pairs s < t
into levels by the highest bit in which their in-block indices differ (k = 0 .. 3): at
level k, s lies in the lower and t in the upper half of one 2^(k+1)-step sub-block, and
the decay splits at r, the first step of that upper half:

    exp((l_t - l_s) A) = exp((l_t - l_r) A) · exp((l_r - l_s) A),   both factors in [0, 1].

Each row is a t or an s on a level, never both, so one [16, S] tensor of factors per
level serves both sides; a level is one masked tl.dot. In total 4·S exponentials per step
(a quarter), four small tensor-core products instead of a [16, 16, S] reduction, and still
nothing overflows: a factor that underflows to zero belongs to a pair whose true decay is
below 1e-38 as well. The diagonal s = t is Σ_n c_tn b_tn. (Blocks of 32 steps, five
levels, also work and were slower; 64 steps lost gate-gradient precision under TF32.)

The backward, derived (per block; dH is the gradient of the loss with respect to the
state at the block's end, H the state at its start, M_ts = do_t · v_s for s ≤ t):

    dv_s = Σ_{t≥s} W_ts do_t + (b_s ⊙ exp((l_end - l_s) A)) dH
    dc_t = exp(l_t A) ⊙ (H do_t) + Σ_{s≤t} M_ts b_s ⊙ exp((l_t - l_s) A)
    db_s = exp((l_end - l_s) A) ⊙ (dH v_s) + Σ_{t≥s} M_ts c_t ⊙ exp((l_t - l_s) A)

The gradient of the log-decay g_t A (an S-vector), dlog_t, collects every decay factor
that spans step t: reads at t' ≥ t of the block-start state, writes at s < t carried to
the block end, pairs s < t ≤ t' inside the block, and the carry exp(l_end A):

    dlog_t = Σ_{t'≥t} c_t' ⊙ dc^H_t' + Σ_{s<t} (b_s ⊙ (db^H_s + db^W_s) - c_s ⊙ dc^W_s)
             + exp(l_end A) ⊙ rowsum(H ⊙ dH)

(superscript H: the part through the block's start or end state; W: the in-block part,
without its t = s terms, which cancel exactly; the W sum is the prefix sum of column
minus row sums of the pairs s < t'). Then dg_t = Σ_n A_n dlog_tn and
dA = Σ_t g_t dlog_t. The shorter dlog_t = Σ_{u≥t} (c_u ⊙ dc_u - b_u ⊙ db_u) +
rowsum(H_end ⊙ dH) is the same number, but it subtracts terms of size one whose
difference is tiny when the decay is strong; with TF32 products that left dA wrong by
5-8% at decay x10 (measured on the H200). Every term above carries its decay factor, so
it is small exactly when the true gradient is, and the error stays at TF32 level (1e-3).

The backward needs the state at each block's start and its gradient at each block's
end. The forward stores the block-start states while it walks the blocks (only when
autograd will need them); a sequential kernel, right to left, stores the gradient at each
chunk's end, dH_k ← exp(L_end A) ⊙ dH_{k+1} + (c ⊙ exp(L A))^T do; a program per chunk then
walks its blocks right to left, carrying dH on chip. The backward uses the same levels,
with the strictly causal M masked per level: the in-block part of dc is Σ_k X_k ⊙ (M_k
(b ⊙ X_k)) and of db is Σ_k X_k ⊙ (M_k^T (c ⊙ X_k)), X_k the level's factors.

Memory: besides the inputs, the forward keeps the block-start states (B·H·⌈T/16⌉·S·D
fp32; 168 MB at B=4, T=4096, H=40) for the backward, and the chunk states while it runs;
the backward adds the chunk-end gradients and returns the gradients.

Precision: all arithmetic in fp32; tl.dot multiplies fp32 in TF32 on the GPU
(``DOT_PRECISION``), relative error about 1e-3 (fla's chunk_gla: the same); the
interpreter computes plain fp32. Inputs may be fp32, bf16, fp16 (or fp64, computed in
fp32); o and every gradient come back in their input's dtype, the final state in fp32.

Measured (benchmarks/results/gdn_h200_2026-11-30.json: one H200, torch 2.11, Triton 3.6,
fla-core 0.6.0, one run with the peer; H=40, S=D=32; forward | forward + backward | peak
memory of forward + backward, this kernel / fla chunk_gla):

    B=4, T=4096,  fp32   0.65 / 0.92 ms | 1.93 / 2.85 ms (0.68x) | 524 / 1040 MiB
    B=4, T=4096,  bf16   0.56 / 0.97 ms | 2.28 / 2.72 ms (0.84x) | 363 / 963 MiB
    B=1, T=16384, fp32   0.57 / 0.98 ms | 2.10 / 3.41 ms (0.62x) | 524 / 1040 MiB
    B=1, T=16384, bf16   0.59 / 0.96 ms | 2.66 / 3.24 ms (0.82x) | 363 / 963 MiB

Forward + backward and memory beat the peer everywhere. These rows go through the
dispatcher, whose input checks (a few small reductions and one host sync) are a fixed
cost per call that fla does not pay; the kernel alone (the autograd Function, as
benchmarks/gdn.py's "triton_chunk_kernel"; benchmarks/results/chunk_kernel_only_h200_
2026-11-30.json, B=4, T=4096, fp32, one run, fla re-timed) took 0.35 ms forward and
1.49 ms forward + backward against fla's 0.78 and 2.85 (0.44x and 0.52x).

The forward is 4.3x (kernel alone, fp32) to 7-15x (through the dispatcher, fp32 and bf16)
the time a device copy of its minimum bytes takes (fla: 9.8-24x), not the 3x aimed for.
It moves 2.0x the minimum bytes in fp32 and 2.5x in bf16 (b and v are read twice, for
the chunk states and for the outputs; the chunk states, fp32 whatever the inputs, are
written, scanned and read), and even so it runs at about 2 TB/s (679 MB in 0.35 ms,
kernel alone) where a copy reaches 4.25 TB/s. That the per-chunk output kernel is held
up by the latency of its small per-block steps is our reading (one warp per program was
fastest, more pipelining did not help); no hardware counters were read. In the T sweep
(B=1, H=40, fp32; benchmarks/results/gdn_sweep_h200_2026-11-30.json) one sequence does
not fill the GPU at short T:
at T=1024 the recurrent kernel is faster forward and forward + backward, at T=2048
forward only, and from T=4096 on this kernel is the fastest hymo path.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from hymo_mini.gdn import check_gdn_inputs, empty_sequence
from hymo_mini.gdn_triton_states import (
    _chunk_delta_kernel,
    _rows,
    _state_bwd_kernel,
    _state_scan_kernel,
)

__all__ = ["triton_chunk_gated_delta_rule", "ChunkGatedDeltaRuleFunction", "CONFIGS",
           "BLOCKS", "INTERPRET", "DOT_PRECISION"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
DOT_PRECISION = "tf32"  # "ieee" for full fp32 products (slower), "tf32x3" in between

# Launch parameters per kernel, from one sweep on an H200 at B=4, T=4096, H=40, S=D=32 fp32
# (benchmarks/gdn_chunk_profile.py --sweep -> benchmarks/results/chunk_sweep_h200_2026-11-30
# .json; differences under ~5% were noise).
# "split": the (split x split) block of the state a sequential program owns (its (n, d)
# entries evolve independently, so 4 programs share one (b, h) at S = D = 32).
# "block" 16 was the fastest (forward + backward 1.76-1.88 ms; 32: 2.6-2.7 ms; 64: 3.5-3.7
# ms). 64 is not offered: with TF32 products its gate gradient at strong decay missed the
# test tolerance on the H200 (probably because the in-block prefix sums of dlog cancel more
# terms in longer blocks); 32 passes.
CONFIGS = {
    "chunk": 64,  # BC: steps per stored state
    "block": 16,  # BT: steps per attention block: 16 or 32
    "chunk_delta": dict(num_warps=1, num_stages=1),
    "state_scan": dict(split=16, num_warps=1, num_stages=3),
    "output_fwd": dict(num_warps=1, num_stages=1),
    "state_bwd": dict(split=16, num_warps=1, num_stages=3),
    "chunk_bwd": dict(num_warps=1, num_stages=1),
}
BLOCKS = (16, 32)
INTERPRET_CONFIGS = {
    "chunk": 32,
    "block": 16,
    "chunk_delta": dict(num_warps=1, num_stages=1),
    "state_scan": dict(split=1 << 30, num_warps=1, num_stages=1),
    "output_fwd": dict(num_warps=1, num_stages=1),
    "state_bwd": dict(split=1 << 30, num_warps=1, num_stages=1),
    "chunk_bwd": dict(num_warps=1, num_stages=1),
}


# --------------------------------------------------------------------------------------
# Kernels. Layouts: v, do (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S);
# states (B·H, NC, S, D) fp32. Step t of (i_b, i_h) is row (i_b·T + t)·H + i_h.
# --------------------------------------------------------------------------------------
@triton.jit
def _gate_sums(b_g, o_i, BT: tl.constexpr):
    """Gate summed from the block start, l [BT], and over the whole block, l_end."""
    b_l = tl.cumsum(b_g, axis=0)  # [BT]
    return b_l, tl.sum(tl.where(o_i == BT - 1, b_l, 0.0), axis=0)


@triton.jit
def _level(b_l, o_i, k: tl.constexpr):
    """Level k of a block's pairs s < t: those whose step indices first differ in bit k,
    i.e. s in the lower and t in the upper half of one 2^(k+1)-step sub-block. Every pair
    s < t of the block is on exactly one of the levels 0 .. log2(BT) - 1.

    The decay of a pair splits at r, the first step of the upper half: exp((l_t - l_s) A) =
    exp((l_t - l_r) A) · exp((l_r - l_s) A), both exponents ≥ 0 times A < 0, both factors
    in [0, 1]. Each step is a t on this level (bit k set) or an s (bit k clear), never both,
    so one gap per row serves: gap_t = l_t - l_r for the t rows, l_r - l_s for the s rows.
    Returns gap [BT] (≥ 0) and the level's pair mask [BT, BT]."""
    hi = o_i >> k  # [BT] which half-sub-block
    is_t = (hi & 1) == 1  # [BT] upper half: this row is a t of the level
    o_r = tl.where(is_t, hi, hi + 1) << k  # [BT] first step of the upper half (< BT)
    b_lr = tl.sum(tl.where(o_i[None, :] == o_r[:, None], b_l[None, :], 0.0), axis=1)  # [BT]
    b_gap = tl.where(is_t, b_l - b_lr, b_lr - b_l)  # [BT] ≥ 0
    m_k = (hi[:, None] == hi[None, :] + 1) & is_t[:, None]  # [BT, BT] pairs of level k
    return b_gap, m_k


@triton.jit
def _intra(b_c, b_b, b_M, b_l, b_A, o_i, LOG2_BT: tl.constexpr, GRAD: tl.constexpr,
           PRECISION: tl.constexpr):
    """The block's decay-weighted attention W_ts = Σ_n c_tn b_sn exp((l_t - l_s) A_n), s ≤ t,
    level by level (see _level): W = diag(c · b) + Σ_k mask_k ⊙ (c ⊙ X_k)(b ⊙ X_k)^T with
    X_k = exp(gap_k A) ≤ 1, four tl.dot calls and 4·BT·BS exponentials, where the direct
    [BT, BT, BS] tensor of decays takes BT·BT·BS and no tensor cores. Nothing overflows:
    every factor is at most one, and one that underflows to zero belongs to a pair whose
    true weight is below 1e-38 too. If GRAD, also the in-block parts (pairs s < t) of
    Σ_s M_ts b_s E_ts and Σ_t M_ts c_t E_ts [BT, BS] for the caller's strictly causal M.
    Returns W [BT, BT] and the two [BT, BS] sums (zeros unless GRAD)."""
    b_W = tl.where(o_i[:, None] == o_i[None, :], tl.sum(b_c * b_b, axis=1)[:, None], 0.0)
    b_dc = tl.zeros_like(b_c)
    b_db = tl.zeros_like(b_b)
    for k in tl.static_range(LOG2_BT):
        b_gap, m_k = _level(b_l, o_i, k)
        b_X = tl.exp(b_gap[:, None] * b_A[None, :])  # [BT, BS] in [0, 1]
        b_cX, b_bX = b_c * b_X, b_b * b_X
        b_W += tl.where(m_k, tl.dot(b_cX, tl.trans(b_bX), input_precision=PRECISION), 0.0)
        if GRAD:
            b_Mk = tl.where(m_k, b_M, 0.0)  # [BT, BT]
            b_dc += b_X * tl.dot(b_Mk, b_bX, input_precision=PRECISION)  # [BT, BS]
            b_db += b_X * tl.dot(tl.trans(b_Mk), b_cX, input_precision=PRECISION)
    return b_W, b_dc, b_db


@triton.jit
def _output_fwd_kernel(v, b, c, g, A, hs, o, hb, T,
                       H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                       BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                       LOG2_BT: tl.constexpr, STORE_HB: tl.constexpr, PRECISION: tl.constexpr):
    """o for one chunk of one (b, h): its 16-step blocks in order, the state on chip.
    If STORE_HB (autograd will need it), also the state each block starts with."""
    i_c, i_bh = tl.program_id(0), tl.program_id(1)
    i_b, i_h = i_bh // H, i_bh % H
    NC, NB = tl.cdiv(T, BC), tl.cdiv(T, BT)
    o_i, o_s, o_d = tl.arange(0, BT), tl.arange(0, BS), tl.arange(0, BD)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]
    o_sd = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_h = tl.load(hs + (i_bh.to(tl.int64) * NC + i_c) * S * D + o_sd, mask=m_h,
                  other=0.0)  # [BS, BD] fp32, the state the chunk starts with
    row0 = i_b.to(tl.int64) * T * H + i_h
    for i_t in range(0, tl.cdiv(tl.minimum(BC, T - i_c * BC), BT)):
        if STORE_HB:
            i_blk = i_c * (BC // BT) + i_t
            tl.store(hb + (i_bh.to(tl.int64) * NB + i_blk) * S * D + o_sd, b_h, mask=m_h)
        o_t = i_c * BC + i_t * BT + o_i
        m_t = o_t < T
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = _gate_sums(b_g, o_i, BT)
        b_c = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_b = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        # read the state the block starts with, then the block itself
        b_cH = b_c * tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS]
        b_o = tl.dot(b_cH, b_h, input_precision=PRECISION)  # [BT, BD]
        b_W, _, _ = _intra(b_c, b_b, b_c, b_l, b_A, o_i, LOG2_BT, False, PRECISION)  # [BT, BT]
        b_o += tl.dot(b_W, b_v, input_precision=PRECISION)  # [BT, BD]
        p_o = o + (row0 + o_t[:, None] * H) * D + o_d[None, :]
        tl.store(p_o, b_o.to(p_o.dtype.element_ty), mask=m_t[:, None] & m_d[None, :])
        # hand the state to the next block
        b_bH = b_b * tl.exp((b_lend - b_l)[:, None] * b_A[None, :])  # [BT, BS]
        b_h = b_h * tl.exp(b_lend * b_A)[:, None]
        b_h += tl.dot(tl.trans(b_bH), b_v, input_precision=PRECISION)  # [BS, BD]


@triton.jit
def _chunk_bwd_kernel(v, b, c, g, A, do, hb, dhs, dv, db, dc, dg, dA, T,
                      H: tl.constexpr, S: tl.constexpr, D: tl.constexpr, BC: tl.constexpr,
                      BS: tl.constexpr, BD: tl.constexpr, BT: tl.constexpr,
                      LOG2_BT: tl.constexpr, PRECISION: tl.constexpr):
    """dv, db, dc, dg and Σ g dlog for one chunk of one (b, h): its blocks right to left."""
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
        # H: the state at the block start, stored by the forward
        p_hb = hb + (i_bh.to(tl.int64) * NB + i_c * (BC // BT) + i_t) * S * D
        b_h = tl.load(p_hb + o_sd, mask=m_h, other=0.0)  # [BS, BD]
        # the block
        o_t = i_c * BC + i_t * BT + o_i
        m_t = o_t < T
        b_g = tl.load(g + row0 + o_t * H, mask=m_t, other=0.0).to(tl.float32)  # [BT]
        b_l, b_lend = _gate_sums(b_g, o_i, BT)
        b_c = _rows(c, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_b = _rows(b, row0, o_t, m_t, o_s, m_s, S, H)  # [BT, BS]
        b_v = _rows(v, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_do = _rows(do, row0, o_t, m_t, o_d, m_d, D, H)  # [BT, BD]
        b_ec = tl.exp(b_l[:, None] * b_A[None, :])  # [BT, BS] block start -> t
        b_eb = tl.exp((b_lend - b_l)[:, None] * b_A[None, :])  # [BT, BS] s -> block end
        b_eT = tl.exp(b_lend * b_A)  # [BS] the whole block
        b_M = tl.dot(b_do, tl.trans(b_v), input_precision=PRECISION)  # [BT, BT] do_t·v_s
        b_Mdiag = tl.sum(tl.where(o_i[:, None] == o_i[None, :], b_M, 0.0), axis=1)  # [BT]
        b_M = tl.where(o_i[:, None] > o_i[None, :], b_M, 0.0)  # pairs s < t
        b_W, b_dci, b_dbi = _intra(b_c, b_b, b_M, b_l, b_A, o_i, LOG2_BT, True, PRECISION)
        b_dv = tl.dot(tl.trans(b_W), b_do, input_precision=PRECISION)  # [BT, BD]
        b_dv += tl.dot(b_b * b_eb, b_dh, input_precision=PRECISION)
        b_dch = b_ec * tl.dot(b_do, tl.trans(b_h), input_precision=PRECISION)  # [BT, BS]
        b_dbh = b_eb * tl.dot(b_v, tl.trans(b_dh), input_precision=PRECISION)  # [BT, BS]
        # dlog_t, summed so that no two large terms cancel (see the module docstring):
        # later reads of the block-start state, earlier writes to the block end, the pairs
        # s < t ≤ t' inside the block (a prefix sum of column minus row sums), the carry.
        b_x = b_b * (b_dbh + b_dbi) - b_c * b_dci  # [BT, BS]
        b_dlog = tl.cumsum(b_c * b_dch, axis=0, reverse=True) + tl.cumsum(b_x, axis=0) - b_x
        b_dlog += (b_eT * tl.sum(b_h * b_dh, axis=1))[None, :]  # [BT, BS]
        b_dc = b_dch + b_dci + b_Mdiag[:, None] * b_b  # + the t = s terms
        b_db = b_dbh + b_dbi + b_Mdiag[:, None] * b_c
        b_dA += tl.sum(b_dlog * b_g[:, None], axis=0)  # [BS]
        b_dg = tl.sum(b_dlog * b_A[None, :], axis=1)  # [BT]
        o_row = row0 + o_t[:, None] * H  # [BT, 1]
        m_tS, m_tD = m_t[:, None] & m_s[None, :], m_t[:, None] & m_d[None, :]
        tl.store(dv + o_row * D + o_d[None, :], b_dv.to(dv.dtype.element_ty), mask=m_tD)
        tl.store(dc + o_row * S + o_s[None, :], b_dc.to(dc.dtype.element_ty), mask=m_tS)
        tl.store(db + o_row * S + o_s[None, :], b_db.to(db.dtype.element_ty), mask=m_tS)
        tl.store(dg + row0 + o_t * H, b_dg.to(dg.dtype.element_ty), mask=m_t)
        # the gradient at the block start = at the end of the block before
        b_dh = b_dh * b_eT[:, None]
        b_dh += tl.dot(tl.trans(b_c * b_ec), b_do, input_precision=PRECISION)  # [BS, BD]
    tl.store(dA + (i_bh.to(tl.int64) * NC + i_c) * S + o_s, b_dA, mask=m_s)


# --------------------------------------------------------------------------------------
# Launchers and the autograd wrapper
# --------------------------------------------------------------------------------------
def _config(name: str):
    return (INTERPRET_CONFIGS if INTERPRET else CONFIGS)[name]


def _blocks(S: int, D: int):
    """Full-width blocks (tl.dot needs 16 at least; masks cover the rest)."""
    return max(16, triton.next_power_of_2(S)), max(16, triton.next_power_of_2(D))


def _split(S: int, D: int, split: int):
    BS, BD = _blocks(S, D)
    BS, BD = min(BS, max(16, split)), min(BD, max(16, split))
    return BS, BD, triton.cdiv(S, BS), triton.cdiv(D, BD)


def _forward(v, b, c, g, A, h0, output_final_state, store_hb):
    B, T, H, D = v.shape
    S = b.shape[-1]
    BC, NC = _config("chunk"), triton.cdiv(T, _config("chunk"))
    BT = _config("block")
    if BT not in BLOCKS or BT > BC:
        raise ValueError(f"CONFIGS['block'] must be one of {BLOCKS} and at most the chunk "
                         f"({BC}), got {BT}")
    hs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)
    ht = v.new_empty(B, H, S, D, dtype=torch.float32) if output_final_state else None
    # the chunk states: every chunk's ΔH in parallel (into hs), then the scan (in place)
    decay = v.new_empty(B * H, NC, S, dtype=torch.float32)
    BS, BD = _blocks(S, D)
    cfg = _config("chunk_delta")
    _chunk_delta_kernel[(NC, B * H)](
        b, v, g, A, hs, decay, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD,
        PRECISION=DOT_PRECISION, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    cfg = _config("state_scan")
    BS = min(triton.next_power_of_2(S), cfg["split"])  # no tl.dot: no minimum of 16
    BD = min(triton.next_power_of_2(D), cfg["split"])
    NS, ND = triton.cdiv(S, BS), triton.cdiv(D, BD)
    _state_scan_kernel[(B * H * NS * ND,)](
        hs, decay, h0, ht, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD, NS=NS, ND=ND,
        USE_H0=h0 is not None, STORE_HT=output_final_state, NUM_STAGES=cfg["num_stages"],
        num_warps=cfg["num_warps"])
    # the outputs, block by block
    cfg = _config("output_fwd")
    BS, BD = _blocks(S, D)
    o = torch.empty_like(v)
    # the backward needs the state at each block's start: the chunk states if a block is a
    # chunk, else the forward stores them (B·H·⌈T/BT⌉·S·D fp32)
    store_hb = store_hb and BT < BC
    hb = (v.new_empty(B * H, triton.cdiv(T, BT), S, D, dtype=torch.float32) if store_hb
          else hs)
    _output_fwd_kernel[(NC, B * H)](
        v, b, c, g, A, hs, o, hb, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD, BT=BT,
        LOG2_BT=BT.bit_length() - 1, STORE_HB=store_hb, PRECISION=DOT_PRECISION,
        num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    return o, hb, ht


def _backward(v, b, c, g, A, h0, hb, do, dht):
    B, T, H, D = v.shape
    S = b.shape[-1]
    BC, NC = _config("chunk"), triton.cdiv(T, _config("chunk"))
    cfg = _config("state_bwd")
    BS, BD, NS, ND = _split(S, D, cfg["split"])
    dhs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)
    dh0 = v.new_empty(B, H, S, D, dtype=torch.float32) if h0 is not None else None
    _state_bwd_kernel[(B * H * NS * ND,)](
        c, g, A, do, dht, dhs, dh0, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD, NS=NS, ND=ND,
        USE_DHT=dht is not None, STORE_DH0=h0 is not None, NUM_STAGES=cfg["num_stages"],
        PRECISION=DOT_PRECISION, num_warps=cfg["num_warps"])
    cfg = _config("chunk_bwd")
    BS, BD = _blocks(S, D)
    dv, db, dc, dg = (torch.empty_like(t) for t in (v, b, c, g))
    dA = v.new_empty(B * H, NC, S, dtype=torch.float32)  # per-chunk partial sums
    _chunk_bwd_kernel[(NC, B * H)](
        v, b, c, g, A, do, hb, dhs, dv, db, dc, dg, dA, T, H=H, S=S, D=D, BC=BC, BS=BS, BD=BD,
        BT=_config("block"), LOG2_BT=_config("block").bit_length() - 1,
        PRECISION=DOT_PRECISION, num_warps=cfg["num_warps"], num_stages=cfg["num_stages"])
    dA = dA.view(B, H, NC, S).sum(dim=(0, 2))  # (H, S)
    return dv, db, dc, dg, dA, dh0


class ChunkGatedDeltaRuleFunction(torch.autograd.Function):
    """(v, b, c, g, A, initial_state, output_final_state) -> (o, final_state or None)."""

    @staticmethod
    def forward(ctx, v, b, c, g, A, initial_state, output_final_state):
        v, b, c, g, A = (t.contiguous() for t in (v, b, c, g, A))
        h0 = initial_state.contiguous().float() if initial_state is not None else None
        o, hb, ht = _forward(v, b, c, g, A, h0, output_final_state, any(ctx.needs_input_grad))
        ctx.save_for_backward(v, b, c, g, A, h0, hb)
        ctx.h0_dtype = initial_state.dtype if initial_state is not None else None
        return o, ht

    @staticmethod
    def backward(ctx, do, dht):
        v, b, c, g, A, h0, hb = ctx.saved_tensors
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dht = dht.contiguous().float() if dht is not None else None
        dv, db, dc, dg, dA, dh0 = _backward(v, b, c, g, A, h0, hb, do, dht)
        if dh0 is not None:
            dh0 = dh0.to(ctx.h0_dtype)
        return dv, db, dc, dg, dA.to(A.dtype), dh0, None


def triton_chunk_gated_delta_rule(v, b, c, g, A, initial_state=None, output_final_state=False):
    """The GDN recurrence by the chunked Triton kernels (a dispatcher backend; see gdn.py).

    v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); initial_state (B, H, S, D) or
    None. Returns ``(o, final_state)``: o (B, T, H, D) in v's dtype, final_state (B, H, S,
    D) fp32 if ``output_final_state`` else None. Differentiable in v, b, c, g, A and
    initial_state.
    """
    check_gdn_inputs(v, b, c, g, A, initial_state)
    if v.device.type != "cuda" and not INTERPRET:
        raise RuntimeError(
            "the chunked Triton GDN kernel needs a CUDA GPU, or the Triton interpreter on "
            "CPU: set TRITON_INTERPRET=1 before hymo_mini.gdn_triton_chunk is imported, or "
            "use gated_delta_rule(..., backend='chunk').")
    if v.shape[1] == 0:
        return empty_sequence(v, b, initial_state, output_final_state)
    return ChunkGatedDeltaRuleFunction.apply(v, b, c, g, A, initial_state,
                                             bool(output_final_state))
