"""The chunkwise gated delta rule in einops (hymo_mini.ops.gated_delta.chunk) against the
plain loop naive_gated_delta.

fp64: output, final state and every gradient (v, b, c, g, A, beta, initial_state) to
~1e-10 by relative RMS error, on awkward sizes (T = 1, T not a multiple of the chunk,
S = 12, D = 20, B and H > 1), decays scaled by 0.01, 1 and 10, β near 0, mid and near 1,
with and without an initial state. fp32 at strong decay: finite and at fp32 rounding.
"""

from __future__ import annotations

import pytest
import torch
from delta_oracle import compare_to_naive, make_leaves
from gdn_oracle import rel_err

from hymo_mini.ops import naive_gated_delta
from hymo_mini.ops.gated_delta.chunk import chunk_gated_delta_torch


def chunked(chunk_size):
    def fn(v, b, c, g, A, beta, h0, output_final_state):
        return chunk_gated_delta_torch(v, b, c, g, A, beta, h0, output_final_state,
                                       chunk_size=chunk_size)
    return fn


def compare(T, dtype=torch.float64, tol=1e-10, chunk_size=8, B=2, H=3, S=12, D=20, **kw):
    return compare_to_naive(chunked(chunk_size), B, T, H, S, D, dtype, tol, device="cpu", **kw)


@pytest.mark.parametrize("decay_scale", [0.01, 1.0, 10.0])
@pytest.mark.parametrize("T", [1, 8, 29])
@pytest.mark.parametrize("with_h0", [True, False])
def test_fp64_matches_loop(T, decay_scale, with_h0):
    compare(T, decay_scale=decay_scale, with_h0=with_h0)


@pytest.mark.parametrize("beta", ["near0", "near1"])
@pytest.mark.parametrize("decay_scale", [0.01, 10.0])
def test_beta_extremes(beta, decay_scale):
    compare(21, beta=beta, decay_scale=decay_scale)


@pytest.mark.parametrize("chunk_size", [1, 3, 16, 64])
def test_any_chunk_size(chunk_size):
    """T = 37 with chunks of one step, of sizes that do not divide T, and longer than T."""
    compare(37, chunk_size=chunk_size, B=1, H=2, S=5, D=7)


def test_without_final_state():
    compare(13, output_final_state=False)


def test_square_state_fp32_strong_decay():
    """S = D = 32, decay x10 (A down to about -70), β near 1: finite, at fp32 rounding."""
    errors = compare(40, torch.float32, tol=2e-5, chunk_size=16, B=2, H=4, S=32, D=32,
                     decay_scale=10.0, beta="near1")
    assert errors["o"] < 1e-5


def test_no_overflow_where_the_factorised_form_fails():
    """A = -40, g near 1 over 64 steps: exp(-L A) would be exp(2560) = inf in fp32."""
    v, b, c, _, _, beta, _ = (t.detach() for t in make_leaves(1, 64, 1, 4, 4, torch.float32,
                                                              with_h0=False, device="cpu")[:6]
                              + [torch.zeros(())])
    g, A = torch.full((1, 64, 1), 0.99), torch.full((1, 4), -40.0)
    o, final = chunk_gated_delta_torch(v, b, c, g, A, beta, output_final_state=True,
                                       chunk_size=64)
    o_ref, final_ref = naive_gated_delta(v, b, c, g, A, beta)
    assert torch.isfinite(o).all() and torch.isfinite(final).all()
    assert rel_err(o, o_ref) < 1e-5 and rel_err(final, final_ref) < 1e-5


def test_comparison_can_fail():
    """The check is not vacuous: a 1% change of one β is far above the tolerance."""
    v, b, c, g, A, beta, h0 = (t.detach().double()
                               for t in make_leaves(1, 20, 2, 6, 5, torch.float32, device="cpu"))
    o_ref, _ = naive_gated_delta(v, b, c, g, A, beta, h0)
    beta_wrong = beta.clone()
    beta_wrong[0, 3, 1] *= 1.01
    o_wrong, _ = chunk_gated_delta_torch(v, b, c, g, A, beta_wrong, h0)
    assert rel_err(o_wrong, o_ref) > 1e-6


def test_empty_sequence():
    v, b, c, g, A, beta, h0 = (t.detach() for t in make_leaves(2, 0, 2, 3, 4, torch.float64,
                                                               device="cpu"))
    o, final = chunk_gated_delta_torch(v, b, c, g, A, beta, h0, output_final_state=True)
    assert o.shape == (2, 0, 2, 4) and final.dtype == torch.float64
    assert torch.equal(final, h0)
    assert chunk_gated_delta_torch(v, b, c, g, A, beta, h0)[1] is None


def test_low_precision_inputs():
    """bf16 inputs: o in bf16, the state in fp32, both at bf16 rounding."""
    compare(19, torch.bfloat16, tol=2e-2, chunk_size=8)


@pytest.mark.parametrize("bad", [0, -4, 2.5, "16", True])
def test_bad_chunk_size_raises(bad):
    v, b, c, g, A, beta, _ = (t.detach() for t in make_leaves(1, 4, 1, 3, 3, torch.float32,
                                                              with_h0=False, device="cpu")[:6]
                              + [torch.zeros(())])
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_gated_delta_torch(v, b, c, g, A, beta, chunk_size=bad)
