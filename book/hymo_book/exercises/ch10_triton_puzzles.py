"""Exercises of chapter 10 in which the learner writes a Triton kernel, in the manner of
Triton-Puzzles: a stub with its signature, a checker that launches it on tiny inputs (in
Triton's interpreter on a CPU) and compares with a plain-torch loop, and, when the answer is
wrong, a message that names the likely mistake.

The learner decorates the kernel with :func:`triton_exercise` instead of ``triton.jit``: the
same kernel, plus a handle the checker can call. ``check(kernel)`` then works as for every other
exercise of the book. The four kernels: a block's pointer arithmetic with masked loads and
stores (``to_heads_first``), one step of the recurrence for a (head, column block)
(``state_step``), one chunk's outputs by ``tl.dot`` (``chunk_attention``), and that chunk's
gradient by the values (``chunk_attention_dv``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from hymo_book.exercises import Case, Exercise, compare_tensors
from hymo_book.exercises.ch10_triton_wrong import CHUNK, CHUNK_DV, HEADS_FIRST, STATE_STEP

__all__ = ["EXERCISES", "compare_with_mistakes"]

RTOL, ATOL = 1e-4, 1e-5  # float32 kernels against float64 loops: float32's tolerance


def _device() -> str:
    return "cuda" if torch.cuda.is_available() else "cpu"


def _on_device(*tensors):
    return [t.float().contiguous().to(_device()) for t in tensors]


def _close(got, want) -> bool:
    """Whether a (tuple of) result(s) matches a catalogued mistake's, loosely."""
    if isinstance(want, tuple):
        return isinstance(got, tuple) and all(_close(g, w) for g, w in zip(got, want, strict=True))
    if not isinstance(got, torch.Tensor) or got.shape != want.shape:
        return False
    return bool(torch.isclose(got.double().cpu(), want.double(), rtol=1e-3, atol=1e-4,
                              equal_nan=True).all())


def compare_with_mistakes(mistakes, *, rtol=RTOL, atol=ATOL, skip=1, exact=None):
    """A compare for ``Exercise``: None when the answer is right; else the hint of the first
    catalogued mistake ``(fn, hint)`` it matches (``fn`` takes the case's inputs, the first
    ``skip`` arguments left out), or the first position that differs. ``exact(got, case)`` may
    reject an answer first (a wrong dtype, ...)."""
    def compare(got, expected, case):
        if isinstance(got, torch.Tensor | tuple):
            got = tuple(t.cpu() for t in got) if isinstance(got, tuple) else got.cpu()
        msg = (exact and exact(got, case)) or compare_tensors(got, expected, case, rtol=rtol,
                                                              atol=atol)
        if msg is None:
            return None
        for mistake, hint in mistakes:
            if _close(got, mistake(*case.args[skip:])):
                return f"case {case.name}: {hint}"
        if isinstance(got, torch.Tensor) and not torch.isfinite(got).all():
            return f"case {case.name}: inf or nan in the output: does an exponent grow?"
        return msg
    return compare


def _randn(gen, *shape):
    return torch.randn(*shape, generator=gen, dtype=torch.float64)


# ---- 1. a block's pointer arithmetic, masked loads and stores ----------------------------
def _launch_to_heads_first(kernel, x, BT, BW):
    import triton
    B, T, H, W = x.shape
    (x_,) = _on_device(x)
    y = torch.zeros(B, H, T, W, device=x_.device)
    kernel[(B, H, triton.cdiv(T, BT))](x_, y, T, H=H, W=W, BT=BT, BW=BW)
    return y.cpu()


def _heads_first_loop(x, BT, BW):
    B, T, H, W = x.shape
    y = torch.zeros(B, H, T, W, dtype=torch.float64)
    for i_b in range(B):
        for i_h in range(H):
            for t in range(T):
                y[i_b, i_h, t] = x[i_b, t, i_h]
    return y


def _heads_first_cases():
    gen = torch.Generator().manual_seed(20)
    launch = _launch_to_heads_first
    return [Case("B = 2, T = 11, H = 3, W = 5 in blocks of 4 steps",
                 (launch, _randn(gen, 2, 11, 3, 5), 4, 8)),
            Case("T = 8, W = 8: one whole block", (launch, _randn(gen, 1, 8, 2, 8), 8, 8)),
            Case("T = 3, one head: a short block", (launch, _randn(gen, 2, 3, 1, 3), 4, 4))]


def _first_block_only(x, BT, BW):
    y = _heads_first_loop(x, BT, BW)
    y[:, :, BT:] = 0.0
    return y


def _last_step_dropped(x, BT, BW):
    y = _heads_first_loop(x, BT, BW)
    y[:, :, -1] = 0.0
    return y


def _rows_without_heads(x, BT, BW):
    B, T, H, W = x.shape
    rows = x.reshape(B * T * H, W)
    y = torch.zeros(B, H, T, W, dtype=torch.float64)
    for i_b in range(B):
        for i_h in range(H):
            for t in range(T):
                y[i_b, i_h, t] = rows[i_b * T + t + i_h]  # row (i_b·T + t) + i_h: no ·H
    return y


_HEADS_FIRST_MISTAKES = [
    (_first_block_only, "steps past the first block stay zero: did you add the block's first "
                        "step, i_t * BT, to the step offsets?"),
    (_last_step_dropped, "the last step stays zero: is the time mask one short? Keep the steps "
                         "with t < T"),
    (_rows_without_heads, "values from the wrong row of x: step t of (i_b, i_h) is row "
                          "(i_b * T + t) * H + i_h (did you forget the * H?)"),
]


# ---- 2. one step of the recurrence for a (head, column block) ----------------------------
def _launch_state_step(kernel, h, b, c, v, g, A, BD):
    import triton
    H, S, D = h.shape
    h_, b_, c_, v_, g_, A_ = _on_device(h, b, c, v, g, A)
    o = torch.zeros(H, D, device=h_.device)
    kernel[(H, triton.cdiv(D, BD))](h_, b_, c_, v_, g_, A_, o, S=S, D=D, BD=BD)
    return h_.cpu(), o.cpu()


def _state_step_loop(h, b, c, v, g, A, BD):
    h_new, o = torch.empty_like(h), torch.empty(h.shape[0], h.shape[2], dtype=h.dtype)
    for i_h in range(h.shape[0]):
        decay = torch.exp(g[i_h] * A[i_h])  # (S,) one factor per key: a row of the state
        h_new[i_h] = decay[:, None] * h[i_h] + torch.outer(b[i_h], v[i_h])  # (S, D)
        o[i_h] = c[i_h] @ h_new[i_h]  # (D,)
    return h_new, o


def _state_step_cases():
    gen = torch.Generator().manual_seed(21)

    def inputs(H, S, D, BD, rate=1.0):
        return (_launch_state_step, _randn(gen, H, S, D), _randn(gen, H, S) / S**0.5,
                _randn(gen, H, S) / S**0.5, _randn(gen, H, D),
                torch.rand(H, generator=gen, dtype=torch.float64),
                -rate * (torch.rand(H, S, generator=gen, dtype=torch.float64) + 0.5), BD)

    return [Case("H = 2, S = 8, D = 6 in column blocks of 4", inputs(2, 8, 6, 4)),
            Case("H = 3, S = 4, D = 8: one column block", inputs(3, 4, 8, 8)),
            Case("strong decay (rates up to 30)", inputs(2, 8, 5, 4, rate=20.0))]


def _no_decay(h, b, c, v, g, A, BD):
    return _state_step_loop(h, b, c, v, torch.zeros_like(g), A, BD)


def _reads_before_the_write(h, b, c, v, g, A, BD):
    h_new, _ = _state_step_loop(h, b, c, v, g, A, BD)
    return h_new, torch.einsum("hs,hsd->hd", c, h)


def _first_column_block_only(h, b, c, v, g, A, BD):
    """Every program steps columns 0 .. BD - 1 of the state in place, one after another."""
    h_new, o = h.clone(), torch.zeros(h.shape[0], h.shape[2], dtype=h.dtype)
    for _ in range(-(-h.shape[2] // BD)):  # one pass per column block
        first, _o = _state_step_loop(h_new[:, :, :BD], b, c, v[:, :BD], g, A, BD)
        h_new[:, :, :BD], o[:, :BD] = first, _o
    return h_new, o


_STATE_STEP_MISTAKES = [
    (_no_decay, "the state is not decayed: multiply its rows by exp(g A) before the write"),
    (_reads_before_the_write, "o reads the state before the step: compute o = Hᵀ c from the "
                              "updated state"),
    (_first_column_block_only, "columns past the first block are untouched: the block's "
                               "columns start at i_d * BD"),
]


# ---- 3. one chunk's outputs, with tl.dot --------------------------------------------------
def _launch_chunk(kernel, c, b, v, l, A):
    H, C, S = c.shape
    D = v.shape[-1]
    c_, b_, v_, l_, A_ = _on_device(c, b, v, l, A)
    out = torch.zeros(H, C, D, device=c_.device)
    kernel[(H,)](c_, b_, v_, l_, A_, out, C=C, S=S, D=D)
    return out.cpu()


def _weights(c, b, l, A, *, mask="causal", sign=1.0, decay=True):
    """P_ts = (c_t · b_s) e^{(l_t - l_s) A} for s ≤ t, per head (H, C, C), in float64."""
    C = c.shape[1]
    P = torch.einsum("hts,hus->htu", c, b)
    if decay:
        P = P * torch.exp(sign * (l[:, :, None] - l[:, None, :]) * A[:, None, None])
    keep = {"causal": torch.ones(C, C).tril(), "strict": torch.ones(C, C).tril(-1),
            "none": torch.ones(C, C)}[mask].bool()
    return torch.where(keep, P, 0.0)


def _chunk_loop(c, b, v, l, A):
    H, C, _ = c.shape
    o = torch.zeros(H, C, v.shape[-1], dtype=torch.float64)
    for i_h in range(H):
        for t in range(C):
            for s in range(t + 1):  # the pairs s ≤ t
                w = (c[i_h, t] @ b[i_h, s]) * torch.exp((l[i_h, t] - l[i_h, s]) * A[i_h])
                o[i_h, t] += w * v[i_h, s]
    return o


def _chunk_cases():
    gen = torch.Generator().manual_seed(22)

    def inputs(H, rate=1.0, C=16, S=16, D=16):
        gates = torch.rand(H, C, generator=gen, dtype=torch.float64)
        return (_launch_chunk, _randn(gen, H, C, S) / S**0.5, _randn(gen, H, C, S) / S**0.5,
                _randn(gen, H, C, D), gates.cumsum(-1),
                -rate * (torch.rand(H, generator=gen, dtype=torch.float64) + 0.5))

    return [Case("two heads, rates 0.5 .. 1.5", inputs(2)),
            Case("strong decay (rates 10 .. 30)", inputs(1, rate=20.0))]


def _chunk_mistakes(product: Callable):
    """The catalogued mistakes of exercises 3 and 4, through ``product(P, x)``."""
    def made(**how):
        return lambda c, b, x, l, A: product(_weights(c, b, l, A, **how), x)
    return [
        (made(mask="none"), "pairs with s > t are kept: mask P to s ≤ t (o_t[:, None] >= "
                            "o_t[None, :])"),
        (made(mask="strict"), "the diagonal s = t is missing: keep the pairs s ≤ t, not s < t"),
        (made(decay=False), "there is no decay: multiply P_ts by exp((l_t - l_s) A)"),
        (made(sign=-1.0), "the decay grows with the gap: the exponent is (l_t - l_s) A, "
                          "which is ≤ 0"),
    ]


def _intra(P, v):
    return torch.einsum("htu,hud->htd", P, v)  # o = P v


# ---- 4. the chunk's gradient by the values -------------------------------------------------
def _chunk_dv_loop(c, b, do, l, A):
    H, C, _ = c.shape
    dv = torch.zeros(H, C, do.shape[-1], dtype=torch.float64)
    for i_h in range(H):
        for s in range(C):
            for t in range(s, C):  # every later output t ≥ s read v_s
                w = (c[i_h, t] @ b[i_h, s]) * torch.exp((l[i_h, t] - l[i_h, s]) * A[i_h])
                dv[i_h, s] += w * do[i_h, t]
    return dv


def _transposed(P, do):
    return torch.einsum("htu,htd->hud", P, do)  # dv = Pᵀ do


_DV_MISTAKES = [(lambda c, b, do, l, A: _intra(_weights(c, b, l, A), do),
                 "dv_s sums over the later steps t ≥ s: use Pᵀ do (tl.trans(P)), not P do"),
                *_chunk_mistakes(_transposed)]


def _drop_launch(loop):
    return lambda launch, *inputs: loop(*inputs)


EXERCISES = [
    Exercise(name="to_heads_first", chapter="10_triton_kernels", cases=_heads_first_cases,
             oracle=_drop_launch(_heads_first_loop),
             compare=compare_with_mistakes(_HEADS_FIRST_MISTAKES), wrong=HEADS_FIRST),
    Exercise(name="state_step", chapter="10_triton_kernels", cases=_state_step_cases,
             oracle=_drop_launch(_state_step_loop),
             compare=compare_with_mistakes(_STATE_STEP_MISTAKES), wrong=STATE_STEP),
    Exercise(name="chunk_attention", chapter="10_triton_kernels", cases=_chunk_cases,
             oracle=_drop_launch(_chunk_loop),
             compare=compare_with_mistakes(_chunk_mistakes(_intra)), wrong=CHUNK),
    Exercise(name="chunk_attention_dv", chapter="10_triton_kernels", cases=_chunk_cases,
             oracle=_drop_launch(_chunk_dv_loop), compare=compare_with_mistakes(_DV_MISTAKES),
             wrong=CHUNK_DV),
]
