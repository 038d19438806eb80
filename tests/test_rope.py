"""RoPE: norm preservation, the relative-position property, partial rotation, start_pos,
and the errors."""

from __future__ import annotations

import math

import pytest
import torch

from hymo_mini.rope import RotaryEmbedding, apply_rotary, rope_frequencies


def rel_err(a: torch.Tensor, ref: torch.Tensor) -> float:
    return ((a - ref).pow(2).mean().sqrt() / ref.pow(2).mean().sqrt()).item()


def test_frequencies():
    freqs = rope_frequencies(32, 10_000.0)
    assert freqs.shape == (16,) and freqs.dtype == torch.float64
    assert freqs[0] == 1.0  # the fastest pair turns one radian per token
    assert torch.all(freqs[1:] < freqs[:-1])  # geometric decay
    assert math.isclose(freqs[-1].item(), 10_000 ** (-30 / 32))
    # the document's worked values (theta_1 = 0.01, theta_2 = 0.0001) are not these
    assert not math.isclose(freqs[1].item(), 0.01)


def test_rotation_matches_complex_multiplication():
    rope = RotaryEmbedding(8, 16)
    x = torch.randn(2, 16, 3, 8)
    out = rope(x)
    z = torch.view_as_complex(x.reshape(2, 16, 3, 4, 2).contiguous())  # pairs as complex
    angle = torch.outer(torch.arange(16.0, dtype=torch.float64), rope_frequencies(8))
    rot = torch.polar(torch.ones_like(angle), angle).to(torch.complex64)  # (t, k)
    expected = torch.view_as_real(z * rot[None, :, None, :]).reshape(2, 16, 3, 8)
    assert rel_err(out, expected) < 1e-6


def test_norm_preserved():
    rope = RotaryEmbedding(16, 64)
    x = torch.randn(3, 64, 4, 16)
    assert torch.allclose(rope(x).norm(dim=-1), x.norm(dim=-1), rtol=1e-5, atol=1e-5)


def test_relative_position_property():
    """<R(p) x, R(q) y> depends on p - q only."""
    rope = RotaryEmbedding(16, 64)
    x, y = torch.randn(16, dtype=torch.float64), torch.randn(16, dtype=torch.float64)
    seq_x = x.expand(1, 64, 1, 16).float()  # the same vector at every position
    seq_y = y.expand(1, 64, 1, 16).float()
    rx, ry = rope(seq_x)[0, :, 0], rope(seq_y)[0, :, 0]  # (t, d)
    dots = rx @ ry.T  # dots[p, q] = <R(p) x, R(q) y>
    for offset in (0, 1, 5, -3, 20):
        diag = torch.diagonal(dots, offset=-offset)  # entries with p - q = offset
        assert diag.std() < 1e-4 * diag.abs().max() + 1e-5, offset
    # and it really depends on the offset (a test that cannot fail is a defect)
    assert abs(dots[5, 0] - dots[0, 0]) > 1e-3


def test_partial_rope_leaves_tail_untouched():
    rope = RotaryEmbedding(4, 32)
    x = torch.randn(2, 32, 3, 16)
    out = rope(x)
    assert torch.equal(out[..., 4:], x[..., 4:])
    assert not torch.allclose(out[:, 1:, :, :4], x[:, 1:, :, :4])
    assert torch.equal(out[:, 0], x[:, 0])  # position 0 is the identity rotation


def test_start_pos_equals_slicing():
    rope = RotaryEmbedding(8, 64)
    x = torch.randn(2, 40, 2, 12)
    full = rope(x)
    part = rope(x[:, 17:29], start_pos=17)
    assert torch.equal(part, full[:, 17:29])


def test_dtype_kept():
    rope = RotaryEmbedding(8, 16)
    x = torch.randn(1, 16, 2, 8, dtype=torch.bfloat16)
    out = rope(x)
    assert out.dtype == torch.bfloat16
    assert rel_err(out.float(), rope(x.float())) < 1e-2


def test_apply_rotary_broadcasts_over_heads():
    cos, sin = torch.ones(5, 2), torch.zeros(5, 2)  # zero angle: identity
    x = torch.randn(2, 5, 3, 6)
    assert torch.equal(apply_rotary(x, cos, sin), x)


@pytest.mark.parametrize("rope_dim", [0, -2, 7])
def test_bad_rope_dim(rope_dim):
    with pytest.raises(ValueError, match="rope_dim"):
        rope_frequencies(rope_dim)
    with pytest.raises(ValueError, match="rope_dim"):
        RotaryEmbedding(rope_dim, 16)


def test_errors():
    with pytest.raises(ValueError, match="base"):
        rope_frequencies(8, base=1.0)
    with pytest.raises(ValueError, match="max_seq_len"):
        RotaryEmbedding(8, 0)
    rope = RotaryEmbedding(8, 16)
    with pytest.raises(ValueError, match="batch, time, heads, dim"):
        rope(torch.randn(16, 2, 8))
    with pytest.raises(ValueError, match="rope_dim"):
        rope(torch.randn(1, 4, 2, 6))
    with pytest.raises(ValueError, match="max_seq_len"):
        rope(torch.randn(1, 17, 2, 8))
    with pytest.raises(ValueError, match="max_seq_len"):
        rope(torch.randn(1, 4, 2, 8), start_pos=13)
    with pytest.raises(ValueError, match="outside"):
        rope(torch.randn(1, 4, 2, 8), start_pos=-1)
