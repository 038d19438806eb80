"""Time cut into chunks, for the two chunkwise forms in plain PyTorch (``gla/chunk.py`` and
``gated_delta/chunk.py``).

A sequence whose length C does not divide is padded at the end with zero steps; each rule
says why its zero steps leave the state unchanged (g = 0: no decay; b = 0, and β = 0 for
the delta rule: no write), and their outputs are dropped on the way back.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from einops import einsum, rearrange

__all__ = ["check_chunk_size", "to_chunks", "from_chunks", "causal_decays"]


def check_chunk_size(chunk_size, default: int) -> None:
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ValueError(f"chunk_size must be a positive int, e.g. {default}, "
                         f"got {chunk_size!r}")


def to_chunks(x: torch.Tensor, chunk_size: int, dtype: torch.dtype) -> torch.Tensor:
    """(B, T, H, ...) -> (B, H, K, C, ...) in ``dtype``: K = ceil(T / C) chunks of C steps,
    the last one filled up with zero steps."""
    pad = (-x.shape[1]) % chunk_size  # steps added at the end so that C divides the length
    x = F.pad(x.to(dtype), [0, 0] * (x.ndim - 2) + [0, pad])  # (B, K * C, H, ...)
    return rearrange(x, "b (k c) h ... -> b h k c ...", c=chunk_size)


def from_chunks(x: torch.Tensor, length: int) -> torch.Tensor:
    """(B, H, K, C, ...) -> (B, length, H, ...): the chunks joined, the padding dropped."""
    return rearrange(x, "b h k c ... -> b (k c) h ...")[:, :length]


def causal_decays(L: torch.Tensor, A: torch.Tensor) -> torch.Tensor:
    """exp((L_t - L_s) A_n) for every pair s <= t of a chunk, 0 for s > t: (b, h, k, t, s, n).

    L (b, h, k, C) is the gate summed from the chunk start, A (h, S) < 0. The exponent is
    formed from the gap L_t - L_s >= 0 (g > 0), never from exp(L_t A) / exp(L_s A), so
    every factor lies in [0, 1] and nothing overflows, however strong the decay."""
    C = L.shape[-1]
    causal = torch.ones(C, C, dtype=torch.bool, device=L.device).tril()  # (t, s), s <= t
    gap = rearrange(L, "b h k t -> b h k t 1") - rearrange(L, "b h k s -> b h k 1 s")
    gap = gap.masked_fill(~causal, 0.0)  # (b, h, k, t, s) >= 0; future pairs zeroed below
    decays = torch.exp(einsum(gap, A, "b h k t s, h n -> b h k t s n"))  # in [0, 1]
    return decays * rearrange(causal, "t s -> t s 1")  # (b, h, k, t, s, n)
