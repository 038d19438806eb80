"""The chunkwise-parallel GDN in PyTorch (hymo_mini.gdn_chunk) against gated_delta_rule_ref.

fp64: output, final state and every gradient (v, b, c, g, A, A_log, initial_state) to
~1e-10 by relative RMS error, on awkward sizes (T = 1, T not a multiple of the chunk,
S = 12, D = 20, B and H > 1) and decays scaled by 0.1, 1 and 10. fp32 at strong decay:
finite and at fp32 rounding. bf16: at bf16 rounding.
"""

from __future__ import annotations

import pytest
import torch

from hymo_mini.gdn import gated_delta_rule, gated_delta_rule_ref
from hymo_mini.gdn_chunk import gated_delta_rule_chunked


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    """RMS(a - ref) / RMS(ref); a gradient that is exactly zero (g and A at T = 1 from a
    zero state) must come out exactly zero."""
    a, ref = a.double(), ref.double()
    diff, scale = (a - ref).pow(2).mean().sqrt().item(), ref.pow(2).mean().sqrt().item()
    if scale == 0.0:
        return 0.0 if diff == 0.0 else float("inf")
    return diff / scale


def make_leaves(B, T, H, S, D, dtype, with_h0=True):
    """Leaves; A = -exp(A_log) * decay_scale, per-head rates 1..H jittered per state dim."""
    v = torch.randn(B, T, H, D)
    b = torch.randn(B, T, H, S) / S**0.5
    c = torch.randn(B, T, H, S) / S**0.5
    g = torch.rand(B, T, H).clamp(0.02, 0.98)
    A_log = torch.log(torch.arange(1, H + 1.0))[:, None] + 0.3 * torch.randn(H, S)
    h0 = torch.randn(B, H, S, D) if with_h0 else None
    leaves = [v, b, c, g, A_log] + ([h0] if with_h0 else [])
    return [t.to(dtype).requires_grad_() for t in leaves]


def run(fn, leaves, decay_scale, do, dht):
    """Forward, loss = <o, do> + <final, dht>, backward: outputs and every gradient."""
    v, b, c, g, A_log = leaves[:5]
    h0 = leaves[5] if len(leaves) > 5 else None
    A = -torch.exp(A_log) * decay_scale
    A.retain_grad()
    o, final = fn(v, b, c, g, A, h0)
    loss = (o.double() * do).sum() + (final.double() * dht).sum()
    loss.backward()
    grads = {n: t.grad for n, t in zip([*"vbcg", "A_log", "h0"], leaves, strict=False)}
    grads["A"] = A.grad
    return o, final, grads


def compare(B, T, H, S, D, dtype, decay_scale, with_h0, tol, chunk_size=8):
    leaves = make_leaves(B, T, H, S, D, dtype, with_h0)
    do = torch.randn(B, T, H, D, dtype=torch.float64)
    dht = torch.randn(B, H, S, D, dtype=torch.float64)

    def chunked(v, b, c, g, A, h0):
        return gated_delta_rule_chunked(v, b, c, g, A, h0, True, chunk_size=chunk_size)

    o, final, grads = run(chunked, leaves, decay_scale, do, dht)
    ref_leaves = [t.detach().double().requires_grad_() for t in leaves]  # same rounded values
    o_ref, final_ref, grads_ref = run(gated_delta_rule_ref, ref_leaves, decay_scale, do, dht)
    assert o.dtype == dtype and o.shape == (B, T, H, D)
    assert final.shape == (B, H, S, D)
    errors = {"o": rel_err(o, o_ref), "final": rel_err(final, final_ref)}
    for name, grad in grads.items():
        if grad is None and grads_ref[name] is None:
            continue
        assert grad.dtype == dtype, name
        errors["d" + name] = rel_err(grad, grads_ref[name])
    bad = {k: e for k, e in errors.items() if not e < tol}  # `not <` also catches NaN
    assert not bad, f"relative RMS errors above {tol}: {bad} (all: {errors})"
    return errors


@pytest.mark.parametrize("decay_scale", [0.1, 1.0, 10.0])
@pytest.mark.parametrize("T", [1, 8, 63])
@pytest.mark.parametrize("with_h0", [True, False])
def test_fp64_matches_reference(T, decay_scale, with_h0):
    compare(2, T, 3, 12, 20, torch.float64, decay_scale, with_h0, tol=1e-10)


@pytest.mark.parametrize("chunk_size", [1, 3, 16, 64, 100])
def test_any_chunk_size(chunk_size):
    """T = 37 with chunks of one step, of sizes that do not divide T, and longer than T."""
    compare(1, 37, 2, 5, 7, torch.float64, 1.0, True, tol=1e-10, chunk_size=chunk_size)


def test_square_state_fp32_strong_decay():
    """S = D = 32, decay x10 (A down to about -70): fp32 stays finite and at rounding."""
    errors = compare(2, 40, 4, 32, 32, torch.float32, 10.0, True, tol=1e-5)
    assert errors["o"] < 1e-6


def test_bf16():
    compare(2, 33, 2, 12, 20, torch.bfloat16, 1.0, True, tol=1e-2)


def test_no_overflow_where_the_factorised_form_fails():
    """A = -40, g near 1 over 64 steps: exp(-L A) would be exp(2560) = inf in fp32."""
    B, T, H, S, D = 1, 64, 1, 4, 4
    v, b, c = torch.randn(B, T, H, D), torch.randn(B, T, H, S), torch.randn(B, T, H, S)
    g = torch.full((B, T, H), 0.99)
    A = torch.full((H, S), -40.0)
    o, final = gated_delta_rule_chunked(v, b, c, g, A, output_final_state=True, chunk_size=64)
    o_ref, final_ref = gated_delta_rule_ref(v, b, c, g, A)
    assert torch.isfinite(o).all() and torch.isfinite(final).all()
    assert rel_err(o, o_ref) < 1e-6 and rel_err(final, final_ref) < 1e-6


def test_comparison_can_fail():
    """The check above is not vacuous: a 1% change of one gate is far above tolerance."""
    v, b, c, g, A = (t.detach().double() for t in make_leaves(1, 20, 2, 6, 5, torch.float32)[:5])
    A = -torch.exp(A)
    o_ref, _ = gated_delta_rule_ref(v, b, c, g, A)
    g_wrong = g.clone()
    g_wrong[0, 3, 1] *= 1.01
    o_wrong, _ = gated_delta_rule_chunked(v, b, c, g_wrong, A)
    assert rel_err(o_wrong, o_ref) > 1e-6


def test_dispatcher_and_final_state_flag():
    leaves = [t.detach() for t in make_leaves(2, 10, 2, 6, 5, torch.float32)]
    v, b, c, g, A_log, h0 = leaves
    A = -torch.exp(A_log)
    o, final = gated_delta_rule(v, b, c, g, A, initial_state=h0, backend="chunk")
    assert final is None
    o2, final2 = gated_delta_rule(v, b, c, g, A, initial_state=h0, output_final_state=True,
                                  backend="chunk")
    o_ref, final_ref = gated_delta_rule_ref(v, b, c, g, A, initial_state=h0)
    assert rel_err(o, o_ref) < 1e-6 and rel_err(final2, final_ref) < 1e-6
    assert torch.equal(o, o2)


def test_cpu_auto_picks_chunk():
    from hymo_mini.gdn import _auto_backend

    assert _auto_backend(torch.zeros(1, 1, 1, 1)) == "chunk"


@pytest.mark.parametrize("bad", [0, -4, 2.5, "16"])
def test_bad_chunk_size_raises(bad):
    v, b, c, g, A_log = (t.detach() for t in make_leaves(1, 4, 1, 3, 3, torch.float32, False))
    with pytest.raises(ValueError, match="chunk_size"):
        gated_delta_rule_chunked(v, b, c, g, -torch.exp(A_log), chunk_size=bad)
