"""Exercises of chapter 09 (a GPU primer): the floor of an operation from its bytes and
FLOPs, TF32 rounding of a float32, a float32 as three bf16 pieces, the backward of a decay
for an autograd.Function, and when back-to-back calls end, the host and the GPU each with
its own clock."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise, compare_tensors
from hymo_book.kernels.primer import bf16_pieces, floors, launch_schedule, tf32_round


# ---- the floor of an operation ---------------------------------------------------------
def _floor_oracle(n_bytes, flops, bandwidth_GBps, tflops):
    return floors(n_bytes, flops, bandwidth_GBps, tflops)["floor_ms"]


def _floor_cases():
    steps = 4 * 4096 * 40  # the GLA forward of chapter 07 at B = 4, T = 4,096, H = 40
    gen = torch.Generator().manual_seed(9)
    cases = [Case("the gla forward (memory-bound)", (steps * 129 * 4, steps * 5152, 4250.0, 67.0)),
             Case("a 4096 matmul in TF32 (compute-bound)", (3 * 4096**2 * 4, 2 * 4096**3, 4250.0,
                                                            494.5)),
             Case("a copy: no FLOPs", (1e9, 0.0, 4000.0, 67.0)),
             Case("no bytes at all", (0.0, 1e12, 4000.0, 67.0)),
             Case("exactly at the ridge", (1e9, 2e10, 1000.0, 20.0)),
             Case("one byte and one FLOP", (1.0, 1.0, 1.0, 1.0))]
    for i in range(4):
        n, f = (10 ** (torch.rand(2, generator=gen) * 6 + 6)).tolist()
        bw, rate = (torch.rand(2, generator=gen) * 1000 + 100).tolist()
        cases.append(Case(f"random {i}", (n, f, bw, rate)))
    return cases


def _floor_compare(got, expected, case):
    return compare_tensors(got, torch.tensor(expected, dtype=torch.float64), case, rtol=1e-6,
                           atol=0.0)  # float32's precision, with room for a few operations


# ---- TF32 rounding ---------------------------------------------------------------------
def _from_bits(*patterns: int) -> torch.Tensor:
    """float32 values with the given bit patterns (as unsigned 32-bit integers)."""
    signed = [p - (1 << 32) if p >= 1 << 31 else p for p in patterns]
    return torch.tensor(signed, dtype=torch.int32).view(torch.float32)


def _tf32_cases():
    gen = torch.Generator().manual_seed(10)
    return [
        Case("random normal values", (torch.randn(64, generator=gen),)),
        Case("values spread over magnitudes", (torch.randn(32, generator=gen)
                                               * 10 ** torch.randint(-30, 30, (32,),
                                                                     generator=gen).float(),)),
        Case("already TF32", (torch.tensor([1.0, -2.5, 0.0, 1024.0, 0.75]),)),
        Case("a tie, kept bit even: rounds down", (_from_bits(0x3F801000, 0xBF805000),)),
        Case("a tie, kept bit odd: rounds up", (_from_bits(0x3F803000, 0xBF807000),)),
        Case("just above and below a tie", (_from_bits(0x3F801001, 0x3F800FFF),)),
        Case("rounding up carries into the exponent", (_from_bits(0x3FFFF000, 0x3FFFFFFF),)),
        Case("the largest float32 rounds to infinity", (_from_bits(0x7F7FFFFF, 0xFF7FFFFF),)),
        Case("zeros, infinities and a subnormal",
             (torch.cat([torch.tensor([0.0, -0.0, float("inf"), -float("inf")]),
                         _from_bits(0x00001FFF)]),)),
        Case("a (4, 8) matrix", (torch.randn(4, 8, generator=gen),)),
    ]


def _exact(got, expected, case):
    return compare_tensors(got, expected, case, rtol=0.0, atol=0.0)


def _truncate(x):
    return (x.view(torch.int32) & ~0x1FFF).view(torch.float32)


def _ties_away(x):
    return ((x.view(torch.int32) + 0x1000) & ~0x1FFF).view(torch.float32)


# ---- three bf16 pieces -------------------------------------------------------------------
def _pieces_cases():
    gen = torch.Generator().manual_seed(12)
    return [
        Case("random normal values", (torch.randn(64, generator=gen),)),
        Case("values spread over magnitudes", (torch.randn(32, generator=gen)
                                               * 10 ** torch.randint(-25, 25, (32,),
                                                                     generator=gen).float(),)),
        Case("already bf16: two zero pieces", (torch.tensor([1.0, -2.5, 0.0, 2.0**60, 0.75]),)),
        Case("all 24 bits set", (_from_bits(0x3FFFFFFF, 0xBFFFFFFF, 0x3F800001),)),
        Case("a tie, kept bit even: rounds down", (_from_bits(0x3F808000, 0xBF848000),)),
        Case("a tie, kept bit odd: rounds up", (_from_bits(0x3F818000, 0xBF858000),)),
        Case("zeros", (torch.tensor([0.0, -0.0]),)),
        Case("a (4, 8) matrix", (torch.randn(4, 8, generator=gen),)),
    ]


def _truncated_pieces(x):
    """Each piece by cutting the low 16 bits instead of rounding."""
    pieces, rest = [], x
    for _ in range(3):
        piece = (rest.view(torch.int32) & ~0xFFFF).view(torch.float32)
        pieces.append(piece)
        rest = rest - piece
    return pieces


def _pieces_of_x(x):
    """Every piece rounded from x itself, not from what the pieces before it left."""
    return [x.to(torch.bfloat16).float() for _ in range(3)]


# ---- the backward of a decay -----------------------------------------------------------
def _decay_backward_oracle(g, a, h, dy):
    """Autograd through y = exp(g a) ⊙ h, in float64."""
    leaves = [t.detach().double().requires_grad_() for t in (g, a, h)]
    y = torch.exp(leaves[0][:, None] * leaves[1][None, :]) * leaves[2]
    return tuple(torch.autograd.grad(y, leaves, dy.double()))


def _decay_cases():
    gen = torch.Generator().manual_seed(11)

    def inputs(N, S, scale=1.0, g=None, a=None, dy=None):
        g = torch.rand(N, generator=gen, dtype=torch.float64) if g is None else g
        a = -scale * torch.rand(S, generator=gen, dtype=torch.float64) if a is None else a
        h = torch.randn(N, S, generator=gen, dtype=torch.float64)
        dy = torch.randn(N, S, generator=gen, dtype=torch.float64) if dy is None else dy
        return (g, a, h, dy)

    return [Case("random (5, 3)", inputs(5, 3)),
            Case("random (2, 7)", inputs(2, 7)),
            Case("one row", inputs(1, 4)),
            Case("one state dimension", inputs(6, 1)),
            Case("no gate: g = 0", inputs(3, 4, g=torch.zeros(3, dtype=torch.float64))),
            Case("no rate: a = 0", inputs(3, 4, a=torch.zeros(4, dtype=torch.float64))),
            Case("strong decay: a = -40", inputs(4, 3, scale=40.0)),
            Case("zero incoming gradient", inputs(3, 2, dy=torch.zeros(3, 2,
                                                                      dtype=torch.float64)))]


def _decay_compare(got, expected, case):
    return compare_tensors(got, expected, case, rtol=1e-5, atol=1e-6)  # float32 passes


def _forgets_the_sum_over_rows(g, a, h, dy):
    dlog = torch.exp(g[:, None] * a[None, :]) * h * dy  # (N, S)
    return (dlog * a).sum(-1), dlog * g[:, None], torch.exp(g[:, None] * a[None, :]) * dy


def _forgets_the_rate(g, a, h, dy):
    alpha = torch.exp(g[:, None] * a[None, :])
    dlog = alpha * h * dy
    return dlog.sum(-1), (dlog * g[:, None]).sum(0), alpha * dy


def _passes_dy_through(g, a, h, dy):
    dlog = torch.exp(g[:, None] * a[None, :]) * h * dy
    return (dlog * a).sum(-1), (dlog * g[:, None]).sum(0), dy


# ---- when back-to-back calls end ---------------------------------------------------------
def _calls_end_oracle(calls, host, device):
    return launch_schedule(calls, host, device)[-1]["gpu_end"]


def _calls_end_cases():
    return [Case("host-bound: host 4, kernel 3, 5 calls", (5, 4, 3)),
            Case("device-bound: host 3, kernel 4, 5 calls", (5, 3, 4)),
            Case("one call pays both clocks", (1, 6, 2)),
            Case("balanced: host 2, kernel 2, 10 calls", (10, 2, 2)),
            Case("no host work (a replayed graph)", (8, 0, 5)),
            Case("a long kernel", (3, 1, 100)),
            Case("a busy host", (100, 9, 1))]


def _same_int(got, expected, case):
    if isinstance(got, bool) or not isinstance(got, int | float) or got != int(got):
        return f"case {case.name}: expected a whole number of time units, got {got!r}"
    if int(got) != expected:
        return f"case {case.name}: expected {expected}, got {int(got)}"
    return None


EXERCISES = [
    Exercise(
        name="roofline_floor_ms", chapter="09_gpu_primer", cases=_floor_cases,
        oracle=_floor_oracle, compare=_floor_compare,
        wrong=[
            (lambda n, f, bw, r: n / (bw * 1e9) * 1e3 + f / (r * 1e12) * 1e3,
             "case the gla forward (memory-bound): output differs at position (): got 0.129963, "
             "expected 0.0795684",
             "add the two times (they overlap: the floor is the larger)"),
            (lambda n, f, bw, r: min(n / (bw * 1e9), f / (r * 1e12)) * 1e3,
             "case the gla forward (memory-bound): output differs at position (): got 0.0503942, "
             "expected 0.0795684",
             "take the smaller time (the floor is the larger)"),
            (lambda n, f, bw, r: max(n / (bw * 1e9), f / (r * 1e12)),
             "case the gla forward (memory-bound): output differs at position (): got "
             "7.95684e-05, expected 0.0795684",
             "return seconds (the answer is in milliseconds)")],  # seconds
    ),
    Exercise(
        name="tf32_round", chapter="09_gpu_primer", cases=_tf32_cases, oracle=tf32_round,
        compare=_exact,
        wrong=[
            (_truncate,
             "case random normal values: output differs at position (0,): got -0.816895, expected "
             "-0.817383",
             "cut the low 13 bits (round to nearest, ties to even)"),
            (_ties_away,
             "case a tie, kept bit even: rounds down: output differs at position (0,): got "
             "1.00098, expected 1",
             "round ties away from zero (a tie goes to the even neighbour)")],
    ),
    Exercise(
        name="bf16_pieces", chapter="09_gpu_primer", cases=_pieces_cases,
        oracle=bf16_pieces, compare=_exact,
        wrong=[
            (_truncated_pieces,
             "case random normal values: output 0 differs at position (4,): got -0.886719, "
             "expected -0.890625",
             "cut the low 16 bits (each piece is rounded to nearest)"),
            (_pieces_of_x,
             "case random normal values: output 1 differs at position (0,): got -0.131836, "
             "expected -0.000177383",
             "round every piece from x (each piece rounds what the pieces before it left)"),
            (lambda x: bf16_pieces(x, 2),
             "case random normal values: expected 3 results, got 2",
             "return two pieces (three are asked for)")],
    ),
    Exercise(
        name="decay_backward", chapter="09_gpu_primer", cases=_decay_cases,
        oracle=_decay_backward_oracle, compare=_decay_compare,
        wrong=[
            (_forgets_the_sum_over_rows,
             "case random (5, 3): output 1 has shape (5, 3), expected (3,)",
             "leave out the sum over the rows (a is shared by every row, so its gradient adds "
             "them up)"),
            (_forgets_the_rate,
             "case random (5, 3): output 0 differs at position (0,): got -3.13294, expected "
             "0.41126",
             "leave out the factor a in dg (d exp(g·a) / dg = a·exp(g·a))"),
            (_passes_dy_through,
             "case random (5, 3): output 2 differs at position (0, 0): got -2.07502, expected "
             "-2.01418",
             "pass dy through to dh (dh = exp(g·a) ⊙ dy)")],
    ),
    Exercise(
        name="calls_end", chapter="09_gpu_primer", cases=_calls_end_cases,
        oracle=_calls_end_oracle, compare=_same_int,
        wrong=[
            (lambda calls, host, device: calls * (host + device),
             "case host-bound: host 4, kernel 3, 5 calls: expected 23, got 35",
             "make the host wait for each kernel (it queues the next call while the GPU runs)"),
            (lambda calls, host, device: calls * max(host, device),
             "case host-bound: host 4, kernel 3, 5 calls: expected 23, got 20",
             "leave out the first call's host time"),
            (lambda calls, host, device: host + calls * device,
             "case host-bound: host 4, kernel 3, 5 calls: expected 23, got 19",
             "take the GPU as the slower clock (here the host is)")],
    ),
]
