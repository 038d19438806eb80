"""The SwiGLU feed-forward: every MoE expert and every MTP depth is one.

    SwiGLU(x) = w2(silu(w1 x) ⊙ w3 x)          w1: gate, w3: up (dim -> inter), w2: down

The gate's SiLU decides, per hidden unit, how much of the up projection passes: a
multiplicative gate instead of a plain activation. No biases (the document's parameter
counts have none).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["SwiGLU", "swiglu_param_count"]


class SwiGLU(nn.Module):
    """w2(silu(w1 x) * w3 x): w1 is the gate, w3 the up projection, w2 the down one."""

    def __init__(self, dim: int, inter_dim: int):
        super().__init__()
        self.w1 = nn.Linear(dim, inter_dim, bias=False)  # gate
        self.w3 = nn.Linear(dim, inter_dim, bias=False)  # up
        self.w2 = nn.Linear(inter_dim, dim, bias=False)  # down

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.w2(F.silu(self.w1(x)) * self.w3(x))  # (..., inter) -> (..., dim)


def swiglu_param_count(dim: int, inter_dim: int) -> int:
    return 3 * dim * inter_dim
