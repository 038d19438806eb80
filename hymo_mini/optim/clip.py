"""Gradient-norm clipping folded into the optimizer step where the optimizer allows it.

``torch.nn.utils.clip_grad_norm_`` makes two passes over every gradient before the step:
one for the global norm, one that multiplies each gradient by min(1, max_norm / norm).
The fused ``torch.optim.Adam`` and ``AdamW`` kernels already read every gradient once and
can divide it by a scale tensor on the way (``grad_scale``, the hook ``GradScaler`` uses to
unscale). :func:`clip_and_step` hands the clip's factor to that hook as its inverse, so the
second pass disappears; any other optimizer gets the plain clip and then its step.
"""

from __future__ import annotations

from collections.abc import Iterable

import torch

__all__ = ["clip_and_step", "takes_grad_scale"]

EPS = 1e-6  # the ε clip_grad_norm_ adds to the norm


def takes_grad_scale(optimizer: torch.optim.Optimizer) -> bool:
    """Whether ``optimizer`` divides gradients by a ``grad_scale`` tensor inside its step:
    a torch Adam or AdamW with every group fused."""
    return (isinstance(optimizer, (torch.optim.Adam, torch.optim.AdamW))
            and all(g.get("fused") for g in optimizer.param_groups))


def clip_and_step(optimizer: torch.optim.Optimizer, parameters: Iterable[torch.Tensor],
                  max_norm: float) -> torch.Tensor:
    """Clip the gradients of ``parameters`` to global L2 norm ``max_norm`` (as
    ``clip_grad_norm_`` does) and take ``optimizer``'s step; returns the norm before clipping.

    The factor is min(1, max_norm / (norm + 1e-6)). A fused Adam or AdamW divides each
    gradient by its inverse inside the step (the gradients are left unscaled by that
    division, as ``GradScaler`` leaves them); the result matches clip-then-step to rounding.
    The norm stays on the device: no host sync either way."""
    if not max_norm > 0:
        raise ValueError(f"max_norm must be > 0, got {max_norm!r}")
    params = [p for p in parameters if p.grad is not None]
    grads = [p.grad for p in params]
    norm = torch.nn.utils.get_total_norm(grads, foreach=True) if grads else torch.zeros(())
    if grads and takes_grad_scale(optimizer):
        optimizer.grad_scale = torch.clamp((norm.float() + EPS) / max_norm, min=1.0)
        try:
            optimizer.step()
        finally:
            del optimizer.grad_scale
    else:
        if grads:
            torch.nn.utils.clip_grads_with_norm_(params, max_norm, norm, foreach=True)
        optimizer.step()
    return norm
