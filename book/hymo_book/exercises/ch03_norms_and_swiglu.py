"""Exercises of chapter 03: RMSNorm and SwiGLU written from scratch, graded against
``torch.nn.functional.rms_norm`` (what ``nn.RMSNorm`` calls) and ``hymo_mini.ffn.SwiGLU``
on random inputs and awkward ones: a zero vector and a tiny one (where eps dominates), a
non-contiguous input, a batch of one, a single vector, big magnitudes, and fp16 values whose
squares overflow fp16."""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hymo_book.exercises import Case, Exercise, compare_tensors
from hymo_mini.ffn import SwiGLU


def _compare_same_dtype(got, expected, case: Case, *, rtol: float, atol: float) -> str | None:
    if isinstance(got, torch.Tensor) and got.dtype != expected.dtype:
        return f"case {case.name}: output has dtype {got.dtype}, expected {expected.dtype}"
    if isinstance(got, torch.Tensor) and expected.dtype == torch.float16:
        rtol, atol = 2e-3, 1e-3  # fp16 keeps about three significant digits
    return compare_tensors(got, expected, case, rtol=rtol, atol=atol)


# ---- rms_norm(x, weight, eps) -----------------------------------------------------------
def _rms_norm_oracle(x, weight, eps):
    return F.rms_norm(x, (x.shape[-1],), weight, eps)  # what nn.RMSNorm computes


def _rms_norm_cases():
    gen = torch.Generator().manual_seed(3)

    def randn(*shape, dtype=torch.float32):
        return torch.randn(*shape, generator=gen).to(dtype)

    d = 16
    weight = randn(d)
    tiny = torch.full((2, d), 1e-4)
    tiny[1, ::2] = -1e-4
    return [
        Case("random (2, 5, 16)", (randn(2, 5, d), weight, 1e-6)),
        Case("a single vector (16,)", (randn(d), weight, 1e-6)),
        Case("a batch of one (1, 1, 16)", (randn(1, 1, d), weight, 1e-6)),
        Case("a non-contiguous input (transposed)",
             (randn(2, d, 3).transpose(1, 2), weight, 1e-6)),  # (2, 3, 16)
        Case("a zero vector (eps keeps it finite)", (torch.zeros(3, d), torch.ones(d), 1e-6)),
        Case("a tiny vector (eps dominates)", (tiny, torch.ones(d), 1e-6)),
        Case("a large eps", (randn(4, d), weight, 1.0)),
        Case("big magnitudes (1e15)", (randn(3, d) * 1e15, weight, 1e-6)),
        Case("fp16 values whose squares overflow fp16",
             (randn(3, d, dtype=torch.float16) * 300, weight.half(), 1e-6)),
    ]


def _compare_rms(got, expected, case: Case) -> str | None:
    return _compare_same_dtype(got, expected, case, rtol=1e-5, atol=1e-6)


def _no_eps(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True)) * weight


def _eps_outside_the_root(x, weight, eps):
    return x / (x.pow(2).mean(-1, keepdim=True).sqrt() + eps) * weight


def _divides_by_the_norm(x, weight, eps):  # the Euclidean norm, not the root mean square
    return x * torch.rsqrt(x.pow(2).sum(-1, keepdim=True) + eps) * weight


def _flattens_with_view(x, weight, eps):
    flat = x.view(-1, x.shape[-1])  # (n, d): view needs a contiguous tensor
    out = flat * torch.rsqrt(flat.pow(2).mean(-1, keepdim=True) + eps) * weight
    return out.view(x.shape)


def _squares_in_fp16(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * weight


def _ignores_weight(x, weight, eps):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)


# ---- swiglu(x, w1, w3, w2) --------------------------------------------------------------
def _swiglu_oracle(x, w1, w3, w2):
    inter, dim = w1.shape
    module = SwiGLU(dim, inter).double()
    with torch.no_grad():
        for linear, w in ((module.w1, w1), (module.w3, w3), (module.w2, w2)):
            linear.weight.copy_(w)
        return module(x.double()).to(x.dtype)  # float64 arithmetic, the input's dtype


def _swiglu_cases():
    gen = torch.Generator().manual_seed(4)

    def weights(dim, inter, scale=1.0):
        w1 = torch.randn(inter, dim, generator=gen) * scale / dim ** 0.5
        w3 = torch.randn(inter, dim, generator=gen) * scale / dim ** 0.5
        w2 = torch.randn(dim, inter, generator=gen) / inter ** 0.5
        return w1, w3, w2

    def randn(*shape):
        return torch.randn(*shape, generator=gen)

    return [
        Case("random (2, 5, 8), inter 12", (randn(2, 5, 8), *weights(8, 12))),
        Case("a single vector (8,)", (randn(8), *weights(8, 12))),
        Case("a batch of one (1, 1, 8)", (randn(1, 1, 8), *weights(8, 12))),
        Case("a non-contiguous input (transposed)",
             (randn(2, 8, 3).transpose(1, 2), *weights(8, 12))),  # (2, 3, 8)
        Case("one hidden unit (inter 1)", (randn(3, 8), *weights(8, 1))),
        Case("a zero input", (torch.zeros(2, 8), *weights(8, 12))),
        Case("big pre-activations (hundreds)", (randn(4, 8), *weights(8, 12, scale=300.0))),
        Case("the mini model's sizes (64 -> 96)", (randn(2, 3, 64), *weights(64, 96))),
    ]


def _compare_swiglu(got, expected, case: Case) -> str | None:
    scale = float(expected.abs().max()) if expected.numel() else 1.0
    return _compare_same_dtype(got, expected, case, rtol=1e-4, atol=1e-5 * max(scale, 1.0))


def _gate_on_the_up_projection(x, w1, w3, w2):
    return (x @ w1.T * F.silu(x @ w3.T)) @ w2.T


def _relu_gate(x, w1, w3, w2):
    return (F.relu(x @ w1.T) * (x @ w3.T)) @ w2.T


def _no_transpose(x, w1, w3, w2):
    return (F.silu(x @ w1) * (x @ w3)) @ w2


def _exp_over_one_plus_exp(x, w1, w3, w2):
    a = x @ w1.T
    silu = a * torch.exp(a) / (1 + torch.exp(a))  # inf / inf for large a
    return (silu * (x @ w3.T)) @ w2.T


EXERCISES = [
    Exercise(
        name="rms_norm", chapter="03_norms_and_swiglu", cases=_rms_norm_cases,
        oracle=_rms_norm_oracle, compare=_compare_rms,
        wrong=[
            (_no_eps,
             "case a zero vector (eps keeps it finite): output differs at position (0, 0): got "
             "nan, expected 0",
             "leave out eps (a zero vector then divides 0 by 0)"),
            (_eps_outside_the_root,
             "case a tiny vector (eps dominates): output differs at position (0, 0): got "
             "0.990099, expected 0.0995037",
             "add eps outside the square root (it goes inside: rsqrt(mean(x²) + eps))"),
            (_divides_by_the_norm,
             "case random (2, 5, 16): output differs at position (0, 0, 0): got -0.00419539, "
             "expected -0.0167816",
             "divide by the norm (the sum of the squares) instead of the root mean square (their "
             "mean)"),
            (_flattens_with_view,
             "case a non-contiguous input (transposed) raised RuntimeError: view size is not "
             "compatible with input tensor's size and stride (at least one dimension spans across "
             "two contiguous subspaces). Use .reshape(...) instead.",
             "flatten with view (a non-contiguous input needs reshape)"),
            (_squares_in_fp16,
             "case fp16 values whose squares overflow fp16: output differs at position (0, 0): "
             "got 0, expected 0.143188",
             "square in fp16 (a square of a few hundred overflows fp16: compute in float32, then "
             "cast back)"),
            (_ignores_weight,
             "case random (2, 5, 16): output differs at position (0, 0, 0): got 0.218954, "
             "expected -0.0167816",
             "leave out the weight")],
    ),
    Exercise(
        name="swiglu", chapter="03_norms_and_swiglu", cases=_swiglu_cases,
        oracle=_swiglu_oracle, compare=_compare_swiglu,
        wrong=[
            (_gate_on_the_up_projection,
             "case random (2, 5, 8), inter 12: output differs at position (0, 0, 0): got "
             "-0.955148, expected 0.274221",
             "put SiLU on the up projection (the gate is silu(x @ w1.T), times x @ w3.T)"),
            (_relu_gate,
             "case random (2, 5, 8), inter 12: output differs at position (0, 0, 0): got "
             "0.286192, expected 0.274221",
             "gate with ReLU instead of SiLU"),
            (_no_transpose,
             "case random (2, 5, 8), inter 12 raised RuntimeError: mat1 and mat2 shapes cannot be "
             "multiplied (10x8 and 12x8)",
             "multiply by the weights untransposed (a Linear computes x @ w.T)"),
            (_exp_over_one_plus_exp,
             "case big pre-activations (hundreds): output differs at position (0, 0): got nan, "
             "expected 471319",
             "write SiLU as a·exp(a) / (1 + exp(a)) (exp overflows for large a: use "
             "a·sigmoid(a))")],
    ),
]
