"""The chunkwise-parallel GDN in PyTorch (hymo_mini.ops.gla.chunk) against naive_gla.

fp64: output, final state and every gradient (v, b, c, g, A, A_log, initial_state) to
~1e-10 by relative RMS error, on awkward sizes (T = 1, T not a multiple of the chunk,
S = 12, D = 20, B and H > 1) and decays scaled by 0.1, 1 and 10. fp32 at strong decay:
finite and at fp32 rounding. bf16: at bf16 rounding.
"""

from __future__ import annotations

import pytest
import torch
from gdn_oracle import compare_to_reference, make_leaves, rel_err

from hymo_mini.ops import gated_linear_attention, naive_gla
from hymo_mini.ops.gla.chunk import chunk_gla_torch


def compare(B, T, H, S, D, dtype, decay_scale, with_h0, tol, chunk_size=8):
    def chunked(v, b, c, g, A, h0, output_final_state):
        return chunk_gla_torch(v, b, c, g, A, h0, output_final_state,
                                        chunk_size=chunk_size)

    return compare_to_reference(chunked, B, T, H, S, D, dtype, decay_scale, with_h0, True, tol,
                                device="cpu")


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
    o, final = chunk_gla_torch(v, b, c, g, A, output_final_state=True, chunk_size=64)
    o_ref, final_ref = naive_gla(v, b, c, g, A)
    assert torch.isfinite(o).all() and torch.isfinite(final).all()
    assert rel_err(o, o_ref) < 1e-6 and rel_err(final, final_ref) < 1e-6


def test_comparison_can_fail():
    """The check above is not vacuous: a 1% change of one gate is far above tolerance."""
    v, b, c, g, A = (t.detach().double() for t in make_leaves(1, 20, 2, 6, 5, torch.float32)[:5])
    A = -torch.exp(A)
    o_ref, _ = naive_gla(v, b, c, g, A)
    g_wrong = g.clone()
    g_wrong[0, 3, 1] *= 1.01
    o_wrong, _ = chunk_gla_torch(v, b, c, g_wrong, A)
    assert rel_err(o_wrong, o_ref) > 1e-6


def test_dispatcher_and_final_state_flag():
    leaves = [t.detach() for t in make_leaves(2, 10, 2, 6, 5, torch.float32)]
    v, b, c, g, A_log, h0 = leaves
    A = -torch.exp(A_log)
    o, final = gated_linear_attention(v, b, c, g, A, initial_state=h0, backend="chunk_torch")
    assert final is None
    o2, final2 = gated_linear_attention(v, b, c, g, A, initial_state=h0, output_final_state=True,
                                  backend="chunk_torch")
    o_ref, final_ref = naive_gla(v, b, c, g, A, initial_state=h0)
    assert rel_err(o, o_ref) < 1e-6 and rel_err(final2, final_ref) < 1e-6
    assert torch.equal(o, o2)


def test_cpu_auto_picks_chunk():
    from hymo_mini.ops import auto_backend

    assert auto_backend("gla", torch.zeros(1, 1, 1, 1)) == "chunk_torch"
    assert auto_backend("delta", torch.zeros(1, 1, 1, 1)) == "chunk_torch"


@pytest.mark.parametrize("bad", [0, -4, 2.5, "16", True])
def test_bad_chunk_size_raises(bad):
    v, b, c, g, A_log = (t.detach() for t in make_leaves(1, 4, 1, 3, 3, torch.float32, False))
    with pytest.raises(ValueError, match="chunk_size"):
        chunk_gla_torch(v, b, c, g, -torch.exp(A_log), chunk_size=bad)
