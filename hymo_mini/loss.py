"""The head's loss without the (N, V) logits: linear, soft-cap and cross-entropy in chunks.

The plain path (``HyMo.loss`` with ``loss_impl="plain"``, the readable reference) is

    logits = softcap(norm(h) @ Wᵀ)             (N, V) fp32: 64,256 numbers per token
    loss   = cross_entropy(logits, targets)     mean over the N positions

For hymo_750m at B = 4, T = 4096 that is 16,380 × 64,256 fp32 logits (4.2 GB) for the main
head and as much again for each MTP depth, plus the soft-cap's and the softmax's copies of
them in the backward. :func:`linear_softcap_cross_entropy` computes the same loss and the
same gradients a chunk of rows at a time:

    for each chunk c of rows (``chunk_rows`` of them):
        z     = h_c @ Wᵀ                        (n, V), in the compute dtype (bf16 under autocast)
        loss_c, dz = rows(z, targets_c)         soft-cap in fp32, log-softmax, dloss/dz
        dh_c  = dz @ W                          (n, d)
        dW   += dz_cᵀ @ h_c                     (V, d), accumulated in fp32

``rows`` is a Triton kernel on the GPU (``hymo_mini.loss_triton``: each row read twice,
written once, dz over z) or :func:`softcap_ce_rows_torch`, the same in plain PyTorch.
Because the loss is a scalar, its gradients are known as soon as the forward has run: they
are computed there, chunk by chunk, and the backward only multiplies them by the incoming
gradient (1, or the loss weight). So no (N, V) tensor outlives one chunk; what is kept for
the backward is dh (N, d) and dW (V, d). The matmuls are the plain path's three (logits,
dh, dW); the element-wise work is one kernel instead of a chain of full-size passes. In
``torch.no_grad`` (evaluation) only the loss is computed.

The soft-cap s = cap · tanh(z / cap) has ds/dz = 1 - tanh²(z / cap); the gradient of the
mean cross-entropy with respect to s is (softmax(s) - onehot(target)) / N_valid. Rows whose
target is ``ignore_index`` count neither in the loss nor in N_valid (as in
``F.cross_entropy``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hymo_mini.ops import triton_usable

__all__ = ["LOSS_IMPLS", "LOSS_BACKENDS", "linear_softcap_cross_entropy",
           "plain_softcap_cross_entropy", "softcap_ce_rows_torch", "default_chunk_rows",
           "resolve_loss_impl"]

LOSS_IMPLS = ("auto", "plain", "chunked")  # ModelConfig.loss_impl
LOSS_BACKENDS = ("auto", "torch", "triton")  # how the rows of a chunk are computed
CHUNK_ELEMENTS = 1 << 28  # logits per chunk: 512 MiB in bf16


def resolve_loss_impl(impl: str, device: torch.device) -> str:
    """"plain" or "chunked" for ``ModelConfig.loss_impl`` on ``device``: "auto" is chunked
    on a CUDA GPU and plain elsewhere (so CPU runs, and the book, use the reference)."""
    if impl not in LOSS_IMPLS:
        raise ValueError(f"loss_impl must be one of {', '.join(map(repr, LOSS_IMPLS))}, "
                         f"got {impl!r}")
    if impl == "auto":
        return "chunked" if device.type == "cuda" else "plain"
    return impl


def default_chunk_rows(vocab_size: int) -> int:
    """Rows per chunk: about ``CHUNK_ELEMENTS`` logits, a multiple of 128 when that large."""
    rows = max(1, CHUNK_ELEMENTS // vocab_size)
    return rows if rows < 128 else rows // 128 * 128


def softcap_ce_rows_torch(z: torch.Tensor, targets: torch.Tensor, cap: float,
                          ignore_index: int, grad: bool):
    """Per-row cross-entropy of softcap(z), z (n, V) logits: returns (loss (n,) fp32,
    dloss_row/dz (n, V) in z's dtype, or None without ``grad``). The PyTorch twin of the
    Triton kernel in ``hymo_mini.loss_triton``."""
    zf = z.float()  # (n, V) fp32: the soft-cap and the softmax in fp32
    t = torch.tanh(zf / cap) if cap > 0 else None
    s = cap * t if cap > 0 else zf  # (n, V)
    lse = torch.logsumexp(s, dim=-1)  # (n,)
    valid = targets != ignore_index  # (n,)
    safe = torch.where(valid, targets, 0)[:, None]  # (n, 1)
    loss = torch.where(valid, lse - s.gather(1, safe)[:, 0], 0.0)  # (n,)
    if not grad:
        return loss, None
    p = torch.exp(s - lse[:, None])  # softmax (n, V)
    p.scatter_add_(1, safe, torch.full_like(safe, -1, dtype=p.dtype))  # - onehot
    if t is not None:
        p = p * (1 - t * t)  # ds/dz
    return loss, (p * valid[:, None]).to(z.dtype)


def _rows_fn(backend: str, device: torch.device):
    if backend == "auto":
        backend = "triton" if device.type == "cuda" else "torch"
    if backend == "torch":
        return softcap_ce_rows_torch
    if not triton_usable(device):
        raise RuntimeError("backend='triton' needs a CUDA GPU, or the Triton interpreter on "
                           "CPU (TRITON_INTERPRET=1 before the kernel is imported); use "
                           "backend='torch'")
    from hymo_mini.loss_triton import softcap_ce_rows_triton
    return softcap_ce_rows_triton


def _chunked(h, w, targets, cap, ignore_index, chunk_rows, rows, need_dh, need_dw):
    """The chunk loop: (loss sum, dh (N, d) or None, dW (V, d) fp32 or None), unscaled."""
    grad = need_dh or need_dw
    loss = h.new_zeros((), dtype=torch.float32)
    dh = torch.empty_like(h) if need_dh else None  # (N, d)
    dw = torch.zeros(w.shape, dtype=torch.float32, device=w.device) if need_dw else None
    for start in range(0, h.shape[0], chunk_rows):
        h_c = h[start:start + chunk_rows]  # (n, d)
        z = h_c @ w.T  # (n, V)
        loss_c, dz = rows(z, targets[start:start + chunk_rows], cap, ignore_index, grad)
        loss = loss + loss_c.sum()
        if need_dh:
            torch.mm(dz, w, out=dh[start:start + chunk_rows])  # (n, d)
        if need_dw:
            _accumulate(dw, dz, h_c)  # (V, d)
    return loss, dh, dw


def _accumulate(dw, dz, h_c) -> None:
    """dw (V, d) fp32 += dzᵀ h_c. fp32 and, on a CUDA GPU, bf16 and fp16 products add into
    dw inside the matmul (cuBLAS accumulates 16-bit products in fp32 and writes fp32),
    so no (V, d) product is made and then added; elsewhere the product is rounded to
    dz's dtype and added, as a plain ``dw += dz.T @ h_c``."""
    if dz.dtype == torch.float32:
        dw.addmm_(dz.T, h_c)
    elif dz.is_cuda and dz.dtype in (torch.bfloat16, torch.float16):
        torch.addmm(dw, dz.T, h_c, out_dtype=torch.float32, out=dw)
    else:
        dw += dz.T @ h_c


class _LinearSoftcapCE(torch.autograd.Function):
    """(hidden (N, d), weight (V, d), targets (N,)) -> mean loss; gradients made in forward."""

    @staticmethod
    def forward(ctx, hidden, weight, targets, cap, ignore_index, chunk_rows, rows, dtype,
                grad_on):
        # grad_on: whether autograd was recording at the call (forward itself runs without);
        # False in evaluation, where only the loss is computed
        need_dh, need_dw = (ctx.needs_input_grad[0] and grad_on,
                            ctx.needs_input_grad[1] and grad_on)
        with torch.autocast(hidden.device.type, enabled=False):
            h, w = hidden.to(dtype), weight.to(dtype)  # (N, d), (V, d)
            total, dh, dw = _chunked(h, w, targets, cap, ignore_index, chunk_rows, rows,
                                     need_dh, need_dw)
        n_valid = (targets != ignore_index).sum()  # on the device: no host sync
        dh = dh.to(hidden.dtype).div_(n_valid) if dh is not None else None
        dw = dw.to(weight.dtype).div_(n_valid) if dw is not None else None
        ctx.save_for_backward(dh, dw)
        return total / n_valid

    @staticmethod
    def backward(ctx, grad_out):
        dh, dw = ctx.saved_tensors
        dh = dh * grad_out if dh is not None else None
        dw = dw * grad_out if dw is not None else None
        return dh, dw, None, None, None, None, None, None, None


def _check(hidden, weight, targets) -> None:
    for name, t in (("hidden", hidden), ("weight", weight), ("targets", targets)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
    if weight.ndim != 2 or hidden.ndim < 1 or hidden.shape[-1] != weight.shape[1]:
        raise ValueError(f"hidden (..., d) and weight (V, d) must share d; got hidden "
                         f"{tuple(hidden.shape)} and weight {tuple(weight.shape)}")
    if targets.shape != hidden.shape[:-1]:
        raise ValueError(f"targets must have hidden's leading shape {tuple(hidden.shape[:-1])}, "
                         f"got {tuple(targets.shape)}")
    if targets.dtype.is_floating_point or targets.dtype == torch.bool:
        raise TypeError(f"targets must be integer class ids, got {targets.dtype}")


def linear_softcap_cross_entropy(hidden: torch.Tensor, weight: torch.Tensor,
                                 targets: torch.Tensor, softcap: float = 0.0, *,
                                 ignore_index: int = -100, chunk_rows: int | None = None,
                                 backend: str = "auto") -> torch.Tensor:
    """Mean of cross_entropy(softcap(hidden @ weightᵀ), targets) without the full logits.

    hidden (..., d); weight (V, d) (the tied head); targets (...) class ids, ``ignore_index``
    left out; softcap 0 switches the cap off. Under autocast the matmuls run in the autocast
    dtype and everything after them in fp32, as the plain path does. ``chunk_rows``: rows per
    chunk (default about 2^28 logits); ``backend``: "torch", "triton" or "auto" (Triton on
    a CUDA GPU). Differentiable in hidden and weight.
    """
    _check(hidden, weight, targets)
    if backend not in LOSS_BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, LOSS_BACKENDS))}, "
                         f"got {backend!r}")
    if chunk_rows is not None and not (isinstance(chunk_rows, int) and chunk_rows > 0):
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    if softcap < 0:
        raise ValueError(f"softcap must be >= 0 (0: no cap), got {softcap}")
    device = hidden.device.type
    dtype = (torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device)
             else torch.promote_types(hidden.dtype, weight.dtype))
    rows = _rows_fn(backend, hidden.device)
    chunk_rows = chunk_rows or default_chunk_rows(weight.shape[0])
    h = hidden.reshape(-1, hidden.shape[-1])  # (N, d)
    return _LinearSoftcapCE.apply(h, weight, targets.reshape(-1), float(softcap),
                                  int(ignore_index), chunk_rows, rows, dtype,
                                  torch.is_grad_enabled())


def plain_softcap_cross_entropy(hidden, weight, targets, softcap: float = 0.0, *,
                                ignore_index: int = -100) -> torch.Tensor:
    """The same loss the plain way: the full logits, soft-capped in fp32 (the reference)."""
    logits = F.linear(hidden, weight).float()  # (..., V)
    if softcap > 0:
        logits = softcap * torch.tanh(logits / softcap)
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
