"""The recurrent Triton kernel for the GDN recurrence: section 6 of the design document.

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t        (S, D) state, decay broadcast over D
    o_t = c_t^T H_t

As the document describes: one program per (batch, head), the state on chip in fp32, a
sequential loop over time. Three changes from the document's design, each measured in
``benchmarks/gdn.py``:

* **The value axis D is split across programs** in the forward: the D columns of the
  state evolve independently (the decay acts on rows), so a program can own a (S, BD)
  slice. At B=4, H=40 that is 160 · D/BD programs instead of 160 on a 132-SM GPU, and
  each program's step is shorter. The replay kernel splits S instead (its output
  dc_t = H_t do_t sums over D, so rows are what is independent there).
* **The loads are software-pipelined.** Nothing a step loads depends on the state, so
  ``tl.range(..., num_stages=N)`` lets the compiler issue the loads of step t + N - 1
  while step t computes: the loop waits on arithmetic, not on memory latency.
* **No state trajectory is stored.** The document saves every H_t for the backward,
  B·T·H·S·D·4 bytes: 4·4096·40·32·32·4 = 2.68e9 bytes (2.5 GiB) per layer at B=4,
  T=4096 (the document writes "2.6 GB"). Here the backward *replays* the forward instead.

The backward, derived. Write α_t = exp(g_t A) (an S-vector) and let dH_t be the gradient
of the loss with respect to H_t through every later step. Running backwards in time,

    dH_t   = c_t ⊗ do_t + α_{t+1} ⊙ dH_{t+1}        (dH_{T-1} also gets d final_state)
    dv_t   = dH_t^T b_t        db_t = dH_t v_t        dc_t = H_t do_t
    dlog_t = α_t ⊙ rowsum(H_{t-1} ⊙ dH_t)           gradient of the log-decay g_t A

dv and db need only the adjoint dH; dc needs the forward state H_t; dlog needs H_{t-1}.
Using H_t - b_t ⊗ v_t = α_t ⊙ H_{t-1} and the recurrence for dH, dlog obeys

    dlog_t = dlog_{t+1} + c_t ⊙ dc_t - b_t ⊙ db_t,    dlog_T = rowsum(H_final ⊙ d final_state)

(exact algebra, no division by α, so it holds when the decay underflows to zero). So:

1. ``_replay_kernel`` runs the forward again, left to right, and writes dc_t = H_t do_t.
2. ``_reverse_kernel`` runs right to left with dH on chip and writes dv, db, and from the
   running dlog the gate gradients dg_t = Σ_s A_s dlog_t[s] and (per program) Σ_t g_t dlog_t.
3. torch sums the per-(b, h) partials of dA over the batch; autograd carries dA to A_log.

Memory arithmetic (fp32, B=4, T=4096, H=40, S=D=32): saved for backward are the inputs
themselves (no copies) and, if returned, the final state B·H·S·D·4 = 0.66 MB. The backward
allocates dc in fp32 (B·T·H·S·4 = 84 MB) besides the gradients it returns. Compute: three
sequential passes over T (forward, replay, reverse) instead of two.

Sizes need not be powers of two: blocks are the next power of two and loads/stores are
masked, so S=12, D=20 or T=63 run without padded copies. Every kernel accumulates in
fp32; o and the gradients come back in their input's dtype (float64 inputs are computed
in fp32 too).
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from hymo_mini.gdn import check_gdn_inputs

__all__ = ["triton_gated_delta_rule", "GatedDeltaRuleFunction", "CONFIGS", "INTERPRET"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"

# Launch parameters per kernel, chosen on an H200 (benchmarks/gdn.py --tune; results in
# benchmarks/results/). "block": the split axis' block size (D for fwd, S for replay).
CONFIGS = {
    "fwd": dict(block=8, num_warps=1, num_stages=4),
    "replay": dict(block=8, num_warps=1, num_stages=4),
    "reverse": dict(num_warps=2, num_stages=4),
}
# The interpreter runs programs one after the other: fewest programs, no pipelining.
INTERPRET_CONFIGS = {
    "fwd": dict(block=1 << 30, num_warps=1, num_stages=1),
    "replay": dict(block=1 << 30, num_warps=1, num_stages=1),
    "reverse": dict(num_warps=1, num_stages=1),
}


# --------------------------------------------------------------------------------------
# Kernels. Layouts: v (B, T, H, D); b, c (B, T, H, S); g (B, T, H) fp32; A (H, S);
# states (B, H, S, D). Row r = (i_b, t, i_h) of the (B, T, H) grid starts at r * S or r * D.
# Each loop iteration handles two time steps: the loads are [block, 2] tiles (time last)
# that tl.split cuts into the two steps' vectors. Two steps give every thread at least
# 4 bytes per load for 16-bit inputs, the smallest copy the pipeliner (cp.async) makes,
# and two independent reductions per iteration for the scheduler to overlap.
# --------------------------------------------------------------------------------------
@triton.jit
def _fwd_step(b_h, b_b, b_c, b_v, b_g, b_A):
    """H_t = exp(g_t A) ⊙ H_{t-1} + b_t ⊗ v_t, o_t = c_t^T H_t on one (BS, BD) block."""
    b_h = b_h * tl.exp(b_g * b_A)[:, None] + b_b[:, None] * b_v[None, :]  # [BS, BD]
    return b_h, tl.sum(b_h * b_c[:, None], axis=0)  # [BS, BD], [BD]


@triton.jit
def _fwd_kernel(v, b, c, g, A, h0, o, ht, T,
                H: tl.constexpr, S: tl.constexpr, D: tl.constexpr,
                BS: tl.constexpr, BD: tl.constexpr, ND: tl.constexpr,
                USE_H0: tl.constexpr, STORE_HT: tl.constexpr, NUM_STAGES: tl.constexpr):
    """Columns [i_d*BD, (i_d+1)*BD) of the state of one (b, h): o and the final state."""
    i_bh, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    i_b, i_h = i_bh // H, i_bh % H
    o_s, o_d, o_2 = tl.arange(0, BS), i_d * BD + tl.arange(0, BD), tl.arange(0, 2)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_state = i_bh.to(tl.int64) * S * D + o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + o_state, mask=m_h, other=0.0).to(tl.float32)
    row = i_b.to(tl.int64) * T * H + i_h  # (i_b, t=0, i_h)
    p_b = b + row * S + o_s[:, None] + o_2[None, :] * (H * S)  # [BS, 2]
    p_c = c + row * S + o_s[:, None] + o_2[None, :] * (H * S)  # [BS, 2]
    p_g = g + row + o_s[:, None] * 0 + o_2[None, :] * H  # [BS, 2], g_t on every row
    p_v = v + row * D + o_d[:, None] + o_2[None, :] * (H * D)  # [BD, 2]
    p_o = o + row * D + o_d[:, None] + o_2[None, :] * (H * D)  # [BD, 2]
    for t in tl.range(0, T, 2, num_stages=NUM_STAGES):
        m_t = (t + o_2) < T  # [2]: the second step is padding when T is odd
        m_st, m_dt = m_s[:, None] & m_t[None, :], m_d[:, None] & m_t[None, :]
        b_b0, b_b1 = tl.split(tl.load(p_b, mask=m_st, other=0.0).to(tl.float32))  # [BS]
        b_c0, b_c1 = tl.split(tl.load(p_c, mask=m_st, other=0.0).to(tl.float32))  # [BS]
        b_g0, b_g1 = tl.split(tl.load(p_g, mask=m_st, other=0.0))  # [BS]
        b_v0, b_v1 = tl.split(tl.load(p_v, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
        b_h, b_o0 = _fwd_step(b_h, b_b0, b_c0, b_v0, b_g0, b_A)
        b_h, b_o1 = _fwd_step(b_h, b_b1, b_c1, b_v1, b_g1, b_A)  # padding: g=b=v=0, a no-op
        tl.store(p_o, tl.join(b_o0, b_o1).to(p_o.dtype.element_ty), mask=m_dt)  # [BD, 2]
        p_b += 2 * H * S
        p_c += 2 * H * S
        p_g += 2 * H
        p_v += 2 * H * D
        p_o += 2 * H * D
    if STORE_HT:
        tl.store(ht + o_state, b_h, mask=m_h)


@triton.jit
def _replay_step(b_h, b_b, b_v, b_do, b_g, b_A):
    """The forward step again; returns dc'_t = (α_t ⊙ H_{t-1}) do_t for this block's rows."""
    b_h = b_h * tl.exp(b_g * b_A)[:, None]  # α_t ⊙ H_{t-1}  [BS, BD]
    b_dc = tl.sum(b_h * b_do[None, :], axis=1)  # [BS]
    return b_h + b_b[:, None] * b_v[None, :], b_dc  # H_t, dc'_t


@triton.jit
def _replay_kernel(v, b, g, A, h0, do, dc, T,
                   H: tl.constexpr, S: tl.constexpr, D: tl.constexpr,
                   BS: tl.constexpr, BD: tl.constexpr, NS: tl.constexpr,
                   USE_H0: tl.constexpr, NUM_STAGES: tl.constexpr):
    """Rows [i_s*BS, (i_s+1)*BS) of the state of one (b, h), left to right: dc' (fp32)."""
    i_bh, i_s = tl.program_id(0) // NS, tl.program_id(0) % NS
    i_b, i_h = i_bh // H, i_bh % H
    o_s, o_d, o_2 = i_s * BS + tl.arange(0, BS), tl.arange(0, BD), tl.arange(0, 2)
    m_s, m_d = o_s < S, o_d < D
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_H0:
        o_state = i_bh.to(tl.int64) * S * D + o_s[:, None] * D + o_d[None, :]  # [BS, BD]
        b_h += tl.load(h0 + o_state, mask=m_s[:, None] & m_d[None, :], other=0.0).to(tl.float32)
    row = i_b.to(tl.int64) * T * H + i_h
    p_b = b + row * S + o_s[:, None] + o_2[None, :] * (H * S)  # [BS, 2]
    p_dc = dc + row * S + o_s[:, None] + o_2[None, :] * (H * S)  # [BS, 2]
    p_g = g + row + o_s[:, None] * 0 + o_2[None, :] * H  # [BS, 2]
    p_v = v + row * D + o_d[:, None] + o_2[None, :] * (H * D)  # [BD, 2]
    p_do = do + row * D + o_d[:, None] + o_2[None, :] * (H * D)  # [BD, 2]
    for t in tl.range(0, T, 2, num_stages=NUM_STAGES):
        m_t = (t + o_2) < T  # [2]
        m_st, m_dt = m_s[:, None] & m_t[None, :], m_d[:, None] & m_t[None, :]
        b_b0, b_b1 = tl.split(tl.load(p_b, mask=m_st, other=0.0).to(tl.float32))  # [BS]
        b_g0, b_g1 = tl.split(tl.load(p_g, mask=m_st, other=0.0))  # [BS]
        b_v0, b_v1 = tl.split(tl.load(p_v, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
        b_do0, b_do1 = tl.split(tl.load(p_do, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
        b_h, b_dc0 = _replay_step(b_h, b_b0, b_v0, b_do0, b_g0, b_A)
        b_h, b_dc1 = _replay_step(b_h, b_b1, b_v1, b_do1, b_g1, b_A)
        tl.store(p_dc, tl.join(b_dc0, b_dc1), mask=m_st)  # [BS, 2]
        p_b += 2 * H * S
        p_dc += 2 * H * S
        p_g += 2 * H
        p_v += 2 * H * D
        p_do += 2 * H * D


@triton.jit
def _reverse_step(b_dh, b_dlog, b_dA, b_b, b_c, b_dc, b_v, b_do, b_g, b_A):
    """One step right to left. In: dH holds α_{t+1} ⊙ dH_{t+1}, dlog holds dlog_{t+1},
    dc holds dc'_t from the replay. Out: the same one step earlier, and db_t, dv_t, dc_t."""
    b_db = tl.sum(b_dh * b_v[None, :], axis=1)  # db'_t = (α_{t+1} ⊙ dH_{t+1}) v_t  [BS]
    b_dlog += b_c * b_dc - b_b * b_db  # dlog_t  [BS]
    b_vdo = tl.sum(b_v * b_do, axis=0)  # v_t · do_t
    b_dh += b_c[:, None] * b_do[None, :]  # dH_t  [BS, BD]
    b_dv = tl.sum(b_dh * b_b[:, None], axis=0)  # dv_t = dH_t^T b_t  [BD]
    b_dA += b_g * b_dlog  # Σ_t g_t dlog_t  [BS]
    b_dg = tl.sum(b_dlog * b_A, axis=0)  # dg_t = Σ_s A_s dlog_t[s]
    b_dh = b_dh * tl.exp(b_g * b_A)[:, None]  # α_t ⊙ dH_t: what reaches H_{t-1}
    # the b_t ⊗ v_t terms left out of db', dc' above: db_t = dH_t v_t, dc_t = H_t do_t
    return b_dh, b_dlog, b_dA, b_db + b_c * b_vdo, b_dc + b_b * b_vdo, b_dv, b_dg


@triton.jit
def _reverse_kernel(v, b, c, g, A, do, dc, ht, dht, dv, db, dg, dA, dh0, T,
                    H: tl.constexpr, S: tl.constexpr, D: tl.constexpr,
                    BS: tl.constexpr, BD: tl.constexpr,
                    USE_DHT: tl.constexpr, STORE_DH0: tl.constexpr, NUM_STAGES: tl.constexpr):
    """The whole state of one (b, h), right to left: dv, db, dc (over dc'), dg, Σ_t g_t dlog_t."""
    i_bh = tl.program_id(0)
    i_b, i_h = i_bh // H, i_bh % H
    o_s, o_d, o_2 = tl.arange(0, BS), tl.arange(0, BD), tl.arange(0, 2)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_state = i_bh.to(tl.int64) * S * D + o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_dh = tl.zeros([BS, BD], dtype=tl.float32)
    b_dlog = tl.zeros([BS], dtype=tl.float32)
    if USE_DHT:  # the final state's gradient enters dH_{T-1} and dlog_T
        b_dh += tl.load(dht + o_state, mask=m_h, other=0.0).to(tl.float32)
        b_dlog += tl.sum(tl.load(ht + o_state, mask=m_h, other=0.0) * b_dh, axis=1)
    b_dA = tl.zeros([BS], dtype=tl.float32)
    row = i_b.to(tl.int64) * T * H + (T - 1) * H + i_h  # (i_b, t=T-1, i_h); o_2 steps back
    p_b = b + row * S + o_s[:, None] - o_2[None, :] * (H * S)  # [BS, 2]
    p_c = c + row * S + o_s[:, None] - o_2[None, :] * (H * S)
    p_dc = dc + row * S + o_s[:, None] - o_2[None, :] * (H * S)
    p_db = db + row * S + o_s[:, None] - o_2[None, :] * (H * S)
    p_g = g + row + o_s[:, None] * 0 - o_2[None, :] * H  # [BS, 2]
    p_dg = dg + row - o_2 * H  # [2]
    p_v = v + row * D + o_d[:, None] - o_2[None, :] * (H * D)  # [BD, 2]
    p_do = do + row * D + o_d[:, None] - o_2[None, :] * (H * D)
    p_dv = dv + row * D + o_d[:, None] - o_2[None, :] * (H * D)
    for t in tl.range(0, T, 2, num_stages=NUM_STAGES):
        m_t = (t + o_2) < T  # [2]: steps T-1-t and T-2-t exist
        m_st, m_dt = m_s[:, None] & m_t[None, :], m_d[:, None] & m_t[None, :]
        b_b0, b_b1 = tl.split(tl.load(p_b, mask=m_st, other=0.0).to(tl.float32))  # [BS]
        b_c0, b_c1 = tl.split(tl.load(p_c, mask=m_st, other=0.0).to(tl.float32))  # [BS]
        b_dc0, b_dc1 = tl.split(tl.load(p_dc, mask=m_st, other=0.0))  # [BS] dc'_t, fp32
        b_g0, b_g1 = tl.split(tl.load(p_g, mask=m_st, other=0.0))  # [BS]
        b_v0, b_v1 = tl.split(tl.load(p_v, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
        b_do0, b_do1 = tl.split(tl.load(p_do, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
        b_dh, b_dlog, b_dA, b_db0, b_dc0, b_dv0, b_dg0 = _reverse_step(
            b_dh, b_dlog, b_dA, b_b0, b_c0, b_dc0, b_v0, b_do0, b_g0, b_A)
        b_dh, b_dlog, b_dA, b_db1, b_dc1, b_dv1, b_dg1 = _reverse_step(
            b_dh, b_dlog, b_dA, b_b1, b_c1, b_dc1, b_v1, b_do1, b_g1, b_A)
        tl.store(p_db, tl.join(b_db0, b_db1).to(p_db.dtype.element_ty), mask=m_st)  # [BS, 2]
        tl.store(p_dc, tl.join(b_dc0, b_dc1), mask=m_st)  # dc_t over dc'_t, in place
        tl.store(p_dv, tl.join(b_dv0, b_dv1).to(p_dv.dtype.element_ty), mask=m_dt)  # [BD, 2]
        tl.store(p_dg, tl.join(b_dg0, b_dg1), mask=m_t)  # [2]
        p_b -= 2 * H * S
        p_c -= 2 * H * S
        p_dc -= 2 * H * S
        p_db -= 2 * H * S
        p_g -= 2 * H
        p_dg -= 2 * H
        p_v -= 2 * H * D
        p_do -= 2 * H * D
        p_dv -= 2 * H * D
    tl.store(dA + i_bh * S + o_s, b_dA, mask=m_s)
    if STORE_DH0:
        tl.store(dh0 + o_state, b_dh.to(dh0.dtype.element_ty), mask=m_h)


# --------------------------------------------------------------------------------------
# Launchers and the autograd wrapper
# --------------------------------------------------------------------------------------
def _config(name: str) -> dict:
    return (INTERPRET_CONFIGS if INTERPRET else CONFIGS)[name]


def _fwd(v, b, c, g32, A, h0, output_final_state):
    B, T, H, D = v.shape
    S = b.shape[-1]
    cfg = _config("fwd")
    BS = triton.next_power_of_2(S)
    BD = min(triton.next_power_of_2(D), cfg["block"])
    ND = triton.cdiv(D, BD)
    o = torch.empty_like(v)  # (B, T, H, D), v's dtype
    ht = v.new_empty(B, H, S, D, dtype=torch.float32) if output_final_state else None
    _fwd_kernel[(B * H * ND,)](
        v, b, c, g32, A, h0, o, ht, T, H=H, S=S, D=D, BS=BS, BD=BD, ND=ND,
        USE_H0=h0 is not None, STORE_HT=output_final_state, NUM_STAGES=cfg["num_stages"],
        num_warps=cfg["num_warps"])
    return o, ht


def _replay(v, b, g32, A, h0, do):
    B, T, H, D = v.shape
    S = b.shape[-1]
    cfg = _config("replay")
    BS = min(triton.next_power_of_2(S), cfg["block"])
    NS = triton.cdiv(S, BS)
    dc = b.new_empty(B, T, H, S, dtype=torch.float32)
    _replay_kernel[(B * H * NS,)](
        v, b, g32, A, h0, do, dc, T, H=H, S=S, D=D, BS=BS, BD=triton.next_power_of_2(D),
        NS=NS, USE_H0=h0 is not None, NUM_STAGES=cfg["num_stages"], num_warps=cfg["num_warps"])
    return dc


def _reverse(v, b, c, g32, A, h0, ht, do, dht, dc):
    B, T, H, D = v.shape
    S = b.shape[-1]
    cfg = _config("reverse")
    dv, db = torch.empty_like(v), torch.empty_like(b)
    dg = g32.new_empty(B, T, H)  # fp32
    dA = A.new_empty(B, H, S, dtype=torch.float32)  # per-(b, h) sums over t
    dh0 = torch.empty_like(h0) if h0 is not None else None
    _reverse_kernel[(B * H,)](
        v, b, c, g32, A, do, dc, ht, dht, dv, db, dg, dA, dh0, T, H=H, S=S, D=D,
        BS=triton.next_power_of_2(S), BD=triton.next_power_of_2(D), USE_DHT=dht is not None,
        STORE_DH0=h0 is not None, NUM_STAGES=cfg["num_stages"], num_warps=cfg["num_warps"])
    return dv, db, dg, dA.sum(0), dh0


def _bwd(v, b, c, g32, A, h0, ht, do, dht):
    dc = _replay(v, b, g32, A, h0, do)  # (B, T, H, S) fp32
    dv, db, dg, dA, dh0 = _reverse(v, b, c, g32, A, h0, ht, do, dht, dc)
    return dv, db, dc, dg, dA, dh0


class GatedDeltaRuleFunction(torch.autograd.Function):
    """(v, b, c, g, A, initial_state, output_final_state) -> (o, final_state or None)."""

    @staticmethod
    def forward(ctx, v, b, c, g, A, initial_state, output_final_state):
        v, b, c, A = (t.contiguous() for t in (v, b, c, A))
        g32 = g.contiguous().float()  # (B, T, H): fp32 so each step's load is a full word
        h0 = initial_state.contiguous() if initial_state is not None else None
        o, ht = _fwd(v, b, c, g32, A, h0, output_final_state)
        ctx.save_for_backward(v, b, c, g32, A, h0, ht)
        ctx.dtypes = (c.dtype, g.dtype, A.dtype)
        return o, ht

    @staticmethod
    def backward(ctx, do, dht):
        v, b, c, g32, A, h0, ht = ctx.saved_tensors
        if do is None:
            do = torch.zeros_like(v)
        dv, db, dc, dg, dA, dh0 = _bwd(v, b, c, g32, A, h0, ht, do.contiguous(),
                                       dht.contiguous() if dht is not None else None)
        c_dtype, g_dtype, A_dtype = ctx.dtypes
        return dv, db, dc.to(c_dtype), dg.to(g_dtype), dA.to(A_dtype), dh0, None


def triton_gated_delta_rule(v, b, c, g, A, initial_state=None, output_final_state=False):
    """The GDN recurrence by the Triton kernels (a dispatcher backend; see gdn.py).

    v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); initial_state (B, H, S, D) or
    None. Returns ``(o, final_state)``: o (B, T, H, D) in v's dtype, final_state (B, H, S, D)
    fp32 if ``output_final_state`` else None. Differentiable in v, b, c, g, A and
    initial_state.
    """
    check_gdn_inputs(v, b, c, g, A, initial_state)
    if v.device.type != "cuda" and not INTERPRET:
        raise RuntimeError(
            "the Triton GDN kernel needs a CUDA GPU, or the Triton interpreter on CPU: set "
            "TRITON_INTERPRET=1 before hymo_mini.gdn_triton is imported, or use "
            "gated_delta_rule(..., backend='eager').")
    B, T, H, D = v.shape
    if T == 0:  # nothing to run: o is empty and the state passes through unchanged
        o = v.new_zeros(B, 0, H, D)
        state = (initial_state.float() if initial_state is not None
                 else v.new_zeros(B, H, b.shape[-1], D, dtype=torch.float32))
        return o, (state if output_final_state else None)
    o, ht = GatedDeltaRuleFunction.apply(v, b, c, g, A, initial_state, bool(output_final_state))
    return o, ht
