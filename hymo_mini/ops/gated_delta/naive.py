"""The true gated delta rule as a plain loop over time: decay, erase, write.

Yang et al. (2025) write the gated delta rule in a (D, S) layout as
S_t = S_{t-1} α_t (I - β_t k_t k_tᵀ) + β_t v_t k_tᵀ. In our (S, D) layout (the transpose),
with a decay per key dimension applied first, as Kimi Delta Attention does:

    H'_t = exp(g_t * A) ⊙ H_{t-1}                       decay, as in the gla rule
    H_t  = (I - β_t b_t b_tᵀ) H'_t + β_t b_t ⊗ v_t      erase what b_t reads, then write
         = H'_t + β_t b_t ⊗ (v_t - H'_tᵀ b_t)          the "delta": new value minus old
    o_t  = c_tᵀ H_t

With a unit key b_t and β_t in (0, 1), I - β_t b_t b_tᵀ shrinks the state only along b_t:
what was stored under that key is partly forgotten before the new value is written, so a
key that is written twice holds the newer value instead of the sum. The caller
L2-normalises b and c (the GDN mixer does); β_t is a per-head write strength.
With a scalar decay (A constant over S) the order "decay, then erase" is exactly Yang et
al.'s; with a per-dimension decay it is Kimi Delta Attention's.

This loop is the oracle every faster path of the rule is tested against.
"""

import torch
from einops import einsum

from hymo_mini.ops.utils.checks import check_inputs, compute_dtype, start_state

__all__ = ["naive_gated_delta"]


def naive_gated_delta(v, b, c, g, A, beta, initial_state=None, *, check_values: bool = True):
    """The gated delta rule step by step, vectorised over batch and heads only.

    Layouts as the gla rule, plus beta (B, T, H) in (0, 1). Computes in fp32 (fp64 for
    fp64 inputs). Returns ``(o, final_state)``: o in v's dtype, the state (B, H, S, D).
    """
    check_inputs(v, b, c, g, A, initial_state, beta, check_values=check_values)
    B, T, H, D = v.shape
    out_dtype = v.dtype
    acc = compute_dtype(v)
    state = start_state(v, b, initial_state, acc)  # (B, H, S, D), zeros without one
    v, b, c, g, A, beta = (t.to(acc) for t in (v, b, c, g, A, beta))
    outputs = []
    for t in range(T):
        state = torch.exp(g[:, t, :, None] * A)[..., None] * state  # decay, (B, H, S, D)
        old = einsum(b[:, t], state, "b h s, b h s d -> b h d")  # what key b_t reads now
        delta = beta[:, t, :, None] * (v[:, t] - old)  # (B, H, D)
        state = state + einsum(b[:, t], delta, "b h s, b h d -> b h s d")  # erase + write
        outputs.append(einsum(c[:, t], state, "b h s, b h s d -> b h d"))  # c_t^T H_t
    o = torch.stack(outputs, dim=1) if T else v.new_zeros(B, 0, H, D)  # (B, T, H, D)
    return o.to(out_dtype), state
