"""The gla recurrence in chunkwise-parallel form: plain PyTorch + einops, no loop over time.

The recurrence of ``naive_gla`` (per batch element and head)

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t ,      o_t = c_t^T H_t

visits T steps one after another. Cut time into chunks of C steps instead. Inside a chunk
write L_t = g_1 + ... + g_t (the gate summed from the chunk start, one scalar per head),
so the decay from the chunk start to step t is exp(L_t * A), a vector over the state dim
n. Unrolling the recurrence from the state H_0 the chunk starts with:

    H_t = exp(L_t A) ⊙ H_0 + Σ_{s≤t} exp((L_t - L_s) A) ⊙ b_s ⊗ v_s

    o_t = (c_t ⊙ exp(L_t A))^T H_0  +  Σ_{s≤t} P_ts v_s ,
          P_ts = Σ_n c_tn b_sn exp((L_t - L_s) A_n)

The first term reads what earlier chunks left in the state; the second is a causal,
decay-weighted attention inside the chunk, done for every chunk at once. Only the C-step
hand-over of the state, H_C = exp(L_C A) ⊙ H_0 + Σ_s (b_s ⊙ exp((L_C - L_s) A)) ⊗ v_s,
is left to a loop, T / C steps long instead of T.

Where the structure of the decay helps: the log-decay is a per-head scalar g_t times the
vector A, so the cumulative sum L runs over one number per step, not S of them, and every
decay above is exp(Δ * A) for a scalar gap Δ between two points of the chunk.

Numerical safety: every exponent is a gap Δ ≥ 0 (L only grows, as g > 0) times A < 0, so
every factor lies in [0, 1]. Nothing overflows, whatever the decay; a strong decay only
underflows factors to 0, which is their correct value to fp32 precision. The well-known
shortcut of linear-attention chunking, c̃_t = c_t exp(L_t A) and b̃_s = b_s exp(-L_s A)
with P = c̃ b̃^T, is avoided on purpose: exp(-L_s A) overflows to inf at strong decay
(A = -40, g = 0.5: exp(20 s) passes fp32's 3e38 at s = 5) and inf * 0 gives nan. The price
is a (C, C, S) tensor of decays per chunk, which is why C stays small here; the Triton
kernel (``chunk_triton``) uses the same safe form on 16-step blocks.

Backward comes from autograd: every operation is an ordinary differentiable torch op.
"""

import torch
from einops import einsum

from hymo_mini.ops.utils.checks import check_inputs, compute_dtype, start_state
from hymo_mini.ops.utils.chunks import causal_decays, check_chunk_size, from_chunks, to_chunks

__all__ = ["chunk_gla_torch", "DEFAULT_CHUNK_SIZE"]

# The chunk length trades two costs on a CPU: the (C, C, S) decay tensor grows with C, the
# Python loop over chunks with T / C. 8 was the fastest of 4, 8 and 16 on a 2-core CPU.
DEFAULT_CHUNK_SIZE = 8


def chunk_gla_torch(v, b, c, g, A, initial_state=None, output_final_state=False,
                    chunk_size: int = DEFAULT_CHUNK_SIZE, *, check_values: bool = True):
    """Chunkwise-parallel gla; same contract as ``naive_gla``.

    v (B, T, H, D); b, c (B, T, H, S); g (B, T, H); A (H, S); initial_state (B, H, S, D).
    Computes in fp32 (fp64 if v is fp64) and returns ``(o, final_state or None)``: o in v's
    dtype, the state in the compute dtype. Any T works: the tail chunk is padded with
    steps that neither decay (g = 0) nor write (b = 0), which leave the state unchanged.
    """
    check_inputs(v, b, c, g, A, initial_state, check_values=check_values)
    check_chunk_size(chunk_size, DEFAULT_CHUNK_SIZE)
    B, T, H, D = v.shape
    acc = compute_dtype(v)
    C = chunk_size
    v_ = to_chunks(v, C, acc)  # (b, h, k, C, D): chunk k, step c; zero steps pad the end
    b_ = to_chunks(b, C, acc)  # (b, h, k, C, S)
    c_ = to_chunks(c, C, acc)  # (b, h, k, C, S)
    g_ = to_chunks(g, C, acc)  # (b, h, k, C)
    A_ = A.to(acc)  # (h, S), negative

    # log-decay from the chunk start to each step, in units of A: one scalar per step
    L = g_.cumsum(dim=-1)  # (b, h, k, C)
    L_end = L[..., -1:]  # (b, h, k, 1): the whole chunk

    # 1. inside each chunk, the weights P_ts = Σ_n c_tn b_sn exp((L_t - L_s) A_n) for s ≤ t
    decay_ts = causal_decays(L, A_)  # (b, h, k, t, s, n) in [0, 1]; 0 where s > t
    P = einsum(c_, b_, decay_ts, "b h k t n, b h k s n, b h k t s n -> b h k t s")
    o_intra = einsum(P, v_, "b h k t s, b h k s d -> b h k t d")  # (b, h, k, C, D)

    # 2. what each chunk adds to the state by its end: b_s decayed from s to the chunk end
    b_to_end = b_ * torch.exp(einsum(L_end - L, A_, "b h k s, h n -> b h k s n"))
    chunk_write = einsum(b_to_end, v_, "b h k s n, b h k s d -> b h k n d")  # (b,h,k,S,D)
    chunk_decay = torch.exp(einsum(L_end[..., 0], A_, "b h k, h n -> b h k n"))

    # 3. hand the state from chunk to chunk: the only loop, T / C steps
    state = start_state(v, b, initial_state, acc)  # (b, h, S, D), zeros without one
    start_states = []
    for k in range(v_.shape[2]):
        start_states.append(state)
        state = chunk_decay[:, :, k, :, None] * state + chunk_write[:, :, k]
    H_0 = torch.stack(start_states, dim=2) if start_states else chunk_write  # (b,h,k,S,D)

    # 4. what each step reads from the state its chunk started with
    c_from_start = c_ * torch.exp(einsum(L, A_, "b h k t, h n -> b h k t n"))
    o_inter = einsum(c_from_start, H_0, "b h k t n, b h k n d -> b h k t d")

    o = from_chunks(o_inter + o_intra, T)  # (b, T, h, D): the padding dropped
    o = o.to(v.dtype)
    return o, (state if output_final_state else None)
