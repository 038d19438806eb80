"""MQAR: the task generator, the layer-layout variants, a training smoke run; and the true
gated delta rule the experiment compares against the documented recurrence."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from hymo_mini.blocks import GDNBlock
from hymo_mini.config import load_config, replace
from hymo_mini.mqar import (
    IGNORE,
    VARIANTS,
    MQARTask,
    mqar_accuracy,
    mqar_batch,
    run_sweep,
    variant_config,
)
from hymo_mini.ops import naive_gated_delta, naive_gla


# ---- the task ---------------------------------------------------------------------------
@pytest.mark.parametrize("n_pairs, seq_len", [(1, 3), (5, 23), (16, 64)])
def test_batch_structure(n_pairs, seq_len):
    task = MQARTask(n_pairs, seq_len, n_keys=20, n_values=30)
    inputs, targets = mqar_batch(task, 8, torch.Generator().manual_seed(0))
    assert inputs.shape == targets.shape == (8, seq_len)
    K = task.n_keys
    for x, y in zip(inputs.tolist(), targets.tolist(), strict=True):
        keys, values = x[0:2 * n_pairs:2], x[1:2 * n_pairs:2]
        assert all(1 <= k <= K for k in keys) and len(set(keys)) == n_pairs
        assert all(K < v <= K + task.n_values for v in values)
        assert all(t == IGNORE for t in y[:2 * n_pairs])  # no loss on the pairs
        pair = dict(zip(keys, values, strict=True))
        asked = [(x[i], y[i]) for i in range(2 * n_pairs, seq_len) if y[i] != IGNORE]
        assert sorted(k for k, _ in asked) == sorted(keys)  # every key asked once
        assert all(pair[k] == v for k, v in asked)  # target = the value after that key
        fillers = [x[i] for i in range(2 * n_pairs, seq_len) if y[i] == IGNORE]
        assert all(f == 0 for f in fillers)


def test_batches_are_seeded():
    task = MQARTask(4, 16)
    a = mqar_batch(task, 4, torch.Generator().manual_seed(1))
    b = mqar_batch(task, 4, torch.Generator().manual_seed(1))
    c = mqar_batch(task, 4, torch.Generator().manual_seed(2))
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])
    assert not torch.equal(a[0], c[0])


def test_task_errors():
    with pytest.raises(ValueError, match="seq_len >= 24"):
        MQARTask(8, 20)
    with pytest.raises(ValueError, match="n_keys"):
        MQARTask(10, 64, n_keys=8)
    with pytest.raises(ValueError, match="n_pairs"):
        MQARTask(0, 8)
    with pytest.raises(ValueError, match="batch_size"):
        mqar_batch(MQARTask(2, 8), 0, torch.Generator())


# ---- the models -------------------------------------------------------------------------
def test_variant_layouts():
    layout = {name: variant_config(name, 129, 64).layer_types for name in VARIANTS}
    assert layout["GDN (gla)"] == ("gdn",) * 4 == layout["GDN (delta)"]
    assert layout["MLA"] == ("mla",) * 4
    assert layout["3:1 MLA first (gla)"] == ("mla", "gdn", "gdn", "gdn")
    assert layout["3:1 MLA last (delta)"] == ("gdn", "gdn", "gdn", "mla")
    assert variant_config("GDN (delta)", 129, 64).gdn_rule == "delta"
    c = variant_config("MLA", 129, 64)
    assert c.mtp_depth == 0 and c.vocab_size == 129
    assert c.moe_capacity(100) >= 100  # no token dropped
    with pytest.raises(ValueError, match="variant"):
        variant_config("transformer", 129, 64)


def test_sweep_smoke():
    tasks = [MQARTask(2, 12, n_keys=8, n_values=8)]
    result = run_sweep(["GDN (gla)", "MLA"], tasks, tasks, steps=3, batch_size=4,
                       n_eval=8, n_layers=2)
    assert set(result["variants"]) == {"GDN (gla)", "MLA"}
    for v in result["variants"].values():
        (n, t, acc), = v["accuracy"]
        assert (n, t) == (2, 12) and 0 <= acc <= 1
        assert v["parameters"] > 0 and len(v["loss_curve"]) == 3
    assert result["variants"]["MLA"]["layer_types"] == "AA"


def test_accuracy_counts_only_queries():
    """A model that always answers the right value scores 1; one that answers 0 scores 0."""
    task = MQARTask(3, 12, n_keys=5, n_values=5)

    class Oracle(torch.nn.Module):
        def forward(self, inputs):
            gen = torch.Generator().manual_seed(99)  # the same draw as mqar_accuracy
            _, targets = mqar_batch(task, inputs.shape[0], gen)
            return F.one_hot(targets.clamp(min=0), task.vocab_size).float()

    assert mqar_accuracy(Oracle(), task, n_sequences=4, batch_size=4, seed=99) == 1.0

    class Zero(torch.nn.Module):
        def forward(self, inputs):
            return F.one_hot(torch.zeros_like(inputs), task.vocab_size).float()

    assert mqar_accuracy(Zero(), task, n_sequences=4, batch_size=4) == 0.0


# ---- the true gated delta rule ----------------------------------------------------------
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
