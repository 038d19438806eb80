"""What every chunk kernel loads first: a block of rows, the gate's running sums, the rates.

Layouts: v, do (B, T, H, D); b, c (B, T, H, S); g, beta (B, T, H); A (H, S). Step t of
batch element i_b and head i_h is row ``(i_b·T + t)·H + i_h`` of the (B·T·H, width) view,
so a kernel finds its rows from ``row0 = i_b·T·H + i_h`` and the steps ``o_t``.
"""

import triton
import triton.language as tl

__all__ = ["LOG2E", "load_rows", "gate_sums", "rates"]

LOG2E = tl.constexpr(1.4426950408889634)  # exp(x) = exp2(x · log2(e)): one instruction


@triton.jit
def load_rows(p, row0, o_t, m_t, o_x, m_x, W: tl.constexpr, H: tl.constexpr):
    """Rows o_t, columns o_x of a (B, T, H, W) tensor as fp32 [len(o_t), len(o_x)]; masked
    entries (steps past T, columns past W) are zero."""
    ptrs = p + (row0 + o_t[:, None] * H) * W + o_x[None, :]
    return tl.load(ptrs, mask=m_t[:, None] & m_x[None, :], other=0.0).to(tl.float32)


@triton.jit
def gate_sums(b_g, o_i, BT: tl.constexpr):
    """The gate summed from the block's start, l [BT], and over the whole block, l_C (b_lend)."""
    b_l = tl.cumsum(b_g, axis=0)  # [BT]
    return b_l, tl.sum(tl.where(o_i == BT - 1, b_l, 0.0), axis=0)


@triton.jit
def rates(A, i_h, o_s, m_s, S: tl.constexpr):
    """Head i_h's decay rates in base 2, A2 = A·log2(e) [BS]. Lanes past S (when the block
    is wider than S) take the head's slowest rate, so that the block's largest and smallest
    rates are the head's own; b, c and the state are zero there, so nothing they multiply
    changes."""
    b_A2 = tl.load(A + i_h * S + o_s, mask=m_s, other=0.0).to(tl.float32) * LOG2E
    return tl.where(m_s, b_A2, tl.max(tl.where(m_s, b_A2, float("-inf")), axis=0))
