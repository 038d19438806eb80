"""The gated delta paths' input check: one clear line naming the argument."""

from __future__ import annotations

import pytest
import torch
from delta_oracle import make_leaves

from hymo_mini.ops.gated_delta.chunk import chunk_gated_delta_torch


def leaves():
    return [t.detach() for t in make_leaves(2, 5, 3, 4, 6, torch.float32, device="cpu")]


@pytest.mark.parametrize("beta, error, match", [
    (torch.rand(2, 5), ValueError, r"beta must have rank 3 \(B, T, H\), got shape \(2, 5\)"),
    (torch.rand(2, 4, 3), ValueError, r"beta must have shape \(B, T, H\) = \(2, 5, 3\)"),
    (torch.rand(2, 5, 3).to(torch.int32), TypeError, "beta has dtype torch.int32"),
    (torch.rand(2, 5, 3, device="meta"), ValueError, "beta on meta"),
    (0.5, TypeError, "beta must be a torch.Tensor"),
])
def test_bad_beta(beta, error, match):
    v, b, c, g, A, _, h0 = leaves()
    with pytest.raises(error, match=match):
        chunk_gated_delta_torch(v, b, c, g, A, beta, h0)


def test_other_inputs_checked_too():
    v, b, c, g, A, beta, h0 = leaves()
    with pytest.raises(ValueError, match="A must have shape"):
        chunk_gated_delta_torch(v, b, c, g, A[:, :2], beta, h0)
    with pytest.raises(TypeError, match="v has dtype torch.int64"):
        chunk_gated_delta_torch(v.to(torch.int64), b, c, g, A, beta, h0)
    with pytest.raises(ValueError, match="initial_state must have shape"):
        chunk_gated_delta_torch(v, b, c, g, A, beta, h0[:, :, :2])
