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
                                                scaled by 1 / N_valid before rounding
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

A tied model scores the same weight with several heads (the main one and each MTP depth):
:func:`linear_softcap_cross_entropy_heads` takes them in one call, Σ_i λ_i · mean_i, with
each head's rows scaled by λ_i / N_valid_i in the row kernel, so the weight is cast once
and its gradient gathered in one (V, d) buffer for all of them.

The soft-cap s = cap · tanh(z / cap) has ds/dz = 1 - tanh²(z / cap); the gradient of the
mean cross-entropy with respect to s is (softmax(s) - onehot(target)) / N_valid. Rows whose
target is ``ignore_index`` count neither in the loss nor in N_valid (as in
``F.cross_entropy``).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

from hymo_mini.choices import one_of
from hymo_mini.ops import triton_usable

__all__ = ["LOSS_IMPLS", "LOSS_BACKENDS", "linear_softcap_cross_entropy",
           "linear_softcap_cross_entropy_heads",
           "plain_softcap_cross_entropy", "softcap_ce_rows_torch", "default_chunk_rows",
           "resolve_loss_impl"]

LOSS_IMPLS = ("auto", "plain", "chunked")  # ModelConfig.loss_impl
LOSS_BACKENDS = ("auto", "torch", "triton")  # how the rows of a chunk are computed
CHUNK_ELEMENTS = 1 << 28  # logits per chunk: 512 MiB in bf16


def resolve_loss_impl(impl: str, device: torch.device) -> str:
    """"plain" or "chunked" for ``ModelConfig.loss_impl`` on ``device``: "auto" is chunked
    on a CUDA GPU and plain elsewhere (so CPU runs, and the book, use the reference)."""
    one_of(impl, "loss_impl", LOSS_IMPLS)
    if impl == "auto":
        return "chunked" if device.type == "cuda" else "plain"
    return impl


def default_chunk_rows(vocab_size: int) -> int:
    """Rows per chunk: about ``CHUNK_ELEMENTS`` logits, a multiple of 128 when that large."""
    rows = max(1, CHUNK_ELEMENTS // vocab_size)
    return rows if rows < 128 else rows // 128 * 128


def softcap_ce_rows_torch(z: torch.Tensor, targets: torch.Tensor, cap: float,
                          ignore_index: int, grad: bool, scale: torch.Tensor | None = None):
    """Per-row cross-entropy of softcap(z), z (n, V) logits: returns (loss (n,) fp32,
    dloss_row/dz (n, V) in z's dtype times ``scale`` (a one-element fp32 tensor) if given,
    or None without ``grad``). The PyTorch twin of the Triton kernel in
    ``hymo_mini.loss_triton``."""
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
    p = p * valid[:, None]
    return loss, (p if scale is None else p * scale).to(z.dtype)


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


def _chunked(h, w, targets, cap, ignore_index, chunk_rows, rows, scale, dh, dw):
    """The chunk loop of one head: its loss sum (fp32); fills dh (N, d) (if not None) and
    adds into dw (V, d) fp32 (if not None) the gradients of the sum times ``scale`` (a
    one-element fp32 tensor, or None for 1), scaled in the row kernel before rounding."""
    grad = dh is not None or dw is not None
    loss = h.new_zeros((), dtype=torch.float32)
    for start in range(0, h.shape[0], chunk_rows):
        h_c = h[start:start + chunk_rows]  # (n, d)
        z = h_c @ w.T  # (n, V)
        loss_c, dz = rows(z, targets[start:start + chunk_rows], cap, ignore_index, grad, scale)
        loss = loss + loss_c.sum()
        if dh is not None:
            torch.mm(dz, w, out=dh[start:start + chunk_rows])  # (n, d)
        if dw is not None:
            _accumulate(dw, dz, h_c)  # (V, d)
    return loss


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
    """(weight (V, d), hidden_1 (N_1, d), ...) -> (Σ_i λ_i · mean loss_i, mean loss_1, ...),
    the per-head means not differentiable; every gradient made in the forward.

    All heads share the weight: it is cast once and its gradient gathered in one fp32
    buffer. Each head's rows get their gradient scaled by λ_i / N_valid_i inside the row
    kernel (not afterwards by passes over dh and dW), except in fp16, whose range would
    lose the small ones: there the two are scaled after the loop."""

    @staticmethod
    def forward(ctx, weight, spec, *hiddens):
        targets, lambdas, cap, ignore_index, chunk_rows, rows, dtype, grad_on = spec
        # grad_on: whether autograd was recording at the call (forward itself runs without);
        # False in evaluation, where only the losses are computed
        need_dw = ctx.needs_input_grad[0] and grad_on
        need_dh = [need and grad_on for need in ctx.needs_input_grad[2:]]
        fold = dtype != torch.float16
        dhs, means = [], []
        with torch.autocast(weight.device.type, enabled=False):
            w = weight.to(dtype)  # (V, d), once for every head
            dw = (torch.zeros(w.shape, dtype=torch.float32, device=w.device) if need_dw
                  else None)
            dw_heads = [] if not fold and need_dw else None
            for hidden, t, lam, need in zip(hiddens, targets, lambdas, need_dh, strict=True):
                h = hidden.to(dtype)  # (N, d)
                n_valid = (t != ignore_index).sum()  # on the device: no host sync
                scale = (lam / n_valid.float()).reshape(1) if fold else None
                dh = torch.empty_like(h) if need else None
                dw_i = (torch.zeros_like(dw) if dw_heads is not None else dw)
                total = _chunked(h, w, t, cap, ignore_index, chunk_rows, rows, scale, dh, dw_i)
                if not fold:
                    dh = dh.to(hidden.dtype).mul_(lam / n_valid) if dh is not None else None
                    if dw_heads is not None:
                        dw_heads.append(dw_i.mul_(lam / n_valid))
                dhs.append(dh.to(hidden.dtype) if dh is not None else None)
                means.append(total / n_valid)
            if dw_heads:
                dw = torch.stack(dw_heads).sum(0)
        weighted = sum(lam * m for lam, m in zip(lambdas, means, strict=True))
        ctx.has_dh = [dh is not None for dh in dhs]
        ctx.save_for_backward(dw.to(weight.dtype) if dw is not None else None,
                              *[dh for dh in dhs if dh is not None])
        ctx.mark_non_differentiable(*means)
        return (weighted, *means)

    @staticmethod
    def backward(ctx, grad_out, *unused):
        dw, *dhs = ctx.saved_tensors
        dhs = iter(dhs)
        grads = [next(dhs) * grad_out if has else None for has in ctx.has_dh]
        return (dw * grad_out if dw is not None else None, None, *grads)


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
    total, _ = linear_softcap_cross_entropy_heads(
        [hidden], weight, [targets], softcap, [1.0], ignore_index=ignore_index,
        chunk_rows=chunk_rows, backend=backend)
    return total


def linear_softcap_cross_entropy_heads(hiddens, weight: torch.Tensor, targets, softcap: float,
                                       lambdas, *, ignore_index: int = -100,
                                       chunk_rows: int | None = None, backend: str = "auto"):
    """Several heads that share one weight (the main head and the MTP heads of a tied
    model): ``(Σ_i λ_i · mean_i, [mean_1, ...])`` where mean_i is
    :func:`linear_softcap_cross_entropy` of ``hiddens[i]`` and ``targets[i]``. The sum is
    differentiable in every hidden and in the weight; the means are detached (for logging).
    One call casts the weight once and gathers its gradient in one buffer for all heads."""
    hiddens, targets, lambdas = list(hiddens), list(targets), [float(x) for x in lambdas]
    if not hiddens or not len(hiddens) == len(targets) == len(lambdas):
        raise ValueError(f"hiddens, targets and lambdas must be non-empty and of one length, "
                         f"got {len(hiddens)}, {len(targets)} and {len(lambdas)}")
    for hidden, t in zip(hiddens, targets, strict=True):
        _check(hidden, weight, t)
    one_of(backend, "backend", LOSS_BACKENDS)
    if chunk_rows is not None and not (isinstance(chunk_rows, int) and chunk_rows > 0):
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    if softcap < 0:
        raise ValueError(f"softcap must be >= 0 (0: no cap), got {softcap}")
    device = weight.device.type
    dtype = (torch.get_autocast_dtype(device) if torch.is_autocast_enabled(device)
             else torch.promote_types(hiddens[0].dtype, weight.dtype))
    rows = _rows_fn(backend, weight.device)
    chunk_rows = chunk_rows or default_chunk_rows(weight.shape[0])
    spec = ([t.reshape(-1) for t in targets], lambdas, float(softcap), int(ignore_index),
            chunk_rows, rows, dtype, torch.is_grad_enabled())
    flat = [h.reshape(-1, h.shape[-1]) for h in hiddens]  # (N_i, d)
    total, *means = _LinearSoftcapCE.apply(weight, spec, *flat)
    return total, means


def plain_softcap_cross_entropy(hidden, weight, targets, softcap: float = 0.0, *,
                                ignore_index: int = -100) -> torch.Tensor:
    """The same loss the plain way: the full logits, soft-capped in fp32 (the reference)."""
    logits = F.linear(hidden, weight).float()  # (..., V)
    if softcap > 0:
        logits = softcap * torch.tanh(logits / softcap)
    return F.cross_entropy(logits.flatten(0, -2), targets.flatten(), ignore_index=ignore_index)
