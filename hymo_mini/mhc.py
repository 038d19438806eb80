"""Manifold-constrained hyper-connections (mHC): the second design document.

An ordinary residual stream carries one vector per token, ``x_{l+1} = x_l + F(x_l)``.
mHC widens it to ``n`` streams ``X`` of shape (b, t, n, d) and gives every sub-layer
three small maps, computed per token from the streams themselves:

    pre   (b, t, n)     sigmoid(.) + eps         x_in   = sum_i pre_i X_i          (b, t, d)
    post  (b, t, n)     2 * sigmoid(.)           X'_j   = post_j F(x_in)
    comb  (b, t, n, n)  Sinkhorn-Knopp(.)                + sum_i comb[i, j] X_i    (b, t, n, d)

The three maps come from one linear projection of the flattened, RMS-normalised streams,
(b, t, n*d) -> (b, t, n + n + n*n), split in the order **[pre, post, comb]**; each part is
multiplied by a learnable scalar (``alpha = [alpha_pre, alpha_post, alpha_comb]``) and
shifted by a learnable bias. The comb matrix is used **transposed**: output stream ``j``
is ``sum_i comb[i, j] X_i`` (``comb^T X``). These are the document's conventions.

Normalising inside the projection: the RMS norm of the flattened streams has no weight,
so ``rms_norm(x) @ W^T = (x @ W^T) * rsqrt(mean(x^2) + eps)``: the per-token scale commutes
with the matrix product. A fused kernel can therefore run the GEMM on the raw streams and
accumulate sum(x^2) on the way (:func:`project_then_normalise`); the test checks both orders.

Readings chosen (the book shows the numbers):

* **Sinkhorn is not exactly doubly stochastic.** The columns are normalised last, so they
  sum to one up to the ``eps`` in the denominator; the rows only converge, and slowly when
  the logits are large (``tests/test_mhc.py`` pins the tolerance that holds).
* **"S_comb = identity gives a pure residual" is false.** Sinkhorn starts from a softmax,
  so logits ``c * I`` give ``(e^c I + (J - I)) / (e^c + n - 1)``: for c = 1 and n = 4 the
  diagonal is 0.475 and each other entry 0.175. We initialise the comb bias to
  ``COMB_INIT_LOGIT * I`` (diagonal 0.948 for n = 4).
* **Read-out: the mean of the streams**, not stream 0 as in the document. When comb's rows
  sum to one the mean stream is an ordinary residual stream,
  ``mean(X') = mean(X) + mean(post) F(x_in)``, and it treats every stream alike. (Before
  the final RMSNorm the mean and the sum give the same output.)
* **Initialisation: at step 0 the wrapped model is the plain residual model.** pre = 1/n
  (the sub-layer reads the mean stream), post = 1, comb ~ I; the streams start as copies
  of the embedding, so they stay copies and every stream follows the plain model. Only
  the dynamic term ``alpha * (W x)`` (alpha = 0.01, W ~ N(0, 1/(n d))) breaks the symmetry;
  with alpha = 0 the wrapped model equals the plain one (tested).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from einops import einsum, rearrange, reduce, repeat
from torch import nn

__all__ = [
    "HC_EPS",
    "COMB_INIT_LOGIT",
    "sinkhorn_knopp",
    "stochastic_errors",
    "expand",
    "collapse",
    "project_then_normalise",
    "ManifoldHyperConnection",
]

HC_EPS = 1e-6  # guard on pre and inside Sinkhorn, where the document puts it
COMB_INIT_LOGIT = 4.0  # comb bias = 4 * I: Sinkhorn gives diagonal 0.948 for n = 4
ALPHA_INIT = 0.01  # the three scales start small: the maps start (almost) static


def _check_iters(iters) -> None:
    if isinstance(iters, bool) or not isinstance(iters, int) or iters < 1:
        raise ValueError(f"iters must be a positive integer (Sinkhorn iterations), got {iters!r}")


def sinkhorn_knopp(logits: torch.Tensor, iters: int = 20, eps: float = HC_EPS) -> torch.Tensor:
    """Push (..., n, n) logits towards a doubly stochastic matrix, the document's way.

    Iteration 1 is a softmax over each row (rows sum to one), plus ``eps``, then a column
    normalisation; iterations 2..iters normalise rows, then columns. So ``iters`` counts
    row/column pairs and the last step is always a column normalisation: columns sum to
    ``s / (s + eps)`` (one, up to eps), rows only as well as the iteration has converged.
    """
    _check_iters(iters)
    if logits.ndim < 2 or logits.shape[-1] != logits.shape[-2]:
        raise ValueError(f"logits must be (..., n, n) square matrices, got {tuple(logits.shape)}")
    if eps < 0:
        raise ValueError(f"eps must be >= 0, got {eps}")
    m = torch.softmax(logits, dim=-1) + eps  # rows sum to 1 + n*eps
    m = m / (m.sum(dim=-2, keepdim=True) + eps)  # columns
    for _ in range(iters - 1):
        m = m / (m.sum(dim=-1, keepdim=True) + eps)  # rows
        m = m / (m.sum(dim=-2, keepdim=True) + eps)  # columns
    return m


def stochastic_errors(m: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(row error, column error) of (..., n, n) matrices: max |sum - 1| over the last axes."""
    row = (m.sum(dim=-1) - 1).abs().amax(dim=-1)  # (...)
    col = (m.sum(dim=-2) - 1).abs().amax(dim=-1)  # (...)
    return row, col


def expand(x: torch.Tensor, n: int) -> torch.Tensor:
    """Embedding (b, t, d) -> n identical streams (b, t, n, d)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"n (the number of streams) must be a positive integer, got {n!r}")
    if x.ndim != 3:
        raise ValueError(f"x must be (b, t, d), got shape {tuple(x.shape)}")
    return repeat(x, "b t d -> b t n d", n=n)


def collapse(streams: torch.Tensor) -> torch.Tensor:
    """Streams (b, t, n, d) -> (b, t, d): the mean over streams (see the module docstring)."""
    if streams.ndim != 4:
        raise ValueError(f"streams must be (b, t, n, d), got shape {tuple(streams.shape)}")
    return reduce(streams, "b t n d -> b t d", "mean")


def project_then_normalise(flat: torch.Tensor, weight: torch.Tensor,
                           eps: float = 1e-6) -> torch.Tensor:
    """The fused-kernel order: GEMM on the raw (b, t, k) input, then scale each token by
    rsqrt(mean(x^2) + eps). Equal to ``rms_norm(flat) @ weight^T`` (no norm weight)."""
    raw = einsum(flat, weight, "b t k, o k -> b t o")  # (b, t, o)
    mean_square = reduce(flat.pow(2), "b t k -> b t 1", "mean")  # (b, t, 1)
    return raw * torch.rsqrt(mean_square + eps)


class ManifoldHyperConnection(nn.Module):
    """The mHC wrapper of one sub-layer (attention, MoE or GDN mixer).

    Parameters (the document's checkpoint layout, all trainable):
      weight (n + n + n*n, n*d)  rows ordered [pre, post, comb]
      bias   (n + n + n*n,)      same order
      alpha  (3,)                [alpha_pre, alpha_post, alpha_comb]

    Use ``forward(streams, sublayer)``, or the three steps: ``pre, post, comb =
    maps(streams)``; ``x_in = collapse_in(streams, pre)``; ``spread_out(streams,
    sublayer(x_in), post, comb)``. The maps are computed in fp32 at least.
    """

    def __init__(self, dim: int, n_hc: int = 4, sinkhorn_iters: int = 20,
                 eps: float = HC_EPS, norm_eps: float = 1e-6):
        super().__init__()
        for name, value in (("dim", dim), ("n_hc", n_hc)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"{name} must be a positive integer, got {value!r}")
        if n_hc < 2:
            raise ValueError("n_hc must be >= 2: one stream is the ordinary residual, "
                             "which needs no mHC module (hc_mult = 1)")
        _check_iters(sinkhorn_iters)
        self.dim, self.n_hc, self.sinkhorn_iters = dim, n_hc, sinkhorn_iters
        self.eps, self.norm_eps = eps, norm_eps
        n = n_hc
        self.weight = nn.Parameter(torch.empty(2 * n + n * n, n * dim))
        self.bias = nn.Parameter(torch.empty(2 * n + n * n))
        self.alpha = nn.Parameter(torch.empty(3))
        self.reset_parameters()

    def reset_parameters(self) -> None:
        """Static part = the plain residual (pre 1/n, post 1, comb ~ I); small dynamic part."""
        n = self.n_hc
        nn.init.normal_(self.weight, std=1.0 / math.sqrt(n * self.dim))  # W x ~ N(0, 1)
        pre_bias = torch.full((n,), -math.log(n - 1))  # sigmoid = 1/n
        post_bias = torch.zeros(n)  # 2 * sigmoid(0) = 1
        comb_bias = COMB_INIT_LOGIT * torch.eye(n).flatten()
        with torch.no_grad():
            self.bias.copy_(torch.cat([pre_bias, post_bias, comb_bias]))
            self.alpha.fill_(ALPHA_INIT)

    def check_streams(self, streams: torch.Tensor) -> None:
        if not isinstance(streams, torch.Tensor) or streams.ndim != 4:
            shape = tuple(streams.shape) if isinstance(streams, torch.Tensor) else streams
            raise ValueError(f"streams must be (b, t, n, d), got {shape}")
        if streams.shape[2] != self.n_hc:
            raise ValueError(f"streams has {streams.shape[2]} streams on axis 2, expected "
                             f"n_hc={self.n_hc} (shape {tuple(streams.shape)})")
        if streams.shape[3] != self.dim:
            raise ValueError(f"streams has hidden size {streams.shape[3]}, expected "
                             f"dim={self.dim} (shape {tuple(streams.shape)})")

    def project(self, streams: torch.Tensor) -> torch.Tensor:
        """RMS-normalised flattened streams times weight^T: (b, t, n + n + n*n), fp32."""
        acc = torch.promote_types(streams.dtype, torch.float32)  # fp32, or fp64 if given
        flat = rearrange(streams.to(acc), "b t n d -> b t (n d)")  # (b, t, n*d)
        flat = flat * torch.rsqrt(reduce(flat.pow(2), "b t k -> b t 1", "mean") + self.norm_eps)
        return einsum(flat, self.weight.to(acc), "b t k, o k -> b t o")

    def maps(self, streams: torch.Tensor):
        """pre (b, t, n), post (b, t, n), comb (b, t, n, n), in fp32 (fp64 for fp64 input)."""
        self.check_streams(streams)
        n = self.n_hc
        proj = self.project(streams)  # (b, t, 2n + n*n)
        pre_w, post_w, comb_w = proj.split([n, n, n * n], dim=-1)
        pre_b, post_b, comb_b = self.bias.to(proj.dtype).split([n, n, n * n])
        alpha_pre, alpha_post, alpha_comb = self.alpha.to(proj.dtype).unbind(0)
        pre = torch.sigmoid(alpha_pre * pre_w + pre_b) + self.eps  # (b, t, n)
        post = 2 * torch.sigmoid(alpha_post * post_w + post_b)  # (b, t, n)
        comb_logits = rearrange(alpha_comb * comb_w + comb_b, "b t (i j) -> b t i j", i=n)
        comb = sinkhorn_knopp(comb_logits, self.sinkhorn_iters, self.eps)  # (b, t, n, n)
        return pre, post, comb

    def collapse_in(self, streams: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
        """The sub-layer input: x_in = sum_i pre_i X_i, (b, t, d)."""
        return einsum(pre.to(streams.dtype), streams, "b t n, b t n d -> b t d")

    def spread_out(self, streams: torch.Tensor, f_out: torch.Tensor, post: torch.Tensor,
                   comb: torch.Tensor) -> torch.Tensor:
        """X'_j = post_j f_out + sum_i comb[i, j] X_i (comb transposed), (b, t, n, d)."""
        b, t, _, d = streams.shape
        if tuple(f_out.shape) != (b, t, d):
            raise ValueError(f"f_out (the sub-layer output) must be (b, t, d) = {(b, t, d)}, "
                             f"got {tuple(f_out.shape)}")
        mixed = einsum(comb.to(streams.dtype), streams, "b t i j, b t i d -> b t j d")
        spread = einsum(post.to(f_out.dtype), f_out, "b t j, b t d -> b t j d")
        return mixed + spread

    def forward(self, streams: torch.Tensor,
                sublayer: Callable[[torch.Tensor], torch.Tensor]) -> torch.Tensor:
        pre, post, comb = self.maps(streams)
        x_in = self.collapse_in(streams, pre)  # (b, t, d)
        return self.spread_out(streams, sublayer(x_in), post, comb)  # (b, t, n, d)

    def extra_repr(self) -> str:
        return f"dim={self.dim}, n_hc={self.n_hc}, sinkhorn_iters={self.sinkhorn_iters}"
