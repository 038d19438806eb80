"""Exercises of chapter 13 (the stack): the logit soft-cap with its derivative, and the
residual stream's scale through depth for a given per-layer gain."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise, compare_tensors
from hymo_mini.model import softcap


# ---- softcap_with_slope ---------------------------------------------------------------
def _softcap_oracle(x, cap):
    x = torch.as_tensor(x, dtype=torch.float64)
    if cap <= 0:
        return softcap(x, cap), torch.ones_like(x)
    return softcap(x, cap), 1 - torch.tanh(x / cap) ** 2


def _softcap_cases():
    gen = torch.Generator().manual_seed(31)
    return [Case("the document's points", (torch.tensor([0.0, 5.0, 10.0, 15.0]), 15.0)),
            Case("negative logits", (torch.tensor([-30.0, -15.0, -1.0]), 15.0)),
            Case("a small cap", (torch.randn(3, 4, generator=gen) * 3, 1.0)),
            Case("far beyond the cap", (torch.tensor([1e4, -1e4, 500.0]), 15.0)),
            Case("cap 0 (switched off)", (torch.tensor([-40.0, 0.0, 3.0, 1e3]), 0.0)),
            Case("a scalar", (torch.tensor(7.5), 15.0)),
            Case("no logits", (torch.zeros(0), 15.0)),
            Case("random", (torch.randn(2, 3, 5, generator=gen) * 20, 15.0))]


def _compare_softcap(got, expected, case):
    if not isinstance(got, tuple | list) or len(got) != 2:
        return f"case {case.name}: return (capped, slope), got {type(got).__name__}"
    return (compare_tensors(got[0], expected[0], case, rtol=1e-5, atol=1e-5, what="capped")
            or compare_tensors(got[1], expected[1], case, rtol=1e-5, atol=1e-6, what="slope"))


# ---- rms_through_depth ----------------------------------------------------------------
def _depth_oracle(rms0, gain, n_layers, identity):
    layers = torch.arange(n_layers + 1, dtype=torch.float64)  # (n_layers + 1,)
    if identity:  # x + F(norm(x)): the branch adds an uncorrelated part of RMS `gain`
        return torch.sqrt(rms0 ** 2 + layers * gain ** 2)
    return rms0 * torch.as_tensor(gain, dtype=torch.float64) ** layers  # F(x) only


def _depth_cases():
    return [Case("the document's block", (1.0, 0.58, 24, False)),
            Case("a pre-norm block", (1.0, 0.58, 24, True)),
            Case("no layers", (0.5, 0.58, 0, True)),
            Case("a dead branch", (0.03, 0.0, 8, True)),
            Case("a dead branch, no identity", (0.03, 0.0, 8, False)),
            Case("from a zero stream", (0.0, 0.5, 6, True)),
            Case("unit gain", (2.0, 1.0, 5, False)),
            Case("deep", (1.0, 0.5, 100, False)),
            Case("a small embedding", (0.034, 0.7, 32, True))]


def _compare_depth(got, expected, case):
    return compare_tensors(got, expected, case, rtol=1e-5, atol=1e-12, what="the RMS")


def _depth_added_linearly(rms0, gain, n_layers, identity):  # RMS, not squares, add up
    layers = torch.arange(n_layers + 1, dtype=torch.float64)
    return rms0 + layers * gain if identity else rms0 * gain ** layers


def _depth_no_start(rms0, gain, n_layers, identity):  # leaves out the stream before layer 1
    return _depth_oracle(rms0, gain, n_layers, identity)[1:]


def _depth_without_the_norm(rms0, gain, n_layers, identity):  # branch of x, not of norm(x)
    layers = torch.arange(n_layers + 1, dtype=torch.float64)
    step = (1 + gain ** 2) ** 0.5 if identity else gain
    return rms0 * step ** layers


EXERCISES = [
    Exercise(
        name="softcap_with_slope", chapter="13_stack", cases=_softcap_cases,
        oracle=_softcap_oracle, compare=_compare_softcap,
        wrong=[
            (lambda x, cap: (cap * torch.tanh(x / cap), 1 - torch.tanh(x) ** 2),
             "case the document's points: slope differs at position (1,): got 0.000181556, "
             "expected 0.89663",
             "differentiate tanh(x) (the slope of cap·tanh(x/cap) is 1 - tanh(x/cap)²)"),
            (lambda x, cap: (cap * torch.tanh(x / cap), 1 - torch.tanh(x / cap) ** 2),
             "case cap 0 (switched off): capped differs at position (0,): got -0, expected -40",
             "apply the cap when it is 0 (a cap of 0 switches the soft-cap off)"),
            (lambda x, cap: (torch.clamp(x, -cap, cap), (x.abs() < cap).double()),
             "case the document's points: capped differs at position (1,): got 5, expected "
             "4.82269",
             "clamp (a soft-cap bends smoothly: cap·tanh(x/cap))")],
    ),
    Exercise(
        name="rms_through_depth", chapter="13_stack", cases=_depth_cases, oracle=_depth_oracle,
        compare=_compare_depth,
        wrong=[
            (_depth_added_linearly,
             "case a pre-norm block: the RMS differs at position (1,): got 1.58, expected 1.15603",
             "add the RMS values (uncorrelated parts add their squares)"),
            (_depth_no_start,
             "case the document's block: the RMS has shape (24,), expected (25,)",
             "leave out the stream before the first layer (there are n_layers + 1 values)"),
            (_depth_without_the_norm,
             "case a pre-norm block: the RMS differs at position (2,): got 1.3364, expected "
             "1.29337",
             "let the branch grow with the stream (it reads norm(x), so it adds a fixed RMS)")],
    ),
]
