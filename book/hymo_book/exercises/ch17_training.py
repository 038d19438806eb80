"""Exercises of chapter 17 (training): the warmup-stable-decay multiplier, and one Newton-Schulz
step of Muon."""

from __future__ import annotations

import torch

from hymo_book.exercises import Case, Exercise, compare_tensors
from hymo_mini.config import SchedulerConfig
from hymo_mini.optim import MUON_DEFAULTS
from hymo_mini.optim.schedule import wsd_multiplier


# ---- the WSD multiplier ----------------------------------------------------------------------
def _wsd_oracle(step, max_steps, warmup, decay, min_ratio):
    """The library's schedule, given step counts instead of fractions."""
    sched = SchedulerConfig(warmup_frac=warmup / max_steps,
                            stable_frac=(max_steps - warmup - decay) / max_steps,
                            decay_frac=decay / max_steps, min_lr_ratio=min_ratio)
    assert round(sched.warmup_frac * max_steps) == warmup  # the fractions give the counts back
    assert round(sched.decay_frac * max_steps) == decay
    return wsd_multiplier(step, max_steps, sched)


def _wsd_cases():
    run = dict(max_steps=100, warmup=10, decay=20, min_ratio=0.1)
    cases = [Case("step 0 of a warmup", (0,), run),
             Case("the last warmup step", (9,), run),
             Case("the middle of the warmup", (4,), run),
             Case("the stable stretch", (50,), run),
             Case("the last stable step", (79,), run),
             Case("the first decay step", (80,), run),
             Case("the middle of the decay", (89,), run),
             Case("the last step", (99,), run),
             Case("no warmup", (0,), {**run, "warmup": 0}),
             Case("no decay, last step", (99,), {**run, "decay": 0}),
             Case("a run of one step", (0,), dict(max_steps=1, warmup=0, decay=1, min_ratio=0.5)),
             Case("floor 0, last step", (99,), {**run, "min_ratio": 0.0}),
             Case("floor 1: no decay at all", (90,), {**run, "min_ratio": 1.0}),
             Case("warmup and decay meet", (5,), dict(max_steps=10, warmup=5, decay=5,
                                                      min_ratio=0.2))]
    return cases


def _wsd_compare(got, expected, case):
    return compare_tensors(torch.tensor(float(got)) if isinstance(got, int | float) else got,
                           torch.tensor(float(expected)), case, rtol=1e-9, atol=1e-12,
                           what="multiplier")


def _warmup_from_zero(step, max_steps, warmup, decay, min_ratio):
    if step < warmup:
        return step / warmup  # the first step would not move the weights
    return _wsd_oracle(step, max_steps, warmup, decay, min_ratio)


def _decay_one_short(step, max_steps, warmup, decay, min_ratio):
    start = max_steps - decay
    if decay and step >= start:
        return 1.0 - (1.0 - min_ratio) * (step - start) / decay  # never reaches the floor
    return _wsd_oracle(step, max_steps, warmup, decay, min_ratio)


# ---- one Newton-Schulz step --------------------------------------------------------------------
def _ns_oracle(x, coefficients=MUON_DEFAULTS["ns_coefficients"]):
    a, b, c = coefficients
    x = x.double()
    gram = x @ x.T  # (rows, rows)
    return a * x + (b * gram + c * gram @ gram) @ x


def _ns_cases():
    gen = torch.Generator().manual_seed(0)

    def unit(*shape):  # Frobenius norm 1, as Muon normalises before the first step
        m = torch.randn(*shape, generator=gen, dtype=torch.float64)
        return m / m.norm()

    q, _ = torch.linalg.qr(torch.randn(5, 5, generator=gen, dtype=torch.float64))
    return [Case("random 4x4", (unit(4, 4),)),
            Case("wide 3x8", (unit(3, 8),)),
            Case("tall 8x3", (unit(8, 3),)),
            Case("1x1", (torch.tensor([[0.5]], dtype=torch.float64),)),
            Case("zeros 3x3", (torch.zeros(3, 3, dtype=torch.float64),)),
            Case("an orthogonal matrix", (q,)),
            Case("the classic cubic (1.5, -0.5, 0)", (unit(4, 6),),
                 {"coefficients": (1.5, -0.5, 0.0)}),
            Case("rank one", (torch.outer(torch.ones(4, dtype=torch.float64),
                                          torch.arange(5.0, dtype=torch.float64)) / 10,))]


def _gram_on_the_wrong_side(x, coefficients=MUON_DEFAULTS["ns_coefficients"]):
    a, b, c = coefficients
    gram = x.T @ x  # (cols, cols): right for X @ gram, wrong in front of X
    return a * x + (b * gram + c * gram @ gram) @ x  # a wide x: a shape error


def _ns_compare(got, expected, case):
    return compare_tensors(got, expected, case, rtol=1e-6, atol=1e-9)


EXERCISES = [
    Exercise(
        name="wsd_factor", chapter="17_training", cases=_wsd_cases, oracle=_wsd_oracle,
        compare=_wsd_compare,
        wrong=[(_warmup_from_zero, "case step 0 of a warmup: multiplier differs"),
               (_decay_one_short, "case the first decay step: multiplier differs")],
    ),
    Exercise(
        name="newton_schulz_step", chapter="17_training", cases=_ns_cases, oracle=_ns_oracle,
        compare=_ns_compare,
        wrong=[(lambda x, coefficients=MUON_DEFAULTS["ns_coefficients"]:
                coefficients[0] * x + coefficients[1] * (x @ x.T) @ x,
                "case random 4x4: output differs"),  # the fifth-power term left out
               (_gram_on_the_wrong_side, "case random 4x4: output differs")],
    ),
]
