"""Exercises of chapter 07 (Gated Delta Net): one step of each recurrence, for one head.

Both are graded against the package's loops (``hymo_mini.ops.naive_gla`` and
``naive_gated_delta``) run for a single step from the given state, in float64.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import einsum, rearrange

from hymo_book.exercises import Case, Exercise
from hymo_mini.ops import naive_gated_delta, naive_gla

CHAPTER = "07_gdn"


def _one_step(x: torch.Tensor) -> torch.Tensor:
    """(...) of one step of one head -> (B=1, T=1, H=1, ...)."""
    return rearrange(torch.as_tensor(x, dtype=torch.float64), "... -> 1 1 1 ...")


def _gla_step_oracle(state, b, c, v, g, A):
    o, new = naive_gla(_one_step(v), _one_step(b), _one_step(c), _one_step(g), A[None],
                       initial_state=state[None, None])
    return o[0, 0, 0], new[0, 0]  # (D,), (S, D)


def _delta_step_oracle(state, b, c, v, g, A, beta):
    o, new = naive_gated_delta(_one_step(v), _one_step(b), _one_step(c), _one_step(g), A[None],
                               _one_step(beta), initial_state=state[None, None])
    return o[0, 0, 0], new[0, 0]


def _draw(S, D, seed, *, unit=False, rate=1.0):
    """state (S, D), b, c (S,), v (D,), A (S,) < 0 spread over [-2·rate, -0.1·rate]."""
    gen = torch.Generator().manual_seed(seed)
    state = torch.randn(S, D, generator=gen, dtype=torch.float64)
    b, c = torch.randn(2, S, generator=gen, dtype=torch.float64)
    if unit:
        b, c = F.normalize(b, dim=0), F.normalize(c, dim=0)
    v = torch.randn(D, generator=gen, dtype=torch.float64)
    A = -rate * torch.linspace(0.1, 2.0, S, dtype=torch.float64)
    return state, b, c, v, A


def _gla_cases():
    cases = []
    state, b, c, v, A = _draw(5, 3, 0)
    cases.append(Case("random, S = 5, D = 3", (state, b, c, v, 0.5, A)))
    state, b, c, v, A = _draw(4, 4, 1)
    cases.append(Case("zero state", (torch.zeros_like(state), b, c, v, 0.7, A)))
    state, b, c, v, A = _draw(3, 6, 2)
    cases.append(Case("no decay (g = 0)", (state, b, c, v, 0.0, A)))
    state, b, c, v, _ = _draw(4, 2, 3)
    cases.append(Case("strong decay (g = 1, A = -40)",
                      (state, b, c, v, 1.0, torch.full((4,), -40.0, dtype=torch.float64))))
    state, b, c, v, A = _draw(1, 1, 4)
    cases.append(Case("S = 1, D = 1", (state, b, c, v, 0.3, A)))
    for i in range(3):
        state, b, c, v, A = _draw(6, 5, 10 + i, rate=3.0)
        cases.append(Case(f"random {i}", (state, b, c, v, 0.2 + 0.3 * i, A)))
    return cases


def _delta_cases():
    cases = []
    state, b, c, v, A = _draw(5, 3, 0, unit=True)
    cases.append(Case("random, S = 5, D = 3, β = 0.7", (state, b, c, v, 0.5, A, 0.7)))
    state, b, c, v, A = _draw(4, 4, 1, unit=True)
    cases.append(Case("zero state", (torch.zeros_like(state), b, c, v, 0.7, A, 0.9)))
    state, b, c, v, A = _draw(4, 3, 2, unit=True)
    cases.append(Case("β = 0 (no write)", (state, b, c, v, 0.4, A, 0.0)))
    state, b, c, v, A = _draw(3, 2, 3, unit=True)
    cases.append(Case("no decay, β = 1 (replace what b reads)", (state, b, c, v, 0.0, A, 1.0)))
    state, b, c, v, _ = _draw(4, 2, 4, unit=True)
    cases.append(Case("strong decay (g = 1, A = -40)",
                      (state, b, c, v, 1.0, torch.full((4,), -40.0, dtype=torch.float64), 0.5)))
    state, b, c, v, A = _draw(1, 1, 5, unit=True)
    cases.append(Case("S = 1, D = 1", (state, b, c, v, 0.3, A, 0.6)))
    for i in range(3):
        state, b, c, v, A = _draw(6, 5, 10 + i, unit=True, rate=3.0)
        cases.append(Case(f"random {i}", (state, b, c, v, 0.2 + 0.3 * i, A, 0.3 + 0.3 * i)))
    return cases


# ---- plausible wrong answers ---------------------------------------------------------
def _gla_no_decay(state, b, c, v, g, A):
    new = state + einsum(b, v, "s, d -> s d")  # forgets to decay the old state
    return einsum(c, new, "s, s d -> d"), new


def _gla_read_before_write(state, b, c, v, g, A):
    decayed = torch.exp(g * A)[:, None] * state
    o = einsum(c, decayed, "s, s d -> d")  # reads before this step's write
    return o, decayed + einsum(b, v, "s, d -> s d")


def _gla_swapped(state, b, c, v, g, A):
    new = torch.exp(g * A)[:, None] * state + einsum(b, v, "s, d -> s d")
    return new, einsum(c, new, "s, s d -> d")  # (state, o) instead of (o, state)


def _delta_no_erase(state, b, c, v, g, A, beta):
    new = torch.exp(g * A)[:, None] * state + beta * einsum(b, v, "s, d -> s d")
    return einsum(c, new, "s, s d -> d"), new


def _delta_erase_before_decay(state, b, c, v, g, A, beta):
    old = einsum(b, state, "s, s d -> d")  # what b read *before* the decay
    new = torch.exp(g * A)[:, None] * state + beta * einsum(b, v - old, "s, d -> s d")
    return einsum(c, new, "s, s d -> d"), new


EXERCISES = [
    Exercise(name="gla_step", chapter=CHAPTER, cases=_gla_cases, oracle=_gla_step_oracle,
             wrong=[
                 (_gla_no_decay,
                  "case random, S = 5, D = 3: output 0 differs at position (0,): got -0.480391, "
                  "expected -0.599288",
                  "forget to decay the old state by exp(g·A)"),
                 (_gla_read_before_write,
                  "case random, S = 5, D = 3: output 0 differs at position (0,): got 1.18197, "
                  "expected -0.599288",
                  "read the state before this step's write (o reads the new state)"),
                 (_gla_swapped,
                  "case random, S = 5, D = 3: output 0 has shape (5, 3), expected (3,)",
                  "return (state, o) (the order is (o, new_state))")]),
    Exercise(name="delta_step", chapter=CHAPTER, cases=_delta_cases, oracle=_delta_step_oracle,
             wrong=[
                 (_delta_no_erase,
                  "case random, S = 5, D = 3, β = 0.7: output 0 differs at position (0,): got "
                  "0.267499, expected 0.363459",
                  "leave out the erase (the delta rule writes β·b ⊗ (v - what b reads from the "
                  "decayed state))"),
                 (_delta_erase_before_decay,
                  "case random, S = 5, D = 3, β = 0.7: output 0 differs at position (0,): got "
                  "0.506419, expected 0.363459",
                  "read what b sees before the decay (the erase reads the decayed state)")]),
]
