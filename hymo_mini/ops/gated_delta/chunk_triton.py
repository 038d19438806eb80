"""The chunked Triton kernels for the gated delta rule, forward and backward: the launchers
and the autograd Function.

    H'_t = exp(g_t A) ⊙ H_{t-1},   H_t = H'_t + β_t b_t ⊗ (v_t - H'_tᵀ b_t),   o_t = H_tᵀ c_t

``hymo_mini.ops.gated_delta.chunk`` derives the chunked form; per chunk of BT = 16 steps,
with L the gate summed from the chunk's start, Γ = exp(L A), E_ts = exp((L_t - L_s) A), H_0
the state the chunk starts with and H_C the one it ends with:

    M_ts = β_t Mk_ts,  Mk_ts = Σ_n b_tn b_sn E_tsn (s < t)      P_ts = Σ_n c_tn b_sn E_tsn (s ≤ t)
    K̃ = b ⊙ Γ,  Q̃ = c ⊙ Γ,  K̂ = b ⊙ exp((L_C - L) A)         (BT, S)
    Uv = (I + M)⁻¹ diag(β) V,  W = (I + M)⁻¹ diag(β) K̃,  U = Uv - W H_0
    O = Q̃ H_0 + P U,   H_C = Γ_C ⊙ H_0 + K̂ᵀ U

    1. wy_fwd_kernel       (wy)         every chunk's Uv, W (and Mk, (I + M)⁻¹) at once
    2. state_fwd_kernel    (chunk_h)    chunk by chunk: each H_0 and U (over groups if long)
    3. chunk_output_kernel (chunk_o)    every chunk's O at once
    4. du_local_kernel     (chunk_bwd)  backward: every chunk's Pᵀ dO
    5. state_bwd_kernel    (chunk_h)    backward: dH at each chunk's end, right to left
    6. chunk_grad_kernel   (chunk_bwd)  backward: every gradient of one chunk

For 16-bit inputs one launch does steps 1-3 (``chunk_chain``). The kernels that form pairs
run twice: by one product where a chunk fits, by levels elsewhere (``utils.pairs``).

**The backward, derived.** Given dO (BT, D) and dH_C (S, D), the gradient at the chunk's
end, and writing R = V - K̃ H_0 (so that (I + M) U = diag(β) R):

    dU   = Pᵀ dO + K̂ dH_C                                                     (BT, D)
    dH_0 = Q̃ᵀ dO + Γ_C ⊙ dH_C - Wᵀ dU        the gradient at the previous chunk's end
    dX   = (I + M)⁻ᵀ dU                       through the solve                 (BT, D)
    dM   = -dX Uᵀ (s < t only),   dMk = diag(β) dM                            (BT, BT)
    dv   = diag(β) dX,   dK̃ = -diag(β) dX H_0ᵀ,   dβ_t = dX_t · R_t + Σ_s dM_ts Mk_ts
    dQ̃   = dO H_0ᵀ,  dK̂ = U dH_Cᵀ,  dP = dO Uᵀ (s ≤ t)                      (BT, S), (BT, BT)
    dc_t = Γ_t ⊙ dQ̃_t + Σ_{s≤t} dP_ts b_s ⊙ E_ts
    db_s = Γ_s ⊙ dK̃_s + e_s ⊙ dK̂_s + Σ_{t≥s} dP_ts c_t ⊙ E_ts
           + Σ_{t>s} dMk_ts b_t ⊙ E_ts + Σ_{u<s} dMk_su b_u ⊙ E_su

(e_s = exp((L_C - L_s) A)). The first two lines are the chunk-to-chunk pass, right to
left; the rest is one program per chunk. The gate: dlog_i (S,), the gradient of the
log-decay g_i A, collects every decay factor that spans step i (Γ_t for t ≥ i, e_s for
s < i, E_ts for s < i ≤ t, and Γ_C), each term with its own factor, none subtracted:

    dlog_i = Σ_{t≥i} (Q̃_t ⊙ dQ̃_t + K̃_t ⊙ dK̃_t) + Σ_{s<i} K̂_s ⊙ dK̂_s
             + Σ_{s<i≤t} (pair terms: ``chunk_bwd.pair_grads``) + Γ_C ⊙ rowsum(H_0 ⊙ dH_C)

then dg_i = Σ_n A_n dlog_in and dA = Σ_i g_i dlog_i.

Memory: W, U, the chunk-start states and, for a backward, Mk and (I + M)⁻¹, all fp32. o and
every gradient come back in their inputs' dtypes, the final state in fp32 (fp64 for fp64).
"""

import torch

from hymo_mini.launching import cdiv, next_power_of_2, on_inputs_device
from hymo_mini.ops.gated_delta import chunk_bwd, chunk_chain, chunk_h, chunk_o, wy
from hymo_mini.ops.utils.checks import check_inputs, check_triton_device, empty_sequence
from hymo_mini.ops.utils.precision import INTERPRET, products

__all__ = ["chunk_gated_delta_triton", "ChunkGatedDeltaFunction", "CHUNK", "LAUNCH",
           "LAUNCH_16BIT", "GROUP_CHUNKS", "GROUPS_BELOW", "ONE_LAUNCH", "STRETCH"]

CHUNK = 16  # BT: steps per chunk
# the input dtypes whose forward runs in one launch (chunk_chain), over stretches of STRETCH
# chunks (fp32 inputs, six products a dot, are faster in the three steps)
ONE_LAUNCH, STRETCH = (torch.bfloat16, torch.float16), 8
# Per kernel: num_warps, num_stages (and maxnreg, a cap on the registers per thread); for the
# state pass "split", the value columns one program owns. LAUNCH_16BIT replaces entries for
# bf16 and fp16 inputs, whose products are one TF32 or bf16 product each.
LAUNCH = {"wy_fwd": dict(num_warps=1, num_stages=1, maxnreg=128),
          "chunk_output": dict(num_warps=1, num_stages=1, maxnreg=128),
          "du_local": dict(num_warps=1, num_stages=1),
          "chunk_grad": dict(num_warps=4, num_stages=1),
          "state_fwd": dict(split=32, num_warps=2, num_stages=3),
          "state_bwd": dict(split=16, num_warps=2, num_stages=3),
          # over groups: the kernels summing up a group ("split": columns of [Φ | Ψ]), and
          # the forward's walks over the groups
          "group_sums": dict(split=64, num_warps=2, num_stages=3),
          "group_state_fwd": dict(split=32, num_warps=2, num_stages=3),
          "chain_fwd": dict(num_warps=1, num_stages=1)}
LAUNCH_16BIT = {"chunk_grad": dict(num_warps=1, num_stages=1),
                "state_fwd": dict(split=16, num_warps=4, num_stages=3),
                "state_bwd": dict(split=16, num_warps=4, num_stages=3)}
# the state pass runs over groups of GROUP_CHUNKS chunks when one walk would launch fewer
# than GROUPS_BELOW programs (few long sequences: too few to fill the GPU)
GROUP_CHUNKS, GROUPS_BELOW = 32, 128


def _launch(name: str, half: bool) -> tuple[int, dict]:
    """Kernel ``name``'s columns per program ("split", or None) and its launch options."""
    settings = dict((LAUNCH_16BIT if half else {}).get(name, LAUNCH[name]))
    return settings.pop("split", None), settings


def _groups(programs: int, NC: int) -> tuple[int, int]:
    """(groups, chunks per group) of the state pass: (1, NC), the one walk, unless a walk
    would launch fewer than GROUPS_BELOW programs."""
    if programs >= GROUPS_BELOW or NC <= GROUP_CHUNKS:
        return 1, NC
    return cdiv(NC, GROUP_CHUNKS), GROUP_CHUNKS


def _columns(split: int, width: int) -> int:
    """Columns per program: a power of two from 16 (tl.dot's least) up to ``width``."""
    return min(max(16, next_power_of_2(width)), max(16, next_power_of_2(split)))


def _sizes(v, b, precision):
    """B, T, H, S, D, NC (chunks), whether v is 16-bit, the sizes every kernel takes and
    those of the kernels that hold a whole chunk."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    sizes = dict(H=H, S=S, D=D, BS=max(16, next_power_of_2(S)), BT=CHUNK)
    in_chunk = dict(sizes, BD=max(16, next_power_of_2(D)), LOG2_BT=CHUNK.bit_length() - 1,
                    PRECISION=precision)
    return B, T, H, S, D, cdiv(T, CHUNK), v.element_size() == 2, sizes, in_chunk


def _forward(v, b, c, g, A, beta, h0, output_final_state, keep, precision):
    """o, the final state (or None), and what the backward reads: the chunk-start states,
    U, W, Mk and (I + M)⁻¹ (Mk and (I + M)⁻¹ only if ``keep``)."""
    B, T, H, S, D, NC, half, sizes, in_chunk = _sizes(v, b, precision)
    shape = (B * H, NC, CHUNK, CHUNK) if keep else (1,)  # placeholders the kernels skip
    mk, ti = v.new_empty(shape, dtype=torch.float32), v.new_empty(shape, dtype=torch.float32)
    u = v.new_empty(B, T, H, D, dtype=torch.float32)  # Uv, then U in place
    w = v.new_empty(B, T, H, S, dtype=torch.float32)
    hs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # the chunk-start states
    ht = v.new_empty(B, H, S, D, dtype=torch.float32) if output_final_state else None
    o = torch.empty_like(v)
    if v.dtype in ONE_LAUNCH:  # each stretch hands its end state on (chunk_chain)
        programs = cdiv(NC, STRETCH) * B * H
        flags = torch.zeros(1 + programs, dtype=torch.int32, device=v.device)
        for i, product in enumerate((True, False)):
            chunk_chain.chain_fwd_kernel[(programs,)](
                v, b, c, g, A, beta, h0, hs, ht, u, w, mk, ti, o, flags, T, B * H,
                i * programs, **in_chunk, NB=STRETCH,
                USE_H0=h0 is not None, STORE_HT=output_final_state, KEEP=keep,
                PRODUCT=product, **_launch("chain_fwd", half)[1])
        return o, ht, hs, u, w, mk, ti
    left = v.new_empty(B * H * NC, dtype=torch.int32)  # chunks the product launch left
    for product in (True, False):
        wy.wy_fwd_kernel[(NC, B * H)](v, b, g, A, beta, u, w, mk, ti, left, T, **in_chunk,
                                      KEEP=keep, PRODUCT=product, **_launch("wy_fwd", half)[1])
    split, walk = _launch("state_fwd", half)
    NG, G = _groups(B * H * cdiv(D, _columns(split, D)), NC)
    if NG > 1:  # each group's map, the groups in order, then every group's walk
        split_sums, sums = _launch("group_sums", half)
        BDg = _columns(split_sums, S + D)
        tg = v.new_empty(B * H, NG, S, S + D, dtype=torch.float32)
        chunk_h.group_fwd_kernel[(B * H * NG * cdiv(S + D, BDg),)](
            b, g, A, w, u, tg, T, NG, G, **sizes, BD=BDg, NA=cdiv(S + D, BDg),
            PRECISION=precision, **sums)
        split, walk = _launch("group_state_fwd", half)
        BDs = _columns(split, D)
        hg = v.new_empty(B * H, NG, S, D, dtype=torch.float32)  # each group's start state
        chunk_h.group_scan_kernel[(B * H * cdiv(D, BDs),)](
            tg, h0, hg, ht, NG, S=S, D=D, BS=sizes["BS"], BD=BDs, ND=cdiv(D, BDs), REVERSE=False,
            USE_FIRST=h0 is not None, STORE_LAST=output_final_state, PRECISION=precision,
            **walk)
        h0, use_h0, store_ht = hg, True, False
    else:
        BDs, use_h0, store_ht = _columns(split, D), h0 is not None, output_final_state
    chunk_h.state_fwd_kernel[(B * H * NG * cdiv(D, BDs),)](
        b, g, A, w, u, h0, hs, u, ht, T, NG, G, **sizes, BD=BDs, ND=cdiv(D, BDs),
        USE_H0=use_h0, STORE_HT=store_ht, PRECISION=precision, **walk)
    for product in (True, False):
        chunk_o.chunk_output_kernel[(NC, B * H)](b, c, g, A, hs, u, o, left, T, **in_chunk,
                                                 PRODUCT=product,
                                                 **_launch("chunk_output", half)[1])
    return o, ht, hs, u, w, mk, ti


def _backward(v, b, c, g, A, beta, hs, u, w, mk, ti, do, dht, with_h0, precision):
    B, T, H, S, D, NC, half, sizes, in_chunk = _sizes(v, b, precision)
    du = v.new_empty(B, T, H, D, dtype=torch.float32)  # Pᵀ dO, then dU in place
    left = v.new_empty(B * H * NC, dtype=torch.int32)
    for product in (True, False):
        chunk_bwd.du_local_kernel[(NC, B * H)](b, c, g, A, do, du, left, T, **in_chunk,
                                               PRODUCT=product, **_launch("du_local", half)[1])
    dhs = v.new_empty(B * H, NC, S, D, dtype=torch.float32)  # the chunk-end gradients
    dh0 = v.new_empty(B, H, S, D, dtype=torch.float32) if with_h0 else None
    split, walk = _launch("state_bwd", half)
    BDs = _columns(split, D)
    NG, G = _groups(B * H * cdiv(D, BDs), NC)
    if NG > 1:  # as in the forward, right to left
        split_sums, sums = _launch("group_sums", half)
        BDg = _columns(split_sums, S + D)
        tg = v.new_empty(B * H, NG, S, S + D, dtype=torch.float32)
        chunk_h.group_bwd_kernel[(B * H * NG * cdiv(S + D, BDg),)](
            b, c, g, A, w, do, du, tg, T, NG, G, **sizes, BD=BDg, NA=cdiv(S + D, BDg),
            PRECISION=precision, **sums)
        dhg = v.new_empty(B * H, NG, S, D, dtype=torch.float32)  # the gradient at each end
        chunk_h.group_scan_kernel[(B * H * cdiv(D, BDs),)](
            tg, dht, dhg, dh0, NG, S=S, D=D, BS=sizes["BS"], BD=BDs, ND=cdiv(D, BDs), REVERSE=True,
            USE_FIRST=dht is not None, STORE_LAST=with_h0, PRECISION=precision, **walk)
        dht, use_dht, store_dh0 = dhg, True, False
    else:
        use_dht, store_dh0 = dht is not None, with_h0
    chunk_h.state_bwd_kernel[(B * H * NG * cdiv(D, BDs),)](
        b, c, g, A, w, do, du, dht, dhs, dh0, T, NG, G, **sizes, BD=BDs, ND=cdiv(D, BDs),
        USE_DHT=use_dht, STORE_DH0=store_dh0, PRECISION=precision, **walk)
    dv, db, dc, dg, dbeta = (torch.empty_like(t) for t in (v, b, c, g, beta))
    dA = v.new_empty(B * H, NC, S, dtype=torch.float32)  # per-chunk partial sums
    chunk_bwd.chunk_grad_kernel[(NC, B * H)](
        v, b, c, g, A, beta, hs, dhs, u, du, do, mk, ti, dv, db, dc, dg, dA, dbeta, T,
        **in_chunk, **_launch("chunk_grad", half)[1])
    return dv, db, dc, dg, dA.view(B, H, NC, S).sum(dim=(0, 2)), dbeta, dh0


def _final_state(ht, v):
    return ht.double() if ht is not None and v.dtype == torch.float64 else ht


class ChunkGatedDeltaFunction(torch.autograd.Function):
    """(v, b, c, g, A, beta, initial_state, output_final_state, keep) -> (o, final_state or
    None). ``keep``: store what a backward needs (only when autograd will call it)."""

    @staticmethod
    @on_inputs_device
    def forward(ctx, v, b, c, g, A, beta, initial_state, output_final_state, keep):
        v, b, c, g, A, beta = (t.contiguous() for t in (v, b, c, g, A, beta))
        h0 = initial_state.contiguous().float() if initial_state is not None else None
        dtype = torch.promote_types(torch.promote_types(v.dtype, b.dtype), c.dtype)
        o, ht, *kept = _forward(v, b, c, g, A, beta, h0, output_final_state, keep,
                                products(dtype, forward=True))
        if keep:
            ctx.save_for_backward(v, b, c, g, A, beta, *kept)
        # the backward's products, chosen now: a change of PyTorch's TF32 switch in between
        # does not change them
        ctx.precision = products(dtype, forward=False)
        ctx.h0_dtype = initial_state.dtype if initial_state is not None else None
        return o, _final_state(ht, v)

    @staticmethod
    @on_inputs_device
    def backward(ctx, do, dht):
        v, b, c, g, A, beta, hs, u, w, mk, ti = ctx.saved_tensors
        do = torch.zeros_like(v) if do is None else do.contiguous()
        dht = dht.contiguous().float() if dht is not None else None
        dv, db, dc, dg, dA, dbeta, dh0 = _backward(v, b, c, g, A, beta, hs, u, w, mk, ti, do,
                                                   dht, ctx.h0_dtype is not None,
                                                   ctx.precision)
        if dh0 is not None:
            dh0 = dh0.to(ctx.h0_dtype)
        return dv, db, dc, dg, dA.to(A.dtype), dbeta, dh0, None, None


def chunk_gated_delta_triton(v, b, c, g, A, beta, initial_state=None, output_final_state=False,
                             *, check_values: bool = True):
    """The gated delta rule by the chunked Triton kernels; same contract as
    ``chunk_gated_delta_torch`` (which derives the form).

    v (B, T, H, D); b, c (B, T, H, S), unit vectors (the caller normalises them); g, beta
    (B, T, H); A (H, S) negative; initial_state (B, H, S, D) or None. Returns
    ``(o, final_state or None)``: o in v's dtype, the state fp32 (fp64 for fp64 inputs).
    Differentiable in v, b, c, g, A, beta and initial_state.
    """
    check_inputs(v, b, c, g, A, initial_state, beta, check_values=check_values)
    check_triton_device(v, INTERPRET, "the chunked Triton gated delta kernel", __name__,
                        "gated_delta_rule(..., backend='chunk_torch')")
    if v.shape[1] == 0:
        o, state = empty_sequence(v, b, initial_state, output_final_state)
        return o, _final_state(state, v)
    inputs = [t for t in (v, b, c, g, A, beta, initial_state) if t is not None]
    keep = torch.is_grad_enabled() and any(t.requires_grad for t in inputs)
    return ChunkGatedDeltaFunction.apply(v, b, c, g, A, beta, initial_state,
                                         bool(output_final_state), keep)
