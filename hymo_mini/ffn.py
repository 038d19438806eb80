"""The SwiGLU feed-forward: every MoE expert and every MTP depth is one.

    SwiGLU(x) = w2(silu(w1 x) ⊙ w3 x)          w1: gate, w3: up (dim -> inter), w2: down

The gate's SiLU decides, per hidden unit, how much of the up projection passes: a
multiplicative gate instead of a plain activation. No biases (the document's parameter
counts have none).

**The compiled activation** (``ModelConfig.swiglu_impl``: "eager", "compiled" or "auto",
which compiles while training on a CUDA GPU; ``hymo_mini.compiling``). In eager mode
silu(a) ⊙ b is two passes forward, and the backward is several more (the product's two
gradients, then SiLU's); :func:`swiglu_activation` compiled is one pass each way, and its
backward keeps only a and b, recomputing the SiLU. Every SwiGLU of the model uses it: the
MoE's experts, routed and shared, and the MTP blocks; the matmuls stay library calls.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from hymo_mini.compiling import compiled_forward, runs_compiled

__all__ = ["SwiGLU", "swiglu_param_count", "swiglu_activation", "activation_for"]


def swiglu_activation(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """silu(a) * b, element-wise: the gate a = x w1ᵀ, the up projection b = x w3ᵀ."""
    return F.silu(a) * b


def activation_for(impl: str, x: torch.Tensor, training: bool):
    """:func:`swiglu_activation`, compiled where ``impl`` (``swiglu_impl``) says so for
    this call on x (the SwiGLU's input)."""
    if runs_compiled(impl, x, training, "swiglu_impl"):
        return compiled_forward(swiglu_activation)
    return swiglu_activation


class SwiGLU(nn.Module):
    """w2(silu(w1 x) * w3 x): w1 is the gate, w3 the up projection, w2 the down one.
    ``impl`` is ``swiglu_impl`` (the activation, eager or compiled)."""

    def __init__(self, dim: int, inter_dim: int, impl: str = "eager"):
        super().__init__()
        self.w1 = nn.Linear(dim, inter_dim, bias=False)  # gate
        self.w3 = nn.Linear(dim, inter_dim, bias=False)  # up
        self.w2 = nn.Linear(inter_dim, dim, bias=False)  # down
        self.impl = impl

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        act = activation_for(self.impl, x, self.training)
        return self.w2(act(self.w1(x), self.w3(x)))  # (..., inter) -> (..., dim)


def swiglu_param_count(dim: int, inter_dim: int) -> int:
    return 3 * dim * inter_dim
