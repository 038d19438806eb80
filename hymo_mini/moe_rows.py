"""The grouped MoE path's two row shuffles: into expert order and back.

``hymo_mini.moe_dispatch.routed_grouped`` runs the ``k·n`` assignments of ``n`` tokens
sorted by expert. Around its grouped products it moves rows twice:

    gather    xs[r] = x[token(r)] in the compute dtype, 0 if assignment r was dropped
                                                               (k·n, dim), expert order
    combine   out[t] = Σ_j combine[t, j] · y[row(t, j)]        (n, dim), token order

In PyTorch each is a chain of full passes: a cast, an ``index_select`` and a ``where``
for the gather; an ``index_copy`` (back to choice-major order), a multiply and a sum for
the combine, and their backwards as many again. Here each direction is one kernel, one
program per row, that reads its rows where they lie:

* gather, forward: program r reads row token(r) of x (or nothing) and writes xs[r];
  backward: program t sums the ≤ k gradient rows of its kept assignments into dx[t]
  (no atomics: the inverse permutation says where they are).
* combine, forward: program t reads its k rows of y and writes their weighted sum in
  fp32 (rounded once); backward: program t writes dy[row(t, j)] = combine[t, j] · g[t]
  and dcombine[t, j] = g[t] · y[row(t, j)].

The kernels are in :mod:`hymo_mini.moe_triton` (imported only when used). The index
arrays, all (k·n,) int64 and choice-major (assignment a = j·n + t) or in expert order, are
made by :func:`row_maps` from the routing. :data:`ROWS_BACKENDS`: "auto" takes the kernels
on a CUDA GPU and the PyTorch chain elsewhere (tests run the kernels in the Triton
interpreter against it).
"""

from __future__ import annotations

import torch

from hymo_mini.choices import one_of
from hymo_mini.ops import triton_usable

__all__ = ["ROWS_BACKENDS", "RowMaps", "row_maps", "gather_rows", "combine_rows",
           "resolve_rows_backend"]

ROWS_BACKENDS = ("auto", "torch", "triton")


class RowMaps:
    """Where each assignment's row lives, for ``n`` tokens and ``k`` choices.

    ``src`` (k·n,) expert order: the token a row reads, -1 if dropped;
    ``row`` (k·n,) choice-major: the expert-order row of assignment j·n + t;
    ``kept_row`` (k·n,) choice-major: that row, or -1 if the assignment was dropped."""

    def __init__(self, src, row, kept_row, n, k):
        self.src, self.row, self.kept_row, self.n, self.k = src, row, kept_row, n, k


def row_maps(by_expert: torch.Tensor, kept: torch.Tensor) -> RowMaps:
    """The maps for ``by_expert`` (k·n,) (assignment ids sorted by expert) and ``kept``
    (n, k) bool."""
    n, k = kept.shape
    kept_flat = kept.t().reshape(-1)  # (k*n,) choice-major
    row = torch.empty_like(by_expert).scatter_(
        0, by_expert, torch.arange(by_expert.numel(), device=by_expert.device))  # (k*n,)
    src = torch.where(kept_flat.gather(0, by_expert), by_expert % n, -1)  # (k*n,)
    return RowMaps(src, row, torch.where(kept_flat, row, -1), n, k)


def resolve_rows_backend(backend: str, device: torch.device) -> str:
    one_of(backend, "rows backend", ROWS_BACKENDS)
    if backend == "auto":
        return "triton" if device.type == "cuda" and triton_usable(device) else "torch"
    if backend == "triton" and not triton_usable(device):
        raise RuntimeError("rows backend 'triton' needs a CUDA GPU, or the Triton interpreter "
                           "on CPU (TRITON_INTERPRET=1 before the kernels are imported); use "
                           "'torch'")
    return backend


# ---- the PyTorch chains (the reference the kernels are tested against) -----------------------
def _gather_torch(x, maps: RowMaps, dtype):
    rows = x.to(dtype).index_select(0, maps.src.clamp(min=0))  # (k*n, dim)
    return torch.where((maps.src >= 0)[:, None], rows, 0)


def _unsort(y, maps: RowMaps):
    return y.index_select(0, maps.row).reshape(maps.k, maps.n, y.shape[1])  # (k, n, dim)


def _combine_torch(y, maps: RowMaps, w, rebuild=None):
    ys = _unsort(y, maps)
    if rebuild is not None:  # saved-tensor hooks: rebuild ys in the backward, keep y
        ys = rebuild(ys, lambda: _unsort(y, maps), y)
    return (ys * w.t().to(y.dtype)[..., None]).sum(dim=0)  # (n, dim)


def gather_rows(x: torch.Tensor, maps: RowMaps, dtype: torch.dtype, backend: str = "auto",
                grad: bool = True) -> torch.Tensor:
    """xs (k·n, dim) in ``dtype``: row r is x[maps.src[r]] (x (n, dim)), zeros where
    ``src`` is -1. Differentiable in x unless ``grad`` is False (a rebuild in a backward)."""
    if resolve_rows_backend(backend, x.device) == "torch":
        return _gather_torch(x, maps, dtype)
    from hymo_mini.moe_triton import _gather_raw, _GatherRows

    if not grad:
        return _gather_raw(x.contiguous(), maps, dtype)
    return _GatherRows.apply(x, maps, dtype)


def combine_rows(y: torch.Tensor, maps: RowMaps, w: torch.Tensor, backend: str = "auto",
                 rebuild=None) -> torch.Tensor:
    """out (n, dim) in y's dtype: out[t] = Σ_j w[t, j] · y[maps.row[j·n + t]] for y
    (k·n, dim) in expert order and w (n, k). Differentiable in y and w. The kernel keeps
    y for the backward; the PyTorch chain keeps the rows in token order, or, given
    ``rebuild`` (``_Rebuilt.rebuild`` of hymo_mini.moe_dispatch), rebuilds them from y."""
    if resolve_rows_backend(backend, y.device) == "torch":
        return _combine_torch(y, maps, w, rebuild)
    from hymo_mini.moe_triton import _CombineRows

    return _CombineRows.apply(y, maps, w)
