"""The chunked Triton GDN kernel (hymo_mini.gdn_triton_chunk) against gated_delta_rule_ref.

Forward output, final state and every gradient (v, b, c, g, A, A_log, initial_state), by
relative RMS error, on awkward sizes (T = 1, T = 63, S = 12, D = 20, S = D = 32, B and
H > 1, T across several chunks with a ragged tail) and decays scaled by 0.1, 1 and 10.
On CPU the kernels run under the Triton interpreter, which computes tl.dot in plain fp32;
on a GPU, fp32 products are TF32 and the tolerance is looser.
"""

from __future__ import annotations

import pytest
import torch

import hymo_mini.gdn_triton_chunk as gtc
from hymo_mini.gdn import gated_delta_rule, gated_delta_rule_ref
from hymo_mini.gdn_triton_chunk import triton_chunk_gated_delta_rule

DEVICE = "cuda" if torch.cuda.is_available() else "cpu"
# fp32: plain fp32 products in the interpreter; TF32 (10-bit mantissa) on the GPU.
# The gate gradients dg, dA sum many cancelling terms, so they get 5x more room.
FP32_TOL = 5e-3 if DEVICE == "cuda" else 2e-5
LOW_TOL = 1e-2  # bf16 / fp16 inputs and outputs


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    """RMS(a - ref) / RMS(ref); where ref is exactly zero (dg, dA at T = 1 from a zero
    state) the absolute RMS of a, which rounding alone keeps near 1e-7."""
    a, ref = a.double(), ref.double()
    diff, scale = (a - ref).pow(2).mean().sqrt().item(), ref.pow(2).mean().sqrt().item()
    return diff / scale if scale > 0 else diff


def make_leaves(B, T, H, S, D, dtype, with_h0=True):
    """Leaves on DEVICE; A = -exp(A_log) * decay_scale, per-head rates 1..H jittered."""
    v = torch.randn(B, T, H, D)
    b = torch.randn(B, T, H, S) / S**0.5
    c = torch.randn(B, T, H, S) / S**0.5
    g = torch.rand(B, T, H).clamp(0.02, 0.98)
    A_log = torch.log(torch.arange(1, H + 1.0))[:, None] + 0.3 * torch.randn(H, S)
    h0 = torch.randn(B, H, S, D) if with_h0 else None
    leaves = [v, b, c, g, A_log] + ([h0] if with_h0 else [])
    return [t.to(DEVICE, dtype).requires_grad_() for t in leaves]


def run(fn, leaves, decay_scale, do, dht, output_final_state):
    """Forward, loss = <o, do> (+ <final, dht>), backward: outputs and every gradient."""
    v, b, c, g, A_log = leaves[:5]
    h0 = leaves[5] if len(leaves) > 5 else None
    A = -torch.exp(A_log) * decay_scale
    A.retain_grad()
    o, final = fn(v, b, c, g, A, h0, output_final_state)
    loss = (o.double() * do).sum()
    if output_final_state:
        loss = loss + (final.double() * dht).sum()
    loss.backward()
    grads = {n: t.grad for n, t in zip([*"vbcg", "A_log", "h0"], leaves, strict=False)}
    grads["A"] = A.grad
    return o, final, grads


def reference(v, b, c, g, A, h0, output_final_state):
    return gated_delta_rule_ref(v, b, c, g, A, h0)


def check(B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state):
    tol = FP32_TOL if dtype == torch.float32 else LOW_TOL
    leaves = make_leaves(B, T, H, S, D, dtype, with_h0)
    do = torch.randn(B, T, H, D, dtype=torch.float64, device=DEVICE)
    dht = torch.randn(B, H, S, D, dtype=torch.float64, device=DEVICE)
    o, final, grads = run(triton_chunk_gated_delta_rule, leaves, decay_scale, do, dht,
                          output_final_state)
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]  # same rounded values
    o_ref, final_ref, grads_ref = run(reference, ref_leaves, decay_scale, do, dht,
                                      output_final_state)
    assert o.dtype == dtype and o.shape == (B, T, H, D)
    errors = {"o": rel_err(o, o_ref)}
    if output_final_state:
        assert final.dtype == torch.float32 and final.shape == (B, H, S, D)
        errors["final"] = rel_err(final, final_ref)
    else:
        assert final is None
    for name, grad in grads.items():
        if grad is None and grads_ref[name] is None:
            continue
        assert grad.dtype == dtype, name
        errors["d" + name] = rel_err(grad, grads_ref[name])
    gate = {"dg", "dA", "dA_log"}
    bad = {k: e for k, e in errors.items()
           if not e < (5 * tol if k in gate else tol)}  # `not <` also catches NaN
    assert not bad, f"relative RMS errors above {tol}: {bad} (all: {errors})"
    return errors


CASES = {
    # name: (B, T, H, S, D, dtype, decay_scale, with_h0, output_final_state)
    "T63_S12_D20": (2, 63, 2, 12, 20, torch.float32, 1.0, True, True),
    "T1_no_state": (2, 1, 2, 12, 20, torch.float32, 1.0, False, True),
    "S32_D32_strong": (1, 40, 2, 32, 32, torch.float32, 10.0, True, True),
    "S32_D32_weak_no_final": (2, 33, 2, 32, 32, torch.float32, 0.1, False, False),
    "bf16": (2, 37, 2, 12, 20, torch.bfloat16, 1.0, True, True),
    "fp16_strong": (1, 20, 2, 12, 20, torch.float16, 10.0, True, True),
}


@pytest.mark.triton
@pytest.mark.parametrize("case", list(CASES))
def test_kernel_matches_reference(case):
    check(*CASES[case])


@pytest.mark.triton
def test_gpu_blocking_under_the_interpreter(monkeypatch):
    """The GPU configuration: chunks of 64 (four 16-step blocks, a ragged last chunk) and
    the state kernels split into 16 x 16 blocks of (S, D) = (32, 20): masked tails."""
    monkeypatch.setattr(gtc, "INTERPRET_CONFIGS", gtc.CONFIGS)
    check(1, 70, 2, 32, 20, torch.float32, 1.0, True, True)


@pytest.mark.triton
def test_only_final_state_used():
    """A loss on the final state alone: autograd hands the backward do = None."""
    v, b, c, g, A_log = (t.detach().requires_grad_()
                         for t in make_leaves(1, 20, 2, 12, 20, torch.float32, False))
    _, final = triton_chunk_gated_delta_rule(v, b, c, g, -torch.exp(A_log), None, True)
    final.sum().backward()
    ref_leaves = [t.detach().double().requires_grad_() for t in (v, b, c, g, A_log)]
    _, final_ref = gated_delta_rule_ref(*ref_leaves[:4], -torch.exp(ref_leaves[4]))
    final_ref.sum().backward()
    for t, r in zip((v, b, g, A_log), ref_leaves[:2] + ref_leaves[3:], strict=True):
        assert rel_err(t.grad, r.grad) < 5 * FP32_TOL
    assert ref_leaves[2].grad is None  # c only reads: it has no path to the state
    assert torch.equal(c.grad, torch.zeros_like(c))


@pytest.mark.triton
def test_dispatcher_and_layout():
    """backend="triton_chunk" through the dispatcher, on non-contiguous inputs."""
    v, b, c, g, A_log, h0 = (t.detach() for t in make_leaves(2, 24, 3, 8, 8, torch.float32))
    b_t = b.transpose(1, 2).contiguous().transpose(1, 2)  # same values, other strides
    assert not b_t.is_contiguous()
    A = -torch.exp(A_log)
    o, final = gated_delta_rule(v, b_t, c, g, A, initial_state=h0, output_final_state=True,
                                backend="triton_chunk")
    o_ref, final_ref = gated_delta_rule_ref(v, b, c, g, A, h0)
    assert rel_err(o, o_ref) < FP32_TOL and rel_err(final, final_ref) < FP32_TOL


@pytest.mark.triton
def test_comparison_can_fail():
    """The checks above are not vacuous: one head decaying 50% faster is far above the
    tolerance, and (in exact fp32, on CPU) so is one step's gate changed by 1%."""
    v, b, c, g, A_log = (t.detach() for t in make_leaves(1, 20, 2, 6, 5, torch.float32, False))
    A = -torch.exp(A_log)
    o_ref, _ = gated_delta_rule_ref(v, b, c, g, A)
    A_wrong = A.clone()
    A_wrong[1] *= 1.5
    o_wrong, _ = triton_chunk_gated_delta_rule(v, b, c, g, A_wrong)
    assert rel_err(o_wrong, o_ref) > 10 * FP32_TOL
    if DEVICE == "cpu":
        g_wrong = g.clone()
        g_wrong[0, 3, 1] *= 1.01
        o_wrong, _ = triton_chunk_gated_delta_rule(v, b, c, g_wrong, A)
        assert rel_err(o_wrong, o_ref) > 5 * FP32_TOL


def test_needs_gpu_or_interpreter(monkeypatch):
    monkeypatch.setattr(gtc, "INTERPRET", False)
    v, b, c, g, A_log = (t.detach().cpu() for t in make_leaves(1, 4, 1, 3, 3, torch.float32,
                                                               False))
    with pytest.raises(RuntimeError, match="TRITON_INTERPRET"):
        triton_chunk_gated_delta_rule(v, b, c, g, -torch.exp(A_log))


def test_empty_sequence():
    v, b, c, g, A_log, h0 = (t.detach() for t in make_leaves(2, 0, 2, 3, 4, torch.float32))
    o, final = triton_chunk_gated_delta_rule(v, b, c, g, -torch.exp(A_log), h0, True)
    assert o.shape == (2, 0, 2, 4) and torch.equal(final, h0)
