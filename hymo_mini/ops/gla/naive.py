"""The document's GDN recurrence as a plain loop over time: gated linear attention.

Per batch element and head (S = key size, D = value size):

    H_t = exp(g_t * A) ⊙ H_{t-1} + b_t ⊗ v_t        H_t: (S, D), decay broadcast over D
    o_t = c_t^T H_t                                  o_t: (D,)

``b`` writes, ``c`` reads, ``g_t`` in (0, 1) is a per-head gate and ``A = -exp(A_log)`` a
negative per-head, per-state-dimension rate. Nothing is erased: an old value fades by the
decay and never by being overwritten. The document calls this a delta rule; it is gated
linear attention (GLA) with a per-dimension decay, which is why this folder is ``gla``.

This loop is the oracle every faster path of the rule is tested against.
"""

import torch
from einops import einsum

from hymo_mini.ops.utils.checks import check_inputs, compute_dtype, start_state

__all__ = ["naive_gla"]


def naive_gla(v, b, c, g, A, initial_state=None, *, check_values: bool = True):
    """The recurrence step by step, vectorised over batch and heads only.

    Computes in fp32 (fp64 for fp64 inputs). Returns ``(o, final_state)``: o (B, T, H, D)
    in v's dtype, the state (B, H, S, D) in the compute dtype.
    """
    check_inputs(v, b, c, g, A, initial_state, check_values=check_values)
    B, T, H, D = v.shape
    out_dtype = v.dtype
    acc = compute_dtype(v)
    state = start_state(v, b, initial_state, acc)  # (B, H, S, D), zeros without one
    v, b, c, g, A = (t.to(acc) for t in (v, b, c, g, A))
    outputs = []
    for t in range(T):
        decay = torch.exp(g[:, t, :, None] * A)  # (B, H, S)
        write = einsum(b[:, t], v[:, t], "b h s, b h d -> b h s d")  # b_t ⊗ v_t
        state = decay[..., None] * state + write  # (B, H, S, D)
        outputs.append(einsum(c[:, t], state, "b h s, b h s d -> b h d"))  # c_t^T H_t
    o = torch.stack(outputs, dim=1) if T else v.new_zeros(B, 0, H, D)  # (B, T, H, D)
    return o.to(out_dtype), state
