"""The row kernel of the chunked loss: soft-cap, log-softmax, loss and dlogits in one pass.

For one chunk of logits z (n, V), fresh out of the head's matmul, one program per row:

    pass 1   t_j = tanh(z_j / cap),  s_j = cap · t_j          (fp32, never stored)
             lse = cap + log Σ_j exp(s_j - cap)              loss = lse - s_target
    pass 2   dz_j = (exp(s_j - lse) - [j = target]) · (1 - t_j²)
             written over z_j, in z's dtype                   (the chunk's only buffer)

so the soft-capped fp32 logits and their softmax are never materialised: each row is read
twice and written once. With a cap, every s_j lies in [-cap, cap], so the sum needs no
running maximum: its terms lie in [e^(-2·cap), 1]. Without one it keeps the usual running
maximum. ``hymo_mini.loss`` calls it between the chunk's matmuls; its PyTorch twin is
:func:`hymo_mini.loss.softcap_ce_rows_torch`. A row whose target is ``ignore_index`` gets
loss 0 and a zero gradient.

tanh, two ways:

* exact (fp32 logits, and the interpreter, which runs no inline assembly): written with
  exp, tanh(x) = sign(x) (1 - e) / (1 + e), e = exp(-2|x|) ∈ (0, 1], which cannot
  overflow; its absolute error is a few fp32 ulps of 1.
* fast (bf16 and fp16 logits on a GPU): the hardware's ``tanh.approx.f32``, one
  special-function instruction where the exact form takes an exp and a division. With the
  exact form the two passes were bound by those instructions rather than by memory; the
  hardware tanh halves them. Its relative error (checked on the GPU below 2⁻¹⁰,
  tests/test_loss.py) is under the 2⁻⁹ with which a bf16 logit was already rounded.
"""

from __future__ import annotations

import os

import torch
import triton
import triton.language as tl

from hymo_mini.launching import next_power_of_2, on_inputs_device

__all__ = ["softcap_ce_rows_triton", "fast_tanh", "INTERPRET"]

INTERPRET = os.environ.get("TRITON_INTERPRET") == "1"
MAX_BLOCK = 4096  # BV: columns per step of a row's loop


@triton.jit
def _tanh(x, FAST: tl.constexpr):
    if FAST:
        return tl.inline_asm_elementwise("tanh.approx.f32 $0, $1;", "=r,r", [x],
                                         dtype=tl.float32, is_pure=True, pack=1)
    e = tl.exp(-2.0 * tl.abs(x))  # in (0, 1]
    t = (1.0 - e) / (1.0 + e)  # tanh(|x|) in [0, 1)
    return tl.where(x < 0, -t, t)


@triton.jit
def _capped(b_z, cap, inv_cap, HAS_CAP: tl.constexpr, FAST: tl.constexpr):
    """(s, 1 - tanh²) of a block of fp32 logits; the second is 1 without a cap."""
    if HAS_CAP:
        b_t = _tanh(b_z * inv_cap, FAST)
        b_s, b_ds = cap * b_t, 1.0 - b_t * b_t
    else:
        b_s, b_ds = b_z, tl.full(b_z.shape, 1.0, tl.float32)
    return b_s, b_ds


@triton.jit
def _softcap_ce_rows_kernel(z, targets, loss, scale, V, stride_z, cap, inv_cap, ignore_index,
                            HAS_CAP: tl.constexpr, FAST: tl.constexpr, GRAD: tl.constexpr,
                            SCALE: tl.constexpr, BV: tl.constexpr):
    i_n = tl.program_id(0)
    p_z = z + i_n.to(tl.int64) * stride_z  # this row
    target = tl.load(targets + i_n).to(tl.int32)
    valid = target != ignore_index
    safe = tl.where(valid, target, 0)
    # pass 1: Σ exp(s - m), one block of columns at a time; m = cap with a cap (s ≤ cap),
    # else the running maximum
    b_m = cap if HAS_CAP else tl.full([], float("-inf"), tl.float32)
    b_sum = tl.zeros([], tl.float32)
    for i_v in range(0, tl.cdiv(V, BV)):
        o_v = i_v * BV + tl.arange(0, BV)  # [BV]
        m_v = o_v < V
        b_z = tl.load(p_z + o_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
        b_s, _ = _capped(b_z, cap, inv_cap, HAS_CAP, FAST)
        b_s = tl.where(m_v, b_s, float("-inf"))  # [BV]
        if HAS_CAP:
            b_sum += tl.sum(tl.exp(b_s - b_m), axis=0)
        else:
            m_new = tl.maximum(b_m, tl.max(b_s, axis=0))
            b_sum = b_sum * tl.exp(b_m - m_new) + tl.sum(tl.exp(b_s - m_new), axis=0)
            b_m = m_new
    b_lse = b_m + tl.log(b_sum)
    b_zt = tl.load(p_z + safe).to(tl.float32)
    b_st, _ = _capped(b_zt, cap, inv_cap, HAS_CAP, FAST)
    tl.store(loss + i_n, tl.where(valid, b_lse - b_st, 0.0))
    if GRAD:  # pass 2: dz = (softmax - onehot) · ds/dz (· scale), over z in place
        b_scale = tl.load(scale).to(tl.float32) if SCALE else 1.0
        for i_v in range(0, tl.cdiv(V, BV)):
            o_v = i_v * BV + tl.arange(0, BV)  # [BV]
            m_v = o_v < V
            b_z = tl.load(p_z + o_v, mask=m_v, other=0.0).to(tl.float32)  # [BV]
            b_s, b_ds = _capped(b_z, cap, inv_cap, HAS_CAP, FAST)
            b_p = tl.exp(b_s - b_lse) - tl.where(o_v == safe, 1.0, 0.0)  # [BV]
            b_dz = tl.where(valid, b_p * b_ds, 0.0)
            if SCALE:
                b_dz = b_dz * b_scale
            tl.store(p_z + o_v, b_dz.to(p_z.dtype.element_ty), mask=m_v)


def fast_tanh(dtype: torch.dtype) -> bool:
    """Whether logits of ``dtype`` get the hardware tanh: 16-bit ones, off the interpreter."""
    return dtype in (torch.bfloat16, torch.float16) and not INTERPRET


@on_inputs_device
def softcap_ce_rows_triton(z: torch.Tensor, targets: torch.Tensor, cap: float,
                           ignore_index: int, grad: bool, scale: torch.Tensor | None = None,
                           block: int | None = None):
    """Per-row loss (n,) fp32 of logits z (n, V); with ``grad`` also dloss/dz, written over
    z (returned), times ``scale`` (a one-element fp32 tensor on z's device) if given.
    ``block`` overrides the columns per step (tests use a small one). Logits in bf16 or
    fp16 get the hardware tanh (see the module's docstring), fp32 ones the exact."""
    n, V = z.shape
    if z.stride(1) != 1:
        raise ValueError("z must have unit stride along the vocabulary (a row-major chunk)")
    loss = torch.empty(n, dtype=torch.float32, device=z.device)
    if n == 0:
        return loss, (z if grad else None)
    BV = block or min(MAX_BLOCK, next_power_of_2(V))
    _softcap_ce_rows_kernel[(n,)](
        z, targets, loss, loss if scale is None else scale, V, z.stride(0), float(cap),
        1.0 / cap if cap > 0 else 0.0, int(ignore_index), HAS_CAP=cap > 0,
        FAST=fast_tanh(z.dtype), GRAD=grad, SCALE=scale is not None, BV=BV, num_warps=8)
    return loss, (z if grad else None)
