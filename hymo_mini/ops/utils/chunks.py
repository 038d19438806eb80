"""Time cut into chunks, for the two chunkwise forms in plain PyTorch (``gla/chunk.py`` and
``gated_delta/chunk.py``), and which chunks the Triton kernels' pair weights take by one
product (:func:`one_product_chunks`, the rule of ``utils.pairs.takes_chunk`` in PyTorch).

A sequence whose length C does not divide is padded at the end with zero steps; each rule
says why its zero steps leave the state unchanged (g = 0: no decay; b = 0, and β = 0 for
the delta rule: no write), and their outputs are dropped on the way back.
"""

import math

import torch
import torch.nn.functional as F
from einops import einsum, rearrange, reduce

__all__ = ["check_chunk_size", "to_chunks", "from_chunks", "causal_decays", "ONE_PRODUCT_SPAN",
           "one_product_chunks"]

# The Triton kernels form a block's pairs by one product when every exp2(±l_t δ_n) of it lies in
# [2^-SPAN, 2^SPAN], δ_n the excess of rate n over the head's slowest, in base 2
# (``utils.pairs``): far from fp32's overflow (2^128) and from its subnormals (2^-126), so
# that no factor loses bits and no product of two overflows.
ONE_PRODUCT_SPAN = 64.0


def check_chunk_size(chunk_size, default: int, name: str = "chunk_size") -> None:
    if not isinstance(chunk_size, int) or isinstance(chunk_size, bool) or chunk_size < 1:
        raise ValueError(f"{name} must be a positive int, e.g. {default}, "
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


def one_product_chunks(g: torch.Tensor, A: torch.Tensor, chunk_size: int,
                       block_size: int = 16) -> torch.Tensor:
    """Which chunks of ``chunk_size`` steps the chunked Triton kernels take by one product
    (the others take the levels): (B, H, K) bool, K = ceil(T / chunk_size), for g (B, T, H)
    and A (H, S) < 0.

    A chunk fits when, in every block of ``block_size`` steps, the gate summed from the
    block's start times the spread of the head's rates (max A - min A, base 2) stays within
    ``ONE_PRODUCT_SPAN``: a head whose keys share one rate fits at any decay. Padding steps
    count as g = 0. A value within rounding of the limit may go the other way in a kernel."""
    if g.ndim != 3:
        raise ValueError(f"g must be (B, T, H), got shape {tuple(g.shape)}")
    if A.ndim != 2 or A.shape[0] != g.shape[2]:
        raise ValueError(f"A must be (H, S) with H = {g.shape[2]} as in g, got shape "
                         f"{tuple(A.shape)}")
    check_chunk_size(block_size, 16, "block_size")
    check_chunk_size(chunk_size, 128)
    if chunk_size % block_size:
        nearest = max(1, round(chunk_size / block_size)) * block_size
        raise ValueError(f"chunk_size must be a multiple of block_size = {block_size}, e.g. "
                         f"{nearest}, got {chunk_size}")
    blocks = to_chunks(g[..., None], block_size, torch.float32)[..., 0]  # (B, H, nb, bt)
    largest = reduce(blocks.cumsum(-1).abs(), "b h n t -> b h n", "max")
    pad = (-largest.shape[-1]) % (chunk_size // block_size)  # blocks of the last chunk's padding
    largest = rearrange(F.pad(largest, [0, pad]), "b h (k n) -> b h k n",
                        n=chunk_size // block_size).amax(-1)  # (B, H, K)
    A2 = A.float() * math.log2(math.e)  # (H, S) the rates in base 2
    spread = A2.amax(-1) - A2.amin(-1)  # (H,) slowest minus fastest
    return largest * spread[:, None] <= ONE_PRODUCT_SPAN
