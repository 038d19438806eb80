"""Rotary position embedding: section 7 of the design document.

A vector's dimensions are taken in adjacent pairs ``(x[2k], x[2k+1])``; the pair ``k`` at
position ``p`` is rotated by the angle ``p * theta_k`` with

    theta_k = base ** (-2k / rope_dim),    k = 0 .. rope_dim/2 - 1

so theta_0 = 1 (the fastest rotation, one radian per token) and the frequencies fall
geometrically towards 1/base. (The document's worked list, "theta_1 = 0.01, theta_2 =
0.0001", divides by ``head_dim`` where it should divide by the rotary size and calls the
fastest pair the slowest; :func:`rope_frequencies` gives the right values.)

*Partial* RoPE rotates only the first ``rope_dim`` channels of the last axis and leaves
the rest untouched. Rotations preserve norms, and ``<R(p) x, R(q) y>`` depends on ``p - q``
only: that is the relative-position property the tests check.
"""

from __future__ import annotations

import torch
from einops import rearrange
from torch import nn

__all__ = ["rope_frequencies", "RotaryEmbedding", "apply_rotary"]


def rope_frequencies(rope_dim: int, base: float = 10_000.0) -> torch.Tensor:
    """The ``rope_dim // 2`` angular frequencies theta_k (radians per token), fp64."""
    if rope_dim <= 0 or rope_dim % 2:
        raise ValueError(f"rope_dim must be a positive even number, got {rope_dim}")
    if base <= 1:
        raise ValueError(f"base must be > 1, got {base}")
    k = torch.arange(rope_dim // 2, dtype=torch.float64)
    return base ** (-2 * k / rope_dim)


def apply_rotary(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """Rotate the first ``2 * cos.shape[-1]`` channels of ``x`` (…, t, h, d) in pairs.

    ``cos``/``sin`` are (t, rope_dim/2) and broadcast over every other axis.
    """
    rope_dim = 2 * cos.shape[-1]
    x_rot, x_pass = x[..., :rope_dim], x[..., rope_dim:]
    pairs = rearrange(x_rot.float(), "... (k two) -> ... k two", two=2)
    even, odd = pairs.unbind(-1)  # (…, t, h, k) each
    cos = rearrange(cos, "t k -> t 1 k")  # broadcast over heads
    sin = rearrange(sin, "t k -> t 1 k")
    rotated = torch.stack((even * cos - odd * sin, even * sin + odd * cos), dim=-1)
    x_rot = rearrange(rotated, "... k two -> ... (k two)").to(x.dtype)
    if x_pass.shape[-1] == 0:  # every channel rotated (the GDN keys): no copy into a cat
        return x_rot
    return torch.cat((x_rot, x_pass), dim=-1)


class RotaryEmbedding(nn.Module):
    """Precomputed cos/sin tables for ``max_seq_len`` positions and ``rope_dim`` channels.

    ``forward(x, start_pos=0)`` takes ``x`` of shape (b, t, h, d) with ``d >= rope_dim`` and
    rotates channels ``[0, rope_dim)`` of each position ``start_pos + i``; ``start_pos`` is
    the offset of the first token, used when decoding one token at a time with a cache.
    """

    def __init__(self, rope_dim: int, max_seq_len: int, base: float = 10_000.0):
        super().__init__()
        if max_seq_len <= 0:
            raise ValueError(f"max_seq_len must be positive, got {max_seq_len}")
        self.rope_dim = rope_dim
        self.max_seq_len = max_seq_len
        self.base = base
        freqs = rope_frequencies(rope_dim, base)  # (rope_dim/2,)
        angles = torch.outer(torch.arange(max_seq_len, dtype=torch.float64), freqs)
        # buffers, not parameters: never trained, rebuilt on load (persistent=False)
        self.register_buffer("cos", angles.cos().float(), persistent=False)  # (T_max, k)
        self.register_buffer("sin", angles.sin().float(), persistent=False)  # (T_max, k)

    def forward(self, x: torch.Tensor, start_pos: int = 0) -> torch.Tensor:
        if x.ndim != 4:
            raise ValueError(f"x must be (batch, time, heads, dim), got shape {tuple(x.shape)}")
        t, d = x.shape[1], x.shape[-1]
        if d < self.rope_dim:
            raise ValueError(f"x has {d} channels but rope_dim is {self.rope_dim}")
        if start_pos < 0 or start_pos + t > self.max_seq_len:
            raise ValueError(
                f"positions {start_pos}..{start_pos + t - 1} are outside the table "
                f"[0, {self.max_seq_len}); raise max_seq_len")
        cos = self.cos[start_pos:start_pos + t]
        sin = self.sin[start_pos:start_pos + t]
        return apply_rotary(x, cos, sin)

    def extra_repr(self) -> str:
        return f"rope_dim={self.rope_dim}, max_seq_len={self.max_seq_len}, base={self.base:g}"
