"""Exercises of chapter 10 (the Triton kernels) written in torch: one block's flat offsets
(``ops.utils.tiles.load_rows``), the backward of one recurrent step (``_bwd_step``) and the
chunk states the gla scan hands on (``gla.chunk_h.state_scan_kernel``). The exercises in which
the learner writes Triton are in ``ch10_triton_puzzles``."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise
from hymo_book.exercises.ch10_triton_puzzles import compare_with_mistakes


# ---- the pointer arithmetic of one block -----------------------------------------------
def _row_offsets_oracle(i_b, i_h, t, T, H, W):
    """The flat index of element (i_b, t, i_h, w) of a contiguous (B, T, H, W) tensor, read
    from the tensor of indices itself: (len(t), W) int64."""
    index = torch.arange((i_b + 1) * T * H * W).reshape(i_b + 1, T, H, W)
    return index[i_b, t, i_h]  # (len(t), W)


def _row_offsets_cases():
    return [
        Case("the second block of (b, h) = (1, 2)", (1, 2, torch.arange(16, 32), 40, 3, 5)),
        Case("the first block of the first (b, h)", (0, 0, torch.arange(16), 64, 4, 8)),
        Case("the last head of the last sequence", (3, 39, torch.arange(4064, 4096), 4096, 40, 32)),
        Case("one step (T = 1)", (2, 1, torch.tensor([0]), 1, 3, 4)),
        Case("one head (H = 1)", (1, 0, torch.arange(8), 8, 1, 6)),
        Case("one column (W = 1)", (0, 3, torch.arange(5), 9, 4, 1)),
        Case("steps out of order", (1, 1, torch.tensor([7, 2, 5]), 8, 2, 3)),
    ]


def _integer_offsets(got, case):
    if isinstance(got, torch.Tensor) and got.is_floating_point():
        return f"case {case.name}: offsets should be integers, got {got.dtype}"
    return None


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


_OFFSET_MISTAKES = [
    (_forgets_the_heads, "the head is missing from the row: step t of (i_b, i_h) is row "
                         "(i_b * T + t) * H + i_h"),
    (_heads_before_time, "these are the offsets of a (B, H, T, W) tensor: in (B, T, H, W) the "
                         "row of step t is (i_b * T + t) * H + i_h"),
    (_rows_only, "one offset per row: add the columns, row * W + arange(W), shape (len(t), W)"),
]
_STEP_MISTAKES = [
    (_forgets_later_steps, "dh_next is left out: dH = c doᵀ + dh_next carries the later "
                           "steps' gradient"),
    (_reads_the_old_state, "dc reads H_prev: dc = H do with H the state after the step"),
    (_forgets_the_decay, "dh_prev lacks the decay: hand exp(g A) ⊙ dH to the step before"),
]
_HAND_ON_MISTAKES = [
    (_end_states, "these are the states the chunks end with: store H_k before the update"),
    (_decay_after_the_write, "ΔH is decayed twice: it is already decayed to its chunk's end, "
                             "H ← decay ⊙ H + ΔH"),
]

EXERCISES = [
    Exercise(
        name="row_offsets", chapter="10_triton_kernels", cases=_row_offsets_cases,
        oracle=_row_offsets_oracle,
        compare=compare_with_mistakes(_OFFSET_MISTAKES, rtol=0.0, atol=0.0, skip=0,
                                      exact=_integer_offsets),
        wrong=[(fn, hint[:40]) for fn, hint in _OFFSET_MISTAKES],
    ),
    Exercise(
        name="recurrent_step_backward", chapter="10_triton_kernels", cases=_step_cases,
        oracle=_step_backward_oracle, compare=compare_with_mistakes(_STEP_MISTAKES, skip=0),
        wrong=[(fn, hint[:40]) for fn, hint in _STEP_MISTAKES],
    ),
    Exercise(
        name="hand_on", chapter="10_triton_kernels", cases=_hand_on_cases,
        oracle=_hand_on_oracle, compare=compare_with_mistakes(_HAND_ON_MISTAKES, skip=0),
        wrong=[*[(fn, hint[:40]) for fn, hint in _HAND_ON_MISTAKES],
               (_decay_on_the_wrong_side, "case 5 chunks, S = 4, D = 3 raised RuntimeError")],
    ),
]
