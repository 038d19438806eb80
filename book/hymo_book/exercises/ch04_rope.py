"""Exercises of chapter 04 (RoPE). A template for the other chapters' modules."""

from __future__ import annotations

import math

import torch

from hymo_book.exercises import Case, Exercise


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


EXERCISES = [
    Exercise(
        name="rotate_pair", chapter="04_rope", cases=_rotate_pair_cases,
        oracle=_rotate_pair_oracle,
        wrong=[(lambda x0, x1, angle: (x0 * math.cos(angle) + x1 * math.sin(angle),
                                       -x0 * math.sin(angle) + x1 * math.cos(angle)),
                "case quarter turn: output 1 differs"),  # rotates the wrong way
               (lambda x0, x1, angle: (x1, x0), "case zero angle: output 0 differs")],
    ),
]
