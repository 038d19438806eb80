"""The Triton kernels of the grouped MoE path's row shuffles (:mod:`hymo_mini.moe.dispatch`,
whose docstring says what they compute): the gather into expert order and the weighted
combine back, forward and backward, one program per row, reading its rows where they lie.

* gather, forward: program r reads row token(r) of x (or nothing) and writes xs[r];
  backward: program t sums the ≤ k gradient rows of its kept assignments into dx[t]
  (no atomics: the inverse permutation says where they are).
* combine, forward: program t reads its k rows of y and writes their weighted sum in
  fp32 (rounded once); backward: program t writes dy[row(t, j)] = combine[t, j] · g[t]
  and dcombine[t, j] = g[t] · y[row(t, j)].
"""

from __future__ import annotations

import torch
import triton
import triton.language as tl

from hymo_mini.launching import next_power_of_2, on_inputs_device

__all__ = ["gather_rows_triton", "combine_rows_triton"]

# ---- kernels ---------------------------------------------------------------------------
@triton.jit
def _gather_kernel(x, src, out, D, BD: tl.constexpr):
    r = tl.program_id(0)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    s = tl.load(src + r)  # the token, or -1: then row 0 is read and zeros are written
    b_x = tl.load(x + tl.maximum(s, 0) * D + o_d, mask=m_d, other=0.0)  # [BD]
    b_x = tl.where(s >= 0, b_x, 0.0)
    tl.store(out + r.to(tl.int64) * D + o_d, b_x.to(out.dtype.element_ty), mask=m_d)


@triton.jit
def _gather_bwd_kernel(dout, kept_row, dx, N, D, K: tl.constexpr, BD: tl.constexpr):
    t = tl.program_id(0)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_acc = tl.zeros([BD], tl.float32)
    for j in tl.static_range(K):
        r = tl.load(kept_row + j * N + t)  # its row, or -1 if dropped
        b_d = tl.load(dout + tl.maximum(r, 0) * D + o_d, mask=m_d, other=0.0)
        b_acc += tl.where(r >= 0, b_d.to(tl.float32), 0.0)
    tl.store(dx + t.to(tl.int64) * D + o_d, b_acc.to(dx.dtype.element_ty), mask=m_d)


@triton.jit
def _combine_kernel(y, row, w, out, N, D, K: tl.constexpr, BD: tl.constexpr):
    t = tl.program_id(0)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_acc = tl.zeros([BD], tl.float32)
    for j in tl.static_range(K):
        r = tl.load(row + j * N + t)
        b_w = tl.load(w + t * K + j).to(tl.float32)
        b_acc += b_w * tl.load(y + r * D + o_d, mask=m_d, other=0.0).to(tl.float32)
    tl.store(out + t.to(tl.int64) * D + o_d, b_acc.to(out.dtype.element_ty), mask=m_d)


@triton.jit
def _combine_bwd_kernel(g, y, row, w, dy, dw, N, D, K: tl.constexpr, BD: tl.constexpr):
    t = tl.program_id(0)
    o_d = tl.arange(0, BD)
    m_d = o_d < D
    b_g = tl.load(g + t.to(tl.int64) * D + o_d, mask=m_d, other=0.0).to(tl.float32)  # [BD]
    for j in tl.static_range(K):
        r = tl.load(row + j * N + t)
        b_w = tl.load(w + t * K + j).to(tl.float32)
        b_y = tl.load(y + r * D + o_d, mask=m_d, other=0.0).to(tl.float32)
        tl.store(dw + t * K + j, tl.sum(b_g * b_y, axis=0).to(dw.dtype.element_ty))
        tl.store(dy + r * D + o_d, (b_w * b_g).to(dy.dtype.element_ty), mask=m_d)


def _block(D: int) -> dict:
    BD = next_power_of_2(D)
    return dict(BD=BD, num_warps=max(1, min(8, BD // 256)))


# ---- the two shuffles, each an autograd Function over its kernels ----------------------
@on_inputs_device
def _gather_raw(x, maps, dtype):
    out = torch.empty(maps.src.numel(), x.shape[1], dtype=dtype, device=x.device)
    if out.numel():
        _gather_kernel[(out.shape[0],)](x, maps.src, out, x.shape[1], **_block(x.shape[1]))
    return out


class _GatherRows(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, maps, dtype):
        ctx.maps, ctx.x_dtype = maps, x.dtype
        return _gather_raw(x.contiguous(), maps, dtype)

    @staticmethod
    @on_inputs_device
    def backward(ctx, dout):
        maps = ctx.maps
        dout = dout.contiguous()
        dx = torch.empty(maps.n, dout.shape[1], dtype=ctx.x_dtype, device=dout.device)
        if dx.numel():
            _gather_bwd_kernel[(maps.n,)](dout, maps.kept_row, dx, maps.n, dout.shape[1],
                                          K=maps.k, **_block(dout.shape[1]))
        return dx, None, None


class _CombineRows(torch.autograd.Function):
    @staticmethod
    @on_inputs_device
    def forward(ctx, y, maps, w):
        y, w = y.contiguous(), w.contiguous()
        out = torch.empty(maps.n, y.shape[1], dtype=y.dtype, device=y.device)
        if out.numel():
            _combine_kernel[(maps.n,)](y, maps.row, w, out, maps.n, y.shape[1], K=maps.k,
                                       **_block(y.shape[1]))
        ctx.maps = maps
        ctx.save_for_backward(y, w)
        return out

    @staticmethod
    @on_inputs_device
    def backward(ctx, g):
        y, w = ctx.saved_tensors
        maps = ctx.maps
        g = g.contiguous()
        dy, dw = torch.empty_like(y), torch.empty_like(w)
        if g.numel():
            _combine_bwd_kernel[(maps.n,)](g, y, maps.row, w, dy, dw, maps.n, y.shape[1],
                                           K=maps.k, **_block(y.shape[1]))
        else:
            dy.zero_(), dw.zero_()
        return dy, None, dw


def gather_rows_triton(x: torch.Tensor, maps, dtype: torch.dtype, grad: bool = True):
    """``dispatch.gather_rows`` by the kernels: xs (k·n, dim) in ``dtype``, differentiable
    in x unless ``grad`` is False."""
    if not grad:
        return _gather_raw(x.contiguous(), maps, dtype)
    return _GatherRows.apply(x, maps, dtype)


def combine_rows_triton(y: torch.Tensor, maps, w: torch.Tensor) -> torch.Tensor:
    """``dispatch.combine_rows`` by the kernels: out (n, dim), differentiable in y and w."""
    return _CombineRows.apply(y, maps, w)
