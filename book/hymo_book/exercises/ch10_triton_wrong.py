"""The catalogued wrong answers of chapter 10's Triton exercises (``ch10_triton_puzzles``):
each kernel is the solution with one plausible mistake, named by its function; the tests check
that ``check`` fails each with the message that names that mistake."""

from __future__ import annotations

from hymo_book.exercises.triton_exercise import triton_exercise

tl = None  # triton.language, bound on the first launch, once TRITON_INTERPRET is set

__all__ = ["HEADS_FIRST", "STATE_STEP", "CHUNK", "CHUNK_DV"]


# ---- 1. to_heads_first -------------------------------------------------------------------
@triton_exercise
def without_the_block_start(x, y, T, H: tl.constexpr, W: tl.constexpr, BT: tl.constexpr,
                            BW: tl.constexpr):
    i_b, i_h = tl.program_id(0), tl.program_id(1)
    o_t = tl.arange(0, BT)  # the mistake: every block takes steps 0 .. BT - 1
    o_w = tl.arange(0, BW)
    m = (o_t[:, None] < T) & (o_w[None, :] < W)
    b_x = tl.load(x + ((i_b * T + o_t[:, None]) * H + i_h) * W + o_w[None, :], mask=m, other=0.0)
    tl.store(y + ((i_b * H + i_h) * T + o_t[:, None]) * W + o_w[None, :], b_x, mask=m)


@triton_exercise
def mask_one_short(x, y, T, H: tl.constexpr, W: tl.constexpr, BT: tl.constexpr,
                   BW: tl.constexpr):
    i_b, i_h, i_t = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_t = i_t * BT + tl.arange(0, BT)
    o_w = tl.arange(0, BW)
    m = (o_t[:, None] < T - 1) & (o_w[None, :] < W)  # the mistake: T - 1
    b_x = tl.load(x + ((i_b * T + o_t[:, None]) * H + i_h) * W + o_w[None, :], mask=m, other=0.0)
    tl.store(y + ((i_b * H + i_h) * T + o_t[:, None]) * W + o_w[None, :], b_x, mask=m)


@triton_exercise
def rows_without_the_heads(x, y, T, H: tl.constexpr, W: tl.constexpr, BT: tl.constexpr,
                           BW: tl.constexpr):
    i_b, i_h, i_t = tl.program_id(0), tl.program_id(1), tl.program_id(2)
    o_t = i_t * BT + tl.arange(0, BT)
    o_w = tl.arange(0, BW)
    m = (o_t[:, None] < T) & (o_w[None, :] < W)
    b_x = tl.load(x + ((i_b * T + o_t[:, None]) + i_h) * W + o_w[None, :], mask=m, other=0.0)
    tl.store(y + ((i_b * H + i_h) * T + o_t[:, None]) * W + o_w[None, :], b_x, mask=m)


# ---- 2. state_step -----------------------------------------------------------------------
@triton_exercise
def state_without_decay(h, b, c, v, g, A, o, S: tl.constexpr, D: tl.constexpr,
                        BD: tl.constexpr):
    i_h, i_d = tl.program_id(0), tl.program_id(1)
    o_s, o_d = tl.arange(0, S), i_d * BD + tl.arange(0, BD)
    m_d = o_d < D
    p_h = h + (i_h * S + o_s[:, None]) * D + o_d[None, :]
    b_h = tl.load(p_h, mask=m_d[None, :], other=0.0)
    b_b, b_c = tl.load(b + i_h * S + o_s), tl.load(c + i_h * S + o_s)
    b_v = tl.load(v + i_h * D + o_d, mask=m_d, other=0.0)
    b_h = b_h + b_b[:, None] * b_v[None, :]  # the mistake: no exp(g A)
    tl.store(p_h, b_h, mask=m_d[None, :])
    tl.store(o + i_h * D + o_d, tl.sum(b_h * b_c[:, None], axis=0), mask=m_d)


@triton_exercise
def reads_before_the_write(h, b, c, v, g, A, o, S: tl.constexpr, D: tl.constexpr,
                           BD: tl.constexpr):
    i_h, i_d = tl.program_id(0), tl.program_id(1)
    o_s, o_d = tl.arange(0, S), i_d * BD + tl.arange(0, BD)
    m_d = o_d < D
    p_h = h + (i_h * S + o_s[:, None]) * D + o_d[None, :]
    b_h = tl.load(p_h, mask=m_d[None, :], other=0.0)
    b_b, b_c = tl.load(b + i_h * S + o_s), tl.load(c + i_h * S + o_s)
    b_A, b_g = tl.load(A + i_h * S + o_s), tl.load(g + i_h)
    b_v = tl.load(v + i_h * D + o_d, mask=m_d, other=0.0)
    tl.store(o + i_h * D + o_d, tl.sum(b_h * b_c[:, None], axis=0), mask=m_d)  # the mistake
    b_h = b_h * tl.exp(b_g * b_A)[:, None] + b_b[:, None] * b_v[None, :]
    tl.store(p_h, b_h, mask=m_d[None, :])


@triton_exercise
def without_the_column_start(h, b, c, v, g, A, o, S: tl.constexpr, D: tl.constexpr,
                             BD: tl.constexpr):
    i_h = tl.program_id(0)
    o_s, o_d = tl.arange(0, S), tl.arange(0, BD)  # the mistake: no i_d * BD
    m_d = o_d < D
    p_h = h + (i_h * S + o_s[:, None]) * D + o_d[None, :]
    b_h = tl.load(p_h, mask=m_d[None, :], other=0.0)
    b_b, b_c = tl.load(b + i_h * S + o_s), tl.load(c + i_h * S + o_s)
    b_A, b_g = tl.load(A + i_h * S + o_s), tl.load(g + i_h)
    b_v = tl.load(v + i_h * D + o_d, mask=m_d, other=0.0)
    b_h = b_h * tl.exp(b_g * b_A)[:, None] + b_b[:, None] * b_v[None, :]
    tl.store(p_h, b_h, mask=m_d[None, :])  # (every block writes the same values there)
    tl.store(o + i_h * D + o_d, tl.sum(b_h * b_c[:, None], axis=0), mask=m_d)


# ---- 3. and 4. chunk_attention, chunk_attention_dv ---------------------------------------
@triton_exercise
def weights_of_every_pair(c, b, v, l, A, o, C: tl.constexpr, S: tl.constexpr, D: tl.constexpr):
    i_h = tl.program_id(0)
    o_t, o_s, o_d = tl.arange(0, C), tl.arange(0, S), tl.arange(0, D)
    b_c = tl.load(c + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_b = tl.load(b + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_v = tl.load(v + (i_h * C + o_t[:, None]) * D + o_d[None, :])
    b_l, b_A = tl.load(l + i_h * C + o_t), tl.load(A + i_h)
    b_P = tl.dot(b_c, tl.trans(b_b), input_precision="ieee")
    b_P = b_P * tl.exp((b_l[:, None] - b_l[None, :]) * b_A)  # the mistake: no mask s ≤ t
    tl.store(o + (i_h * C + o_t[:, None]) * D + o_d[None, :],
             tl.dot(b_P, b_v, input_precision="ieee"))


@triton_exercise
def without_the_diagonal(c, b, v, l, A, o, C: tl.constexpr, S: tl.constexpr, D: tl.constexpr):
    i_h = tl.program_id(0)
    o_t, o_s, o_d = tl.arange(0, C), tl.arange(0, S), tl.arange(0, D)
    b_c = tl.load(c + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_b = tl.load(b + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_v = tl.load(v + (i_h * C + o_t[:, None]) * D + o_d[None, :])
    b_l, b_A = tl.load(l + i_h * C + o_t), tl.load(A + i_h)
    m_ts = o_t[:, None] > o_t[None, :]  # the mistake: s < t
    b_gap = tl.where(m_ts, b_l[:, None] - b_l[None, :], 0.0)
    b_P = tl.where(m_ts, tl.dot(b_c, tl.trans(b_b), input_precision="ieee")
                   * tl.exp(b_gap * b_A), 0.0)
    tl.store(o + (i_h * C + o_t[:, None]) * D + o_d[None, :],
             tl.dot(b_P, b_v, input_precision="ieee"))


@triton_exercise
def decay_that_grows(c, b, v, l, A, o, C: tl.constexpr, S: tl.constexpr, D: tl.constexpr):
    i_h = tl.program_id(0)
    o_t, o_s, o_d = tl.arange(0, C), tl.arange(0, S), tl.arange(0, D)
    b_c = tl.load(c + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_b = tl.load(b + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_v = tl.load(v + (i_h * C + o_t[:, None]) * D + o_d[None, :])
    b_l, b_A = tl.load(l + i_h * C + o_t), tl.load(A + i_h)
    m_ts = o_t[:, None] >= o_t[None, :]
    b_gap = tl.where(m_ts, b_l[None, :] - b_l[:, None], 0.0)  # the mistake: l_s - l_t
    b_P = tl.where(m_ts, tl.dot(b_c, tl.trans(b_b), input_precision="ieee")
                   * tl.exp(b_gap * b_A), 0.0)
    tl.store(o + (i_h * C + o_t[:, None]) * D + o_d[None, :],
             tl.dot(b_P, b_v, input_precision="ieee"))


@triton_exercise
def dv_by_p_not_its_transpose(c, b, do, l, A, dv, C: tl.constexpr, S: tl.constexpr,
                              D: tl.constexpr):
    i_h = tl.program_id(0)
    o_t, o_s, o_d = tl.arange(0, C), tl.arange(0, S), tl.arange(0, D)
    b_c = tl.load(c + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_b = tl.load(b + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_do = tl.load(do + (i_h * C + o_t[:, None]) * D + o_d[None, :])
    b_l, b_A = tl.load(l + i_h * C + o_t), tl.load(A + i_h)
    m_ts = o_t[:, None] >= o_t[None, :]
    b_gap = tl.where(m_ts, b_l[:, None] - b_l[None, :], 0.0)
    b_P = tl.where(m_ts, tl.dot(b_c, tl.trans(b_b), input_precision="ieee")
                   * tl.exp(b_gap * b_A), 0.0)
    tl.store(dv + (i_h * C + o_t[:, None]) * D + o_d[None, :],
             tl.dot(b_P, b_do, input_precision="ieee"))  # the mistake: P do


@triton_exercise
def dv_without_decay(c, b, do, l, A, dv, C: tl.constexpr, S: tl.constexpr, D: tl.constexpr):
    i_h = tl.program_id(0)
    o_t, o_s, o_d = tl.arange(0, C), tl.arange(0, S), tl.arange(0, D)
    b_c = tl.load(c + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_b = tl.load(b + (i_h * C + o_t[:, None]) * S + o_s[None, :])
    b_do = tl.load(do + (i_h * C + o_t[:, None]) * D + o_d[None, :])
    m_ts = o_t[:, None] >= o_t[None, :]
    b_P = tl.where(m_ts, tl.dot(b_c, tl.trans(b_b), input_precision="ieee"), 0.0)  # no decay
    tl.store(dv + (i_h * C + o_t[:, None]) * D + o_d[None, :],
             tl.dot(tl.trans(b_P), b_do, input_precision="ieee"))


# each wrong answer with the fragment of the message ``check`` must give it
HEADS_FIRST = [(without_the_block_start, "did you add the block's first step, i_t * BT"),
               (mask_one_short, "is the time mask one short?"),
               (rows_without_the_heads, "did you forget the * H?")]
STATE_STEP = [(state_without_decay, "the state is not decayed"),
              (reads_before_the_write, "o reads the state before the step"),
              (without_the_column_start, "the block's columns start at i_d * BD")]
CHUNK = [(weights_of_every_pair, "pairs with s > t are kept"),
         (without_the_diagonal, "the diagonal s = t is missing"),
         (decay_that_grows, "the decay grows with the gap")]
CHUNK_DV = [(dv_by_p_not_its_transpose, "use Pᵀ do (tl.trans(P)), not P do"),
            (dv_without_decay, "there is no decay")]
