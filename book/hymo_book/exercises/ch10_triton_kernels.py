"""Exercises of chapter 10 (the Triton kernels): one block's flat offsets
(``ops.utils.tiles.load_rows``), the backward of one recurrent step (``_bwd_step``), one level
of the delta inverse by merged blocks (``gated_delta.wy.unit_lower_inverse``), chunk-to-chunk
steps composed into one affine map, the chunk states the gla scan hands on
(``gla.chunk_h.state_scan_kernel``), and the one-product test (``utils.pairs.takes_chunk``)."""

from __future__ import annotations

import math
from functools import partial

import torch

from hymo_book.exercises import Case, Exercise, compare_tensors


# ---- the pointer arithmetic of one block -----------------------------------------------
def _row_offsets_oracle(i_b, i_h, t, T, H, W):
    """The flat index of element (i_b, t, i_h, w) of a contiguous (B, T, H, W) tensor, read
    from the tensor of indices itself: (len(t), W) int64."""
    index = torch.arange((i_b + 1) * T * H * W).reshape(i_b + 1, T, H, W)
    return index[i_b, t, i_h]  # (len(t), W)


def _row_offsets_cases():
    return [
        Case("the first block of the first (b, h)", (0, 0, torch.arange(16), 64, 4, 8)),
        Case("the second block of (b, h) = (1, 2)", (1, 2, torch.arange(16, 32), 40, 3, 5)),
        Case("the last head of the last sequence", (3, 39, torch.arange(4064, 4096), 4096, 40, 32)),
        Case("one step (T = 1)", (2, 1, torch.tensor([0]), 1, 3, 4)),
        Case("one head (H = 1)", (1, 0, torch.arange(8), 8, 1, 6)),
        Case("one column (W = 1)", (0, 3, torch.arange(5), 9, 4, 1)),
        Case("steps out of order", (1, 1, torch.tensor([7, 2, 5]), 8, 2, 3)),
    ]


def _exact_offsets(got, expected, case):
    if isinstance(got, torch.Tensor) and got.is_floating_point():
        return f"case {case.name}: offsets should be integers, got {got.dtype}"
    return compare_tensors(got, expected, case, rtol=0.0, atol=0.0, what="offset tensor")


def _forgets_the_heads(i_b, i_h, t, T, H, W):
    return (i_b * T + t)[:, None] * W + i_h + torch.arange(W)[None, :]


def _heads_before_time(i_b, i_h, t, T, H, W):  # a (B, H, T, W) layout
    return ((i_b * H + i_h) * T + t)[:, None] * W + torch.arange(W)[None, :]


def _rows_only(i_b, i_h, t, T, H, W):
    return ((i_b * T + t) * H + i_h) * W


# ---- the backward of one recurrent step ------------------------------------------------
def _step_backward_oracle(h_prev, b, c, v, g, A, do, dh_next):
    """Autograd through H = exp(g A) ⊙ h_prev + b ⊗ v, o = c^T H, in float64, for the loss
    whose gradients are do (by o) and dh_next (by H, from the later steps)."""
    leaves = [t.detach().double().requires_grad_() for t in (h_prev, b, c, v)]
    h_prev_, b_, c_, v_ = leaves
    H = torch.exp(g.double() * A.double())[:, None] * h_prev_ + torch.outer(b_, v_)  # (S, D)
    o = c_ @ H  # (D,)
    loss = (o * do.double()).sum() + (H * dh_next.double()).sum()
    return tuple(torch.autograd.grad(loss, leaves))


def _step_cases():
    gen = torch.Generator().manual_seed(10)

    def inputs(S, D, g=None, rate=1.0, do=True, dh=True):
        def randn(*shape):
            return torch.randn(*shape, generator=gen, dtype=torch.float64)

        g = torch.rand((), generator=gen, dtype=torch.float64) if g is None else torch.tensor(g)
        A = -rate * torch.rand(S, generator=gen, dtype=torch.float64)
        return (randn(S, D), randn(S) / S**0.5, randn(S) / S**0.5, randn(D), g.double(), A,
                randn(D) if do else torch.zeros(D, dtype=torch.float64),
                randn(S, D) if dh else torch.zeros(S, D, dtype=torch.float64))

    return [Case("random S = 4, D = 3", inputs(4, 3)),
            Case("S = D = 8", inputs(8, 8)),
            Case("S = 1", inputs(1, 5)),
            Case("D = 1", inputs(6, 1)),
            Case("the last step: no gradient from later steps", inputs(3, 4, dh=False)),
            Case("no gradient through the output", inputs(3, 4, do=False)),
            Case("no decay: g = 0", inputs(5, 2, g=0.0)),
            Case("strong decay: A down to -40", inputs(4, 4, rate=40.0))]


def _step_compare(got, expected, case):
    return compare_tensors(got, expected, case, rtol=1e-9, atol=1e-12)


def _forgets_later_steps(h_prev, b, c, v, g, A, do, dh_next):
    alpha = torch.exp(g * A)  # (S,)
    dH = torch.outer(c, do)  # only through o_t
    H = alpha[:, None] * h_prev + torch.outer(b, v)
    return alpha[:, None] * dH, dH @ v, H @ do, dH.T @ b


def _reads_the_old_state(h_prev, b, c, v, g, A, do, dh_next):
    alpha = torch.exp(g * A)
    dH = dh_next + torch.outer(c, do)
    return alpha[:, None] * dH, dH @ v, h_prev @ do, dH.T @ b  # dc from H_{t-1}


def _forgets_the_decay(h_prev, b, c, v, g, A, do, dh_next):
    alpha = torch.exp(g * A)
    dH = dh_next + torch.outer(c, do)
    H = alpha[:, None] * h_prev + torch.outer(b, v)
    return dH, dH @ v, H @ do, dH.T @ b  # dh_prev without alpha


# ---- one level of the inverse by merged blocks --------------------------------------------
def _block_inverse(M, size):
    """(I + M)⁻¹ restricted to the diagonal blocks of ``size`` steps, block by block."""
    n = M.shape[0]
    T = torch.zeros_like(M)
    for s in range(0, n, size):
        block = torch.eye(size, dtype=M.dtype) + M[s:s + size, s:s + size]
        T[s:s + size, s:s + size] = torch.linalg.inv(block)
    return T


def _merge_oracle(T, M, k):
    """The inverse on blocks of 2^(k+1) steps, straight from M (T is not used)."""
    return _block_inverse(M, 2 ** (k + 1))


def _merge_cases():
    gen = torch.Generator().manual_seed(11)

    def inputs(n, k, scale=1.0, aligned=False):
        if aligned:  # every pair close to the same weight: the hardest solve
            M = torch.full((n, n), scale, dtype=torch.float64)
        else:
            M = scale * torch.randn(n, n, generator=gen, dtype=torch.float64) / n**0.5
        M = torch.tril(M, diagonal=-1)  # strictly lower-triangular, as the kernel's M
        return (_block_inverse(M, 2 ** k), M, k)

    return [Case("n = 2, the first level", inputs(2, 0)),
            Case("n = 8, level 0", inputs(8, 0)),
            Case("n = 8, level 1", inputs(8, 1)),
            Case("n = 8, the last level", inputs(8, 2)),
            Case("n = 16, level 2", inputs(16, 2)),
            Case("n = 16, every pair weight 0.99", inputs(16, 3, 0.99, aligned=True)),
            Case("n = 4, M = 0", (torch.eye(4, dtype=torch.float64),
                                  torch.zeros(4, 4, dtype=torch.float64), 1))]


_merge_compare = partial(compare_tensors, rtol=1e-9, atol=1e-9)


def _level_mask(n, k):
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    return ((i >> (k + 1)) == (j >> (k + 1))) & ((i >> k) & 1 == 1) & ((j >> k) & 1 == 0)


def _plus_not_minus(T, M, k):
    Mk = torch.where(_level_mask(M.shape[0], k), M, 0.0)
    return T + T @ Mk @ T


def _all_of_M(T, M, k):
    return T - T @ M @ T


def _one_side_only(T, M, k):
    Mk = torch.where(_level_mask(M.shape[0], k), M, 0.0)
    return T - Mk @ T


# ---- a group of chunk-to-chunk steps as one affine map ----------------------------------
def _compose_oracle(A, U):
    """(M, B) with H_end = M H_start + B, by applying the steps to the identity and to zero
    separately: M is the map of H_start, B what zero grows into (float64)."""
    S, D = A.shape[1], U.shape[2]
    M, B = torch.eye(S, dtype=torch.float64), torch.zeros(S, D, dtype=torch.float64)
    for k in range(A.shape[0]):
        M = A[k].double() @ M
    for k in range(A.shape[0]):
        B = A[k].double() @ B + U[k].double()
    return M, B


def _compose_cases():
    gen = torch.Generator().manual_seed(12)

    def steps(G, S, D, scale=1.0):
        A = torch.eye(S, dtype=torch.float64) * 0.9 - scale * torch.randn(
            G, S, S, generator=gen, dtype=torch.float64) / S
        return A, torch.randn(G, S, D, generator=gen, dtype=torch.float64)

    return [Case("a group of 4 steps, S = D = 3", steps(4, 3, 3)),
            Case("one step", steps(1, 4, 2)),
            Case("no step at all: the identity and zero", steps(0, 3, 2)),
            Case("S = 5 keys, D = 2 values", steps(6, 5, 2)),
            Case("S = 1", steps(5, 1, 3)),
            Case("D = 1", steps(3, 4, 1)),
            Case("16 steps", steps(16, 8, 8, 0.5)),
            Case("no offsets: B stays zero", (steps(3, 3, 3)[0],
                                               torch.zeros(3, 3, 3, dtype=torch.float64)))]


_fp64_compare = partial(compare_tensors, rtol=1e-9, atol=1e-12)  # compose_steps, hand_on


def _reversed_order(A, U):
    S, D = A.shape[1], U.shape[2]
    M, B = torch.eye(S, dtype=A.dtype), torch.zeros(S, D, dtype=A.dtype)
    for k in reversed(range(A.shape[0])):  # the last step applied first
        M, B = A[k] @ M, A[k] @ B + U[k]
    return M, B


def _offsets_not_carried(A, U):
    S = A.shape[1]
    M = torch.eye(S, dtype=A.dtype)
    for k in range(A.shape[0]):
        M = A[k] @ M
    return M, U.sum(0)  # each offset as if no later step acted on it


def _offset_before_step(A, U):
    S, D = A.shape[1], U.shape[2]
    M, B = torch.eye(S, dtype=A.dtype), torch.zeros(S, D, dtype=A.dtype)
    for k in range(A.shape[0]):
        M, B = A[k] @ M, A[k] @ (B + U[k])  # step k's own transition applied to its offset
    return M, B


# ---- the chunk states handed from program to program ------------------------------------
def _hand_on_oracle(delta, decay, h0):
    """Every chunk's start state and the final state, the loop of the scan kernel
    (H_{k+1} = decay_k ⊙ H_k + ΔH_k), in float64."""
    h, starts = h0.double(), []
    for k in range(delta.shape[0]):
        starts.append(h)
        h = decay[k].double()[:, None] * h + delta[k].double()
    return torch.stack(starts) if starts else delta.double()[:0], h


def _hand_on_cases():
    gen = torch.Generator().manual_seed(13)

    def chunks(NC, S, D, strong=False):
        rate = 40.0 if strong else 1.0
        decay = torch.exp(-rate * torch.rand(NC, S, generator=gen, dtype=torch.float64))
        return (torch.randn(NC, S, D, generator=gen, dtype=torch.float64), decay,
                torch.randn(S, D, generator=gen, dtype=torch.float64))

    return [Case("5 chunks, S = 4, D = 3", chunks(5, 4, 3)),
            Case("one chunk: it starts from h0", chunks(1, 3, 2)),
            Case("S = 1, D = 1", chunks(6, 1, 1)),
            Case("strong decay: the states forget h0", chunks(4, 5, 2, strong=True)),
            Case("32 chunks", chunks(32, 8, 8)),
            Case("h0 = 0", (*chunks(3, 3, 3)[:2], torch.zeros(3, 3, dtype=torch.float64)))]


def _end_states(delta, decay, h0):
    h, ends = h0, []
    for k in range(delta.shape[0]):
        h = decay[k][:, None] * h + delta[k]
        ends.append(h)  # the state each chunk ends with, not the one it starts with
    return torch.stack(ends), h


def _decay_after_the_write(delta, decay, h0):
    h, starts = h0, []
    for k in range(delta.shape[0]):
        starts.append(h)
        h = decay[k][:, None] * (h + delta[k])  # ΔH is already decayed to the chunk's end
    return torch.stack(starts), h


def _decay_on_the_wrong_side(delta, decay, h0):
    h, starts = h0, []
    for k in range(delta.shape[0]):
        starts.append(h)
        h = h * decay[k][None, :] + delta[k]  # the decay is per key (row), not per value
    return torch.stack(starts), h


# ---- one product or the levels ------------------------------------------------------------
def _fits_oracle(g, A, span=64.0):
    """Every exponent of the block's excess decay, l_t δ_n in base 2 with δ = A - max A,
    within ±span: the (T, S) table of them, its largest size."""
    A = A.double()
    exponents = g.double().cumsum(0)[:, None] * (A - A.max())[None, :] / math.log(2)  # (T, S)
    return bool(exponents.abs().max() <= span)


def _fits_cases():
    gen = torch.Generator().manual_seed(6)
    rates = torch.rand(32, generator=gen, dtype=torch.float64) + 0.5  # (S,) in [0.5, 1.5)
    gates = torch.rand(16, generator=gen, dtype=torch.float64)  # (T,) in [0, 1)

    def at(share, g=gates, base=2.0):
        """Rates scaled so that the largest exponent of the excess, in the given base, is
        share · 64."""
        top = g.cumsum(0).abs().max() * (rates.max() - rates.min()) / math.log(base)
        return (g, -rates * share * 64.0 / top)

    swing = torch.tensor([30.0, -30.0, 1.0, -1.0], dtype=torch.float64)  # l = 30, 0, 1, 0
    return [Case("one fast rate on every key (1,000)",
                 (gates, -torch.full((32,), 1000.0, dtype=torch.float64))),
            Case("a mild block (largest exponent 0.5 · 64)", at(0.5)),
            Case("a strong block (2 · 64)", at(2.0)),
            Case("just inside (0.99 · 64)", at(0.99)),
            Case("just outside (1.01 · 64)", at(1.01)),
            Case("within 64 in base e, past it in base 2", at(0.9, base=math.e)),
            Case("a fast shared rate, a mild spread (rates 1,000 .. 1,000.5)",
                 (gates, -1000.0 - rates + 0.5)),
            Case("a gate that swings back (largest |l| mid-block)", (swing, -torch.tensor(
                [3.0, 4.0, 6.0], dtype=torch.float64))),
            Case("one step (T = 1)", (gates[:1], -rates)),
            Case("span 10 instead of 64", (gates, -rates / 4), {"span": 10.0}),
            Case("a long block of small gates", (torch.full((256,), 0.4, dtype=torch.float64),
                                                 -torch.tensor([0.5, 0.6], dtype=torch.float64))),
            Case("gates below zero (l falls to -40)", (torch.tensor([-30.0, -10.0, 5.0]).double(),
                                                        -torch.tensor([3.0, 4.0, 6.0]).double()))]


def _exact_answer(got, expected, case):
    if not isinstance(got, bool | torch.Tensor) or (isinstance(got, torch.Tensor)
                                                     and got.numel() != 1):
        return f"case {case.name}: the answer should be one True or False, got {got!r}"
    got = bool(got)
    if got != expected:
        return f"case {case.name}: expected {expected}, got {got}"
    return None


def _natural_base(g, A, span=64.0):
    return bool((g.cumsum(0).abs().max() * (A.max() - A.min())) <= span)  # e^x, not 2^x


def _end_of_the_block(g, A, span=64.0):
    return bool(g.sum().abs() * (A.max() - A.min()) / math.log(2) <= span)  # l_end, not max |l|


def _largest_not_absolute(g, A, span=64.0):
    return bool(g.cumsum(0).max() * (A.max() - A.min()) / math.log(2) <= span)  # max l, not |l|


def _fastest_rate(g, A, span=64.0):
    return bool(g.cumsum(0).abs().max() * A.abs().max() / math.log(2) <= span)  # all the decay


EXERCISES = [
    Exercise(
        name="row_offsets", chapter="10_triton_kernels", cases=_row_offsets_cases,
        oracle=_row_offsets_oracle, compare=_exact_offsets,
        wrong=[(_forgets_the_heads, "case the first block of the first (b, h): offset tensor "
                                    "differs at position (1, 0)"),
               (_heads_before_time, "case the first block of the first (b, h): offset tensor "
                                    "differs at position (1, 0)"),
               (_rows_only, "case the first block of the first (b, h): offset tensor has shape "
                            "(16,)")],
    ),
    Exercise(
        name="recurrent_step_backward", chapter="10_triton_kernels", cases=_step_cases,
        oracle=_step_backward_oracle, compare=_step_compare,
        wrong=[(_forgets_later_steps, "case random S = 4, D = 3: output 0 differs"),
               (_reads_the_old_state, "case random S = 4, D = 3: output 2 differs"),
               (_forgets_the_decay, "case random S = 4, D = 3: output 0 differs")],
    ),
    Exercise(
        name="merge_level", chapter="10_triton_kernels", cases=_merge_cases,
        oracle=_merge_oracle, compare=_merge_compare,
        wrong=[(_plus_not_minus, "case n = 2, the first level: output differs"),
               (_all_of_M, "case n = 8, level 0: output differs"),
               (_one_side_only, "case n = 8, level 1: output differs")],
    ),
    Exercise(
        name="compose_steps", chapter="10_triton_kernels", cases=_compose_cases,
        oracle=_compose_oracle, compare=_fp64_compare,
        wrong=[(_reversed_order, "case a group of 4 steps, S = D = 3: output 0 differs"),
               (_offsets_not_carried, "case a group of 4 steps, S = D = 3: output 1 differs"),
               (_offset_before_step, "case a group of 4 steps, S = D = 3: output 1 differs")],
    ),
    Exercise(
        name="hand_on", chapter="10_triton_kernels", cases=_hand_on_cases,
        oracle=_hand_on_oracle, compare=_fp64_compare,
        wrong=[(_end_states, "case 5 chunks, S = 4, D = 3: output 0 differs"),
               (_decay_after_the_write, "case 5 chunks, S = 4, D = 3: output 0 differs"),
               (_decay_on_the_wrong_side, "case 5 chunks, S = 4, D = 3 raised RuntimeError")],
    ),
    Exercise(
        name="fits_one_product", chapter="10_triton_kernels", cases=_fits_cases,
        oracle=_fits_oracle, compare=_exact_answer,
        wrong=[(_natural_base, "case just outside (1.01 · 64): expected False, got True"),
               (_end_of_the_block, "case a gate that swings back (largest |l| mid-block): "
                                   "expected False, got True"),
               (_fastest_rate, "case one fast rate on every key (1,000): expected True, "
                               "got False"),
               (_largest_not_absolute, "case gates below zero (l falls to -40): expected False, "
                                       "got True")],
    ),
]
