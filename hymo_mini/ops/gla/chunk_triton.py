"""The chunked Triton kernels for the gla rule, forward and backward: the launchers and the
autograd Function.

    H_t = exp(g_t A) ⊙ H_{t-1} + b_t ⊗ v_t ,      o_t = c_tᵀ H_t

``hymo_mini.ops.gla.chunk`` derives the chunked form; the kernels compute it with the state
in memory once per chunk of BC steps (H_k, the state chunk k starts with) and the pairs formed
in blocks of BT = 16 steps, inside a program that carries the state on chip:

    1. chunk_writes_kernel   (chunk_h)    every chunk's own write ΔH_k and decay, at once
    2. state_scan_kernel     (chunk_h)    H_{k+1} = exp(L_C A) ⊙ H_k + ΔH_k, chunk by chunk
    3. chunk_output_kernel   (chunk_o)    every chunk's outputs from H_k (twice: ``utils.pairs``)
    4. state_grad_kernel     (chunk_h)    backward: dH at each chunk's end, right to left
    5. chunk_grad_kernel     (chunk_bwd)  backward: every chunk's dv, db, dc, dg and dA

**The backward, derived** (per block; dH the gradient of the loss at its end, H the state at its
start, l the gate summed from its start, l_C over it, and dP_ts = do_t · v_s for s < t):

    dv_s = Σ_{t≥s} P_ts do_t + (b_s ⊙ exp((l_C - l_s) A)) dH
    dc_t = exp(l_t A) ⊙ (H do_t) + Σ_{s≤t} dP_ts b_s ⊙ exp((l_t - l_s) A)
    db_s = exp((l_C - l_s) A) ⊙ (dH v_s) + Σ_{t≥s} dP_ts c_t ⊙ exp((l_t - l_s) A)

dlog_t, the gradient of the log-decay g_t A (S,), collects every decay factor spanning step t:

    dlog_t = Σ_{t'≥t} c_t' ⊙ dc^H_t' + Σ_{s<t} (b_s ⊙ (db^H_s + db^P_s) - c_s ⊙ dc^P_s)
             + exp(l_C A) ⊙ rowsum(H ⊙ dH)

(H: the part through the block's start or end state; P: the in-block part without its
t = s terms, which cancel exactly). Then dg_t = Σ_n A_n dlog_tn and dA = Σ_t g_t dlog_t.
Every term carries its own decay factor: the shorter Σ_{u≥t} (c_u ⊙ dc_u - b_u ⊙ db_u) +
rowsum(H_end ⊙ dH) subtracts terms of size one and loses dA at strong decay.

Memory: the chunk states and, for a backward, the block-start states (B·H·⌈T/16⌉·S·D
fp32). Inputs may be fp32, bf16, fp16 (or fp64, computed as fp32); o and every gradient come
back in their input's dtype, the final state in fp32. Products: ``utils.precision``.
"""

import torch

from hymo_mini.launching import cdiv, next_power_of_2, on_inputs_device
from hymo_mini.ops.gla import chunk_bwd, chunk_h, chunk_o
from hymo_mini.ops.utils.checks import check_inputs, check_triton_device, empty_sequence
from hymo_mini.ops.utils.precision import INTERPRET, products

__all__ = ["chunk_gla_triton", "ChunkGLAFunction", "CHUNK", "BLOCK", "SPLIT", "LAUNCH"]

CHUNK = 32 if INTERPRET else 128  # BC: steps per stored chunk state (short on the CPU)
BLOCK = 16  # BT: steps per block of pairs
SPLIT = 16  # a sequential program owns a [SPLIT, SPLIT] block of the state
# per kernel: num_warps, and num_stages (the software pipeline of the sequential loops)
LAUNCH = {"chunk_writes": dict(num_warps=1, num_stages=1),
          "state_scan": dict(num_warps=1, num_stages=3),
          "chunk_output": dict(num_warps=1, num_stages=2),
          "state_grad": dict(num_warps=1, num_stages=3),
          "chunk_grad": dict(num_warps=1, num_stages=1)}


def _state_blocks(S: int, D: int, least: int):
    """The [BS, BD] block of the state a program owns (at least ``least`` wide, at most
    SPLIT) and how many cover S and D."""
    BS = min(max(least, next_power_of_2(S)), max(least, SPLIT))
    BD = min(max(least, next_power_of_2(D)), max(least, SPLIT))
    return BS, BD, cdiv(S, BS), cdiv(D, BD)


def _forward(v, b, c, g, A, h0, output_final_state, keep, precision):
    """o, the final state (or None), and the block-start states (None unless ``keep``)."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    NC = cdiv(T, CHUNK)
    BS, BD = max(16, next_power_of_2(S)), max(16, next_power_of_2(D))  # tl.dot needs 16
    hs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # ΔH_k, then H_k in place
    decay = v.new_empty(B * H, NC, S, dtype=torch.float32)
    ht = v.new_empty(B, H, S, D, dtype=torch.float32) if output_final_state else None
    chunk_h.chunk_writes_kernel[(NC, B * H)](b, v, g, A, hs, decay, T, H=H, S=S, D=D, BC=CHUNK,
                                             BS=BS, BD=BD, PRECISION=precision,
                                             **LAUNCH["chunk_writes"])
    sBS, sBD, NS, ND = _state_blocks(S, D, 1)  # no tl.dot in the scan: any width
    scan = LAUNCH["state_scan"]
    chunk_h.state_scan_kernel[(B * H * NS * ND,)](
        hs, decay, h0, ht, T, S=S, D=D, BC=CHUNK, BS=sBS, BD=sBD, NS=NS, ND=ND,
        USE_H0=h0 is not None, STORE_HT=output_final_state, NUM_STAGES=scan["num_stages"],
        num_warps=scan["num_warps"])
    o = torch.empty_like(v)
    hb = v.new_empty(B * H, cdiv(T, BLOCK), S, D, dtype=torch.float32) if keep else None
    left = v.new_empty(B * H * NC, dtype=torch.int32)  # chunks the product launch left
    for product in (True, False):
        chunk_o.chunk_output_kernel[(NC, B * H)](
            v, b, c, g, A, hs, o, hb, left, T, H=H, S=S, D=D, BC=CHUNK, BS=BS, BD=BD,
            BT=BLOCK, LOG2_BT=BLOCK.bit_length() - 1, STORE_HB=keep, PRODUCT=product,
            PRECISION=precision, **LAUNCH["chunk_output"])
    return o, ht, hb


def _backward(v, b, c, g, A, h0, hb, do, dht, precision):
    B, T, H, D = v.shape
    S = b.shape[-1]
    NC = cdiv(T, CHUNK)
    dhs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # the gradient at chunk ends
    dh0 = v.new_empty(B, H, S, D, dtype=torch.float32) if h0 is not None else None
    sBS, sBD, NS, ND = _state_blocks(S, D, 16)
    grad = LAUNCH["state_grad"]
    chunk_h.state_grad_kernel[(B * H * NS * ND,)](
        c, g, A, do, dht, dhs, dh0, T, H=H, S=S, D=D, BC=CHUNK, BS=sBS, BD=sBD, NS=NS, ND=ND,
        USE_DHT=dht is not None, STORE_DH0=h0 is not None, NUM_STAGES=grad["num_stages"],
        PRECISION=precision, num_warps=grad["num_warps"])
    dv, db, dc, dg = (torch.empty_like(t) for t in (v, b, c, g))
    dA = v.new_empty(B * H, NC, S, dtype=torch.float32)  # per-chunk partial sums
    BS, BD = max(16, next_power_of_2(S)), max(16, next_power_of_2(D))
    chunk_bwd.chunk_grad_kernel[(NC, B * H)](
        v, b, c, g, A, do, hb, dhs, dv, db, dc, dg, dA, T, H=H, S=S, D=D, BC=CHUNK, BS=BS,
        BD=BD, BT=BLOCK, LOG2_BT=BLOCK.bit_length() - 1, PRECISION=precision,
        **LAUNCH["chunk_grad"])
    return dv, db, dc, dg, dA.view(B, H, NC, S).sum(dim=(0, 2)), dh0


def _dtype(v, b, c):
    """The widest dtype among the multiplied inputs: it sets the products' grade."""
    return torch.promote_types(v.dtype, torch.promote_types(b.dtype, c.dtype))


class ChunkGLAFunction(torch.autograd.Function):
    """(v, b, c, g, A, initial_state, output_final_state, keep) -> (o, final_state or None).
    ``keep``: store what a backward needs (only when autograd will call it)."""

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, g, A, initial_state, output_final_state, keep):
        v, b, c, g, A = (t.contiguous() for t in (v, b, c, g, A))
        h0 = initial_state.contiguous().float() if initial_state is not None else None
        dtype = _dtype(v, b, c)
        o, ht, hb = _forward(v, b, c, g, A, h0, output_final_state, keep,
                             products(dtype, forward=True))
        if keep:
            ctx.save_for_backward(v, b, c, g, A, h0, hb)
        # the backward's products, chosen now: a change of PyTorch's TF32 switch in between
        # does not change them
        ctx.precision = products(dtype, forward=False)
        ctx.h0_dtype = initial_state.dtype if initial_state is not None else None
        return o, ht

    @staticmethod
    @on_inputs_device
    def backward(ctx, do, dht):
        v, b, c, g, A, h0, hb = ctx.saved_tensors
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dht = dht.contiguous().float() if dht is not None else None
        dv, db, dc, dg, dA, dh0 = _backward(v, b, c, g, A, h0, hb, do, dht, ctx.precision)
        if dh0 is not None:
            dh0 = dh0.to(ctx.h0_dtype)
        return dv, db, dc, dg, dA.to(A.dtype), dh0, None, None


def chunk_gla_triton(v, b, c, g, A, initial_state=None, output_final_state=False, *,
                     check_values: bool = True):
    """The gla recurrence by the chunked Triton kernels (backend "chunk_triton").

    v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); initial_state (B, H, S, D) or
    None. Returns ``(o, final_state)``: o (B, T, H, D) in v's dtype, final_state (B, H, S,
    D) fp32 if ``output_final_state`` else None. Differentiable in v, b, c, g, A and
    initial_state.
    """
    check_inputs(v, b, c, g, A, initial_state, check_values=check_values)
    check_triton_device(v, INTERPRET, "the chunked Triton kernel", __name__,
                        "gated_linear_attention(..., backend='chunk_torch')")
    if v.shape[1] == 0:
        return empty_sequence(v, b, initial_state, output_final_state)
    inputs = [t for t in (v, b, c, g, A, initial_state) if t is not None]
    keep = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
    return ChunkGLAFunction.apply(v, b, c, g, A, initial_state, bool(output_final_state), keep)
