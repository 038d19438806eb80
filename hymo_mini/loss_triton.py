"""The row kernel of the chunked loss: soft-cap, log-softmax, loss and dlogits in one pass.

For one chunk of logits z (n, V), fresh out of the head's matmul, one program per row:

    pass 1   s_j = cap · tanh(z_j / cap)                      (fp32, never stored)
             lse = log Σ_j exp(s_j)                           online: running max m, sum
             loss = lse - s_target
    pass 2   dz_j = (exp(s_j - lse) - [j = target]) · (1 - tanh²(z_j / cap))
             written over z_j, in z's dtype                   (the chunk's only buffer)

so the soft-capped fp32 logits and their softmax are never materialised: each row is read
twice and written once. ``hymo_mini.loss`` calls it between the chunk's matmuls; its
PyTorch twin is :func:`hymo_mini.loss.softcap_ce_rows_torch`. A row whose target is
``ignore_index`` gets loss 0 and a zero gradient.

tanh is written with exp (libdevice's tanh does not run in the Triton interpreter):
tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) ∈ (0, 1], which cannot overflow; its
absolute error is a few fp32 ulps of 1.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

__all__ = ["softcap_ce_rows_triton", "INTERPRET"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
MAX_BLOCK = 4096  # BV: columns per step of a row's loop


@triton.jit
def _tanh(x):
    e = tl.exp(-2.0 * tl.abs(x))  # in (0, 1]
    t = (1.0 - e) / (1.0 + e)  # tanh(|x|) in [0, 1)
    return tl.where(x < 0, -t, t)


@triton.jit
def _capped(b_z, cap, HAS_CAP: tl.constexpr):
    """(s, 1 - tanh²) of a block of fp32 logits; the second is 1 without a cap."""
    if HAS_CAP:
        b_t = _tanh(b_z / cap)
        b_s, b_ds = cap * b_t, 1.0 - b_t * b_t
    else:
        b_s, b_ds = b_z, tl.full(b_z.shape, 1.0, tl.float32)
    return b_s, b_ds


@triton.jit
def _softcap_ce_rows_kernel(z, targets, loss, V, stride_z, cap, ignore_index,
                            HAS_CAP: tl.constexpr, GRAD: tl.constexpr, BV: tl.constexpr):
    i_n = tl.program_id(0)
    p_z = z + i_n.to(tl.int64) * stride_z  # this row
    target = tl.load(targets + i_n).to(tl.int32)
    valid = target != ignore_index
    safe = tl.where(valid, target, 0)
    # pass 1: running max m and Σ exp(s - m), one block of columns at a time
    b_m = tl.full([], float("-inf"), tl.float32)
    b_sum = tl.zeros([], tl.float32)
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)  # [BV]
        m_v = o_v < V
        b_z = tl.load(p_z + o_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
        b_s, _ = _capped(b_z, cap, HAS_CAP)
        b_s = tl.where(m_v, b_s, float("-inf"))  # [BV]
        m_new = tl.maximum(b_m, tl.max(b_s, axis=0))
        b_sum = b_sum * tl.exp(b_m - m_new) + tl.sum(tl.exp(b_s - m_new), axis=0)
        b_m = m_new
    b_lse = b_m + tl.log(b_sum)
    b_zt = tl.load(p_z + safe).to(tl.float32)
    b_st, _ = _capped(b_zt, cap, HAS_CAP)
    tl.store(loss + i_n, tl.where(valid, b_lse - b_st, 0.0))
    if GRAD:  # pass 2: dz = (softmax - onehot) · ds/dz, over z in place
        for i_v in range(0, tl.cdiv(V, BV)):
            o_v = i_v * BV + tl.arange(0, BV)  # [BV]
            m_v = o_v < V
            b_z = tl.load(p_z + o_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
            b_s, b_ds = _capped(b_z, cap, HAS_CAP)
            b_p = tl.exp(b_s - b_lse) - tl.where(o_v == safe, 1.0, 0.0)  # [BV]
            b_dz = tl.where(valid, b_p * b_ds, 0.0)
            tl.store(p_z + o_v, b_dz.to(p_z.dtype.element_ty), mask=m_v)


def softcap_ce_rows_triton(z: torch.Tensor, targets: torch.Tensor, cap: float,
                           ignore_index: int, grad: bool, block: int | None = None):
    """Per-row loss (n,) fp32 of logits z (n, V); with ``grad`` also dloss/dz, written over
    z (returned). ``block`` overrides the columns per step (tests use a small one)."""
    n, V = z.shape
    if z.stride(1) != 1:
        raise ValueError("z must have unit stride along the vocabulary (a row-major chunk)")
    loss = torch.empty(n, dtype=torch.float32, device=z.device)
    if n == 0:
        return loss, (z if grad else None)
    BV = block or min(MAX_BLOCK, triton.next_power_of_2(V))
    _softcap_ce_rows_kernel[(n,)](
        z, targets, loss, V, z.stride(0), float(cap), int(ignore_index),
        HAS_CAP=cap > 0, GRAD=grad, BV=BV, num_warps=8)
    return loss, (z if grad else None)
