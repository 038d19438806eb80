"""Exercises of chapter 16 (mHC): one Sinkhorn-Knopp iteration, and the gain of a product of
residual maps."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise, compare_tensors
from hymo_mini.mhc import HC_EPS


# ---- one Sinkhorn-Knopp iteration ------------------------------------------------------------
def _sinkhorn_step_oracle(m, eps=HC_EPS):
    m = m.double()
    m = m / (m.sum(dim=-1, keepdim=True) + eps)  # rows
    return m / (m.sum(dim=-2, keepdim=True) + eps)  # then columns


def _sinkhorn_step_cases():
    gen = torch.Generator().manual_seed(0)
    cases = [Case("random 4x4", (torch.rand(4, 4, generator=gen) + 0.1,)),
             Case("a batch of 3 matrices 5x5", (torch.rand(3, 5, 5, generator=gen),)),
             Case("1x1", (torch.tensor([[2.5]]),)),
             Case("already doubly stochastic", (torch.full((4, 4), 0.25),)),
             Case("a row of zeros", (torch.tensor([[0.0, 0.0, 0.0], [1.0, 2.0, 3.0],
                                                   [0.5, 0.5, 4.0]]),)),
             Case("entries from 1e-30 to 1e30", (torch.tensor([[1e-30, 1.0], [1e30, 2.0]],
                                                              dtype=torch.float64),)),
             Case("eps = 0", (torch.rand(2, 3, 3, generator=gen) + 0.5,), {"eps": 0.0})]
    for i in range(3):
        n = int(torch.randint(2, 7, (1,), generator=gen))
        cases.append(Case(f"random softmax {i} ({n}x{n})", (torch.softmax(
            4 * torch.randn(n, n, generator=gen), dim=-1),)))
    return cases


def _close(got, expected, case):
    return compare_tensors(got, expected, case, rtol=1e-5, atol=1e-7)


# ---- the gain of a product of residual maps ----------------------------------------------------
def _composite_gain_oracle(maps):
    product = torch.eye(maps.shape[-1], dtype=torch.float64)
    for m in maps.double():  # (n, n) each, the first map applied first
        product = m @ product
    forward = product.abs().sum(dim=-1).amax()  # largest absolute row sum
    backward = product.abs().sum(dim=-2).amax()  # largest absolute column sum
    return forward, backward


def _composite_gain_cases():
    gen = torch.Generator().manual_seed(1)
    eye = torch.eye(4)
    doubly = torch.softmax(torch.randn(6, 4, 4, generator=gen), -1)
    for _ in range(30):  # a few Sinkhorn iterations: close to doubly stochastic
        doubly = doubly / doubly.sum(-1, keepdim=True)
        doubly = doubly / doubly.sum(-2, keepdim=True)
    return [
        Case("one map", (torch.tensor([[[1.0, -2.0], [0.5, 0.25]]]),)),
        Case("identity maps", (eye.expand(5, 4, 4).clone(),)),
        Case("two maps that do not commute", (torch.tensor([[[1.0, 1.0], [0.0, 1.0]],
                                                            [[1.0, 0.0], [2.0, 1.0]]]),)),
        Case("near-identity maps, depth 16", (eye + 0.2 * torch.randn(16, 4, 4, generator=gen),)),
        Case("doubly stochastic maps", (doubly,)),
        Case("1x1 maps", (torch.tensor([[[2.0]], [[-0.5]], [[3.0]]]),)),
        Case("negative entries", (torch.tensor([[[0.5, -1.5], [-1.0, 0.25]]] * 3),)),
        Case("random 3x3, depth 8", (torch.randn(8, 3, 3, generator=gen),)),
    ]


def _wrong_order(maps):  # M_1 ... M_L instead of M_L ... M_1
    product = torch.eye(maps.shape[-1], dtype=maps.dtype)
    for m in maps:
        product = product @ m
    return product.abs().sum(-1).amax(), product.abs().sum(-2).amax()


def _no_abs(maps):  # signed sums: negative entries cancel
    product = torch.eye(maps.shape[-1], dtype=maps.dtype)
    for m in maps:
        product = m @ product
    return product.sum(-1).amax(), product.sum(-2).amax()


EXERCISES = [
    Exercise(
        name="sinkhorn_step", chapter="16_mhc", cases=_sinkhorn_step_cases,
        oracle=_sinkhorn_step_oracle, compare=_close,
        wrong=[
            (lambda m, eps=HC_EPS: (m / (m.sum(-2, keepdim=True) + eps))
             / ((m / (m.sum(-2, keepdim=True) + eps)).sum(-1, keepdim=True) + eps),
             "case random 4x4: output differs at position (0, 0): got 0.392616, expected 0.394891",
             "normalise the columns first (rows, then columns)"),
            (lambda m, eps=HC_EPS: (m / m.sum(-1, keepdim=True))
             / (m / m.sum(-1, keepdim=True)).sum(-2, keepdim=True),
             "case a row of zeros: output differs at position (0, 0): got nan, expected 0",
             "leave out eps (a row of zeros divides 0 by 0)"),
            (lambda m, eps=HC_EPS: m / (m.sum(-1, keepdim=True) + eps),
             "case random 4x4: output differs at position (0, 0): got 0.316319, expected 0.394891",
             "normalise only the rows (one step normalises the rows, then the columns)")],
    ),
    Exercise(
        name="composite_gain", chapter="16_mhc", cases=_composite_gain_cases,
        oracle=_composite_gain_oracle,
        wrong=[
            (_wrong_order,
             "case two maps that do not commute: output 0 differs at position (): got 4, expected "
             "5",
             "multiply in the wrong order (the first map acts first: M_L ⋯ M_1)"),
            (_no_abs,
             "case one map: output 0 differs at position (): got 0.75, expected 3",
             "add the signed entries (the gain adds absolute values)"),
            (lambda maps: tuple(reversed(_composite_gain_oracle(maps))),
             "case one map: output 0 differs at position (): got 2.25, expected 3",
             "swap the forward and backward gains (forward is the largest absolute row sum)")],
    ),
]
