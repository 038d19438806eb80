"""The gated-decay recurrence as one matrix, cut into chunks (book chapter 08).

From a zero state the recurrence of ``hymo_mini.ops.naive_gla`` is linear in the values:
o = P v, with P (T, T) lower-triangular. Its column s is what the outputs are when the
only value ever written is a 1 at step s, so running the loop on the identity matrix as
values (D = T) gives P itself: :func:`recurrence_matrix`. :func:`chunk_matrix_figure`
draws |P| cut into chunks of C steps: the blocks on the diagonal are what the chunked
form computes as small masked attentions; every entry left of them reaches its output
only through the state the chunk starts with.
"""

from __future__ import annotations

import math

import numpy as np
import torch
from einops import rearrange
from matplotlib.colors import LogNorm
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle
from matplotlib.ticker import MaxNLocator

from hymo_mini.ops import naive_gla

__all__ = ["recurrence_matrix", "chunk_example", "chunk_matrix_figure"]


def recurrence_matrix(b: torch.Tensor, c: torch.Tensor, g: torch.Tensor,
                      A: torch.Tensor) -> torch.Tensor:
    """P (T, T) with o = P v for one head, from the loop itself: b, c (T, S); g (T,);
    A (S,). The values are the T × T identity, so output t's entry s is P_ts."""
    if b.ndim != 2 or c.shape != b.shape or g.shape != b.shape[:1] or A.shape != b.shape[1:]:
        raise ValueError("expected b, c (T, S), g (T,), A (S,); got "
                         f"{tuple(b.shape)}, {tuple(c.shape)}, {tuple(g.shape)}, {tuple(A.shape)}")
    T = g.shape[0]
    one_head = lambda x: rearrange(x, "t ... -> 1 t 1 ...")  # (T, ...) -> (1, T, 1, ...)
    eye = torch.eye(T, dtype=b.dtype, device=b.device)  # (T, T): value s is the unit vector e_s
    o, _ = naive_gla(one_head(eye), one_head(b), one_head(c), one_head(g), A[None])
    return o[0, :, 0]  # (T, T): row t = output t, column s = the value written at s


def chunk_example(T: int = 32, S: int = 8, rate: float = 1.0, seed: int = 0):
    """Seeded inputs of one head: b, c (T, S) unit-scale, g (T,) sigmoids of normals,
    A (S,) spread from -0.05·rate (slow) to -rate (fast); float64."""
    gen = torch.Generator().manual_seed(seed)
    b = torch.randn(T, S, generator=gen, dtype=torch.float64) / math.sqrt(S)
    c = torch.randn(T, S, generator=gen, dtype=torch.float64) / math.sqrt(S)
    g = torch.sigmoid(torch.randn(T, generator=gen, dtype=torch.float64))
    A = -rate * torch.linspace(0.05, 1.0, S, dtype=torch.float64)
    return b, c, g, A


def chunk_matrix_figure(T: int = 32, chunk: int = 8, rate: float = 1.0, S: int = 8,
                        seed: int = 0) -> Figure:
    """|P_ts| of one head on a log colour scale (:func:`chunk_example`'s inputs), the chunk
    boundaries drawn in white and the diagonal blocks outlined."""
    for name, value in (("T", T), ("chunk", chunk), ("S", S)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name} must be a positive int, got {value!r}")
    if not rate > 0:
        raise ValueError(f"rate must be positive, got {rate!r}")
    P = recurrence_matrix(*chunk_example(T, S, rate, seed)).abs().numpy()  # (T, T)
    shown = np.ma.masked_where(np.triu(np.ones_like(P, dtype=bool), k=1) | (P == 0), P)
    fig = Figure(figsize=(6.4, 5.6), layout="constrained")
    ax = fig.subplots()
    top = float(shown.max())
    image = ax.imshow(shown, cmap="viridis", norm=LogNorm(vmin=top * 1e-6, vmax=top),
                      extent=(-0.5, T - 0.5, T - 0.5, -0.5), interpolation="nearest")
    fig.colorbar(image, ax=ax, label="|P_ts|, log scale")
    for edge in range(chunk, T, chunk):
        ax.axhline(edge - 0.5, color="white", lw=1.2)
        ax.axvline(edge - 0.5, color="white", lw=1.2)
    for start in range(0, T, chunk):
        size = min(chunk, T - start)
        ax.add_patch(Rectangle((start - 0.5, start - 0.5), size, size, fill=False,
                               edgecolor="#ff7f0e", lw=2.2))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("input position s (the step that wrote)")
    ax.set_ylabel("output position t (the step that reads)")
    ax.set_title(f"o = P v: T = {T}, {math.ceil(T / chunk)} chunks of {chunk}, S = {S}\n"
                 "outlined: inside a chunk (masked attention); left of it: through the "
                 "carried state", fontsize=9)
    return fig
