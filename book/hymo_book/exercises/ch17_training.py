"""Exercises of chapter 17 (training): the warmup-stable-decay multiplier, one Newton-Schulz
step of Muon, and the bytes autograd keeps for a backward."""

from __future__ import annotations

import torch
import torch.nn.functional as F

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
                           torch.tensor(float(expected)), case, rtol=1e-6, atol=1e-9,
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
    return compare_tensors(got, expected, case, rtol=1e-5, atol=1e-6)  # float32 passes


# ---- what autograd keeps ----------------------------------------------------------------------
def _saved_oracle(fn, *inputs):
    """Bytes of the distinct storages autograd saves while computing fn(*inputs)."""
    storages = {}

    def pack(t):
        storage = t.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        fn(*inputs)
    return sum(storages.values())


def _leaf(*shape, grad=True, dtype=torch.float32):
    gen = torch.Generator().manual_seed(sum(shape))
    return torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_(grad)


def _saved_cases():
    return [Case("a product x @ w: both factors", (torch.matmul, _leaf(4, 8), _leaf(8, 16))),
            Case("x @ w with only x trained: w alone", (torch.matmul, _leaf(4, 8),
                                                         _leaf(8, 16, grad=False))),
            Case("sin: its input", (torch.sin, _leaf(5, 7))),
            Case("exp: its output", (torch.exp, _leaf(5, 7))),
            Case("x * x: x once", (lambda x: x * x, _leaf(6, 3))),
            Case("a sum: nothing", (torch.sum, _leaf(6, 3))),
            Case("x + y: nothing", (torch.add, _leaf(3, 4), _leaf(3, 4))),
            Case("SiLU(x) * y", (lambda x, y: F.silu(x) * y, _leaf(4, 9), _leaf(4, 9))),
            Case("x @ w.T: the view holds w's memory", (lambda x, w: x @ w.T, _leaf(4, 8),
                                                         _leaf(16, 8))),
            Case("bf16 copies of the factors", (lambda x, w: x.bfloat16() @ w.bfloat16(),
                                                _leaf(4, 8), _leaf(8, 16)))]


def _saved_compare(got, expected, case):
    if not isinstance(got, int) or isinstance(got, bool):
        return f"case {case.name}: expected an int (bytes), got {type(got).__name__}"
    if got != expected:
        return f"case {case.name}: expected {expected:,} bytes, got {got:,}"
    return None


def _every_save(fn, *inputs):  # no deduplication: x * x counts x twice
    sizes = []
    with torch.autograd.graph.saved_tensors_hooks(
            lambda t: sizes.append(t.untyped_storage().nbytes()) or t, lambda t: t):
        fn(*inputs)
    return sum(sizes)


def _the_inputs(fn, *inputs):  # what goes in, not what is kept
    return sum(t.numel() * t.element_size() for t in inputs)


EXERCISES = [
    Exercise(
        name="wsd_factor", chapter="17_training", cases=_wsd_cases, oracle=_wsd_oracle,
        compare=_wsd_compare,
        wrong=[
            (_warmup_from_zero,
             "case step 0 of a warmup: multiplier differs at position (): got 0, expected 0.1",
             "start the warmup at 0 (step 0 gets 1/warmup, so the first step moves the weights)"),
            (_decay_one_short,
             "case the first decay step: multiplier differs at position (): got 1, expected 0.955",
             "stop the decay one step short of the floor (the last step reaches min_ratio)")],
    ),
    Exercise(
        name="newton_schulz_step", chapter="17_training", cases=_ns_cases, oracle=_ns_oracle,
        compare=_ns_compare,
        wrong=[
            (lambda x, coefficients=MUON_DEFAULTS["ns_coefficients"]:
             coefficients[0] * x + coefficients[1] * (x @ x.T) @ x,
             "case random 4x4: output differs at position (0, 0): got 0.208417, expected 0.191675",
             "leave out the c·(XXᵀ)²X term"),
            (_gram_on_the_wrong_side,
             "case random 4x4: output differs at position (0, 0): got 0.0935275, expected "
             "0.191675",
             "form the Gram matrix as XᵀX (in front of X it is XXᵀ)")],
    ),
    Exercise(
        name="saved_bytes", chapter="17_training", cases=_saved_cases, oracle=_saved_oracle,
        compare=_saved_compare,
        wrong=[
            (_every_save,
             "case x * x: x once: expected 72 bytes, got 144",
             "count a tensor each time it is saved (x * x saves x twice, one storage)"),
            (_the_inputs,
             "case x @ w with only x trained: w alone: expected 512 bytes, got 640",
             "count the inputs (autograd keeps only what the backward needs)")],
    ),
]
