"""What the gated delta paths take from the rest of hymo_mini, in one place, and their
one input check.

The names below still live in ``hymo_mini.gdn`` on main; when the library moves to
``hymo_mini.ops`` only these imports change (``check_inputs(..., beta=beta)`` of
``hymo_mini.ops.checks`` replaces :func:`check_delta_inputs`).
"""

from __future__ import annotations

import torch

from hymo_mini.gdn import check_gdn_inputs, empty_sequence
from hymo_mini.gdn import delta_rule_ref as naive_gated_delta

__all__ = ["check_delta_inputs", "empty_sequence", "naive_gated_delta"]


def check_delta_inputs(v, b, c, g, A, beta, initial_state=None) -> None:
    """One clear line for inputs no gated delta path can take: those of every GDN path
    (``check_gdn_inputs``) and beta, a (B, T, H) tensor on v's device."""
    check_gdn_inputs(v, b, c, g, A, initial_state)
    if not isinstance(beta, torch.Tensor):
        raise TypeError(f"beta must be a torch.Tensor of shape (B, T, H) = {tuple(g.shape)}, "
                        f"got {type(beta).__name__}")
    if tuple(beta.shape) != tuple(g.shape):
        raise ValueError(f"beta must have shape (B, T, H) = {tuple(g.shape)} to match v "
                         f"{tuple(v.shape)}, got {tuple(beta.shape)}")
    if beta.dtype not in (torch.float32, torch.float16, torch.bfloat16, torch.float64):
        raise TypeError(f"beta has unsupported dtype {beta.dtype}; "
                        "use float32, bfloat16, float16 or float64")
    if beta.device != v.device:
        raise ValueError(f"beta must be on v's device {v.device}, got {beta.device}")
