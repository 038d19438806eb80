"""The recurrent Triton kernel for the gla recurrence: section 6 of the design document.

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t        (S, D) state, decay broadcast over D
    o_t = c_t^T H_t

As the document describes: one program per (batch, head), the state on chip in fp32, a
sequential loop over time. What differs from its design: the loads are software-pipelined
(nothing a step loads depends on the state; each iteration takes two steps, as [block, 2]
tiles cut by ``tl.split``, so a 16-bit load still moves the 4 bytes an asynchronous copy
needs); the D columns of the state, which evolve independently, may be split across
programs; and the forward keeps one state every C steps, not every H_t.

The backward, derived. Write α_t = exp(g_t A) (an S-vector) and dH_t for the gradient of
the loss with respect to H_t through every later step. Running backwards in time,

    dH_t   = c_t ⊗ do_t + α_{t+1} ⊙ dH_{t+1}       (dH_{T-1} also gets d final_state)
    dv_t   = dH_t^T b_t        db_t = dH_t v_t       dc_t = H_t do_t
    dlog_t = rowsum(α_t ⊙ H_{t-1} ⊙ dH_t)          gradient of the log-decay g_t A (S,)
    dg_t   = Σ_s A_s dlog_t[s]        dA = Σ_{b,t} g_t dlog_t      dh0 = α_0 ⊙ dH_0

dc and dlog need the forward states, in reverse order. Going back from H_t to H_{t-1}
would divide by α_t, which underflows to zero at strong decay, so the states are
recomputed: the forward stores the state entering every segment of C steps, and the
backward, segment by segment from the last, replays the C steps from that checkpoint
into a scratch buffer and then walks them right to left. (The cheaper identity
dlog_t = dlog_{t+1} + c_t ⊙ dc_t - b_t ⊙ db_t needs no H_{t-1}, but it subtracts nearly
equal terms and loses the gate gradient's precision over long sequences.)

Memory: the inputs, the checkpoints B·H·(T/C)·S·D fp32 (only when a gradient is needed);
the backward adds one segment of scratch per (b, h). Sizes need not be powers of two (masked
blocks). Everything accumulates in fp32; o and the gradients come back in their input's
dtype (float64 is computed in fp32).
"""

import torch
import triton
import triton.language as tl

from hymo_mini.launching import cdiv, next_power_of_2, on_inputs_device
from hymo_mini.ops.utils.checks import check_inputs, check_triton_device, empty_sequence
from hymo_mini.ops.utils.precision import INTERPRET

__all__ = ["recurrent_gla_triton", "RecurrentGLAFunction", "CONFIGS"]

# Launch parameters per kernel and input width (4: fp32, 2: bf16/fp16). fwd "block": columns
# of the state per program; bwd "chunk": the checkpoint interval C (even).
CONFIGS = {
    "fwd": {4: dict(block=32, num_warps=1, num_stages=3),
            2: dict(block=32, num_warps=1, num_stages=3)},
    "bwd": {4: dict(chunk=32, num_warps=2, num_stages=3),
            2: dict(chunk=64, num_warps=1, num_stages=3)},
}
# The interpreter runs programs one after the other: fewest programs, no pipelining, and
# short segments so that the tests' sequences span several checkpoints.
INTERPRET_CONFIGS = {
    "fwd": dict(block=1 << 30, num_warps=1, num_stages=1),
    "bwd": dict(chunk=16, num_warps=1, num_stages=1),
}


# Layouts: v (B, T, H, D); b, c (B, T, H, S); g (B, T, H) fp32; A (H, S); states (B, H, S, D).
# Each loop iteration takes two steps, loaded as [block, 2] tiles (time last) that tl.split
# cuts into the two steps' vectors.
@triton.jit
def _fwd_kernel(v, b, c, g, A, h0, o, ht, ckpt, T,
                H: tl.constexpr, S: tl.constexpr, D: tl.constexpr,
                BS: tl.constexpr, BD: tl.constexpr, ND: tl.constexpr, C: tl.constexpr,
                USE_H0: tl.constexpr, STORE_HT: tl.constexpr, STORE_CKPT: tl.constexpr,
                NUM_STAGES: tl.constexpr):
    """Columns [i_d*BD, (i_d+1)*BD) of the state of one (b, h): o, the final state, and
    the state entering every segment of C steps (the checkpoints of the backward)."""
    i_bh, i_d = tl.program_id(0) // ND, tl.program_id(0) % ND
    i_b, i_h = i_bh // H, i_bh % H
    o_s, o_d, o_2 = tl.arange(0, BS), i_d * BD + tl.arange(0, BD), tl.arange(0, 2)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_h = o_s[:, None] * D + o_d[None, :]  # [BS, BD], offsets inside one (S, D) state
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    b_h = tl.zeros([BS, BD], dtype=tl.float32)
    if USE_H0:
        b_h += tl.load(h0 + i_bh.to(tl.int64) * S * D + o_h, mask=m_h, other=0.0).to(tl.float32)
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
        if STORE_CKPT:  # H_{t-1} when t opens a segment (a scalar test, broadcast for the mask)
            p_ck = ckpt + (i_bh.to(tl.int64) * tl.cdiv(T, C) + t // C) * (S * D) + o_h
            tl.store(p_ck, b_h, mask=m_h & ((o_h * 0 + t % C) == 0))  # ckpt: (B*H, T/C, S, D)
        b_h = b_h * tl.exp(b_g0 * b_A)[:, None] + b_b0[:, None] * b_v0[None, :]  # H_t
        b_o0 = tl.sum(b_h * b_c0[:, None], axis=0)  # [BD]
        b_h = b_h * tl.exp(b_g1 * b_A)[:, None] + b_b1[:, None] * b_v1[None, :]  # H_{t+1}
        b_o1 = tl.sum(b_h * b_c1[:, None], axis=0)  # [BD] (padding: g=b=v=0, H unchanged)
        tl.store(p_o, tl.join(b_o0, b_o1).to(p_o.dtype.element_ty), mask=m_dt)  # [BD, 2]
        p_b += 2 * H * S
        p_c += 2 * H * S
        p_g += 2 * H
        p_v += 2 * H * D
        p_o += 2 * H * D
    if STORE_HT:
        tl.store(ht + i_bh.to(tl.int64) * S * D + o_h, b_h, mask=m_h)


@triton.jit
def _bwd_step(b_dh, b_dA, b_hp, b_b, b_c, b_v, b_do, b_g, b_A):
    """One step right to left. In: b_dh = α_{t+1} ⊙ dH_{t+1}, b_hp = H_{t-1}. Out: α_t ⊙ dH_t,
    the running Σ g dlog, and this step's dc_t, db_t, dv_t, dg_t."""
    b_a = tl.exp(b_g * b_A)  # α_t  [BS]
    b_hd = b_hp * b_a[:, None]  # α_t ⊙ H_{t-1}  [BS, BD]
    b_vdo = tl.sum(b_v * b_do, axis=0)  # v_t · do_t
    b_dc = tl.sum(b_hd * b_do[None, :], axis=1) + b_b * b_vdo  # H_t do_t  [BS]
    b_dh += b_c[:, None] * b_do[None, :]  # dH_t  [BS, BD]
    b_dlog = tl.sum(b_hd * b_dh, axis=1)  # dlog_t  [BS]
    b_db = tl.sum(b_dh * b_v[None, :], axis=1)  # dH_t v_t  [BS]
    b_dv = tl.sum(b_dh * b_b[:, None], axis=0)  # dH_t^T b_t  [BD]
    b_dg = tl.sum(b_dlog * b_A, axis=0)  # Σ_s A_s dlog_t[s]
    return b_dh * b_a[:, None], b_dA + b_g * b_dlog, b_dc, b_db, b_dv, b_dg


@triton.jit
def _bwd_kernel(v, b, c, g, A, do, dht, ckpt, scratch, dv, db, dc, dg, dA, dh0, T,
                H: tl.constexpr, S: tl.constexpr, D: tl.constexpr,
                BS: tl.constexpr, BD: tl.constexpr, C: tl.constexpr,
                STORE_DH0: tl.constexpr, NUM_STAGES: tl.constexpr):
    """The whole state of one (b, h), segment by segment from the last: replay the
    segment from its checkpoint into scratch (H_{t-1} for each step), then walk it back."""
    i_bh = tl.program_id(0)
    i_b, i_h = i_bh // H, i_bh % H
    o_s, o_d, o_2 = tl.arange(0, BS), tl.arange(0, BD), tl.arange(0, 2)
    m_s, m_d = o_s < S, o_d < D
    m_h = m_s[:, None] & m_d[None, :]  # [BS, BD]
    o_h = o_s[:, None] * D + o_d[None, :]  # [BS, BD]
    b_A = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32)  # [BS]
    # dH starts as d final_state (zeros when the final state is unused). Loading it as a
    # tile, like the scratch states, also gives dH their register layout, which saves the
    # layout conversions that starting from tl.zeros costs in every step.
    b_dh = tl.load(dht + i_bh.to(tl.int64) * S * D + o_h, mask=m_h, other=0.0).to(tl.float32)
    b_dA = tl.zeros([BS], dtype=tl.float32)
    NT = tl.cdiv(T, C)
    p_ck = ckpt + i_bh.to(tl.int64) * NT * S * D + o_h  # [BS, BD]
    p_sc = scratch + i_bh.to(tl.int64) * C * S * D + o_h  # [BS, BD]: this program's C states
    row0 = i_b.to(tl.int64) * T * H + i_h  # (i_b, t=0, i_h)
    for i_k in range(NT):
        t0 = (NT - 1 - i_k) * C  # the segment [t0, t0 + C), last first
        # 1. replay: scratch[j] = H_{t0+j-1}, from the checkpoint H_{t0-1}
        b_h = tl.load(p_ck + (t0 // C) * (S * D), mask=m_h, other=0.0)  # [BS, BD]
        p_b = b + (row0 + t0 * H) * S + o_s[:, None] + o_2[None, :] * (H * S)  # [BS, 2]
        p_g = g + (row0 + t0 * H) + o_s[:, None] * 0 + o_2[None, :] * H  # [BS, 2]
        p_v = v + (row0 + t0 * H) * D + o_d[:, None] + o_2[None, :] * (H * D)  # [BD, 2]
        for j in tl.range(0, C, 2, num_stages=NUM_STAGES):
            m_t = (t0 + j + o_2) < T  # [2]
            m_st, m_dt = m_s[:, None] & m_t[None, :], m_d[:, None] & m_t[None, :]
            b_b0, b_b1 = tl.split(tl.load(p_b, mask=m_st, other=0.0).to(tl.float32))  # [BS]
            b_g0, b_g1 = tl.split(tl.load(p_g, mask=m_st, other=0.0))  # [BS]
            b_v0, b_v1 = tl.split(tl.load(p_v, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
            tl.store(p_sc + j * (S * D), b_h, mask=m_h)
            b_h = b_h * tl.exp(b_g0 * b_A)[:, None] + b_b0[:, None] * b_v0[None, :]
            tl.store(p_sc + (j + 1) * (S * D), b_h, mask=m_h)
            b_h = b_h * tl.exp(b_g1 * b_A)[:, None] + b_b1[:, None] * b_v1[None, :]
            p_b += 2 * H * S
            p_g += 2 * H
            p_v += 2 * H * D
        tl.debug_barrier()  # the scratch is written before any thread reads it back
        # 2. reverse: steps t = t0 + C - 1 - j and t - 1, right to left
        row = row0 + (t0 + C - 1) * H
        p_b = b + row * S + o_s[:, None] - o_2[None, :] * (H * S)  # [BS, 2]
        p_c = c + row * S + o_s[:, None] - o_2[None, :] * (H * S)
        p_db = db + row * S + o_s[:, None] - o_2[None, :] * (H * S)
        p_dc = dc + row * S + o_s[:, None] - o_2[None, :] * (H * S)
        p_g = g + row + o_s[:, None] * 0 - o_2[None, :] * H  # [BS, 2]
        p_dg = dg + row - o_2 * H  # [2]
        p_v = v + row * D + o_d[:, None] - o_2[None, :] * (H * D)  # [BD, 2]
        p_do = do + row * D + o_d[:, None] - o_2[None, :] * (H * D)
        p_dv = dv + row * D + o_d[:, None] - o_2[None, :] * (H * D)
        for j in tl.range(0, C, 2, num_stages=NUM_STAGES):
            m_t = (t0 + C - 1 - j - o_2) < T  # [2]: steps past T are padding (g = 0)
            m_st, m_dt = m_s[:, None] & m_t[None, :], m_d[:, None] & m_t[None, :]
            b_b0, b_b1 = tl.split(tl.load(p_b, mask=m_st, other=0.0).to(tl.float32))  # [BS]
            b_c0, b_c1 = tl.split(tl.load(p_c, mask=m_st, other=0.0).to(tl.float32))  # [BS]
            b_g0, b_g1 = tl.split(tl.load(p_g, mask=m_st, other=0.0))  # [BS]
            b_v0, b_v1 = tl.split(tl.load(p_v, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
            b_do0, b_do1 = tl.split(tl.load(p_do, mask=m_dt, other=0.0).to(tl.float32))  # [BD]
            b_hp0 = tl.load(p_sc + (C - 1 - j) * (S * D), mask=m_h, other=0.0)  # H_{t-1}
            b_hp1 = tl.load(p_sc + (C - 2 - j) * (S * D), mask=m_h, other=0.0)  # H_{t-2}
            b_dh, b_dA, b_dc0, b_db0, b_dv0, b_dg0 = _bwd_step(
                b_dh, b_dA, b_hp0, b_b0, b_c0, b_v0, b_do0, b_g0, b_A)
            b_dh, b_dA, b_dc1, b_db1, b_dv1, b_dg1 = _bwd_step(
                b_dh, b_dA, b_hp1, b_b1, b_c1, b_v1, b_do1, b_g1, b_A)
            tl.store(p_dc, tl.join(b_dc0, b_dc1).to(p_dc.dtype.element_ty), mask=m_st)
            tl.store(p_db, tl.join(b_db0, b_db1).to(p_db.dtype.element_ty), mask=m_st)
            tl.store(p_dv, tl.join(b_dv0, b_dv1).to(p_dv.dtype.element_ty), mask=m_dt)
            tl.store(p_dg, tl.join(b_dg0, b_dg1), mask=m_t)  # [2]
            p_b -= 2 * H * S
            p_c -= 2 * H * S
            p_db -= 2 * H * S
            p_dc -= 2 * H * S
            p_g -= 2 * H
            p_dg -= 2 * H
            p_v -= 2 * H * D
            p_do -= 2 * H * D
            p_dv -= 2 * H * D
        tl.debug_barrier()  # every read of this segment's scratch is done before the next
    tl.store(dA + i_bh * S + o_s, b_dA, mask=m_s)
    if STORE_DH0:
        tl.store(dh0 + i_bh.to(tl.int64) * S * D + o_h, b_dh.to(dh0.dtype.element_ty), mask=m_h)


def _config(name: str, v: torch.Tensor) -> dict:
    return INTERPRET_CONFIGS[name] if INTERPRET else CONFIGS[name][min(v.element_size(), 4)]


def _chunk(v: torch.Tensor) -> int:
    """The checkpoint interval C: the configured one, or less for short sequences (even)."""
    return max(2, min(_config("bwd", v)["chunk"], next_power_of_2(v.shape[1])))


def _fwd(v, b, c, g32, A, h0, output_final_state, store_ckpt):
    B, T, H, D = v.shape
    S = b.shape[-1]
    cfg, C = _config("fwd", v), _chunk(v)
    BD = min(next_power_of_2(D), cfg["block"])
    ND = cdiv(D, BD)
    o = torch.empty_like(v)  # (B, T, H, D), v's dtype
    ht = v.new_empty(B, H, S, D, dtype=torch.float32) if output_final_state else None
    ckpt = v.new_empty(B * H, cdiv(T, C), S, D, dtype=torch.float32) if store_ckpt else None
    _fwd_kernel[(B * H * ND,)](
        v, b, c, g32, A, h0, o, ht, ckpt, T, H=H, S=S, D=D, BS=next_power_of_2(S),
        BD=BD, ND=ND, C=C, USE_H0=h0 is not None, STORE_HT=output_final_state,
        STORE_CKPT=store_ckpt, NUM_STAGES=cfg["num_stages"], num_warps=cfg["num_warps"])
    return o, ht, ckpt


def _bwd(v, b, c, g32, A, h0, ckpt, do, dht):
    B, T, H, D = v.shape
    S = b.shape[-1]
    cfg, C = _config("bwd", v), _chunk(v)
    scratch = v.new_empty(B * H, C, S, D, dtype=torch.float32)  # one segment of states
    dv, db, dc = torch.empty_like(v), torch.empty_like(b), torch.empty_like(b)
    dg = g32.new_empty(B, T, H)  # fp32
    dA = A.new_empty(B, H, S, dtype=torch.float32)  # per-(b, h) sums over t
    dh0 = torch.empty_like(h0) if h0 is not None else None
    dht = dht if dht is not None else v.new_zeros(B, H, S, D, dtype=torch.float32)
    _bwd_kernel[(B * H,)](
        v, b, c, g32, A, do, dht, ckpt, scratch, dv, db, dc, dg, dA, dh0, T, H=H, S=S, D=D,
        BS=next_power_of_2(S), BD=next_power_of_2(D), C=C,
        STORE_DH0=h0 is not None, NUM_STAGES=cfg["num_stages"],
        num_warps=cfg["num_warps"])
    return dv, db, dc, dg, dA.sum(0), dh0


class RecurrentGLAFunction(torch.autograd.Function):
    """(v, b, c, g, A, initial_state, output_final_state, store_ckpt) -> (o, final_state or
    None). ``store_ckpt``: keep the checkpoints a backward needs."""

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, g, A, initial_state, output_final_state, store_ckpt):
        v, b, c, A = (t.contiguous() for t in (v, b, c, A))
        g32 = g.contiguous().float()  # (B, T, H): fp32, one word per step and head
        h0 = initial_state.contiguous() if initial_state is not None else None
        o, ht, ckpt = _fwd(v, b, c, g32, A, h0, output_final_state, store_ckpt)
        ctx.save_for_backward(v, b, c, g32, A, h0, ckpt)
        ctx.g_dtype = g.dtype
        ctx.set_materialize_grads(False)
        return o, ht

    @staticmethod
    @on_inputs_device
    def backward(ctx, do, dht):
        v, b, c, g32, A, h0, ckpt = ctx.saved_tensors
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dv, db, dc, dg, dA, dh0 = _bwd(v, b, c, g32, A, h0, ckpt, do,
                                       dht.contiguous() if dht is not None else None)
        return dv, db, dc, dg.to(ctx.g_dtype), dA.to(A.dtype), dh0, None, None


def recurrent_gla_triton(v, b, c, g, A, initial_state=None, output_final_state=False, *,
                         check_values: bool = True):
    """The gla recurrence by the recurrent Triton kernels (backend "recurrent_triton").

    v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); initial_state (B, H, S, D) or
    None. Returns ``(o, final_state)``: o (B, T, H, D) in v's dtype, final_state (B, H, S, D)
    fp32 if ``output_final_state`` else None. Differentiable in v, b, c, g, A and
    initial_state.
    """
    check_inputs(v, b, c, g, A, initial_state, check_values=check_values)
    check_triton_device(v, INTERPRET, "the recurrent Triton kernel", __name__,
                        "gated_linear_attention(..., backend='chunk_torch')")
    if v.shape[1] == 0:
        return empty_sequence(v, b, initial_state, output_final_state)
    inputs = [t for t in (v, b, c, g, A, initial_state) if t is not None]
    needs_grad = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
    # checkpoints only when a backward can follow: inference keeps nothing
    return RecurrentGLAFunction.apply(v, b, c, g, A, initial_state, bool(output_final_state),
                                        needs_grad)
