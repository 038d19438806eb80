"""Exercises of chapter 04 (RoPE): the rotation of one pair, then of a whole block of rows
at their positions."""

from __future__ import annotations

import math

import torch

from hymo_book.exercises import Case, Exercise
from hymo_mini.rope import rope_frequencies


# ---- rotate_pair(x0, x1, angle) -> (y0, y1) ---------------------------------------------
def _rotate_pair_oracle(x0, x1, angle):
    c, s = math.cos(angle), math.sin(angle)
    return (x0 * c - x1 * s, x0 * s + x1 * c)


def _rotate_pair_cases():
    gen = torch.Generator().manual_seed(0)
    cases = [Case("zero angle", (1.0, 2.0, 0.0)),
             Case("quarter turn", (1.0, 0.0, math.pi / 2)),
             Case("negative angle", (0.3, -1.2, -0.7)),
             Case("a full turn", (2.0, 5.0, 2 * math.pi))]
    for i in range(5):
        x0, x1, a = (torch.randn(3, generator=gen) * 3).tolist()
        cases.append(Case(f"random {i}", (x0, x1, a)))
    return cases


# ---- rope_rotate(x, start_pos, base) -> x rotated ------------------------------------------
def _rope_rotate_oracle(x, start_pos=0, base=10_000.0):
    """float64, written out pair by pair from the library's frequencies."""
    t, d = x.shape
    theta = rope_frequencies(d, base)  # (d/2,) float64
    angle = (start_pos + torch.arange(t, dtype=torch.float64))[:, None] * theta  # (t, d/2)
    even, odd = x[:, 0::2], x[:, 1::2]  # (t, d/2) each
    out = torch.empty_like(x)
    out[:, 0::2] = even * angle.cos() - odd * angle.sin()
    out[:, 1::2] = even * angle.sin() + odd * angle.cos()
    return out


def _rope_rotate_cases():
    gen = torch.Generator().manual_seed(4)

    def rand(t, d, scale=1.0):
        return torch.randn(t, d, generator=gen, dtype=torch.float64) * scale

    return [
        Case("one row at position 0", (rand(1, 2),)),
        Case("start_pos 1, two channels", (rand(1, 2), 1)),
        Case("random (5, 8)", (rand(5, 8),)),
        Case("start_pos 4000, 32 channels", (rand(3, 32), 4000)),
        Case("zeros", (torch.zeros(3, 4, dtype=torch.float64), 7)),
        Case("empty block (0, 8)", (rand(0, 8), 3)),
        Case("base 2, six channels", (rand(4, 6), 2, 2.0)),
        Case("large values", (rand(6, 16, 1e6), 10, 500.0)),
    ]


def _half_split(x, start_pos=0, base=10_000.0):
    """Pairs channel k with channel k + d/2 (another convention), not 2k with 2k + 1."""
    t, d = x.shape
    theta = rope_frequencies(d, base)
    angle = (start_pos + torch.arange(t, dtype=torch.float64))[:, None] * theta
    a, b = x[:, : d // 2], x[:, d // 2:]
    return torch.cat([a * angle.cos() - b * angle.sin(), a * angle.sin() + b * angle.cos()], -1)


def _no_start(x, start_pos=0, base=10_000.0):
    """Forgets start_pos: every block starts at position 0."""
    return _rope_rotate_oracle(x, 0, base)


def _exponent_k_over_d(x, start_pos=0, base=10_000.0):
    """theta_k = base^(-k/d): half the exponent, so the pairs turn too fast."""
    t, d = x.shape
    k = torch.arange(d // 2, dtype=torch.float64)
    angle = (start_pos + torch.arange(t, dtype=torch.float64))[:, None] * base ** (-k / d)
    even, odd = x[:, 0::2], x[:, 1::2]
    out = torch.empty_like(x)
    out[:, 0::2] = even * angle.cos() - odd * angle.sin()
    out[:, 1::2] = even * angle.sin() + odd * angle.cos()
    return out


def _float32_angles(x, start_pos=0, base=10_000.0):
    """Positions and angles in float32: position 4000 times theta_0 = 1 loses digits."""
    t, d = x.shape
    theta = rope_frequencies(d, base).float()
    angle = ((start_pos + torch.arange(t, dtype=torch.float32))[:, None] * theta).double()
    even, odd = x[:, 0::2], x[:, 1::2]
    out = torch.empty_like(x)
    out[:, 0::2] = even * angle.float().cos().double() - odd * angle.float().sin().double()
    out[:, 1::2] = even * angle.float().sin().double() + odd * angle.float().cos().double()
    return out


EXERCISES = [
    Exercise(
        name="rotate_pair", chapter="04_rope", cases=_rotate_pair_cases,
        oracle=_rotate_pair_oracle,
        wrong=[
            (lambda x0, x1, angle: (x0 * math.cos(angle) + x1 * math.sin(angle),
                                    -x0 * math.sin(angle) + x1 * math.cos(angle)),
             "case quarter turn: output 1 differs at position (): got -1, expected 1",
             "rotate the wrong way (by minus the angle)"),
            (lambda x0, x1, angle: (x1, x0),
             "case zero angle: output 0 differs at position (): got 2, expected 1",
             "swap x0 and x1 instead of rotating")],
    ),
    Exercise(
        name="rope_rotate", chapter="04_rope", cases=_rope_rotate_cases,
        oracle=_rope_rotate_oracle,
        wrong=[
            (_half_split,
             "case random (5, 8): output differs at position (1, 0): got 0.475355, expected "
             "0.673777",
             "pair channel k with channel k + d/2 (this book pairs channel 2k with 2k + 1)"),
            (_no_start,
             "case start_pos 1, two channels: output differs at position (0, 0): got 2.23987, "
             "expected 0.497234",
             "leave out start_pos (the rows sit at positions start_pos, start_pos + 1, ...)"),
            (_exponent_k_over_d,
             "case random (5, 8): output differs at position (1, 2): got -0.738878, expected "
             "-0.451631",
             "use θ_k = base^(-k/d) (it is base^(-2k/d))"),
            (_float32_angles,
             "case start_pos 4000, 32 channels: output differs at position (0, 3): got 0.0495543, "
             "expected 0.0495248",
             "compute the angles in float32 (at position 4,000 float32 keeps too few digits: use "
             "float64)")],
    ),
]
