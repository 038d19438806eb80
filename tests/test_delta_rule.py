"""The true gated delta rule (``gdn_rule="delta"``), the recurrence the MQAR experiment
compares against the documented one: the loop against the matrix form, overwriting where
the documented rule accumulates, its input checks, and a block that trains every parameter."""

import pytest
import torch
import torch.nn.functional as F

from hymo_mini.blocks import GDNBlock
from hymo_mini.config import load_config, replace
from hymo_mini.ops import naive_gated_delta, naive_gla


def delta_inputs(B=2, T=11, H=3, S=5, D=4):
    v = torch.randn(B, T, H, D, dtype=torch.float64)
    b = F.normalize(torch.randn(B, T, H, S, dtype=torch.float64), dim=-1)
    c = torch.randn(B, T, H, S, dtype=torch.float64)
    g = torch.rand(B, T, H, dtype=torch.float64)
    A = -3 * torch.rand(H, S, dtype=torch.float64) - 0.01
    beta = torch.rand(B, T, H, dtype=torch.float64)
    return v, b, c, g, A, beta


def matrix_form(v, b, c, g, A, beta, state):
    """H_t = (I - β b bᵀ) diag(exp(g A)) H_{t-1} + β b vᵀ, one (batch, head) at a time."""
    B, T, H, D = v.shape
    S = b.shape[-1]
    state = state.clone()
    out = torch.zeros_like(v)
    for i in range(B):
        for h in range(H):
            for t in range(T):
                k = b[i, t, h]
                erase = torch.eye(S, dtype=v.dtype) - beta[i, t, h] * torch.outer(k, k)
                decay = torch.diag(torch.exp(g[i, t, h] * A[h]))
                state[i, h] = (erase @ decay @ state[i, h]
                               + beta[i, t, h] * torch.outer(k, v[i, t, h]))
                out[i, t, h] = c[i, t, h] @ state[i, h]
    return out, state


def test_delta_rule_matches_the_matrix_form():
    v, b, c, g, A, beta = delta_inputs()
    state0 = torch.randn(2, 3, 5, 4, dtype=torch.float64)
    o, state = naive_gated_delta(v, b, c, g, A, beta, state0)
    o_ref, state_ref = matrix_form(v, b, c, g, A, beta, state0)
    assert torch.allclose(o, o_ref, atol=1e-12) and torch.allclose(state, state_ref, atol=1e-12)


def test_delta_rule_overwrites_where_gla_accumulates():
    """Write key k with value v1, then with v2 (β = 1, no decay): the delta rule reads back
    v2; the documented recurrence reads v1 + v2."""
    S, D = 4, 3
    k = F.normalize(torch.randn(S, dtype=torch.float64), dim=0)
    v = torch.randn(1, 2, 1, D, dtype=torch.float64)
    b = k.expand(1, 2, 1, S).clone()
    g = torch.zeros(1, 2, 1, dtype=torch.float64)
    A = -torch.ones(1, S, dtype=torch.float64)
    o_delta, _ = naive_gated_delta(v, b, b, g, A, torch.ones(1, 2, 1, dtype=torch.float64))
    o_gla, _ = naive_gla(v, b, b, g, A)
    assert torch.allclose(o_delta[0, 1, 0], v[0, 1, 0], atol=1e-12)
    assert torch.allclose(o_gla[0, 1, 0], v[0, 0, 0] + v[0, 1, 0], atol=1e-12)
    # β = 0 writes nothing: the state only decays
    o_none, state = naive_gated_delta(v, b, b, g, A, torch.zeros(1, 2, 1, dtype=torch.float64))
    assert o_none.abs().max() == 0 and state.abs().max() == 0


def test_delta_rule_errors():
    v, b, c, g, A, beta = delta_inputs()
    with pytest.raises(ValueError, match="beta"):
        naive_gated_delta(v, b, c, g, A, beta[:, :3])


def test_delta_block_trains_every_parameter():
    config = replace(load_config("hymo_mini").model, gdn_rule="delta")
    block = GDNBlock(config)
    block(torch.randn(2, 9, config.dim)).pow(2).mean().backward()
    for name, p in block.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name
    gla = GDNBlock(config.__class__(**{**config.__dict__, "gdn_rule": "gla"}))
    extra = sum(p.numel() for p in block.parameters()) - sum(p.numel() for p in gla.parameters())
    assert extra == config.gdn_d_inner * config.gdn_n_heads  # beta_proj only
