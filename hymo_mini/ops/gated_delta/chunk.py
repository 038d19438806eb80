"""The gated delta rule in chunkwise-parallel form: plain PyTorch + einops, no loop over time.

The rule, per batch element and head (state H (S, D); b_t, c_t unit keys (S,); v_t (D,)):

    H'_t = exp(g_t A) ⊙ H_{t-1}                      decay, per key dimension n
    H_t  = H'_t + β_t b_t ⊗ (v_t - H'_tᵀ b_t)         erase what b_t reads, write v_t
    o_t  = H_tᵀ c_t

Cut time into chunks of C steps. Inside one chunk (steps t = 1 .. C), from the state H_0
(S, D) it starts with, write L_t = g_1 + ... + g_t (one scalar per step) and

    Γ_t  = exp(L_t A)                 (S,)  the decay from the chunk start through step t
    E_ts = exp((L_t - L_s) A), s ≤ t  (S,)  the decay after step s through step t

**The WY form.** The chunk's state is the decayed start state plus C rank-one writes of
"pseudo-values" u_s (D,), each carried by its key decayed since its step:

    H_t = Γ_t ⊙ H_0 + Σ_{s≤t} (E_ts ⊙ b_s) ⊗ u_s                               (S, D)

It holds by induction: the decay α_t = exp(g_t A) turns E_{t-1,s} into E_ts and Γ_{t-1}
into Γ_t, and the delta step adds b_t ⊗ u_t with

    u_t = β_t (v_t - H'_tᵀ b_t)
        = β_t (v_t - H_0ᵀ (Γ_t ⊙ b_t)) - Σ_{s<t} β_t (b_t · (E_ts ⊙ b_s)) u_s      (D,)

Stacked over the chunk, with K̃ = b ⊙ Γ (C, S) and the strictly lower-triangular

    M_ts = β_t Σ_n b_tn b_sn E_tsn  for s < t, else 0                         (C, C)

that is one unit-lower-triangular system, solved by forward substitution:

    (I + M) U = diag(β) (V - K̃ H_0)                                            (C, D)
    U = Uv - W H_0,   Uv = (I + M)⁻¹ diag(β) V  (C, D),   W = (I + M)⁻¹ diag(β) K̃  (C, S)

Uv and W depend on the chunk's own inputs only, so every chunk's are computed at once.
(I + M)⁻¹ diag(β) is the "UT" form of the chunk's erasures: without decay (A = 0) their
product is (I - β_C b_C b_Cᵀ) ··· (I - β_1 b_1 b_1ᵀ) = I - Bᵀ (I + M)⁻¹ diag(β) B, with B
(C, S) the chunk's keys: one (C, C) triangular solve in place of C (S, S) products.

Then, with Q̃ = c ⊙ Γ (C, S), K̂ = b ⊙ exp((L_C - L) A) (C, S) (keys decayed to the chunk
end) and

    P_ts = Σ_n c_tn b_sn E_tsn  for s ≤ t, else 0                             (C, C)

the outputs and the state handed to the next chunk are

    O   = Q̃ H_0 + P U                                                          (C, D)
    H_C = Γ_C ⊙ H_0 + K̂ᵀ U                                                      (S, D)

The only loop runs over chunks, T / C steps: U_k = Uv_k - W_k H_k, H_{k+1} = Γ_C ⊙ H_k +
K̂_kᵀ U_k. (Substituting U: H_C = (diag(Γ_C) - K̂ᵀ W) H_0 + K̂ᵀ Uv, the chunk's whole
transition in WY form.)

**Numerical safety.** Every exponent above is a gap ≥ 0 (L only grows, as g > 0) times
A < 0: Γ_t, E_ts and exp((L_C - L) A) all lie in [0, 1], so nothing overflows whatever the
decay; a strong decay only underflows factors to 0, their correct value to working
precision. The factorised shortcut b_s exp(-L_s A), c_t exp(L_t A) is never formed (it
overflows at strong decay; see the gla chunk form, ``hymo_mini.ops.gla.chunk``). The price
is a (C, C, S) tensor of decays per chunk. With unit keys and β in (0, 1), |M_ts| ≤ 1.

A ragged tail is padded with steps of g = 0 (no decay), β = 0 and b = c = 0 (no write):
they leave the state unchanged and their outputs are dropped.

Backward comes from autograd: every operation, the triangular solve included
(``torch.linalg.solve_triangular``), is an ordinary differentiable torch op.
"""

import torch
from einops import einsum, rearrange

from hymo_mini.ops.utils.checks import check_inputs, compute_dtype, empty_sequence, start_state
from hymo_mini.ops.utils.chunks import causal_decays, check_chunk_size, from_chunks, to_chunks

__all__ = ["chunk_gated_delta_torch", "DEFAULT_CHUNK_SIZE"]

# the (C, C, S) decay tensor grows with C, the Python loop over chunks with T / C
DEFAULT_CHUNK_SIZE = 16


def _in_chunk(b_, c_, g_, beta_, A_):
    """Everything that depends on one chunk's own inputs, for all chunks at once.

    b_, c_ (b, h, k, C, S); g_, beta_ (b, h, k, C); A_ (h, S). Returns M (strictly lower,
    with β), P (lower, diagonal included) (b, h, k, C, C), Γ (b, h, k, C, S), the keys
    decayed to the chunk end K̂ (b, h, k, C, S) and the chunk's decay Γ_C (b, h, k, S)."""
    C = b_.shape[-2]
    L = g_.cumsum(dim=-1)  # (b, h, k, C): gate summed from the chunk start
    L_end = L[..., -1:]  # (b, h, k, 1)
    E = causal_decays(L, A_)  # (b, h, k, t, s, n) in [0, 1]; 0 where s > t
    strict = torch.ones(C, C, dtype=torch.bool, device=b_.device).tril(-1)  # (t, s), s < t
    BB = einsum(b_, b_, E, "b h k t n, b h k s n, b h k t s n -> b h k t s")
    M = rearrange(beta_, "b h k t -> b h k t 1") * BB.masked_fill(~strict, 0.0)  # (b,h,k,C,C)
    P = einsum(c_, b_, E, "b h k t n, b h k s n, b h k t s n -> b h k t s")  # (b,h,k,C,C)
    Gamma = torch.exp(einsum(L, A_, "b h k t, h n -> b h k t n"))  # (b, h, k, C, S)
    b_hat = b_ * torch.exp(einsum(L_end - L, A_, "b h k t, h n -> b h k t n"))  # (b,h,k,C,S)
    Gamma_C = torch.exp(einsum(L_end[..., 0], A_, "b h k, h n -> b h k n"))  # (b, h, k, S)
    return M, P, Gamma, b_hat, Gamma_C


def chunk_gated_delta_torch(v, b, c, g, A, beta, initial_state=None, output_final_state=False,
                            chunk_size: int = DEFAULT_CHUNK_SIZE, *, check_values: bool = True):
    """The gated delta rule, chunkwise-parallel; same contract as ``naive_gated_delta``.

    v (B, T, H, D); b, c (B, T, H, S), unit vectors (the caller normalises them); g, beta
    (B, T, H); A (H, S) negative; initial_state (B, H, S, D) or None. Computes in fp32
    (fp64 for fp64 v) and returns ``(o, final_state or None)``: o (B, T, H, D) in v's
    dtype, the state (B, H, S, D) in the compute dtype. Differentiable by autograd.
    """
    check_inputs(v, b, c, g, A, initial_state, beta, check_values=check_values)
    check_chunk_size(chunk_size, DEFAULT_CHUNK_SIZE)
    B, T, H, D = v.shape
    S = b.shape[-1]
    acc = compute_dtype(v)
    if T == 0:
        o, state = empty_sequence(v, b, initial_state, output_final_state)
        return o, (state.to(acc) if state is not None else None)
    C = chunk_size
    v_ = to_chunks(v, C, acc)  # (b, h, k, C, D): chunk k, step c; zero steps pad the end
    b_ = to_chunks(b, C, acc)  # (b, h, k, C, S)
    c_ = to_chunks(c, C, acc)  # (b, h, k, C, S)
    g_ = to_chunks(g, C, acc)  # (b, h, k, C)
    beta_ = to_chunks(beta, C, acc)  # (b, h, k, C)
    M, P, Gamma, b_hat, Gamma_C = _in_chunk(b_, c_, g_, beta_, A.to(acc))

    # the WY quantities: (I + M) [Uv | W] = diag(β) [V | K̃], every chunk at once
    eye = torch.eye(C, dtype=acc, device=v.device)  # (C, C)
    rhs = torch.cat([v_, b_ * Gamma], dim=-1) * beta_[..., None]  # (b, h, k, C, D + S)
    UvW = torch.linalg.solve_triangular(eye + M, rhs, upper=False, unitriangular=True)
    Uv, W = UvW.split([D, S], dim=-1)  # (b, h, k, C, D), (b, h, k, C, S)

    # hand the state from chunk to chunk: the only loop, T / C steps
    state = start_state(v, b, initial_state, acc)  # (b, h, S, D), zeros without one
    start_states, pseudo_values = [], []
    for k in range(v_.shape[2]):
        U_k = Uv[:, :, k] - einsum(W[:, :, k], state, "b h c n, b h n d -> b h c d")
        start_states.append(state)
        pseudo_values.append(U_k)  # (b, h, C, D)
        state = (Gamma_C[:, :, k, :, None] * state
                 + einsum(b_hat[:, :, k], U_k, "b h c n, b h c d -> b h n d"))  # (b,h,S,D)
    H_0 = torch.stack(start_states, dim=2)  # (b, h, k, S, D)
    U = torch.stack(pseudo_values, dim=2)  # (b, h, k, C, D)

    # O = Q̃ H_0 + P U, every chunk at once
    o = (einsum(c_ * Gamma, H_0, "b h k t n, b h k n d -> b h k t d")
         + einsum(P, U, "b h k t s, b h k s d -> b h k t d"))  # (b, h, k, C, D)
    o = from_chunks(o, T)  # (b, T, h, D): the padding dropped
    return o.to(v.dtype), (state if output_final_state else None)
